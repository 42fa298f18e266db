package commands

import (
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/tallydb/tally/internal/quote"
)

// value is one parameter's parsed value.
type value struct {
	set bool
	u   []uint64 // Uint: one value, or a Multiple's
	i   []int64  // Int
	s   []string // String
	// The first value of each kind, so that a parameter given once (most
	// are) takes no allocation of its own: a served LIKE.LIKE parsed in
	// 8 allocations before, in 3 now.
	u1 [1]uint64
	i1 [1]int64
	s1 [1]string
}

// Input is a command's parsed arguments, by parameter name.
type Input struct {
	cmd   *Command
	vals  []value               // one per cmd.Params
	style func(*Command) string // the synopsis errors show: CLI or RESP
	cli   bool                  // parsed from a command line

	// Set by the CLI's glue (SetOutput, SetOwnOpen); nil over RESP.
	stderr   io.Writer
	progress Progress
	ownOpen  bool
}

// SetOwnOpen records that the database was opened for this command alone
// (an embedded CLI command), not by a server that has run for a while.
func (in *Input) SetOwnOpen(own bool) { in.ownOpen = own }

// OwnOpen reports whether the database was opened for this command alone:
// figures a package counts since its open (SinceOpen) are then all zero,
// and stats leaves them out rather than print zeros that mean nothing.
func (in *Input) OwnOpen() bool { return in.ownOpen }

// Progress receives a long command's progress (compact, jobs wait): the
// CLI draws it as a bar on a terminal. A command calls it from one
// goroutine at a time, and Finish once, after the last Update.
type Progress interface {
	// Update reports done units of total (0: not known) of the step
	// named label ("jobs", "seal"); unit names what is counted.
	Update(label, unit string, done, total int64)
	// Finish ends the display, before the command's output is printed.
	Finish()
}

// Progress returns where the command reports its progress, or nil: over
// RESP, and in a CLI whose output is not a terminal.
func (in *Input) Progress() Progress { return in.progress }

// Stderr returns where the CLI prints a note beside the command's
// output, one that is not a failure (verify names an interrupted load
// and the command that finishes it); io.Discard over RESP, whose reply
// is the command's whole answer.
func (in *Input) Stderr() io.Writer {
	if in.stderr == nil {
		return io.Discard
	}
	return in.stderr
}

// SetOutput gives a command parsed from a command line the CLI's error
// stream and, on a terminal, a progress display (nil: none).
func (in *Input) SetOutput(stderr io.Writer, p Progress) {
	in.stderr, in.progress = stderr, p
}

// CLI reports whether the input came from the command line. A command's
// effect never depends on it; the few defaults that do say so in the
// table (post waits for its fan-out in the CLI, whose process exits when
// the command returns, and not over RESP).
func (in *Input) CLI() bool { return in.cli }

func (in *Input) val(name string) *value {
	for i := range in.cmd.Params {
		if in.cmd.Params[i].Name == name {
			return &in.vals[i]
		}
	}
	panic("commands: " + in.cmd.CLI + " has no parameter " + name) // a bug in the table
}

// Has reports whether the parameter was given (a Flag: whether it is set).
func (in *Input) Has(name string) bool { return in.val(name).set }

// Uint returns a Uint parameter's value, or 0 when not given.
func (in *Input) Uint(name string) uint64 {
	if v := in.val(name); v.set {
		return v.u[0]
	}
	return 0
}

// UintOr returns a Uint parameter's value, or def when not given.
func (in *Input) UintOr(name string, def uint64) uint64 {
	if v := in.val(name); v.set {
		return v.u[0]
	}
	return def
}

// Uints returns a Multiple Uint parameter's values.
func (in *Input) Uints(name string) []uint64 { return in.val(name).u }

// Int returns an Int parameter's value, or 0 when not given.
func (in *Input) Int(name string) int64 {
	if v := in.val(name); v.set {
		return v.i[0]
	}
	return 0
}

// IntOr returns an Int parameter's value, or def when not given.
func (in *Input) IntOr(name string, def int64) int64 {
	if v := in.val(name); v.set {
		return v.i[0]
	}
	return def
}

// String returns a String parameter's value, or "" when not given.
func (in *Input) String(name string) string {
	if v := in.val(name); v.set {
		return v.s[0]
	}
	return ""
}

// Strings returns a Multiple String parameter's values.
func (in *Input) Strings(name string) []string { return in.val(name).s }

// Repeated returns how many values the command's Multiple parameter got
// (0 when it has none).
func (in *Input) Repeated() int {
	for i, p := range in.cmd.Params {
		if p.Multiple {
			v := &in.vals[i]
			return len(v.u) + len(v.i) + len(v.s)
		}
	}
	return 0
}

// Command returns the command the input is for.
func (in *Input) Command() *Command { return in.cmd }

