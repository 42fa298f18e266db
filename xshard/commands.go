package xshard

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/tallydb/tally/server"
)

// Command names.
const (
	CmdRecv   = "TALLY.XRECV"
	CmdAck    = "TALLY.XACK"
	CmdStatus = "TALLY.XSTATUS"
)

// GapReplyPrefix starts TALLY.XRECV's error reply for ErrGap, followed by
// the last sequence applied from the source: "XGAP 17 xshard: ...".
const GapReplyPrefix = "XGAP"

// Commands returns TALLY.XRECV, TALLY.XACK and TALLY.XSTATUS for a server
// whose store s is attached to (register them on every server the host
// opens, with the Streams of its store):
//
//	TALLY.XRECV src first batch   replicated write: Receive; replies the
//	                              last sequence applied from src
//	TALLY.XACK target seq         replicated write: Ack; replies OK
//	TALLY.XSTATUS                 local read: the outboxes and inbox records
//
// XRECV and XACK refuse to run outside a replicated apply
// (server.ErrNotApplying's message): a shard is a Raft group.
func Commands(s *Streams) []server.Command {
	return []server.Command{
		{
			Name: CmdRecv, Arity: 4, Flags: server.FlagWrite, Group: "tally", Since: "0.1.0",
			Summary:    "Applies a batch of cross-shard messages from a source shard, each once, in order.",
			Complexity: "O(N) in the messages' commands",
			Args:       []server.Arg{{Name: "src", Type: "integer"}, {Name: "first", Type: "integer"}, {Name: "batch", Type: "string"}},
			Handler:    func(c *server.Conn, args [][]byte) { recv(s, c, args) },
		},
		{
			Name: CmdAck, Arity: 3, Flags: server.FlagWrite | server.FlagFast, Group: "tally", Since: "0.1.0",
			Summary:    "Drops a target's outbox messages up to a sequence, acknowledged by the target.",
			Complexity: "O(1)",
			Args:       []server.Arg{{Name: "target", Type: "integer"}, {Name: "seq", Type: "integer"}},
			Handler:    func(c *server.Conn, args [][]byte) { ack(s, c, args) },
		},
		{
			Name: CmdStatus, Arity: 1, Flags: server.FlagReadOnly | server.FlagLocal, Group: "tally", Since: "0.1.0",
			Summary:    "Shows this replica's cross-shard outboxes and inbox records.",
			Complexity: "O(N) in the shards streamed with",
			Handler:    func(c *server.Conn, _ [][]byte) { status(s, c) },
		},
	}
}

func parseShard(b []byte) (uint32, error) {
	v, err := strconv.ParseUint(string(b), 10, 32)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("%w: %q", ErrBadShard, b)
	}
	return uint32(v), nil
}

func parseSeq(b []byte) (uint64, error) {
	v, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: sequence %q", ErrBadMessage, b)
	}
	return v, nil
}

// nestable reports whether a message's command may run inside XRECV: not
// the stream commands themselves.
func nestable(argv [][]byte) bool {
	name := argv[0]
	return !bytes.EqualFold(name, []byte(CmdRecv)) && !bytes.EqualFold(name, []byte(CmdAck))
}

func recv(s *Streams, c *server.Conn, args [][]byte) {
	if !c.Replicated() {
		c.WriteErr(server.ErrNotApplying)
		return
	}
	src, err := parseShard(args[1])
	if err != nil {
		c.WriteErr(err)
		return
	}
	first, err := parseSeq(args[2])
	if err != nil {
		c.WriteErr(err)
		return
	}
	msgs, err := DecodeBatch(args[3])
	if err != nil {
		c.WriteErr(err)
		return
	}
	for _, m := range msgs {
		if !nestable(m) {
			c.WriteErr(fmt.Errorf("%w: %s inside a message", ErrBadMessage, m[0]))
			return
		}
	}
	if err := c.NestCommands(len(msgs)); err != nil {
		c.WriteErr(err)
		return
	}
	last, err := s.Receive(src, first, msgs, func(i int, argv [][]byte) error {
		if _, err := c.RunNested(i, argv); err != nil {
			return err
		}
		// A store that failed under the command fails the entry: the
		// host stops the replica and the entry applies again.
		return s.db.Writable()
	})
	switch {
	case errors.Is(err, ErrGap):
		c.WriteError(fmt.Sprintf("%s %d %v", GapReplyPrefix, last, err))
	case err != nil:
		c.WriteErr(err)
	default:
		c.WriteUint(last)
	}
}

func ack(s *Streams, c *server.Conn, args [][]byte) {
	if !c.Replicated() {
		c.WriteErr(server.ErrNotApplying)
		return
	}
	target, err := parseShard(args[1])
	if err != nil {
		c.WriteErr(err)
		return
	}
	seq, err := parseSeq(args[2])
	if err != nil {
		c.WriteErr(err)
		return
	}
	if err := s.Ack(target, seq); err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteOK()
}

func status(s *Streams, c *server.Conn) {
	st, err := s.Status(time.Now())
	if err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteMap(2)
	c.WriteBulkString("targets")
	c.WriteArray(len(st.Targets))
	for _, t := range st.Targets {
		c.WriteMap(5)
		c.WriteBulkString("target")
		c.WriteUint(uint64(t.Target))
		c.WriteBulkString("pending")
		c.WriteUint(t.Pending)
		c.WriteBulkString("last_appended")
		c.WriteUint(t.LastAppended)
		c.WriteBulkString("last_acked")
		c.WriteUint(t.LastAcked)
		c.WriteBulkString("oldest_age_ms")
		c.WriteUint(uint64(t.OldestAge.Milliseconds()))
	}
	c.WriteBulkString("sources")
	c.WriteArray(len(st.Sources))
	for _, src := range st.Sources {
		c.WriteMap(2)
		c.WriteBulkString("source")
		c.WriteUint(uint64(src.Source))
		c.WriteBulkString("last_applied")
		c.WriteUint(src.LastApplied)
	}
}
