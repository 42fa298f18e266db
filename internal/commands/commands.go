// Package commands is tally's one command table. Every command a user runs
// against a database is declared here once: its CLI words, its RESP name,
// its parameters, its help, and its handler against a *tally.DB. The CLI
// (cmd/tally) and the RESP server (server) are two renderings of the same
// table, so argument order, defaults, limits and errors agree by
// construction; only the output format differs (lines of text on a
// terminal, RESP replies to a client).
//
// # Mapping rules
//
// A command has a CLI name of one to three words ("like", "unread kind
// add") and a RESP name ("LIKE.LIKE", "UNREAD.KIND ADD": a container and a
// subcommand where the CLI has a group). Its parameters are, in order:
//
//   - positionals, the same in both front ends and in the same order; the
//     last may be Optional or Multiple (one or more; zero or more when also
//     Optional);
//   - options, after the positionals: CLI "--name VALUE" (or --name=VALUE),
//     RESP "NAME VALUE" (the name upper-cased with its dashes dropped:
//     --range-bits is RANGEBITS); a Flag option has no value (--wait,
//     WAIT). In the CLI options may also come before or between
//     positionals, and an optional positional may be named like an option
//     (--owner 7); over RESP options come after the positionals, and a
//     word equal to an option's name is read as that option.
//   - a command over many ids (CLI "unread get UID...") has an M-form over
//     RESP that replies an array, one element per id (UNREAD.MGET), and,
//     where Redis users expect it, a single-id form that replies the
//     element (UNREAD.GET), as Redis has GET beside MGET (RESPOne).
//
// Defaults and limits are the library's, so a command without an option
// behaves the same from both front ends. Bad input is refused before
// anything runs with an error that wraps ErrUsage (the CLI exits 2; RESP
// replies "ERR ..." with the same words); errors of the library are passed
// through (the CLI exits 1; RESP replies "ERR " and the same message).
//
// Replies: a command that returns one number replies an integer; a list,
// an array; a record (a like's counts, a user's unread counts by kind, a
// post's status), name/value pairs (Replier.WriteMap: a RESP2 array of 2n
// as HGETALL replies, an object under --json); a page, an array of the
// next cursor (nil at the end) and the page's array; a missing value, nil.
// The CLI prints one line per value, "next CURSOR" or "end" after a page.
//
// Redis's own commands (HINCRBY, HGET, DEL, INFO, ...) keep Redis's
// shapes and live in server only; the table's TALLY.* commands are the RESP
// renderings of the CLI's counter commands. Commands that read local files
// (the loads), run a process (serve, demo) or print help are CLI-only; a
// client reaches them, and every other CLI command, through TALLY.EXEC,
// which runs the CLI's own code inside the server.
package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/store"
)

// ErrUsage is wrapped by every error for a malformed command: a missing or
// extra argument, an unknown option, a value that does not parse.
var ErrUsage = errors.New("usage")

// usageError is an ErrUsage with its own message.
type usageError struct{ msg string }

func (u *usageError) Error() string        { return u.msg }
func (u *usageError) Is(target error) bool { return target == ErrUsage }

// Usagef returns an error wrapping ErrUsage with the formatted message.
func Usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// Kind is a parameter's type.
type Kind uint8

const (
	// Uint is an unsigned decimal below 2^64 (ids).
	Uint Kind = iota
	// Int is a signed decimal.
	Int
	// String is any word.
	String
	// Flag is an option without a value: present or not.
	Flag
)