// add parses a as a value of parameter i, naming it as shown. The RESP
// parser passes the request's bytes: a number is parsed from them without
// a copy (only a String parameter's value is copied into a string).
func add[T string | []byte](in *Input, i int, a T, shown string) error {
	p := &in.cmd.Params[i]
	v := &in.vals[i]
	if v.set && !p.Multiple {
		return Usagef("%s given twice", shown)
	}
	if p.Multiple && p.Max > 0 && len(v.u)+len(v.i)+len(v.s) >= p.Max {
		return Usagef("too many %s: at most %d", shown, p.Max)
	}
	switch p.Kind {
	case Uint:
		u, err := strconv.ParseUint(string(a), 10, 64)
		if err != nil {
			return Usagef("bad %s %s: want an unsigned decimal integer below 2^64", shown, quote.Input(string(a)))
		}
		if v.u == nil {
			v.u = v.u1[:0]
		}
		v.u = append(v.u, u)
	case Int:
		n, err := strconv.ParseInt(string(a), 10, 64)
		if err != nil {
			return Usagef("bad %s %s: want a decimal integer (may be negative)", shown, quote.Input(string(a)))
		}
		if v.i == nil {
			v.i = v.i1[:0]
		}
		v.i = append(v.i, n)
	case String:
		if v.s == nil {
			// s1[0] may hold the value an earlier request parsed into a
			// reused Input (ParseRESPReuse): the same bytes take no copy.
			if v.s1[0] != string(a) {
				v.s1[0] = string(a)
			}
			v.s = v.s1[:1]
		} else {
			v.s = append(v.s, string(a))
		}
	}
	v.set = true
	return nil
}

// positional adds the n-th positional argument a.
func positional[T string | []byte](in *Input, n int, a T) error {
	k := 0
	for i, p := range in.cmd.Params {
		if p.Option {
			break
		}
		if k == n || p.Multiple && k < n {
			return add(in, i, a, p.Name)
		}
		k++
	}
	return errNoSlot
}

// errNoSlot is positional's error for an argument past the last
// positional; the parsers say what it is.
var errNoSlot = Usagef("wrong number of arguments")

// finish checks that every required positional was given.
func (in *Input) finish() error {
	for i, p := range in.cmd.Params {
		if !p.Option && !p.Optional && !in.vals[i].set {
			return Usagef("missing %s (want %s)", strings.ToUpper(p.Name), in.style(in.cmd))
		}
	}
	return nil
}

func newInput(c *Command, style func(*Command) string) *Input {
	return &Input{cmd: c, vals: make([]value, len(c.Params)), style: style}
}

// reset makes in an empty Input of c, keeping its memory: the values'
// array and each value's first string (see add).
func (in *Input) reset(c *Command, style func(*Command) string) {
	vals := in.vals
	if cap(vals) < len(c.Params) {
		vals = make([]value, len(c.Params))
	} else {
		vals = vals[:len(c.Params)]
		for i := range vals {
			vals[i] = value{s1: vals[i].s1}
		}
	}
	*in = Input{cmd: c, vals: vals, style: style}
}

// Reusable reports whether an Input of c may be reused by
// ParseRESPReuse: c has no Multiple parameter, so a command's Run can
// only read single values (copied out of the Input, or immutable
// strings), never a slice of the Input it might keep.
func (c *Command) Reusable() bool {
	for _, p := range c.Params {
		if p.Multiple {
			return false
		}
	}
	return true
}

// ParseRESPReuse is ParseRESP into in, an Input an earlier ParseRESP or
// ParseRESPReuse returned for a command that is Reusable, and that
// nothing uses any more (nil: a new Input). It returns in itself when in
// is not nil, so a server connection parses every request into one
// Input: a served LIKE.LIKE allocates neither an Input nor, when the
// connection sent the same business name before, the name's string.
// On an error in is left in an unspecified state, still reusable.
func (c *Command) ParseRESPReuse(in *Input, args [][]byte) (*Input, error) {
	if in == nil {
		in = newInput(c, (*Command).RESPSynopsis)
	} else {
		in.reset(c, (*Command).RESPSynopsis)
	}
	return c.parseRESP(in, args)
}

