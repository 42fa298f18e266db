package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	tallydb "github.com/tallydb/tally"
	cmdtab "github.com/tallydb/tally/internal/commands"
	"github.com/tallydb/tally/internal/quote"
	"github.com/tallydb/tally/store"
)

// Exit codes, stable for scripts.
const (
	exitOK       = 0
	exitError    = 1 // the store refused or failed
	exitUsage    = 2 // the command line is malformed
	exitInternal = 3 // tally panicked: a bug, never the user's doing
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// command is one subcommand. Groups ("counter add") are named with a space.
type command struct {
	name     string
	synopsis string // one line, shown by "tally help"
	help     string // full help with flags and an example
	run      func(e *env, args []string) error
	// local marks a command that never goes to a running server (serve,
	// demo, help): it opens no store, or its own (see remote.go).
	local bool
	// keyValues marks a command whose output is "key value" lines (the
	// loads): --json prints them as one JSON object.
	keyValues bool
	// table marks a rendering of an entry of the one command table
	// (table.go): it renders its own --json; entry is that entry.
	table bool
	entry *cmdtab.Command
}

// commands lists every subcommand in the order "tally help" shows them.
var commands []*command

func init() {
	commands = []*command{
		cmdLoad,
		cmdFollowsLoad,
	}
	commands = append(commands, tableCommands()...)
	commands = append(commands, cmdLikesLoad)
	commands = append(commands, cmdServe, cmdClusterStatus, cmdClusterAdd, cmdClusterPromote,
		cmdClusterRemove, cmdClusterTransfer, cmdClusterCreate, cmdClusterAddNode, cmdClusterMove, cmdClusterRebalance, cmdClusterLocalStart, cmdClusterLocalAddNode, cmdClusterLocalStop, cmdDemo, cmdVersion, cmdHelp)
}

// env is what every command runs with: the output streams and the global
// flags, which commands may override with their own -d and --durability.
type env struct {
	stdout, stderr io.Writer
	dir            string // -d, or TALLY_DIR
	durability     string // --durability
	durabilitySet  bool   // --durability was given before the command
	password       string // --password, or TALLY_PASSWORD: AUTH to a running server
	json           bool   // --json: a table command prints its RESP reply as JSON

	// served is set when the command runs inside tally serve for a client
	// (TALLY.EXEC, remote.go): every open returns the server's database and
	// every close leaves it open; cwd is the client's working directory,
	// against which relative FILE arguments are read.
	served *tallydb.DB
	cwd    string
	// dirArg is where a served command parses -d (the command's own, as
	// in "get -d DIR ..."; the client sends no global one), and otherDir
	// records that it named a directory other than the server's: the
	// client then runs the command itself.
	dirArg   string
	otherDir bool
	// base is the served command's context (interruptContext).
	base context.Context
	// serving is set by serve: packages keep their background work, and
	// the store heals a failure in place (store.Options.ReopenOnFailure).
	serving bool
	// bulk is set when the command run was a bulk load (a keyValues
	// command): TALLY.EXEC then hands the load's transient memory back to
	// the operating system (remote.go).
	bulk bool
}

// usageError marks a malformed command line: exit status 2.
type usageError struct{ msg string }

func (u *usageError) Error() string { return u.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// errHelp asks for the command's help on stdout and exit status 0.
var errHelp = errors.New("help requested")

const globalHelp = `tally is the command line of tally, an embedded counter store.

Usage:
  tally [-d DIR] [--durability MODE] [--password PASSWORD] COMMAND [ARGS]

Global flags (every store command also accepts -d and --durability after
its name):
  -d DIR               the store directory; the default is $TALLY_DIR
  --durability MODE    sync, interval or nosync; the default is sync
  --version            print tally's version (tally version) and exit
  --json               print a command's result as JSON (the commands of
                       the one command table: the value its RESP form
                       replies, arrays as arrays, nil as null)
  --password PASSWORD  the password of the "tally serve" holding DIR, if it
                       has one; the default is $TALLY_PASSWORD (prefer it:
                       a command line is visible to other local users)

While "tally serve" holds DIR, commands run inside it: the CLI sends them
over RESP to the address the server records in DIR (see "tally help serve").

Commands:
`

const globalFooter = `
Output is plain lines on stdout; errors go to stderr prefixed "tally: ".
Exit status: 0 ok, 1 error, 2 usage error, 3 internal error (a bug in
tally; please report it).
Run "tally help COMMAND" or "tally COMMAND -h" for a command's help.
`

func printGlobalHelp(w io.Writer) {
	fmt.Fprint(w, globalHelp)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-16s %s\n", c.name, c.synopsis)
	}
	fmt.Fprint(w, globalFooter)
}

// run is the whole program; tests call it in-process. A panic on its
// goroutine is reported as an internal error with exit status 3 (Go's own
// status for a panic, 2, is the documented usage-error status); goroutines
// a command starts use env.goSafe for the same.
func run(args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr, dir: os.Getenv("TALLY_DIR"), durability: "sync",
		password: os.Getenv("TALLY_PASSWORD")}
	return e.run(args)
}

