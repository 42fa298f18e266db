package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/tallydb/tally/internal/commands"
	"github.com/tallydb/tally/store"
)

// Connection handling.
//
// Each connection has one goroutine running Conn.serve: read every complete
// command the client has sent (reader, resp.go, parses RESP and inline
// commands), run them in order, flush the replies with one write, repeat.
// Pipelining therefore costs one read and one write per batch of commands,
// and a run of batchable writes in one batch commits as one store batch
// (batch.go).
//
// Why not redcon.Server: its Close closes every connection at once, so
// replies of commands already executed are lost (we want "finish in-flight
// commands" on shutdown); it has no write deadline, so a client that stops
// reading parks its goroutine forever; and it cannot answer "max number of
// clients reached" before closing. Nor its reader: resp.go says why. The
// loop below owns those things.
//
// Limits, per connection:
//   - input: at most Options.MaxRequestBytes are read while waiting for the
//     next complete command, and a bulk length or argument count over the
//     limits is refused at its header; a client over them is sent an error
//     and dropped (the input buffer therefore stays within about the limit
//     plus one read);
//   - arguments: a command with more than Options.MaxArgs arguments is
//     answered with an error and the client dropped, before the arguments
//     are read;
//   - output: replies are flushed whenever 64 KiB are pending, and every
//     write has a deadline of Options.WriteTimeout; a client that does not
//     read its replies for that long is dropped. While a write blocks, the
//     connection reads nothing more, so its memory stays bounded and other
//     connections (their own goroutines) are not slowed.
//   - cross-protocol requests: a command named POST or "Host:" anywhere in
//     a batch, or a first command shaped like an HTTP request line, closes
//     the connection before anything of the batch runs (see httpRequest).

// flushAt is the size of pending output that triggers a write in the
// middle of a batch of commands.
const flushAt = 64 << 10

// maxKeptBuffer is the largest output buffer kept between batches.
const maxKeptBuffer = 1 << 20

// Conn is one client connection as a command handler sees it: its state
// and its reply writer. A Conn is used by one goroutine at a time (its
// connection's); handlers must not keep it after they return.
type Conn struct {
	s      *Server
	nc     net.Conn
	rd     *reader
	out    []byte
	werr   error // sticky: the first write error; later writes are dropped
	id     uint64
	addr   string
	opened time.Time

	info     connInfo // inspect.go: CLIENT LIST's view
	authed   bool
	quit     bool // QUIT: close after this reply
	served   bool // a batch of commands was read: the next is not the first
	errReply bool // the running command replied with an error

	// Cluster mode (cluster.go).
	readonly bool // READONLY: reads run on a follower
	applying bool // the Conn of Server.Apply: no network
	nested   bool // running a command of RunNested (FlagInternal allowed)
	// Command numbers of the entry being applied (declareCommand,
	// NestCommands): the running command's number, how many nested
	// commands it declared, and how many numbers nested commands of the
	// entry's earlier commands took.
	unit, nestN, unitShift int
	applyReqs              []request // Apply's scratch
	// applyBase is 1 + the index in the entry of the first command of the
	// batch runBatch runs for Apply (0: none): when the batch fails, its
	// commands run one by one, each declared as its own (declareCommand).
	applyBase int
	cst       struct { // the group's status for the batch being run
		st     ReplicationStatus
		ok     bool          // st was read in this batch
		fenced bool          // a ReadIndex barrier was passed in this batch
		view   *TopologyView // the slot map for this batch (topology.go)
		viewOK bool          // view was read in this batch
	}

	// Scratch reused by commands.
	batch *store.Batch
	one   *store.Batch // a single capped increment (counters.go incr)
	pend  []pending
	locks []uint32
	vals  []uint64
	ids   []uint64
	ents  []*counterEntry
	// input is the parsed arguments of the table's commands
	// (renderCommand), reused request after request.
	input *commands.Input
}

// countingReader counts the bytes read from clients.
type countingReader struct {
	nc net.Conn
	s  *Server
}

func (r countingReader) Read(p []byte) (int, error) {
	n, err := r.nc.Read(p)
	r.s.stats.netIn.Add(uint64(n))
	return n, err
}

func newConn(s *Server, nc net.Conn, id uint64) *Conn {
	c := &Conn{s: s, nc: nc, id: id, addr: nc.RemoteAddr().String(), opened: time.Now()}
	c.rd = newReader(countingReader{nc: nc, s: s}, s.opts.MaxRequestBytes, s.opts.MaxArgs)
	c.authed = s.opts.Password == ""
	return c
}

