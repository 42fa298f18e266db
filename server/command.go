package server

import (
	"fmt"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tallydb/tally/store"
)

// Flags describe a command for the dispatcher and for COMMAND's reply.
type Flags uint32

const (
	// FlagWrite marks a command that may change the store.
	FlagWrite Flags = 1 << iota
	// FlagReadOnly marks a command that only reads the store.
	FlagReadOnly
	// FlagFast marks a command whose cost does not grow with the data.
	FlagFast
	// FlagNoAuth lets a command run before AUTH when a password is set
	// (AUTH, HELLO, QUIT).
	FlagNoAuth
	// FlagAdmin marks an administrative command (schema changes, SAVE).
	FlagAdmin
	// FlagLocal marks a command about this node rather than the data
	// (CONFIG SET, SLOWLOG, CLIENT KILL, SAVE, TALLY.COMPACT, TALLY.STATS,
	// ...): in cluster mode it runs on the node it is sent to, whatever
	// its other flags, and is never replicated or redirected. COMMAND
	// reports it as "local". See Command.ClassOf for the whole rule.
	FlagLocal
	// FlagInternal marks a command one shard sends another through the
	// cross-shard streams (TL.XPUBLISH, ...): it runs only nested inside
	// a replicated apply (Conn.RunNested), and a client that sends it, or
	// an entry that carries it, gets an error. COMMAND reports it as
	// "internal".
	FlagInternal
)

// redisFlagNames are the names COMMAND reports, in Redis's words.
var redisFlagNames = []struct {
	f    Flags
	name string
}{
	{FlagWrite, "write"},
	{FlagReadOnly, "readonly"},
	{FlagAdmin, "admin"},
	{FlagNoAuth, "no_auth"},
	{FlagFast, "fast"},
	{FlagLocal, "local"},
	{FlagInternal, "internal"},
}

// Arg documents one argument of a command for COMMAND DOCS (redis-cli
// builds its hints from it). Type is one of Redis's argument types: "key",
// "string", "integer", "pure-token", "oneof" or "block"; the last two hold
// Args.
type Arg struct {
	Name     string
	Type     string
	Token    string // a literal word before the value, e.g. "RANGEBITS"
	Optional bool
	Multiple bool
	Args     []Arg
}

// Handler runs one command. args[0] is the command name as the client sent
// it (args[1] the subcommand, for a subcommand's handler). A handler writes
// exactly one reply to c, and returns only when the command is done: the
// server sends replies in order after the handler returns.
type Handler func(c *Conn, args [][]byte)

// A Command is one entry of the command table. Register adds commands; a
// group of commands (counters, later timelines, unread, likes) is one slice
// of them, so adding a group never touches connection handling.
type Command struct {
	// Name is the command's name, matched without regard to case
	// ("HINCRBY", "TALLY.MGET"). A subcommand's Name is its own word
	// ("GET" under "CONFIG").
	Name string
	// Arity is Redis's: N > 0 means exactly N arguments, -N at least N;
	// both count the command name (and a subcommand's name).
	Arity int
	// Flags describe the command.
	Flags Flags
	// FirstKey, LastKey and KeyStep locate key arguments for COMMAND (1, 1,
	// 1 for a command with one key first; LastKey -1 for "every argument
	// from FirstKey on"; all 0 when there is no key).
	FirstKey, LastKey, KeyStep int
	// Keys, if set, gives a call's keys where no argument is one, calling
	// key with each (the buffer is only valid during the call): TALLY.MGET
	// COUNTER ID... names rows COUNTER:ID. Such a command has no key
	// positions and COMMAND reports it "movablekeys", as Redis does; a
	// sharded cluster routes by these keys (topology.go).
	Keys func(args [][]byte, key func([]byte))
	// Group, Summary, Since, Complexity and Args are returned by COMMAND
	// DOCS.
	Group      string
	Summary    string
	Since      string
	Complexity string
	Args       []Arg
	// Handler runs the command. A container (CONFIG, CLIENT) may leave it
	// nil and list Subcommands; a container with both runs Handler when no
	// subcommand is given (COMMAND).
	Handler Handler
	// Subcommands, if any, are dispatched on the second argument.
	Subcommands []Command
	// Classify, if set, decides how one call is routed in cluster mode,
	// overriding the flags (see ClassOf): a command whose effect depends
	// on its arguments (TALLY.EXEC runs a CLI command line, which may read
	// or write, or read a local file) classifies each call. An error
	// refuses the call: the client gets it as an error reply and nothing
	// runs. It runs on the node the client is connected to, before
	// anything is proposed, and never on Server.Apply's path.
	Classify func(args [][]byte) (Class, error)

	// gather marks a read gathered from every shard in a sharded cluster
	// (gather.go): route lets it run on the node it is sent to.
	gather bool

	// stage and finish, when set, let the server fold a run of such
	// commands within one pipeline into one store batch (see batch.go).
	stage  stageFunc
	finish finishFunc

	// Set by Register.
	fullName string // "hincrby", "config|get": metrics, errors, COMMAND
	parent   *Command
	subs     map[string]*Command
	metrics  *commandMetrics
}

