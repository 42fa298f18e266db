package main

import (
	"fmt"
	"strconv"
	"strings"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/internal/quote"
	"github.com/tallydb/tally/store"
)

var cmdIncr = &command{
	name:     "incr",
	synopsis: "add to one column of a row and print the new value",
	help: `Usage: tally -d DIR incr NAME ID COLUMN [DELTA] [--source S --seq N]
       tally -d DIR incr NAME ID.COLUMN [DELTA] [--source S --seq N]

Adds DELTA (default 1, may be negative) to COLUMN of row ID of counter NAME
and prints the new value. A count never goes below 0: a negative DELTA larger
than the value leaves it at 0. A result above the column's maximum is refused
and changes nothing. Flags (-d, --durability) go before NAME.

With --source S --seq N the increment is applied once per message: the
store remembers the highest N applied for source S (a queue partition, a
producer) and a redelivered or older N changes nothing; the current value
is printed followed by " duplicate". N starts at 1; each source's
sequences must grow in delivery order.

Example:
  $ tally -d /var/lib/tally incr posts 1234 likes 5
  5
  $ tally -d /var/lib/tally incr posts 1234.likes -2
  3
  $ tally -d /var/lib/tally incr posts 1234 likes 1 --source kafka-7 --seq 42
  4
  $ tally -d /var/lib/tally incr posts 1234 likes 1 --source kafka-7 --seq 42
  4 duplicate
`,
}

var cmdSet = &command{
	name:     "set",
	synopsis: "set every column of a row",
	help: `Usage: tally -d DIR set NAME ID V...

Sets every column of row ID of counter NAME, in column order (see "counter
list"); give exactly one value per column. Prints nothing.

Example:
  tally -d /var/lib/tally set posts 1234 10 0 7
`,
}

var cmdGet = &command{
	name:     "get",
	synopsis: "print rows, or single columns",
	help: `Usage: tally -d DIR get NAME ID|ID.COLUMN...

Prints one line per argument, in argument order:
  ID            ->  ID col=v col=v ...   (every column, in column order)
  ID.COLUMN     ->  ID.COLUMN v
An id never written reads as zeros.

Example:
  $ tally -d /var/lib/tally get posts 1234 99 1234.likes
  1234 reposts=10 comments=0 likes=7
  99 reposts=0 comments=0 likes=0
  1234.likes 7
`,
}

var cmdDelete = &command{
	name:     "delete",
	synopsis: "delete rows (every column reads 0 afterwards)",
	help: `Usage: tally -d DIR delete NAME ID...

Deletes the rows ID... of counter NAME, atomically. Prints nothing.

Example:
  tally -d /var/lib/tally delete posts 1234 99
`,
}

func init() {
	cmdIncr.run = runIncr
	cmdSet.run = runSet
	cmdGet.run = runGet
	cmdDelete.run = runDelete
}

// splitIDColumn splits "ID.COLUMN"; ok is false for a plain ID.
func splitIDColumn(arg string) (id uint64, column string, ok bool, err error) {
	idStr, column, ok := strings.Cut(arg, ".")
	if ok && column == "" {
		return 0, "", false, usagef("bad ID.COLUMN %s: missing COLUMN", quote.Input(arg))
	}
	id, err = parseUint("ID", idStr)
	return id, column, ok, err
}

func runIncr(e *env, args []string) error {
	pos, err := parse(e.flags(cmdIncr), args, false)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usagef("want NAME ID COLUMN [DELTA] or NAME ID.COLUMN [DELTA]")
	}
	pos, source, seq, err := sourceFlags(pos)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usagef("want NAME ID COLUMN [DELTA] or NAME ID.COLUMN [DELTA]")
	}
	name := pos[0]
	id, column, dotted, err := splitIDColumn(pos[1])
	if err != nil {
		return err
	}
	rest := pos[2:]
	if !dotted {
		if len(rest) == 0 {
			return usagef("want NAME ID COLUMN [DELTA] or NAME ID.COLUMN [DELTA]: missing COLUMN")
		}
		column, rest = rest[0], rest[1:]
	}
	delta := int64(1)
	switch len(rest) {
	case 0:
	case 1:
		if delta, err = parseInt("DELTA", rest[0]); err != nil {
			return err
		}
	default:
		return usagef("too many arguments: %s", quote.Input(strings.Join(rest[1:], " ")))
	}
	return e.withCounter(name, func(_ *store.DB, c *store.Counter) error {
		if source != "" {
			v, applied, err := c.IncrOnce(id, column, delta, source, seq)
			switch {
			case err != nil:
			case applied:
				fmt.Fprintln(e.stdout, v)
			default:
				fmt.Fprintln(e.stdout, v, "duplicate")
			}
			return err
		}
		v, err := c.Incr(id, column, delta)
		if err == nil {
			fmt.Fprintln(e.stdout, v)
		}
		return err
	})
}

