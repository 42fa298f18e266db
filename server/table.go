package server

import (
	"bytes"
	"strings"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/internal/commands"
)

// DBCommands returns the RESP rendering of tally's one command table
// (internal/commands) on db: every command the CLI has against a database
// (timelines, unread, likes, counters, jobs and maintenance), with the same
// parameters in the same order, the same defaults and the same errors. Its
// mapping rules are in the package doc. "tally serve" registers them:
//
//	srv.Register(server.DBCommands(db)...)
func DBCommands(db *tallydb.DB) []Command {
	return tableCommands(db, commands.All())
}

// tableCommands renders table as server commands: one per RESP name (and
// RESPOne), subcommands grouped under their container in table order.
func tableCommands(db *tallydb.DB, table []*commands.Command) []Command {
	var out []Command
	containers := map[string]int{} // container name -> index in out
	add := func(name string, cmd Command) {
		container, sub, ok := strings.Cut(name, " ")
		if !ok {
			cmd.Name = name
			out = append(out, cmd)
			return
		}
		cmd.Name = sub
		i, seen := containers[container]
		if !seen {
			i = len(out)
			containers[container] = i
			out = append(out, Command{Name: container, Arity: -2, Group: cmd.Group, Since: cmd.Since,
				Summary: strings.ToUpper(container[strings.LastIndexByte(container, '.')+1:]) + " commands."})
		}
		out[i].Subcommands = append(out[i].Subcommands, cmd)
	}
	for _, tc := range table {
		add(tc.RESP, renderCommand(db, tc, false))
		if tc.RESPOne != "" {
			add(tc.RESPOne, renderCommand(db, tc, true))
		}
	}
	return out
}

// renderCommand is the RESP form of tc; one is its single-value form.
func renderCommand(db *tallydb.DB, tc *commands.Command, one bool) Command {
	words := len(strings.Fields(tc.RESP)) // 2 for a subcommand
	if one {
		words = len(strings.Fields(tc.RESPOne))
	}
	min := tc.MinArgs()
	arity := -(words + min)
	if tc.Fixed() || one && !hasOptions(tc) {
		arity = words + min
	}
	cmd := Command{
		Arity: arity, Group: tc.Group, Since: "1.0.0", Summary: tc.Summary, Complexity: tc.Complexity,
		Args: respArgs(tc, one),
	}
	switch tc.Mode {
	case commands.Read:
		cmd.Flags = FlagReadOnly
	case commands.Write:
		cmd.Flags = FlagWrite
	case commands.Admin:
		cmd.Flags = FlagWrite | FlagAdmin
	}
	if tc.Fast {
		cmd.Flags |= FlagFast
	}
	if tc.Local {
		cmd.Flags |= FlagLocal
	}
	if tc.Internal {
		cmd.Flags |= FlagInternal
	}
	// Key positions count from the command's name, a subcommand's
	// included (Redis's "memory|usage" has its key at 2).
	for i, p := range tc.Positionals() {
		switch {
		case p.Key:
			cmd.FirstKey, cmd.LastKey, cmd.KeyStep = words+i, words+i, 1
			if p.Multiple {
				cmd.LastKey = -1
			}
		case p.RowKey:
			cmd.Keys = rowKeys(words, words+i, p.Multiple)
		default:
			continue
		}
		break
	}
	cmd.gather = tc.Gather != nil
	if !tc.Reusable() {
		cmd.Handler = func(c *Conn, args [][]byte) {
			in, err := tc.ParseRESP(args[words:])
			runTable(c, db, tc, one, in, err)
		}
		return cmd
	}
	cmd.Handler = func(c *Conn, args [][]byte) {
		// The connection's Input, taken while this command uses it: a
		// command nested in this one (RunNested) finds none and
		// allocates its own.
		scratch := c.input
		c.input = nil
		in, err := tc.ParseRESPReuse(scratch, args[words:])
		runTable(c, db, tc, one, in, err)
		if in == nil {
			in = scratch
		}
		c.input = in
	}
	return cmd
}

