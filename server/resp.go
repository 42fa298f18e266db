package server

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The request reader.
//
// A client sends commands in one of two forms, which Redis tells apart by
// the first byte of each request:
//
//	multibulk  *N\r\n then N times $L\r\n + L bytes + \r\n   (every client library)
//	inline     words separated by blanks, ending in \n       (telnet, nc, redis-cli scripts)
//
// reader parses both, with Redis's rules (src/networking.c
// processMultibulkBuffer and processInlineBuffer, sds.c sdssplitargs) and
// Redis's error texts, and with limits that hold before any work is done:
//
//   - *N: N must be a decimal integer (no sign but '-', no leading zero);
//     N <= 0 is an empty request and ignored, as Redis does; N above
//     MaxArgs is "invalid multibulk length" at the header, before anything
//     loops or allocates. A header line longer than any valid one
//     (maxHeaderLine) is refused at once instead of being buffered.
//   - $L: the next request byte must be '$' ("expected '$', got 'c'", so a
//     nested array is refused); L < 0 ($-1, a null, is not an argument) or
//     L above MaxRequestBytes is "invalid bulk length" at the header; the
//     L bytes must be followed by \r\n. Once the request's headers and
//     bulks would pass MaxRequestBytes it is "request larger than N bytes"
//     at the header that says so.
//   - inline: a line that reaches MaxRequestBytes without its \n is "too big
//     inline request"; the line is split in one pass, in place (unquoted
//     and unescaped arguments point into the buffer, so nothing is copied),
//     and the MaxArgs-th-plus-one argument stops the split. An unterminated
//     quote, or a closing quote followed by anything but a blank, is
//     "unbalanced quotes in request". A blank line is ignored.
//
// Every complete request already buffered in front of a protocol error is
// returned first; the error comes with the next call (Redis runs and
// answers those commands, then replies the error and closes).
//
// Memory: the input buffer holds at most one incomplete request (at most
// MaxRequestBytes plus one read, minRead) and the complete ones in front
// of it from one read; it starts at initialBuffer bytes, doubles when an
// incomplete request needs room, and is let go once empty if it grew past
// maxKeptInput. Arguments are slices of it, one [][]byte per batch shared
// by its commands: 24 bytes per argument, and a batch stops growing once
// it holds maxBatchCommands commands or maxBatchArgs arguments (the rest
// stays buffered for the next call), so the slices stay within a few
// times MaxArgs x 24 bytes whatever the input. A request that arrives in
// pieces is scanned once: the state of the incomplete request (its
// argument count, the offsets of the arguments read so far, how far an
// inline line has been searched for its \n) is kept between reads. In
// steady state a batch allocates nothing.
//
// Why not redcon's Reader (which tally used until issue 16): it loops over
// the count of a *N header before checking it against anything, so
// *9223372036854775807 spins a core forever; it splits an inline line by
// allocating a copy of the rest of the line per argument (quadratic: 400 KB
// of " a" took 20 s and 9 GB), and the argument count can only be checked
// after it returns; its bounds check on $L overflows and panics near the
// int maximum; it returns nothing of a read that ends in a protocol error,
// so the complete commands in front of the error were neither run nor
// answered; and it copies every request (one allocation per command and
// one per inline argument). None of that can be fixed from outside it.

const (
	// initialBuffer is the input buffer of a new connection: a pipeline of
	// a few dozen short commands fits.
	initialBuffer = 4 << 10
	// minRead is the least free space a read is given; below it the buffer
	// is compacted or grown first.
	minRead = 1 << 10
	// maxKeptInput is the largest input buffer kept once empty.
	maxKeptInput = 64 << 10
	// maxHeaderLine bounds a *N or $L line: '-', 19 digits, \r\n.
	maxHeaderLine = 22
	// maxBatchCommands and maxBatchArgs bound one batch: a batch stops
	// before the next request once it holds this many commands or
	// arguments.
	maxBatchCommands = 256
	maxBatchArgs     = 2048
)

// request is one command: its name and arguments. The slices point into
// the reader's buffer and are valid until the reader's next read.
type request struct {
	Args [][]byte
}

// protocolError is input that is not a request: the client is answered
// "ERR " + Error() and dropped, counted under reason.
type protocolError struct {
	msg    string
	reason dropReason
}