// Param is one parameter of a command.
type Param struct {
	// Name is the parameter's name in lower case ("user", "range-bits").
	// Help shows a positional upper-cased (USER); an option is --name in
	// the CLI and NAME (dashes dropped) over RESP.
	Name string
	Kind Kind
	// Option marks a named parameter (after the positionals).
	Option bool
	// Optional marks a positional that may be left out; only the last
	// positionals may be.
	Optional bool
	// Multiple marks the last positional: it repeats.
	Multiple bool
	// Max bounds the number of values of a Multiple (0: no bound but the
	// request's).
	Max int
	// Key marks the positional that names the data the command touches:
	// COMMAND's key positions, and the key a sharded cluster routes the
	// command by (its slot). At most one positional of a command is a
	// Key; a Multiple Key makes each of its values a key (the command
	// must then have no options, which would come after them). The table
	// test lists, per command, which positional is its key and why, and
	// why a command has none.
	Key bool
	// RowKey marks the id positional of a command on counter rows: each
	// of its values names a row whose key is COUNTER:ID, COUNTER being the
	// command's first positional (HINCRBY's key for the same row). No
	// argument is such a key, so COMMAND reports the command movablekeys
	// without key positions; a sharded cluster routes by the rows' keys.
	// A command has a Key or a RowKey, not both.
	RowKey bool
	// Help is one line for the CLI's help (options only).
	Help string
	// Aliases are other names of an option, accepted in both front ends
	// (each as --alias and as its RESP token), so a name can change
	// without breaking scripts.
	Aliases []string
}

// Mode says what a command does to the database.
type Mode uint8

const (
	// Read commands only read.
	Read Mode = iota
	// Write commands change data.
	Write
	// Admin commands change schema or run maintenance.
	Admin
)

// Open says how the CLI opens the database for a command (the server has
// it open already).
type Open uint8

const (
	// OpenWrite opens every package, creating what is missing.
	OpenWrite Open = iota
	// OpenCreate is OpenWrite that may also create the store.
	OpenCreate
	// OpenExisting is writable but opens only the packages whose data
	// exists.
	OpenExisting
	// OpenReadOnly writes nothing and opens only the packages whose data
	// exists.
	OpenReadOnly
	// OpenCreateStore may create the store, as OpenCreate, but opens only
	// the packages whose data exists, as OpenExisting: a command on the
	// host's own counters (counter add) creates no package's data.
	OpenCreateStore
)

// Replier is where a command writes its RESP reply (server.Conn).
type Replier interface {
	WriteArray(n int)
	// WriteMap starts a record of n name/value pairs: the 2n values
	// follow, name first. Over RESP2 it is an array of 2n (as HGETALL
	// replies); --json renders an object.
	WriteMap(n int)
	WriteInt(v int64)
	WriteUint(v uint64)
	WriteBulkString(s string)
	WriteNull()
	WriteOK()
	WriteSimple(s string)
}

// RecordWriter is a Replier that also writes a whole record of three
// unsigned fields in one call (the server's connection does): what
// WriteMap(3) and a WriteBulkString and a WriteUint per field write,
// without six more calls through the interface. LIKE.TOP's reply is up
// to 1,000 such records.
type RecordWriter interface {
	WriteUintRecord3(names *[3]string, vals [3]uint64)
}

// writeRecord3 writes a record of three named unsigned fields to w.
func writeRecord3(w Replier, names *[3]string, vals [3]uint64) {
	if rw, ok := w.(RecordWriter); ok {
		rw.WriteUintRecord3(names, vals)
		return
	}
	w.WriteMap(3)
	for i := range names {
		w.WriteBulkString(names[i])
		w.WriteUint(vals[i])
	}
}