// run parses the global flags and runs the command args name. Embedded, a
// command for a directory that "tally serve" holds is sent to the server
// (forward); served (TALLY.EXEC), it runs on the server's database.
func (e *env) run(args []string) (code int) {
	defer func() {
		if r := recover(); r != nil {
			reportPanic(e.stderr, r, debug.Stack())
			code = exitInternal
		}
	}()
	fs := flag.NewFlagSet("tally", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(e.dirFlag(), "d", e.dir, "")
	fs.StringVar(&e.durability, "durability", e.durability, "")
	fs.StringVar(&e.password, "password", e.password, "")
	fs.BoolVar(&e.json, "json", e.json, "")
	version := fs.Bool("version", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printGlobalHelp(e.stdout)
			return exitOK
		}
		fmt.Fprintf(e.stderr, "tally: %s\n", clipArgs(err.Error(), args))
		fmt.Fprintln(e.stderr, `Run "tally help" for usage.`)
		return exitUsage
	}
	fs.Visit(func(f *flag.Flag) { e.durabilitySet = e.durabilitySet || f.Name == "durability" })
	rest := fs.Args()
	if *version && len(rest) == 0 {
		rest = []string{"version"}
	}
	if len(rest) == 0 {
		fmt.Fprintln(e.stderr, "tally: no command given")
		printGlobalHelp(e.stderr)
		return exitUsage
	}
	c, cargs, err := lookup(rest)
	if err != nil {
		fmt.Fprintf(e.stderr, "tally: %v\n", err)
		fmt.Fprintln(e.stderr, `Run "tally help" for the list of commands.`)
		return exitUsage
	}
	if e.served != nil && c.local {
		// Never sent by the CLI; refused should another client send it
		// (a serve inside the server would hold it until a signal).
		fmt.Fprintf(e.stderr, "%v: %s runs in the CLI only\n", errNotRemote, c.name)
		return exitError
	}
	remote := e.served == nil && !c.local
	if remote && e.dir != "" {
		// A server answering for -d runs the command, before this
		// process reads any input. If none took it, it runs here.
		code, ferr := e.forward(rest)
		if ferr == nil {
			return code
		}
		if !errors.Is(ferr, errNotSent) {
			fmt.Fprintln(e.stderr, errorLine(ferr))
			return exitError
		}
	}
	e.bulk = c.keyValues
	err = e.runCommand(c, cargs)
	if remote && errors.Is(err, store.ErrLocked) {
		// Held by a server that did not take the command up front: the
		// directory came with the command's own -d, the server started
		// just now, or it refused (AUTH).
		code, ferr := e.forward(rest)
		if ferr == nil {
			return code
		}
		if errors.Is(ferr, errNotSent) {
			err = fmt.Errorf("%w (and tally serve did not take the command: %v)", err, ferr)
		} else {
			err = ferr
		}
	}
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errHelp):
		fmt.Fprint(e.stdout, c.help)
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "tally: %s: %v\n", c.name, err)
		fmt.Fprintf(e.stderr, "Run \"tally help %s\" for usage.\n", c.name)
		return exitUsage
	default:
		fmt.Fprintln(e.stderr, errorLine(err))
		return exitError
	}
}

// reportPanic writes the internal-error report of a panic to w.
func reportPanic(w io.Writer, r any, stack []byte) {
	fmt.Fprintf(w, "tally: internal error: %v\n%s\n", r, stack)
	fmt.Fprintln(w, "tally: this is a bug in tally, not in your input or store; please report it with the command line and this message.")
}