func (e *protocolError) Error() string { return "Protocol error: " + e.msg }

var (
	errInvalidMultibulk = &protocolError{"invalid multibulk length", reasonProtocol}
	errTooManyArgs      = &protocolError{"invalid multibulk length", reasonTooManyArgs}
	errInvalidBulk      = &protocolError{"invalid bulk length", reasonProtocol}
	errBulkTooLong      = &protocolError{"invalid bulk length", reasonTooLarge}
	errUnbalancedQuotes = &protocolError{"unbalanced quotes in request", reasonProtocol}
	errTooBigInline     = &protocolError{"too big inline request", reasonTooLarge}
)

// reader reads requests from a client. It is used by one goroutine.
type reader struct {
	rd       io.Reader
	maxBytes int // MaxRequestBytes
	maxArgs  int // MaxArgs
	// Errors that carry a limit, made once.
	errTooLarge, errInlineArgs *protocolError

	buf        []byte
	start, end int // buf[start:end] is input not yet returned

	// The request at start while it is incomplete: offsets are from start,
	// so they survive compaction.
	count int   // multibulk: N of its *N header; 0 before the header is read
	pos   int   // where parsing resumes: after the last complete part
	marks []int // multibulk: begin and end of each argument read
	need  int   // bytes from start the request needs at least; 0 if unknown

	cmds []request
	args [][]byte

	err     error // sticky: once returned, every later read returns it
	readErr error // the error of a read that also returned data
}

func newReader(rd io.Reader, maxBytes, maxArgs int) *reader {
	return &reader{
		rd: rd, maxBytes: maxBytes, maxArgs: maxArgs,
		errTooLarge:   &protocolError{fmt.Sprintf("request larger than %d bytes", maxBytes), reasonTooLarge},
		errInlineArgs: &protocolError{fmt.Sprintf("more than %d arguments", maxArgs), reasonTooManyArgs},
	}
}

// read returns the next batch of requests: every complete request
// buffered (up to the batch bounds), reading from the client only when
// none is. It returns at least one request, or an error: a
// *protocolError, or the underlying reader's. The requests are valid until
// the next call.
func (r *reader) read() ([]request, error) {
	r.cmds = r.cmds[:0]
	if cap(r.args) > 4*maxBatchArgs {
		r.args = nil // a command with many arguments passed; do not keep its slices
	}
	r.args = r.args[:0]
	for r.err == nil {
		if err := r.parse(); err != nil {
			r.err = err
			break
		}
		if len(r.cmds) > 0 {
			return r.cmds, nil
		}
		r.err = r.fill()
	}
	if len(r.cmds) > 0 {
		return r.cmds, nil
	}
	return nil, r.err
}

