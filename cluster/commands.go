package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/tallydb/tally/replica"
	"github.com/tallydb/tally/server"
)

// membershipTimeout bounds a membership change or a leadership transfer
// asked for over RESP.
const membershipTimeout = 30 * time.Second

// commands are the group's own RESP commands: TALLY.CLUSTER STATUS,
// ADDLEARNER, PROMOTE, REMOVE and TRANSFER. They run on the node they are
// sent to (never replicated as commands: a membership change is itself a
// Raft entry) and changes must be sent to the leader.
func (n *Node) commands() []server.Command {
	sub := func(name string, arity int, flags server.Flags, summary string, args []server.Arg, h server.Handler) server.Command {
		return server.Command{Name: name, Arity: arity, Flags: flags | server.FlagLocal, Group: "cluster", Since: "0.1.0",
			Complexity: "O(N) where N is the number of replicas", Summary: summary, Args: args, Handler: h}
	}
	peerArgs := []server.Arg{{Name: "id", Type: "integer"}, {Name: "raft-addr", Type: "string"}, {Name: "client-addr", Type: "string"}}
	idArg := []server.Arg{{Name: "id", Type: "integer"}}
	return []server.Command{{
		Name: "TALLY.CLUSTER", Arity: -2, Group: "cluster", Since: "0.1.0",
		Summary: "Shows and changes the replica group this node belongs to.",
		Subcommands: []server.Command{
			sub("STATUS", 2, server.FlagReadOnly, "Returns the group as this node sees it: its id, role, term, leader, "+
				"commit and applied indexes, and one record per member (id, raft and client addresses, voter, match, lag).", nil, n.statusHandler),
			sub("ADDLEARNER", 5, server.FlagAdmin, "Adds a replica as a learner (it receives the log or a snapshot, "+
				"and does not vote); send to the leader.", peerArgs, n.addHandler),
			sub("PROMOTE", 3, server.FlagAdmin, "Makes a caught-up learner a voter; send to the leader.", idArg, n.promoteHandler),
			sub("REMOVE", 3, server.FlagAdmin, "Removes a replica from the group; send to the leader.", idArg, n.removeHandler),
			sub("TRANSFER", -2, server.FlagAdmin, "Hands leadership to voter id (without it, to the most caught-up "+
				"voter) and waits until this node no longer leads; send to the leader (with an id, a follower "+
				"refuses, naming the leader).",
				[]server.Arg{{Name: "id", Type: "integer", Optional: true}}, n.transferHandler),
		},
	}}
}

func (n *Node) statusHandler(c *server.Conn, _ [][]byte) {
	st := n.rep.Status()
	c.WriteMap(9)
	c.WriteBulkString("id")
	c.WriteUint(st.ID)
	c.WriteBulkString("role")
	c.WriteBulkString(st.Role)
	c.WriteBulkString("term")
	c.WriteUint(st.Term)
	c.WriteBulkString("leader")
	c.WriteUint(st.Leader.ID)
	c.WriteBulkString("leader_addr")
	c.WriteBulkString(st.Leader.ClientAddr)
	c.WriteBulkString("commit")
	c.WriteUint(st.Commit)
	c.WriteBulkString("applied")
	c.WriteUint(st.Applied)
	c.WriteBulkString("log")
	c.WriteBulkString(fmt.Sprintf("%d-%d", st.LogFirst, st.LogLast))
	c.WriteBulkString("members")
	c.WriteArray(len(st.Members))
	for _, m := range st.Members {
		c.WriteMap(6)
		c.WriteBulkString("id")
		c.WriteUint(m.ID)
		c.WriteBulkString("raft_addr")
		c.WriteBulkString(m.RaftAddr)
		c.WriteBulkString("client_addr")
		c.WriteBulkString(m.ClientAddr)
		c.WriteBulkString("voter")
		c.WriteInt(b2i(m.Voter))
		c.WriteBulkString("match")
		c.WriteUint(m.Match)
		c.WriteBulkString("lag")
		var lag uint64
		if st.LogLast > m.Match && st.Role == "leader" {
			lag = st.LogLast - m.Match
		}
		c.WriteUint(lag)
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// parseID reads a replica id argument.
func parseID(b []byte) (uint64, error) {
	id, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("%w: replica id %q (want 1..2^64-1)", ErrInvalidConfig, b)
	}
	return id, nil
}

// checkAddr refuses an address that is not "host:port".
func checkAddr(what string, b []byte) error {
	if _, port, err := net.SplitHostPort(string(b)); err != nil || port == "" {
		return fmt.Errorf("%w: %s %q (want host:port)", ErrInvalidConfig, what, b)
	}
	return nil
}

func (n *Node) change(c *server.Conn, fn func(ctx context.Context) error) {
	ctx, cancel := context.WithTimeout(c.Context(), membershipTimeout)
	defer cancel()
	if err := fn(ctx); err != nil {
		var nl *replica.NotLeaderError
		if errors.As(err, &nl) && nl.Leader.ClientAddr != "" {
			c.WriteError(fmt.Sprintf("ERR not the leader: send membership changes to %s", nl.Leader.ClientAddr))
			return
		}
		c.WriteErr(err)
		return
	}
	c.WriteOK()
}

func (n *Node) addHandler(c *server.Conn, args [][]byte) {
	id, err := parseID(args[2])
	if err == nil {
		err = errors.Join(checkAddr("raft address", args[3]), checkAddr("client address", args[4]))
	}
	if err != nil {
		c.WriteErr(err)
		return
	}
	p := replica.Peer{ID: id, RaftAddr: string(args[3]), ClientAddr: string(args[4])}
	n.change(c, func(ctx context.Context) error { return n.rep.AddLearner(ctx, p) })
}

func (n *Node) promoteHandler(c *server.Conn, args [][]byte) { n.idChange(c, args[2], n.rep.Promote) }

func (n *Node) removeHandler(c *server.Conn, args [][]byte) { n.idChange(c, args[2], n.rep.Remove) }

// idChange runs a membership change naming one replica by id.
func (n *Node) idChange(c *server.Conn, arg []byte, fn func(ctx context.Context, id uint64) error) {
	id, err := parseID(arg)
	if err != nil {
		c.WriteErr(err)
		return
	}
	n.change(c, func(ctx context.Context) error { return fn(ctx, id) })
}

func (n *Node) transferHandler(c *server.Conn, args [][]byte) {
	switch len(args) {
	case 2:
		n.change(c, n.rep.TransferLeadership)
	case 3:
		// A named target is a request to this shard's leader: a follower
		// says where the leader is rather than reply OK for nothing.
		if st := n.rep.Status(); st.Role != "leader" {
			if st.Leader.ClientAddr != "" {
				c.WriteError(fmt.Sprintf("ERR not the leader: send membership changes to %s", st.Leader.ClientAddr))
			} else {
				c.WriteErr(replica.ErrNotLeader)
			}
			return
		}
		n.idChange(c, args[2], n.rep.TransferLeadershipTo)
	default:
		c.WriteError("ERR syntax error: TALLY.CLUSTER TRANSFER [id]")
	}
}