// goSafe runs fn on a new goroutine. A panic in fn is reported like one on
// run's goroutine and exits with status 3, rather than Go's status 2.
func (e *env) goSafe(fn func()) {
	go func() {
		defer func() {
			if r := recover(); r != nil {
				reportPanic(e.stderr, r, debug.Stack())
				os.Exit(exitInternal)
			}
		}()
		fn()
	}()
}

// clipArgs returns msg, an error of the flag package, with every argument
// longer than quote.MaxEcho bytes that it echoes (as it is or Go-quoted) cut
// down as quote.Input cuts it: an error names what is wrong with an input
// and never repeats 10 KB of it. tally's own messages quote through
// quote.Input directly.
func clipArgs(msg string, args []string) string {
	for _, a := range args {
		// The flag package echoes an argument whole, a flag's name without
		// its dashes, or a value after '='.
		name, value, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		for _, s := range []string{a, name, value} {
			if len(s) > quote.MaxEcho {
				short := quote.Input(s)
				msg = strings.ReplaceAll(msg, strconv.Quote(s), short)
				msg = strings.ReplaceAll(msg, s, short)
			}
		}
	}
	return msg
}

// errorLine prefixes err with "tally: " unless it already is (the store's
// sentinel errors are).
func errorLine(err error) string {
	msg := err.Error()
	if strings.HasPrefix(msg, "tally: ") {
		return msg
	}
	return "tally: " + msg
}

// lookup finds the command named by the first one, two or three words of
// args.
func lookup(args []string) (*command, []string, error) {
	if len(args) >= 3 {
		for _, c := range commands {
			if c.name == args[0]+" "+args[1]+" "+args[2] {
				return c, args[3:], nil
			}
		}
	}
	if len(args) >= 2 {
		for _, c := range commands {
			if c.name == args[0]+" "+args[1] {
				return c, args[2:], nil
			}
		}
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c, args[1:], nil
		}
	}
	if group := groupOf(args[0]); len(group) > 0 {
		names := make([]string, len(group))
		for i, c := range group {
			names[i] = strings.TrimPrefix(c.name, args[0]+" ")
		}
		if len(args) == 1 {
			return nil, nil, fmt.Errorf("%s: missing subcommand (%s)", args[0], strings.Join(names, ", "))
		}
		return nil, nil, fmt.Errorf("%s: unknown subcommand %s (%s)", args[0], quote.Input(args[1]), strings.Join(names, ", "))
	}
	if near := suggest(args[0]); near != "" {
		return nil, nil, fmt.Errorf("unknown command %s; did you mean %q?", quote.Input(args[0]), near)
	}
	return nil, nil, fmt.Errorf("unknown command %s", quote.Input(args[0]))
}

