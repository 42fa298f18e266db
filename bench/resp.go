package bench

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"
)

// respConn is a minimal pipelined RESP2 client for the Redis targets: append
// commands with begin/arg, flush them in one write, then read one reply per
// command. It only dials loopback addresses, bounds every round trip by a
// deadline and every reply by maxBulk and maxArray, and does not allocate
// per command once its buffers have grown.
type respConn struct {
	c       net.Conn
	r       *bufio.Reader
	out     []byte
	pending int // commands written and not yet answered
	timeout time.Duration
}

const (
	respMaxBulk  = 64 << 20
	respMaxArray = 1 << 20
)

var errRESPProtocol = errors.New("resp: protocol error")

// redisError is an error reply from the server.
type redisError string

func (e redisError) Error() string { return "redis: " + string(e) }

func dialRESP(addr string, timeout time.Duration) (*respConn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("resp: %s is not a loopback address", addr)
	}
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	return &respConn{c: c, r: bufio.NewReaderSize(c, 64<<10), timeout: timeout}, nil
}

func (c *respConn) Close() error { return c.c.Close() }

// begin starts a command of n arguments (the command name included).
func (c *respConn) begin(n int) {
	c.out = append(c.out, '*')
	c.out = strconv.AppendInt(c.out, int64(n), 10)
	c.out = append(c.out, '\r', '\n')
	c.pending++
}

func (c *respConn) arg(b []byte) {
	c.out = append(c.out, '$')
	c.out = strconv.AppendInt(c.out, int64(len(b)), 10)
	c.out = append(c.out, '\r', '\n')
	c.out = append(c.out, b...)
	c.out = append(c.out, '\r', '\n')
}

func (c *respConn) argString(s string) {
	c.out = append(c.out, '$')
	c.out = strconv.AppendInt(c.out, int64(len(s)), 10)
	c.out = append(c.out, '\r', '\n')
	c.out = append(c.out, s...)
	c.out = append(c.out, '\r', '\n')
}

func (c *respConn) argInt(v int64) {
	var tmp [20]byte
	c.arg(strconv.AppendInt(tmp[:0], v, 10))
}

// cmd appends a command of string arguments (for setup, not the hot path).
func (c *respConn) cmd(args ...string) {
	c.begin(len(args))
	for _, a := range args {
		c.argString(a)
	}
}

// flush sends the buffered commands and arms the deadline for their replies.
func (c *respConn) flush() error {
	if err := c.c.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return err
	}
	_, err := c.c.Write(c.out)
	c.out = c.out[:0]
	return err
}

// line reads one reply line without its CRLF. The slice is valid until the
// next read.
func (c *respConn) line() ([]byte, error) {
	b, err := c.r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(b) < 3 || b[len(b)-2] != '\r' {
		return nil, errRESPProtocol
	}
	return b[:len(b)-2], nil
}

// parseInt parses a decimal RESP length or integer without allocating.
func parseInt(b []byte) (int64, error) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, errRESPProtocol
	}
	var v int64
	for _, d := range b {
		if d < '0' || d > '9' {
			return 0, errRESPProtocol
		}
		v = v*10 + int64(d-'0')
	}
	if neg {
		v = -v
	}
	return v, nil
}

// reply reads one reply. Integers and numeric bulk strings are returned as
// n (nil bulk as 0, with isNil); an array header returns its length in n and
// leaves its elements to the caller; simple and bulk strings are returned in
// s, valid until the next read.
func (c *respConn) reply() (kind byte, n int64, s []byte, err error) {
	b, err := c.line()
	if err != nil {
		return 0, 0, nil, err
	}
	kind, b = b[0], b[1:]
	switch kind {
	case '+':
		return kind, 0, b, nil
	case '-':
		return kind, 0, nil, redisError(b)
	case ':':
		n, err = parseInt(b)
		return kind, n, nil, err
	case '*':
		n, err = parseInt(b)
		if err == nil && n > respMaxArray {
			err = errRESPProtocol
		}
		return kind, n, nil, err
	case '$':
		n, err = parseInt(b)
		if err != nil || n > respMaxBulk {
			return 0, 0, nil, errRESPProtocol
		}
		if n < 0 {
			return kind, -1, nil, nil
		}
		buf, err := c.r.Peek(int(n) + 2)
		if err == bufio.ErrBufferFull {
			buf = make([]byte, n+2)
			_, err = ioReadFull(c.r, buf)
		} else if err == nil {
			_, err = c.r.Discard(int(n) + 2)
		}
		if err != nil {
			return 0, 0, nil, err
		}
		return kind, n, buf[:n], nil
	}
	return 0, 0, nil, errRESPProtocol
}