// ParseCLI parses a command line's arguments after the command's name.
// Options are --name VALUE, --name=VALUE or -name VALUE, anywhere (an
// optional positional may be given so too); "--" ends them; an argument that starts with '-' and a digit is a value (a
// negative number), not an option.
func (c *Command) ParseCLI(args []string) (*Input, error) {
	in := newInput(c, (*Command).Synopsis)
	in.cli = true
	n := 0
	optionsDone := false
	for k := 0; k < len(args); k++ {
		a := args[k]
		if !optionsDone && a == "--" {
			optionsDone = true
			continue
		}
		if optionsDone || len(a) < 2 || a[0] != '-' || a[1] >= '0' && a[1] <= '9' {
			if err := positional(in, n, a); err != nil {
				switch {
				case err == errNoSlot && len(c.Positionals()) == 0:
					err = Usagef("takes no arguments, got %s", quote.Input(a))
				case err == errNoSlot:
					err = Usagef("wrong number of arguments: extra %s (want %s)", quote.Input(a), c.Synopsis())
				}
				return nil, err
			}
			n++
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		i := c.option(name)
		if i < 0 {
			return nil, Usagef("unknown flag -%s", quote.Clip(name))
		}
		p := &c.Params[i]
		shown := p.Name
		if p.Kind == Flag {
			if hasVal {
				b, err := strconv.ParseBool(val)
				if err != nil {
					return nil, Usagef("bad %s %s: want true or false", shown, quote.Input(val))
				}
				in.vals[i].set = b
				continue
			}
			in.vals[i].set = true
			continue
		}
		if !hasVal {
			if k+1 >= len(args) {
				return nil, Usagef("%s needs a value", shown)
			}
			k++
			val = args[k]
		}
		if err := add(in, i, val, shown); err != nil {
			return nil, err
		}
	}
	if err := in.finish(); err != nil {
		return nil, err
	}
	return in, nil
}

// option returns the index of the option named name (CLI spelling), or -1.
// An optional single positional may also be given so ("like video 1 42
// --owner 7" is "like video 1 42 7").
func (c *Command) option(name string) int {
	for i, p := range c.Params {
		if (p.Option || p.Optional && !p.Multiple) && (p.Name == name || slices.Contains(p.Aliases, name)) {
			return i
		}
	}
	return -1
}

// respOption returns the index of the option whose RESP token is tok (any
// case), or -1.
func (c *Command) respOption(tok []byte) int {
	for i, p := range c.Params {
		if !p.Option || len(tok) > 32 {
			continue
		}
		if strings.EqualFold(RESPOption(p.Name), string(tok)) {
			return i
		}
		for _, a := range p.Aliases {
			if strings.EqualFold(RESPOption(a), string(tok)) {
				return i
			}
		}
	}
	return -1
}

// ParseRESP parses a request's arguments after the command's name (and
// subcommand). Positionals come first; after the required ones, a word
// equal to an option's token is that option.
func (c *Command) ParseRESP(args [][]byte) (*Input, error) {
	return c.parseRESP(newInput(c, (*Command).RESPSynopsis), args)
}

func (c *Command) parseRESP(in *Input, args [][]byte) (*Input, error) {
	min := c.MinArgs()
	n := 0
	for k := 0; k < len(args); k++ {
		a := args[k]
		if n >= min {
			if i := c.respOption(a); i >= 0 {
				p := &c.Params[i]
				tok := RESPOption(p.Name)
				if p.Kind == Flag {
					if in.vals[i].set {
						return nil, Usagef("%s given twice", tok)
					}
					in.vals[i].set = true
					continue
				}
				if k+1 >= len(args) {
					return nil, Usagef("%s needs a value", tok)
				}
				k++
				if err := add(in, i, args[k], p.Name); err != nil {
					return nil, err
				}
				continue
			}
		}
		if err := positional(in, n, a); err != nil {
			if err != errNoSlot {
				return nil, err
			}
			if len(a) > 0 && !isDigits(a) && hasOption(c) {
				return nil, Usagef("unknown option %s (want %s)", quote.Input(string(a)), c.RESPSynopsis())
			}
			return nil, Usagef("wrong number of arguments for '%s' command (want %s)", strings.ToLower(c.RESP), c.RESPSynopsis())
		}
		n++
	}
	if err := in.finish(); err != nil {
		return nil, err
	}
	return in, nil
}

func hasOption(c *Command) bool {
	for _, p := range c.Params {
		if p.Option {
			return true
		}
	}
	return false
}

func isDigits(b []byte) bool {
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return false
		}
	}
	return true
}

// Keys returns the keys a sharded cluster routes the parsed command by,
// in argument order: each value of the Key positional (a Uint or Int in
// decimal), or COUNTER:ID for each row of the RowKey positional (the ID of
// an ID.COLUMN argument; COUNTER is the first positional), as the server
// keys the command's RESP form. A command without a Key or RowKey has
// none (nil).
func (in *Input) Keys() []string {
	var out []string
	for i, p := range in.cmd.Params {
		if p.Option || !p.Key && !p.RowKey {
			continue
		}
		v := &in.vals[i]
		if p.RowKey {
			counter := in.vals[0].s
			if len(counter) == 0 {
				return nil
			}
			for _, id := range v.s {
				row, _, _ := strings.Cut(id, ".")
				out = append(out, counter[0]+":"+row)
			}
			for _, id := range v.u {
				out = append(out, counter[0]+":"+strconv.FormatUint(id, 10))
			}
			return out
		}
		for _, u := range v.u {
			out = append(out, strconv.FormatUint(u, 10))
		}
		for _, n := range v.i {
			out = append(out, strconv.FormatInt(n, 10))
		}
		out = append(out, v.s...)
		return out
	}
	return nil
}