// runTable runs the table command tc parsed as in (err: the parse's
// error) and writes its reply.
func runTable(c *Conn, db *tallydb.DB, tc *commands.Command, one bool, in *commands.Input, err error) {
	if err == nil && one && in.Repeated() != 1 {
		err = commands.Usagef("wrong number of arguments for '%s' command", strings.ToLower(tc.RESPOne))
	}
	if err == nil && tc.Check != nil {
		err = tc.Check(in)
	}
	if err != nil {
		c.WriteErr(err)
		return
	}
	out, gathered := c.runGather(tc, in)
	if !gathered {
		if out, err = tc.Run(c.Context(), db, in); err != nil {
			c.WriteErr(err)
			return
		}
	} else if out == nil {
		return // runGather replied its error
	}
	if one {
		tc.Reply(&unwrapReplier{Replier: c}, in, out)
		return
	}
	tc.Reply(c, in, out)
}

// rowKeys is the Keys of a command on counter rows: the argument at name
// is the counter, the one at id (every one from id on when multiple) a
// row's id, or ID.COLUMN; each row's key is COUNTER:ID (the column is not
// part of it: TALLY.INCR posts 5.likes is HINCRBY posts:5's row, so the
// shard that holds it).
func rowKeys(name, id int, multiple bool) func([][]byte, func([]byte)) {
	return func(args [][]byte, key func([]byte)) {
		if name >= len(args) {
			return
		}
		var buf [128]byte
		last := id
		if multiple {
			last = len(args) - 1
		}
		for j := id; j <= last && j < len(args); j++ {
			row, _, _ := bytes.Cut(args[j], []byte{'.'})
			k := append(append(append(buf[:0], args[name]...), ':'), row...)
			key(k)
		}
	}
}

func hasOptions(tc *commands.Command) bool {
	for _, p := range tc.Params {
		if p.Option || p.Optional && !p.Multiple {
			return true
		}
	}
	return false
}

// respArgs is COMMAND DOCS's argument list of tc.
func respArgs(tc *commands.Command, one bool) []Arg {
	var args []Arg
	for _, p := range tc.Params {
		a := Arg{Name: p.Name, Type: "string", Optional: p.Optional || p.Option, Multiple: p.Multiple && !one}
		switch p.Kind {
		case commands.Uint, commands.Int:
			a.Type = "integer"
		case commands.Flag:
			a.Type = "pure-token"
		}
		if p.Key {
			a.Type = "key"
		}
		if p.Option {
			a.Token = commands.RESPOption(p.Name)
		}
		if one && p.Multiple {
			a.Optional = false
		}
		args = append(args, a)
	}
	return args
}

// unwrapReplier drops the array header of an M-form's reply, so the
// single-value form replies the one element.
type unwrapReplier struct {
	commands.Replier
	started bool
}

func (u *unwrapReplier) WriteArray(n int) {
	if !u.started {
		u.started = true
		return
	}
	u.Replier.WriteArray(n)
}

func (u *unwrapReplier) first() {
	u.started = true
}

func (u *unwrapReplier) WriteMap(n int)           { u.first(); u.Replier.WriteMap(n) }
func (u *unwrapReplier) WriteInt(v int64)         { u.first(); u.Replier.WriteInt(v) }
func (u *unwrapReplier) WriteUint(v uint64)       { u.first(); u.Replier.WriteUint(v) }
func (u *unwrapReplier) WriteBulkString(s string) { u.first(); u.Replier.WriteBulkString(s) }
func (u *unwrapReplier) WriteNull()               { u.first(); u.Replier.WriteNull() }
func (u *unwrapReplier) WriteOK()                 { u.first(); u.Replier.WriteOK() }
func (u *unwrapReplier) WriteSimple(s string)     { u.first(); u.Replier.WriteSimple(s) }