// ID returns the connection's id (CLIENT ID), unique in this process.
func (c *Conn) ID() uint64 { return c.id }

// RemoteAddr returns the client's address.
func (c *Conn) RemoteAddr() string { return c.addr }

// Context is the context a command that waits (for a job, a long scan)
// must wait under: it ends when the server closes its connections (Close,
// or Shutdown when its own context ends first), so no command holds
// Shutdown past its deadline.
func (c *Conn) Context() context.Context { return c.s.ctx }

// Server returns the server the connection belongs to.
func (c *Conn) Server() *Server { return c.s }

// serve runs the connection until the client leaves, the server shuts
// down, or the client breaks a limit.
func (c *Conn) serve() {
	defer c.s.connDone(c)
	for {
		if idle := c.s.opts.IdleTimeout; idle > 0 {
			c.nc.SetReadDeadline(time.Now().Add(idle))
			// NB: Shutdown sets closing before it moves every read
			// deadline to the past; checking after our own deadline is
			// set means one of the two always wins.
			if c.s.closing.Load() {
				c.nc.SetReadDeadline(aLongTimeAgo)
			}
		}
		if c.info.killed.Load() {
			c.s.dropped(c, reasonKilled, nil)
			return
		}
		cmds, err := c.rd.read()
		if err != nil {
			if c.info.killed.Load() {
				c.s.dropped(c, reasonKilled, nil)
				return
			}
			c.readFailed(err)
			return
		}
		c.execute(cmds)
		c.flush()
		if c.werr != nil {
			c.s.dropped(c, reasonWriteError, c.werr)
			return
		}
		if c.quit {
			return
		}
		if cap(c.out) > maxKeptBuffer {
			c.out = nil
		}
	}
}

// aLongTimeAgo is a read deadline in the past: it makes a blocked Read
// return at once.
var aLongTimeAgo = time.Unix(1, 0)

// readFailed ends the connection after a read error, telling the client why
// when it is its fault.
func (c *Conn) readFailed(err error) {
	var ne net.Error
	var pe *protocolError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
	case errors.As(err, &ne) && ne.Timeout():
		if !c.s.closing.Load() {
			c.s.dropped(c, reasonIdle, err)
		}
	case errors.As(err, &pe):
		c.writeError("ERR " + pe.Error())
		c.flush()
		c.s.dropped(c, pe.reason, err)
	default:
		c.s.dropped(c, reasonReadError, err)
	}
}

// execute runs one batch of commands in order.
func (c *Conn) execute(cmds []request) {
	if c.httpRequest(cmds) {
		c.quit = true
		c.s.crossProtocol(c)
		return
	}
	c.cst.ok, c.cst.fenced, c.cst.viewOK = false, false, false
	for i := 0; i < len(cmds) && !c.quit && c.werr == nil; {
		args := cmds[i].Args
		cmd, ok := c.resolve(args)
		if !ok {
			i++
			continue
		}
		c.info.lastCmd.Store(cmd)
		c.info.lastActive.Store(time.Now().UnixNano())
		if c.s.cluster != nil {
			if n := c.route(cmd, cmds[i:]); n > 0 {
				i += n
				continue
			}
		}
		if cmd.stage != nil {
			i += c.runBatch(cmd, cmds[i:])
			continue
		}
		c.run(cmd, args)
		i++
	}
}

// resolve finds the command for args and checks what every command must
// pass: a sane name, the argument limit, AUTH, arity. On failure it writes
// the error reply (and drops the client when its input is not a request
// at all) and returns false.
func (c *Conn) resolve(args [][]byte) (*Command, bool) {
	cmd, msg, drop := c.find(args)
	if msg == "" {
		return cmd, true
	}
	t0 := time.Now()
	if drop != "" {
		c.quit = true
		c.s.dropped(c, drop, nil)
	}
	c.writeError(msg)
	if cmd != nil && cmd.Handler != nil {
		cs := cmd.metrics.get()
		cs.failed.Inc()
		cs.latency.observeN(time.Since(t0), 1)
		cmd.metrics.rejected.Add(1)
	} else {
		c.s.metrics.unknown.Inc()
	}
	c.s.stats.commands.Add(1)
	c.s.stats.errorReplies.Add(1)
	return nil, false
}