func ioReadFull(r *bufio.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// flushReadInts sends the queued requests and appends the integers of
// every reply (readInts) to dst.
func (c *respConn) flushReadInts(dst []uint64) ([]uint64, error) {
	if err := c.flush(); err != nil {
		return dst, err
	}
	var err error
	for c.pending > 0 && err == nil {
		dst, err = c.readInts(dst)
	}
	return dst, err
}

// readInts reads one reply into dst: an integer, a bulk number or nil (0),
// or an array of those.
func (c *respConn) readInts(dst []uint64) ([]uint64, error) {
	c.pending--
	kind, n, s, err := c.reply()
	if err != nil {
		return dst, err
	}
	switch kind {
	case ':':
		return append(dst, uint64(n)), nil
	case '$':
		v, err := bulkUint(n, s)
		return append(dst, v), err
	case '*':
		for k := int64(0); k < n; k++ {
			kind, m, s, err := c.reply()
			if err != nil {
				return dst, err
			}
			if kind != '$' {
				return dst, errRESPProtocol
			}
			v, err := bulkUint(m, s)
			if err != nil {
				return dst, err
			}
			dst = append(dst, v)
		}
		return dst, nil
	}
	return dst, fmt.Errorf("resp: unexpected reply %q", kind)
}

func bulkUint(n int64, s []byte) (uint64, error) {
	if n < 0 {
		return 0, nil
	}
	v, err := parseInt(s)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("resp: count %q is not a non-negative number", s)
	}
	return uint64(v), nil
}

// readOK reads one simple-string or integer reply and discards it.
func (c *respConn) readOK() error {
	c.pending--
	return c.skip(0)
}

// skip reads one reply, arrays nested to respMaxDepth included, and keeps
// none of it: a timed read whose values the runner does not use costs the
// client the same for every target, whatever the reply's shape.
func (c *respConn) skip(depth int) error {
	kind, n, _, err := c.reply()
	if err != nil {
		return err
	}
	if kind != '*' {
		return nil
	}
	if depth >= respMaxDepth {
		return errRESPProtocol
	}
	for ; n > 0; n-- {
		if err := c.skip(depth + 1); err != nil {
			return err
		}
	}
	return nil
}

// drain reads every pending reply, returning the first error reply.
func (c *respConn) drain() error {
	var first error
	for c.pending > 0 {
		if err := c.readOK(); err != nil {
			var re redisError
			if !errors.As(err, &re) {
				return err
			}
			if first == nil {
				first = err
			}
		}
	}
	return first
}

// do sends one command and returns its reply as a string (bulk or simple).
func (c *respConn) do(args ...string) (string, error) {
	c.cmd(args...)
	if err := c.flush(); err != nil {
		return "", err
	}
	c.pending--
	kind, n, s, err := c.reply()
	if err != nil {
		return "", err
	}
	if kind == ':' {
		return strconv.FormatInt(n, 10), nil
	}
	return string(s), nil
}

// readValue reads one whole reply, nested arrays included: an int64, a
// string (simple or bulk), nil (a nil bulk or array), or []any. An error
// reply is returned as a redisError after the reply is consumed.
func (c *respConn) readValue() (any, error) {
	c.pending--
	return c.value(0)
}

// respMaxDepth bounds the nesting readValue follows.
const respMaxDepth = 8

func (c *respConn) value(depth int) (any, error) {
	kind, n, s, err := c.reply()
	if err != nil {
		return nil, err
	}
	switch kind {
	case ':':
		return n, nil
	case '+':
		return string(s), nil
	case '$':
		if n < 0 {
			return nil, nil
		}
		return string(s), nil
	case '*':
		if n < 0 {
			return nil, nil
		}
		if depth >= respMaxDepth {
			return nil, errRESPProtocol
		}
		arr := make([]any, 0, n)
		for k := int64(0); k < n; k++ {
			v, err := c.value(depth + 1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		return arr, nil
	}
	return nil, errRESPProtocol
}