// sourceFlags takes "--source S --seq N" (either order, "=" forms too)
// from anywhere in incr's arguments, which are parsed without
// interspersed flags so a negative DELTA stays an argument.
func sourceFlags(args []string) (rest []string, source string, seq uint64, err error) {
	var haveSource, haveSeq bool
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "--") || name != "source" && name != "seq" {
			rest = append(rest, a)
			continue
		}
		if !hasVal {
			if i+1 == len(args) {
				return nil, "", 0, usagef("flag --%s needs a value", name)
			}
			i++
			val = args[i]
		}
		if name == "source" {
			source, haveSource = val, true
			if val == "" {
				return nil, "", 0, usagef("--source needs a non-empty name")
			}
		} else {
			if seq, err = parseUint("--seq", val); err != nil {
				return nil, "", 0, err
			}
			haveSeq = true
		}
	}
	if haveSource != haveSeq {
		return nil, "", 0, usagef("--source and --seq go together")
	}
	return rest, source, seq, nil
}

func runSet(e *env, args []string) error {
	pos, err := parse(e.flags(cmdSet), args, false)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usagef("want NAME ID V...")
	}
	id, err := parseUint("ID", pos[1])
	if err != nil {
		return err
	}
	vals := make([]uint64, len(pos)-2)
	for i, s := range pos[2:] {
		if vals[i], err = parseUint("value "+strconv.Itoa(i+1), s); err != nil {
			return err
		}
	}
	return e.withCounter(pos[0], func(_ *store.DB, c *store.Counter) error {
		if cols := c.Columns(); len(cols) != len(vals) {
			return fmt.Errorf("%w: set %s: got %d values, the counter has %d columns (%s)",
				store.ErrColumnCount, pos[0], len(vals), len(cols), strings.Join(cols, " "))
		}
		return c.Set(id, vals...)
	})
}

func runGet(e *env, args []string) error {
	pos, err := parse(e.flags(cmdGet), args, false)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usagef("want NAME ID|ID.COLUMN...")
	}
	type query struct {
		id     uint64
		column string // "" for the whole row
		row    int    // index into rowIDs
	}
	qs := make([]query, len(pos)-1)
	var rowIDs []uint64
	for i, arg := range pos[1:] {
		id, column, dotted, err := splitIDColumn(arg)
		if err != nil {
			return err
		}
		qs[i] = query{id: id, column: column}
		if !dotted {
			qs[i].row = len(rowIDs)
			rowIDs = append(rowIDs, id)
		}
	}
	db, err := e.openRead()
	if err != nil {
		return err
	}
	c, err := tallydb.UserCounter(db, pos[0])
	if err != nil {
		return closeDB(db, err)
	}
	// Read everything before printing, so an error prints no partial output.
	cols := c.Columns()
	vals, err := c.MultiGet(rowIDs, nil)
	if err != nil {
		return closeDB(db, err)
	}
	colVals := make([]uint64, len(qs))
	for i, q := range qs {
		if q.column != "" {
			if colVals[i], err = c.GetColumn(q.id, q.column); err != nil {
				return closeDB(db, err)
			}
		}
	}
	if len(vals) != len(rowIDs)*len(cols) {
		return closeDB(db, fmt.Errorf("get %s: %d values for %d ids of %d columns", pos[0], len(vals), len(rowIDs), len(cols)))
	}
	var b strings.Builder
	for i, q := range qs {
		b.Reset()
		if q.column != "" {
			fmt.Fprintf(&b, "%d.%s %d", q.id, q.column, colVals[i])
		} else {
			b.WriteString(strconv.FormatUint(q.id, 10))
			for j, name := range cols {
				fmt.Fprintf(&b, " %s=%d", name, vals[q.row*len(cols)+j])
			}
		}
		fmt.Fprintln(e.stdout, b.String())
	}
	return closeDB(db, nil)
}

func runDelete(e *env, args []string) error {
	pos, err := parse(e.flags(cmdDelete), args, false)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usagef("want NAME ID...")
	}
	ids := make([]uint64, len(pos)-1)
	for i, s := range pos[1:] {
		if ids[i], err = parseUint("ID", s); err != nil {
			return err
		}
	}
	return e.withCounter(pos[0], func(db *store.DB, _ *store.Counter) error {
		b := db.NewBatch()
		defer b.Close()
		for _, id := range ids {
			if err := b.Delete(pos[0], id); err != nil {
				return err
			}
		}
		return b.Commit()
	})
}