// Command is one entry of the table.
type Command struct {
	// CLI is the command's name on the command line: one to three words.
	CLI string
	// RESP is its name over RESP: "NAME" or "CONTAINER SUB".
	RESP string
	// RESPOne, for a command whose last positional is Multiple, also
	// names its single-value form over RESP, as Redis has GET beside MGET:
	// RESP "UNREAD.MGET uid [uid ...]" replies an array, one element per
	// uid; RESPOne "UNREAD.GET uid" takes one uid and replies that element.
	RESPOne string
	// Group is COMMAND DOCS's group ("likes", "timeline").
	Group string
	Mode  Mode
	// Local marks a command about this node rather than the data: its
	// figures, its maintenance, its background jobs (stats, verify,
	// compact, checkpoint, jobs). A replicated server (tally serve
	// --cluster) runs it on the node it is sent to and never replicates
	// or redirects it, whatever its Mode; every other Write or Admin
	// command is replicated, every other Read is routed as a read.
	Local bool
	// Fast marks a command whose cost does not grow with the data.
	Fast bool
	// Internal marks a message one shard sends another (tlshard.go):
	// the RESP server runs it only inside a cross-shard stream's apply.
	Internal bool
	// Open is how the CLI opens the database.
	Open Open
	// Summary is one line: the CLI's synopsis and COMMAND DOCS's summary.
	Summary string
	// Help is the body of the CLI's help, after the generated usage line:
	// what the command does, what it prints, an example.
	Help string
	// Complexity is COMMAND DOCS's.
	Complexity string
	Params     []Param
	// Check, if set, validates the input before anything is opened (the
	// CLI may create a store): names, ranges, combinations of options.
	Check func(in *Input) error
	// StoreOptions, if set, is how the input sets the options the CLI
	// opens the store with (compact's --bytes-per-sec paces its jobs),
	// called after Check. o is nil when the store is open already, with
	// its own options (the CLI's command runs inside tally serve): it then
	// returns an error naming each option it cannot apply. Over RESP it is
	// not called: Check refuses such options there.
	StoreOptions func(in *Input, o *store.Options) error
	// Run runs the command against db; ctx ends when the client goes or
	// the server shuts down (RESP), or at an interrupt (CLI).
	Run func(ctx context.Context, db *tallydb.DB, in *Input) (any, error)
	// Text prints Run's result as the CLI's lines.
	Text func(w io.Writer, in *Input, out any) error
	// Reply writes Run's result as one RESP reply.
	Reply func(w Replier, in *Input, out any)
	// Gather, if set, is how a sharded cluster answers the command when
	// its data is spread over every shard (gather.go): it returns Run's
	// result type, merged from the shards' parts sent through g.
	Gather func(ctx context.Context, g Gatherer, in *Input) (any, error)
}

// Positionals returns the command's positional parameters.
func (c *Command) Positionals() []Param {
	var ps []Param
	for _, p := range c.Params {
		if !p.Option {
			ps = append(ps, p)
		}
	}
	return ps
}

// Repeats returns the command's Multiple parameter, or nil.
func (c *Command) Repeats() *Param {
	for i := range c.Params {
		if c.Params[i].Multiple {
			return &c.Params[i]
		}
	}
	return nil
}

// MinArgs is the least number of positional arguments the command takes.
func (c *Command) MinArgs() int {
	n := 0
	for _, p := range c.Params {
		if !p.Option && !p.Optional {
			n++
		}
	}
	return n
}

// Fixed reports whether the command always takes exactly MinArgs
// arguments (no optional, repeated or named parameter).
func (c *Command) Fixed() bool {
	for _, p := range c.Params {
		if p.Option || p.Optional || p.Multiple {
			return false
		}
	}
	return true
}

// RESPOption is the RESP token of an option named name: "range-bits" is
// RANGEBITS.
func RESPOption(name string) string {
	return strings.ToUpper(strings.ReplaceAll(name, "-", ""))
}

// Synopsis is the command's arguments as the CLI's usage shows them:
// "BIZ ITEM USER [--owner OWNER]".
func (c *Command) Synopsis() string {
	var b strings.Builder
	for _, p := range c.Params {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		up := strings.ToUpper(p.Name)
		switch {
		case p.Option && p.Kind == Flag:
			fmt.Fprintf(&b, "[--%s]", p.Name)
		case p.Option:
			fmt.Fprintf(&b, "[--%s %s]", p.Name, up)
		case p.Multiple && p.Optional:
			fmt.Fprintf(&b, "[%s...]", up)
		case p.Multiple:
			fmt.Fprintf(&b, "%s...", up)
		case p.Optional:
			fmt.Fprintf(&b, "[%s]", up)
		default:
			b.WriteString(up)
		}
	}
	return b.String()
}