// FullName returns the command's lower-case name as Redis reports it:
// "hincrby", or "config|get" for a subcommand.
func (c *Command) FullName() string { return c.fullName }

// maxNameLen bounds the length of a command name the dispatcher looks up;
// longer names are unknown without a map lookup.
const maxNameLen = 32

// table is the set of registered commands.
type table struct {
	byName map[string]*Command
	sorted []*Command // by name, for COMMAND
}

// register validates cmds and adds them. It fails without adding any on a
// duplicate or malformed entry.
func (t *table) register(m *metrics, cmds []Command) error {
	staged := make([]*Command, 0, len(cmds))
	seen := map[string]bool{}
	for i := range cmds {
		c := cmds[i] // copy: the table owns its entries
		if err := c.check(""); err != nil {
			return err
		}
		name := strings.ToLower(c.Name)
		if t.byName[name] != nil || seen[name] {
			return fmt.Errorf("%w: command %q registered twice", ErrInvalidCommand, c.Name)
		}
		seen[name] = true
		staged = append(staged, &c)
	}
	for _, c := range staged {
		c.link(nil, m)
		t.byName[c.fullName] = c
		t.sorted = append(t.sorted, c)
	}
	sort.Slice(t.sorted, func(i, j int) bool { return t.sorted[i].fullName < t.sorted[j].fullName })
	return nil
}

// check reports a malformed command entry.
func (c *Command) check(parent string) error {
	name := c.Name
	if parent != "" {
		name = parent + "|" + c.Name
	}
	switch {
	case c.Name == "" || len(c.Name) > maxNameLen || strings.ContainsAny(c.Name, " |\r\n"):
		return fmt.Errorf("%w: bad command name %q", ErrInvalidCommand, name)
	case c.Arity == 0 || c.Arity == 1 && parent != "" || c.Arity == -1 && parent != "":
		return fmt.Errorf("%w: %s: bad arity %d", ErrInvalidCommand, name, c.Arity)
	case c.Handler == nil && len(c.Subcommands) == 0:
		return fmt.Errorf("%w: %s has neither a handler nor subcommands", ErrInvalidCommand, name)
	case parent != "" && len(c.Subcommands) > 0:
		return fmt.Errorf("%w: %s: subcommands nest one level only", ErrInvalidCommand, name)
	case (c.stage == nil) != (c.finish == nil):
		return fmt.Errorf("%w: %s: stage without finish", ErrInvalidCommand, name)
	}
	seen := map[string]bool{}
	for i := range c.Subcommands {
		sc := &c.Subcommands[i]
		if err := sc.check(c.Name); err != nil {
			return err
		}
		if n := strings.ToLower(sc.Name); seen[n] {
			return fmt.Errorf("%w: subcommand %s|%s registered twice", ErrInvalidCommand, name, sc.Name)
		} else {
			seen[n] = true
		}
	}
	return nil
}

// link fills the fields Register sets, recursively.
func (c *Command) link(parent *Command, m *metrics) {
	c.parent = parent
	c.fullName = strings.ToLower(c.Name)
	if parent != nil {
		c.fullName = parent.fullName + "|" + c.fullName
	}
	if c.Handler != nil {
		c.metrics = m.forCommand(c.fullName)
	}
	if len(c.Subcommands) > 0 {
		subs := make([]Command, len(c.Subcommands), len(c.Subcommands)+1)
		copy(subs, c.Subcommands)
		if !hasSubcommand(subs, "help") {
			subs = append(subs, helpSubcommand(c))
		}
		c.Subcommands = subs
		c.subs = make(map[string]*Command, len(subs))
		for i := range c.Subcommands {
			sc := &c.Subcommands[i]
			sc.link(c, m)
			c.subs[strings.ToLower(sc.Name)] = sc
		}
	}
}