// find is resolve without side effects: the command, or the error reply
// and whether the client must be dropped.
func (c *Conn) find(args [][]byte) (*Command, string, dropReason) {
	name := args[0]
	cmd := lookupIn(c.s.cmds.byName, name)
	if cmd == nil {
		if !printable(name) {
			// Bytes that are neither RESP nor a readable inline command:
			// garbage, not a typo.
			return nil, "ERR Protocol error: unreadable command name", reasonProtocol
		}
		return nil, unknownCommand(args), ""
	}
	if !c.authed && cmd.Flags&FlagNoAuth == 0 {
		return nil, "NOAUTH Authentication required.", ""
	}
	if cmd.subs != nil && (len(args) >= 2 || cmd.Handler == nil) {
		if len(args) < 2 {
			return cmd, fmt.Sprintf("ERR wrong number of arguments for '%s' command", cmd.fullName), ""
		}
		sub := lookupIn(cmd.subs, args[1])
		if sub == nil {
			return nil, fmt.Sprintf("ERR unknown subcommand '%.128s'. Try %s HELP.",
				sanitize(args[1]), strings.ToUpper(cmd.fullName)), ""
		}
		if !c.authed && sub.Flags&FlagNoAuth == 0 {
			return nil, "NOAUTH Authentication required.", ""
		}
		cmd = sub
	}
	if !arityOK(cmd.Arity, len(args)) {
		return cmd, fmt.Sprintf("ERR wrong number of arguments for '%s' command", cmd.fullName), ""
	}
	if cmd.Flags&FlagInternal != 0 && !c.nested {
		return cmd, fmt.Sprintf("ERR %s: '%s' is sent by one shard to another, not by clients", ErrInternal.Error(), cmd.fullName), ""
	}
	return cmd, "", ""
}

// httpRequest reports whether a batch is (part of) an HTTP request, which
// a web page can make a browser send to any local port (issue 16: curl -X
// POST with commands in its body ran them). Redis closes a connection that
// sends a command named POST or "Host:" (securityWarningCommand); a browser
// sends both in every request with a body. We check every command of the
// batch before running any, and also refuse a first command shaped like a
// request line (METHOD target HTTP/x.y), which any HTTP client sends
// first: no RESP client starts with that.
func (c *Conn) httpRequest(cmds []request) bool {
	first := !c.served
	c.served = true
	for i := range cmds {
		name := cmds[i].Args[0]
		if len(name) == 4 && bytes.EqualFold(name, []byte("post")) ||
			len(name) == 5 && bytes.EqualFold(name, []byte("host:")) {
			return true
		}
	}
	return first && requestLine(cmds[0].Args)
}

// requestLine reports whether args is an HTTP request line: an upper-case
// method token, a target, a version "HTTP/" and a digit.
func requestLine(args [][]byte) bool {
	if len(args) != 3 || len(args[0]) > 16 {
		return false
	}
	for _, ch := range args[0] {
		if ch < 'A' || ch > 'Z' {
			return false
		}
	}
	v := args[2]
	return len(v) > 5 && string(v[:5]) == "HTTP/" && v[5] >= '0' && v[5] <= '9'
}

// printable reports whether a command name is plain ASCII text.
func printable(b []byte) bool {
	for _, ch := range b {
		if ch < 0x20 || ch > 0x7e {
			return false
		}
	}
	return true
}

// unknownCommand is Redis's reply to an unknown command.
func unknownCommand(args [][]byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ERR unknown command '%.128s', with args beginning with: ", sanitize(args[0]))
	for _, a := range args[1:] {
		if b.Len() >= 200 {
			break
		}
		fmt.Fprintf(&b, "'%.64s' ", sanitize(a))
	}
	return b.String()
}

// sanitize makes client bytes safe inside an error line.
func sanitize(b []byte) string {
	s := []byte(nil)
	for i, ch := range b {
		if ch < 0x20 || ch > 0x7e {
			if s == nil {
				s = append(s, b[:i]...)
			}
			ch = ' '
		}
		if s != nil {
			s = append(s, ch)
		}
	}
	if s == nil {
		return string(b)
	}
	return string(s)
}

// run runs one command and accounts for it.
func (c *Conn) run(cmd *Command, args [][]byte) {
	t0 := time.Now()
	c.errReply = false
	cmd.Handler(c, args)
	d := time.Since(t0)
	c.account(cmd, d)
	c.s.slow.record(c, args, d)
	c.s.latency.record(cmd, d)
}

func (c *Conn) account(cmd *Command, d time.Duration) {
	failed := 0
	if c.errReply {
		failed = 1
	}
	c.accountN(cmd, d, 1, failed)
}

// accountN accounts for n calls of cmd that took d each, failed of them
// with an error reply: a batch's run of one command in one go.
func (c *Conn) accountN(cmd *Command, d time.Duration, n, failed int) {
	cs := cmd.metrics.get()
	if failed > 0 {
		cs.failed.Add(float64(failed))
		c.s.stats.errorReplies.Add(int64(failed))
	}
	if n > failed {
		cs.ok.Add(float64(n - failed))
	}
	cs.latency.observeN(d, n)
	c.s.stats.commands.Add(int64(n))
}

