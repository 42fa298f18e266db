package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	cmdtab "github.com/tallydb/tally/internal/commands"
	"github.com/tallydb/tally/store"
)

// The CLI rendering of tally's one command table (internal/commands): each
// table entry becomes a command whose arguments the table parses, which
// opens the database as the entry says, runs the entry's handler and
// prints its Text. The RESP server renders the same table (server.DBCommands).

// tableCommands returns the CLI commands of the table.
func tableCommands() []*command {
	var out []*command
	for _, tc := range cmdtab.All() {
		out = append(out, &command{
			name:     tc.CLI,
			synopsis: tc.Summary,
			help:     tc.CLIHelp(),
			run:      func(e *env, args []string) error { return e.runTable(tc, args) },
			table:    true,
			entry:    tc,
		})
	}
	return out
}

// runTable runs a table command: the global -d and --durability may follow
// the command's name, as for every command.
func (e *env) runTable(tc *cmdtab.Command, args []string) error {
	rest, err := e.globalFlags(args)
	if err != nil {
		return err
	}
	in, err := tc.ParseCLI(rest)
	if err == nil && tc.Check != nil {
		err = tc.Check(in)
	}
	if err != nil {
		if errors.Is(err, cmdtab.ErrUsage) {
			return &usageError{err.Error()}
		}
		return err
	}
	mode := openWrite
	switch tc.Open {
	case cmdtab.OpenCreate:
		mode = openCreate
	case cmdtab.OpenExisting:
		mode = openExisting
	case cmdtab.OpenReadOnly:
		mode = openReadOnly
	case cmdtab.OpenCreateStore:
		mode = openCreateStore
	}
	var fresh *freshDir // a store this command creates, removed if it fails
	if (mode == openCreate || mode == openCreateStore) && e.served == nil {
		fresh, _ = newStoreDir(e.dir)
	}
	var configure func(*store.Options) error
	if tc.StoreOptions != nil {
		configure = func(o *store.Options) error { return tc.StoreOptions(in, o) }
	}
	db, err := e.openDBWith(mode, configure)
	if err != nil {
		return fresh.removeAfter(err)
	}
	// The bar's clock starts with the run.
	var progress cmdtab.Progress
	if isTerminal(e.stdout) {
		progress = barProgress{newProgress(e.stdout, "", "", 0)}
	}
	in.SetOutput(e.stderr, progress)
	in.SetOwnOpen(e.served == nil)
	ctx, stop := e.interruptContext()
	defer stop()
	out, err := tc.Run(ctx, db, in)
	if err != nil {
		return fresh.removeAfter(closeTally(db, err))
	}
	// Printed after the run, and in full before the store closes: a
	// command's output is all or nothing, like its effect.
	var b strings.Builder
	if e.json {
		err = cmdtab.JSON(&b, tc, in, out)
	} else {
		err = tc.Text(&b, in, out)
	}
	e.stdout.Write([]byte(b.String()))
	return closeTally(db, err)
}

// removeAfter removes the store a command created in f (nil: none) when
// the command failed with err, and returns err with the removal's own
// failure added. Table commands check their input before the store is
// opened; what gets here (an I/O error, a like in a business the new store
// cannot have) leaves no half-made store behind either.
func (f *freshDir) removeAfter(err error) error {
	if err != nil && f != nil {
		if rerr := f.remove(); rerr != nil {
			err = fmt.Errorf("%w (and %v)", err, rerr)
		}
	}
	return err
}

// globalFlags takes -d DIR, --durability MODE, --json and -h out of a
// command's arguments (anywhere before "--"), and returns the rest.
func (e *env) globalFlags(args []string) ([]string, error) {
	var rest []string
	for k := 0; k < len(args); k++ {
		a := args[k]
		if a == "--" {
			return append(rest, args[k:]...), nil
		}
		name, val, hasVal := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if len(a) < 2 || a[0] != '-' {
			rest = append(rest, a)
			continue
		}
		switch name {
		case "h", "help":
			return nil, errHelp
		case "json":
			e.json = true
		case "d", "durability":
			if !hasVal {
				if k+1 >= len(args) {
					return nil, usagef("flag needs an argument: -%s", name)
				}
				k++
				val = args[k]
			}
			if name == "d" {
				*e.dirFlag() = val
			} else {
				e.durability = val
			}
		default:
			rest = append(rest, a)
		}
	}
	return rest, nil
}

// barProgress draws a table command's progress as the CLI's progress bar
// (progress.go).
type barProgress struct{ bar *progressBar }

func (b barProgress) Update(label, unit string, done, total int64) {
	b.bar.label, b.bar.unit, b.bar.total = label, unit, total
	b.bar.update(done)
}

func (b barProgress) Finish() { b.bar.finish() }

// runCommand runs c. With --json, a table command renders its own result
// (runTable) and version prints an object; a command whose output is
// "key value" lines prints them as one JSON object (numbers as numbers);
// any other command refuses --json before it runs.
func (e *env) runCommand(c *command, args []string) error {
	if !e.json || c.table || c == cmdVersion || c == cmdHelp {
		return c.run(e, args)
	}
	if !c.keyValues {
		return usagef("--json: %s has no JSON output (its output is a report or a server)", c.name)
	}
	out := e.stdout
	var b bytes.Buffer
	e.stdout = &b
	err := c.run(e, args)
	e.stdout = out
	if err != nil {
		out.Write(b.Bytes())
		return err
	}
	obj := map[string]any{}
	for _, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseFloat(v, 64); err == nil {
			obj[k] = n
		} else {
			obj[k] = v
		}
	}
	return writeJSON(out, obj)
}

// writeJSON prints v as one line of JSON.
func writeJSON(w io.Writer, v any) error {
	buf, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(buf, '\n'))
	return err
}