// lookup finds the command named by name without allocating (the name is
// lower-cased into a stack buffer).
func lookupIn(m map[string]*Command, name []byte) *Command {
	if len(name) > maxNameLen {
		return nil
	}
	var buf [maxNameLen]byte
	for i, ch := range name {
		if ch >= 'A' && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		buf[i] = ch
	}
	return m[string(buf[:len(name)])]
}

// arityOK reports whether n arguments fit arity.
func arityOK(arity, n int) bool {
	if arity > 0 {
		return n == arity
	}
	return n >= -arity
}

// stageFunc checks a batchable command and adds its store operations to b.
// It returns false, having added nothing, when the command cannot be
// batched (bad input or a case the handler treats specially); the server
// then runs the command's Handler on its own.
type stageFunc func(c *Conn, args [][]byte, b *store.Batch, p *pending) bool

// finishFunc writes the reply of a staged command after its batch
// committed.
type finishFunc func(c *Conn, b *store.Batch, p *pending)

// commandMetrics are a command's metric children, resolved on the
// command's first call (an idle server exports no series for commands
// nobody ran; Redis's commandstats likewise list only commands called),
// then kept, so the hot path does no label lookups. INFO's commandstats
// are derived from them (calls and time from the latency histogram, errors
// from the failed counter) but for rejected: Redis splits an error reply
// into rejected (refused before running: arity, AUTH) and failed (the
// command's own), and only resolve, an error path, counts the first.
type commandMetrics struct {
	m        *metrics
	name     string
	children atomic.Pointer[commandSeries]
	rejected atomic.Int64
}

// commandSeries are the series of one command.
type commandSeries struct {
	ok, failed prometheus.Counter
	latency    *latencyHist
}

// get returns the command's series, creating them on first use.
func (cm *commandMetrics) get() *commandSeries {
	if cs := cm.children.Load(); cs != nil {
		return cs
	}
	cm.children.CompareAndSwap(nil, &commandSeries{
		ok:      cm.m.commands.WithLabelValues(cm.name, "ok"),
		failed:  cm.m.commands.WithLabelValues(cm.name, "error"),
		latency: cm.m.latency.forCommand(cm.name),
	})
	return cm.children.Load()
}

// used returns the command's series, or nil if it was never called.
func (cm *commandMetrics) used() *commandSeries { return cm.children.Load() }

func hasSubcommand(subs []Command, name string) bool {
	for i := range subs {
		if strings.EqualFold(subs[i].Name, name) {
			return true
		}
	}
	return false
}

// helpSubcommand is the HELP every container gets: one line per
// subcommand with its arguments and summary, as Redis's X HELP replies.
func helpSubcommand(parent *Command) Command {
	return Command{
		Name: "HELP", Arity: 2, Flags: FlagFast | FlagNoAuth, Group: parent.Group,
		Summary: "Returns helpful text about the different subcommands.",
		Since:   "1.0.0",
		Handler: func(c *Conn, args [][]byte) {
			lines := []string{strings.ToUpper(parent.Name) + " <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"}
			for i := range parent.Subcommands {
				sc := &parent.Subcommands[i]
				lines = append(lines, strings.ToUpper(sc.Name)+argsSynopsis(sc.Args), "    "+sc.Summary)
			}
			c.WriteArray(len(lines))
			for _, l := range lines {
				c.WriteSimple(l)
			}
		},
	}
}

// argsSynopsis renders args the way redis-cli shows hints: " KEY [FIELD ...]".
func argsSynopsis(args []Arg) string {
	var b strings.Builder
	for _, a := range args {
		b.WriteByte(' ')
		b.WriteString(a.synopsis())
	}
	return b.String()
}

func (a Arg) synopsis() string {
	var part string
	switch a.Type {
	case "pure-token":
		part = a.Token
	case "oneof", "block":
		sep := " "
		if a.Type == "oneof" {
			sep = "|"
		}
		subs := make([]string, len(a.Args))
		for i, s := range a.Args {
			subs[i] = s.synopsis()
		}
		part = strings.Join(subs, sep)
		if a.Token != "" {
			part = a.Token + " " + part
		}
	default:
		part = a.Name
		if a.Token != "" {
			part = a.Token + " " + part
		}
	}
	if a.Multiple {
		part += " [" + part + " ...]"
	}
	if a.Optional {
		part = "[" + part + "]"
	}
	return part
}