// suggest returns the command (or group) name closest to word, if one is
// within two edits of it (a typo), else "".
func suggest(word string) string {
	if len(word) > 64 {
		return ""
	}
	best, bestD := "", 3
	seen := map[string]bool{}
	for _, c := range commands {
		first, _, _ := strings.Cut(c.name, " ")
		for _, n := range []string{c.name, first} {
			if seen[n] {
				continue
			}
			seen[n] = true
			if d := editDistance(word, n); d < bestD && d < len(n) {
				best, bestD = n, d
			}
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// groupOf returns the commands named "word ...".
func groupOf(word string) []*command {
	var g []*command
	for _, c := range commands {
		if strings.HasPrefix(c.name, word+" ") {
			g = append(g, c)
		}
	}
	return g
}

// flags returns a FlagSet for command c that also accepts -d and
// --durability, defaulting to the global values.
func (e *env) flags(c *command) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(e.dirFlag(), "d", e.dir, "")
	fs.StringVar(&e.durability, "durability", e.durability, "")
	return fs
}

// parse parses the command's flags and returns its positional arguments.
// With interspersed, flags may also follow positional arguments (as in
// "counter add posts --range-bits 40"); commands whose arguments may be
// negative numbers parse without it, so "-3" stays an argument.
func parse(fs *flag.FlagSet, args []string, interspersed bool) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, errHelp
			}
			return nil, &usageError{clipArgs(err.Error(), args)}
		}
		args = fs.Args()
		if !interspersed || len(args) == 0 {
			return append(pos, args...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// open opens the store named by -d. Only commands that define schema pass
// create; the others refuse a missing or empty directory rather than turn a
// mistyped path into a new store.
func (e *env) open(create bool) (*store.DB, error) {
	if e.served != nil {
		return e.served.Store(), e.servedOptions()
	}
	opts, err := e.options()
	if err != nil {
		return nil, err
	}
	if !create {
		if err := mustBeStoreDir(e.dir); err != nil {
			return nil, err
		}
	}
	return store.Open(e.dir, opts)
}

// openRead opens the store named by -d read-only, for commands that only
// read (get, counter list, verify, replay, stats): they write nothing to
// the directory, so they work on a full disk and change nothing on a
// damaged store.
func (e *env) openRead() (*store.DB, error) {
	if e.served != nil {
		return e.served.Store(), e.servedOptions()
	}
	opts, err := e.options()
	if err != nil {
		return nil, err
	}
	if err := mustBeStoreDir(e.dir); err != nil {
		return nil, err
	}
	opts.ReadOnly = true
	return store.Open(e.dir, opts)
}

// options checks the global flags before anything is opened.
func (e *env) options() (*store.Options, error) {
	if e.served != nil {
		return &store.Options{}, e.servedOptions()
	}
	if e.dir == "" {
		return nil, usagef("no store directory: give -d DIR or set TALLY_DIR")
	}
	d, err := store.ParseDurability(e.durability)
	if err != nil {
		return nil, usagef("bad --durability %s: want sync, interval or nosync", quote.Input(e.durability))
	}
	return &store.Options{Durability: d, ReopenOnFailure: e.serving}, nil
}

func mustBeStoreDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s: no such directory (create a store with: tally -d %s counter add NAME)", dir, dir)
		}
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", store.ErrNotStore, dir)
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return fmt.Errorf("%w: %s is empty (create a store with: tally -d %s counter add NAME)", store.ErrNotStore, dir, dir)
	}
	return nil
}

// closeDB closes db and returns the first of err and Close's error.
func closeDB(db *store.DB, err error) error {
	if isServed(db) {
		return err // the server's: it closes it at shutdown
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}

// parseUint parses an unsigned decimal argument named what.
func parseUint(what, s string) (uint64, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, usagef("bad %s %s: want an unsigned decimal integer below 2^64", what, quote.Input(s))
	}
	return v, nil
}

// parseInt parses a signed decimal argument named what.
func parseInt(what, s string) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, usagef("bad %s %s: want a decimal integer (may be negative)", what, quote.Input(s))
	}
	return v, nil
}

// uint8Flag checks that a flag value fits the store's uint8 fields. Zero
// is refused where the store would read it as "the default". A number
// outside its allowed set (want) is an invalid option, exit status 1, like
// every value the store refuses; a flag that is not a number at all is a
// usage error (the flag package reports it).
func uint8Flag(name string, v uint, zeroOK bool, want string) (uint8, error) {
	if v > 255 || v == 0 && !zeroOK {
		return 0, fmt.Errorf("%w: --%s %d (want %s)", store.ErrInvalidOption, name, v, want)
	}
	return uint8(v), nil
}

var cmdHelp = &command{
	name:     "help",
	local:    true,
	synopsis: "show help for tally or for one command",
	help: `Usage: tally help [COMMAND]

Shows the list of commands, or the help of one command.

Example:
  tally help counter add
`,
}

func init() {
	cmdHelp.run = func(e *env, args []string) error {
		if len(args) == 0 {
			printGlobalHelp(e.stdout)
			return nil
		}
		if len(args) == 1 && (args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			return errHelp
		}
		c, rest, err := lookup(args)
		if err != nil {
			if g := groupOf(args[0]); len(g) > 0 && len(args) == 1 {
				for _, c := range g {
					fmt.Fprint(e.stdout, c.help, "\n")
				}
				return nil
			}
			return usagef("%v", err)
		}
		if len(rest) > 0 {
			return usagef("help takes one command, got extra %s", quote.Input(strings.Join(rest, " ")))
		}
		fmt.Fprint(e.stdout, c.help)
		return nil
	}
}