// RESPSynopsis is the command's RESP form: "LIKE.LIKE biz item user [OWNER
// owner]".
func (c *Command) RESPSynopsis() string {
	var b strings.Builder
	b.WriteString(c.RESP)
	for _, p := range c.Params {
		b.WriteByte(' ')
		tok := RESPOption(p.Name)
		switch {
		case p.Option && p.Kind == Flag:
			fmt.Fprintf(&b, "[%s]", tok)
		case p.Option:
			fmt.Fprintf(&b, "[%s %s]", tok, p.Name)
		case p.Multiple && p.Optional:
			fmt.Fprintf(&b, "[%s ...]", p.Name)
		case p.Multiple:
			fmt.Fprintf(&b, "%s [%s ...]", p.Name, p.Name)
		case p.Optional:
			fmt.Fprintf(&b, "[%s]", p.Name)
		default:
			b.WriteString(p.Name)
		}
	}
	return b.String()
}

// CLIHelp is the command's full CLI help: the usage line, Help, the
// options, and the RESP form.
func (c *Command) CLIHelp() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: %s\n\n", strings.TrimSpace("tally -d DIR "+c.CLI+" "+c.Synopsis()))
	b.WriteString(strings.TrimRight(c.Help, "\n"))
	b.WriteString("\n")
	var opts []Param
	for _, p := range c.Params {
		if p.Option {
			opts = append(opts, p)
		}
	}
	if len(opts) > 0 {
		b.WriteString("\nFlags:\n")
		for _, p := range opts {
			name := "--" + p.Name
			if p.Kind != Flag {
				name += " " + strings.ToUpper(p.Name)
			}
			fmt.Fprintf(&b, "  %-22s %s\n", name, p.Help)
		}
	}
	fmt.Fprintf(&b, "\nOver RESP (tally serve): %s\n", c.RESPSynopsis())
	return b.String()
}

// Validate reports a malformed entry: the table's own test runs it on every
// command.
func (c *Command) Validate() error {
	if c.CLI == "" || c.RESP == "" || c.Summary == "" || c.Run == nil || c.Text == nil || c.Reply == nil {
		return fmt.Errorf("command %q/%q: CLI, RESP, Summary, Run, Text and Reply are required", c.CLI, c.RESP)
	}
	if n := len(strings.Fields(c.CLI)); n < 1 || n > 3 {
		return fmt.Errorf("command %q: the CLI name has one to three words", c.CLI)
	}
	if n := len(strings.Fields(c.RESP)); n < 1 || n > 2 {
		return fmt.Errorf("command %q: the RESP name is a name or a container and a subcommand", c.RESP)
	}
	seen := map[string]bool{}
	optionsStarted, optionalStarted, multiple := false, false, false
	for _, p := range c.Params {
		switch {
		case p.Name == "" || strings.ToLower(p.Name) != p.Name:
			return fmt.Errorf("command %q: parameter %q: names are lower case", c.CLI, p.Name)
		case seen[p.Name]:
			return fmt.Errorf("command %q: parameter %q twice", c.CLI, p.Name)
		case p.Kind == Flag && !p.Option:
			return fmt.Errorf("command %q: %q: a flag is an option", c.CLI, p.Name)
		case p.Option && (p.Optional || p.Multiple || p.Key):
			return fmt.Errorf("command %q: option %q is optional already, and single", c.CLI, p.Name)
		case !p.Option && optionsStarted:
			return fmt.Errorf("command %q: positional %q after an option", c.CLI, p.Name)
		case !p.Option && multiple:
			return fmt.Errorf("command %q: positional %q after a repeated one", c.CLI, p.Name)
		case !p.Option && !p.Optional && optionalStarted:
			return fmt.Errorf("command %q: required %q after an optional one", c.CLI, p.Name)
		}
		seen[p.Name] = true
		optionsStarted = optionsStarted || p.Option
		optionalStarted = optionalStarted || p.Optional
		multiple = multiple || p.Multiple
	}
	return nil
}

// ErrCommandFailed is what the CLI prints no more than: Text returns it when
// it printed the failure itself and the exit status must be 1 (e.g. a
// verify that found damage).
var ErrCommandFailed = errors.New("command failed")

// Find returns the command whose CLI name is name, or nil.
func Find(table []*Command, name string) *Command {
	for _, c := range table {
		if c.CLI == name {
			return c
		}
	}
	return nil
}