// flush writes the pending replies under the write deadline.
func (c *Conn) flush() {
	if len(c.out) == 0 || c.werr != nil {
		c.out = c.out[:0]
		return
	}
	if t := c.s.opts.WriteTimeout; t > 0 {
		c.nc.SetWriteDeadline(time.Now().Add(t))
	}
	n, err := c.nc.Write(c.out)
	c.s.stats.netOut.Add(uint64(n))
	if err != nil {
		c.werr = err
	}
	c.out = c.out[:0]
}

// more flushes when enough output is pending.
func (c *Conn) more() {
	if len(c.out) >= flushAt && !c.applying {
		c.flush()
	}
}

// writeError writes an error reply; msg starts with its code ("ERR ...").
func (c *Conn) writeError(msg string) {
	c.errReply = true
	c.s.errorStats.note(msg)
	c.out = appendLine(c.out, '-', msg)
	c.more()
}

// WriteError writes an error reply. msg starts with an upper-case code
// ("ERR", "WRONGTYPE", ...); "ERR " is added when it does not. Line breaks
// are replaced by spaces.
func (c *Conn) WriteError(msg string) {
	code, _, _ := strings.Cut(msg, " ")
	if code == "" || strings.ToUpper(code) != code || strings.ContainsAny(code, "0123456789") {
		msg = "ERR " + msg
	}
	c.writeError(msg)
}

// WriteErr writes err as an error reply, in Redis's words where one fits
// (see replyFor).
func (c *Conn) WriteErr(err error) { c.writeError(replyFor(err)) }

// WriteOK writes the simple string OK.
func (c *Conn) WriteOK() {
	c.out = append(c.out, "+OK\r\n"...)
	c.more()
}

// WriteSimple writes a simple string (line breaks become spaces).
func (c *Conn) WriteSimple(s string) {
	c.out = appendLine(c.out, '+', s)
	c.more()
}

// WriteInt writes an integer reply.
func (c *Conn) WriteInt(v int64) {
	c.out = appendPrefix(c.out, ':', v)
	c.more()
}

// WriteUint writes a count as an integer reply; a count above 2^63-1
// (possible only in a 64-bit column) is written as a bulk string, since
// RESP integers are signed.
func (c *Conn) WriteUint(v uint64) {
	if v > maxInt64 {
		c.WriteBulkUint(v)
		return
	}
	c.out = appendPrefix(c.out, ':', int64(v))
	c.more()
}

// WriteBulk writes a bulk string.
func (c *Conn) WriteBulk(b []byte) {
	c.out = appendBulk(c.out, b)
	c.more()
}

// WriteBulkString writes a bulk string.
func (c *Conn) WriteBulkString(s string) {
	c.out = appendBulkString(c.out, s)
	c.more()
}

// WriteBulkUint writes v in decimal as a bulk string, without allocating.
func (c *Conn) WriteBulkUint(v uint64) {
	var tmp [20]byte
	c.WriteBulk(strconv.AppendUint(tmp[:0], v, 10))
}

// WriteUintRecord3 writes a record of three named counts, as WriteMap(3)
// and a WriteBulkString and a WriteUint per field would (commands's
// RecordWriter: LIKE.TOP's records), in one call.
func (c *Conn) WriteUintRecord3(names *[3]string, vals [3]uint64) {
	c.out = append(c.out, "*6\r\n"...)
	for i := range names {
		c.out = appendBulkString(c.out, names[i])
		if v := vals[i]; v <= maxInt64 {
			c.out = appendPrefix(c.out, ':', int64(v))
		} else {
			var tmp [20]byte
			c.out = appendBulk(c.out, strconv.AppendUint(tmp[:0], v, 10))
		}
	}
	c.more()
}

// WriteNull writes a null bulk string.
func (c *Conn) WriteNull() {
	c.out = append(c.out, "$-1\r\n"...)
	c.more()
}

// WriteArray writes an array header; n replies must follow.
// WriteMap starts a record of n name/value pairs: in RESP2, an array of
// 2n (as HGETALL replies).
func (c *Conn) WriteMap(n int) { c.WriteArray(2 * n) }

// WriteArray starts an array of n elements.
func (c *Conn) WriteArray(n int) {
	c.out = appendPrefix(c.out, '*', int64(n))
	c.more()
}

const maxInt64 = 1<<63 - 1