// parse moves the complete requests at start into r.cmds, up to the batch
// bounds, and stops at the first incomplete one.
func (r *reader) parse() error {
	for r.start < r.end && len(r.cmds) < maxBatchCommands && len(r.args) < maxBatchArgs {
		b := r.buf[r.start:r.end]
		var n int
		var err error
		if b[0] == '*' {
			n, err = r.multibulk(b)
		} else {
			n, err = r.inline(b)
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		r.start += n
		r.count, r.pos, r.need = 0, 0, 0
		if cap(r.marks) > 2*maxBatchArgs {
			r.marks = nil // a command with many arguments passed
		}
		r.marks = r.marks[:0]
	}
	return nil
}

// multibulk parses the multibulk request at the start of b. It returns the
// bytes the request takes (0 while it is incomplete) and appends the
// request, unless it is empty, to r.cmds.
func (r *reader) multibulk(b []byte) (int, error) {
	if r.count == 0 {
		line, err := headerLine(b[1:], errInvalidMultibulk)
		if line == nil || err != nil {
			return 0, err
		}
		n, ok := parseLength(line)
		switch {
		case !ok:
			return 0, errInvalidMultibulk
		case n > int64(r.maxArgs):
			return 0, errTooManyArgs
		case n <= 0:
			return 1 + len(line) + 2, nil // an empty request: nothing to run
		}
		r.count = int(n)
		r.pos = 1 + len(line) + 2
	}
	for len(r.marks) < 2*r.count {
		p := r.pos
		if p >= len(b) {
			return 0, nil
		}
		if b[p] != '$' {
			return 0, &protocolError{fmt.Sprintf("expected '$', got '%c'", printableByte(b[p])), reasonProtocol}
		}
		line, err := headerLine(b[p+1:], errInvalidBulk)
		if line == nil || err != nil {
			return 0, err
		}
		n, ok := parseLength(line)
		switch {
		case !ok || n < 0:
			return 0, errInvalidBulk
		case n > int64(r.maxBytes):
			return 0, errBulkTooLong
		}
		data := p + 1 + len(line) + 2
		end := data + int(n) + 2
		if end > r.maxBytes {
			return 0, r.errTooLarge
		}
		if end > len(b) {
			r.need = end
			return 0, nil
		}
		if b[end-2] != '\r' || b[end-1] != '\n' {
			return 0, errInvalidBulk
		}
		r.marks = append(r.marks, data, data+int(n))
		r.pos = end
	}
	lo := len(r.args)
	for i := 0; i < len(r.marks); i += 2 {
		r.args = append(r.args, b[r.marks[i]:r.marks[i+1]:r.marks[i+1]])
	}
	r.cmds = append(r.cmds, request{Args: r.args[lo:len(r.args):len(r.args)]})
	return r.pos, nil
}

// headerLine returns the text of the *N or $L line at the start of b
// (without its \r\n), nil if the line is not complete yet, or bad when it
// cannot be a header: no \r before the \n, or longer than any valid one.
func headerLine(b []byte, bad error) ([]byte, error) {
	i := bytes.IndexByte(b[:min(len(b), maxHeaderLine)], '\n')
	if i < 0 {
		if len(b) >= maxHeaderLine {
			return nil, bad
		}
		return nil, nil
	}
	if i == 0 || b[i-1] != '\r' {
		return nil, bad
	}
	return b[: i-1 : i-1], nil
}

// parseLength parses a *N or $L length as Redis's string2ll does: an
// optional '-', then "0" or a digit 1-9 and more digits, within int64.
func parseLength(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 || b[0] < '0' || b[0] > '9' || b[0] == '0' && (len(b) > 1 || neg) {
		return 0, false
	}
	var v uint64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		v = v*10 + uint64(ch-'0') // 19 digits cannot overflow a uint64
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return -int64(v), true
	}
	if v > 1<<63-1 {
		return 0, false
	}
	return int64(v), true
}

// printableByte is ch, or a space when ch could break an error line.
func printableByte(ch byte) byte {
	if ch < 0x20 || ch > 0x7e {
		return ' '
	}
	return ch
}

// inline parses the inline request at the start of b: like multibulk.
func (r *reader) inline(b []byte) (int, error) {
	i := bytes.IndexByte(b[r.pos:], '\n')
	if i < 0 {
		r.pos = len(b)
		if len(b) >= r.maxBytes {
			return 0, errTooBigInline
		}
		return 0, nil
	}
	i += r.pos
	if i >= r.maxBytes {
		return 0, errTooBigInline
	}
	line := b[:i]
	if i > 0 && line[i-1] == '\r' {
		line = line[:i-1]
	}
	lo := len(r.args)
	if err := r.split(line); err != nil {
		r.args = r.args[:lo]
		return 0, err
	}
	if len(r.args) > lo {
		r.cmds = append(r.cmds, request{Args: r.args[lo:len(r.args):len(r.args)]})
	}
	return i + 1, nil
}

// split appends the arguments of an inline line to r.args, as Redis's
// sdssplitargs splits it: blanks separate arguments; "double quotes" take
// \xHH, \n, \r, \t, \b, \a and \c (for any other c); 'single quotes' take
// \' only; a closing quote must be followed by a blank or the end of the
// line. Arguments are unescaped in place: the output of an argument never
// passes its input, since every input byte makes at most one output byte.
func (r *reader) split(line []byte) error {
	n := 0
	p := 0
	for {
		for p < len(line) && isBlank(line[p]) {
			p++
		}
		if p == len(line) {
			return nil
		}
		if n == r.maxArgs {
			return r.errInlineArgs
		}
		t, w := p, p // the argument is line[t:w]
		inDouble, inSingle := false, false
	arg:
		for p < len(line) {
			ch := line[p]
			switch {
			case inDouble:
				switch {
				case ch == '\\' && p+3 < len(line) && line[p+1] == 'x' && isHex(line[p+2]) && isHex(line[p+3]):
					line[w] = unhex(line[p+2])<<4 | unhex(line[p+3])
					p += 4
				case ch == '\\' && p+1 < len(line):
					line[w] = unescape(line[p+1])
					p += 2
				case ch == '"':
					if p+1 < len(line) && !isBlank(line[p+1]) {
						return errUnbalancedQuotes
					}
					p++
					inDouble = false
					break arg
				default:
					line[w] = ch
					p++
				}
				w++
			case inSingle:
				switch {
				case ch == '\\' && p+1 < len(line) && line[p+1] == '\'':
					line[w] = '\''
					p += 2
				case ch == '\'':
					if p+1 < len(line) && !isBlank(line[p+1]) {
						return errUnbalancedQuotes
					}
					p++
					inSingle = false
					break arg
				default:
					line[w] = ch
					p++
				}
				w++
			default:
				switch ch {
				case ' ', '\n', '\r', '\t':
					p++
					break arg
				case '"':
					inDouble = true
				case '\'':
					inSingle = true
				default:
					line[w] = ch
					w++
				}
				p++
			}
		}
		if inDouble || inSingle {
			return errUnbalancedQuotes
		}
		r.args = append(r.args, line[t:w:w])
		n++
	}
}

// isBlank is C's isspace, which sdssplitargs skips between arguments.
func isBlank(ch byte) bool {
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f'
}

func isHex(ch byte) bool {
	return ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'f' || ch >= 'A' && ch <= 'F'
}

func unhex(ch byte) byte {
	switch {
	case ch >= 'a':
		return ch - 'a' + 10
	case ch >= 'A':
		return ch - 'A' + 10
	}
	return ch - '0'
}

func unescape(ch byte) byte {
	switch ch {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'b':
		return '\b'
	case 'a':
		return '\a'
	}
	return ch
}

// fill reads more input, making room first: the consumed front is
// dropped, and the buffer grows (to what the incomplete request needs, at
// least double) when less than minRead is free, never past
// MaxRequestBytes plus minRead.
func (r *reader) fill() error {
	if r.readErr != nil {
		return r.readErr
	}
	pending := r.end - r.start
	if pending >= r.maxBytes {
		// Multibulk requests are refused at the header that passes the
		// limit; only a header line cut short gets here.
		if r.buf[r.start] == '*' {
			return r.errTooLarge
		}
		return errTooBigInline
	}
	if pending == 0 {
		r.start, r.end = 0, 0
		if len(r.buf) > maxKeptInput {
			r.buf = nil
		}
	}
	if r.buf == nil {
		r.buf = make([]byte, initialBuffer)
	}
	if len(r.buf)-r.end < minRead {
		if r.start > 0 {
			copy(r.buf, r.buf[r.start:r.end])
			r.start, r.end = 0, pending
		}
		if len(r.buf)-r.end < minRead {
			size := min(max(2*len(r.buf), r.need), r.maxBytes+minRead)
			nb := make([]byte, size)
			copy(nb, r.buf[:r.end])
			r.buf = nb
		}
	}
	n, err := r.rd.Read(r.buf[r.end:])
	r.end += n
	if n > 0 {
		r.readErr = err
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// Reply encoding (RESP2).

func appendPrefix(b []byte, prefix byte, n int64) []byte {
	b = append(b, prefix)
	b = strconv.AppendInt(b, n, 10)
	return append(b, '\r', '\n')
}

// appendLine appends a simple string or error line; \r and \n in s
// become spaces, so a reply is always one line.
func appendLine(b []byte, prefix byte, s string) []byte {
	b = append(b, prefix)
	if !strings.ContainsAny(s, "\r\n") {
		b = append(b, s...)
		return append(b, '\r', '\n')
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch == '\r' || ch == '\n' {
			ch = ' '
		}
		b = append(b, ch)
	}
	return append(b, '\r', '\n')
}

func appendBulk(b, v []byte) []byte {
	b = appendPrefix(b, '$', int64(len(v)))
	b = append(b, v...)
	return append(b, '\r', '\n')
}

func appendBulkString(b []byte, v string) []byte {
	b = appendPrefix(b, '$', int64(len(v)))
	b = append(b, v...)
	return append(b, '\r', '\n')
}
