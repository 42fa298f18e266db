package commands

import (
	"context"
	"fmt"
	"io"
	"math/bits"
	"strconv"
	"strings"
	"time"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/internal/limits"
	"github.com/tallydb/tally/internal/quote"
	"github.com/tallydb/tally/store"
)

// Counter commands: the host's own counters in package store, their schema
// (counter add, column add, counter list) and their rows (incr, set, get,
// delete). Every one goes through tally.UserCounter or
// tally.CheckCounterName, so a counter a package owns, or a name in a
// package's namespace, is refused with store.ErrReserved: that data is
// reached through its package. Names and shapes are checked before the
// store is opened, so a refused "counter add" creates no store.
//
// Redis's own commands on the same rows (HINCRBY, HGET, DEL, ...) keep
// Redis's shapes and live in package server; TALLY.INCR, TALLY.SET,
// TALLY.GET and TALLY.DELETE are the RESP forms of the CLI's commands.

const counterGroup = "tally"

var (
	pCounterName = Param{Name: "name", Kind: String}
	pRangeBits   = Param{Name: "range-bits", Kind: Uint, Option: true,
		Help: fmt.Sprintf("low id bits per row (%d..%d); fixed once given", limits.MinRangeBits, limits.MaxRangeBits)}
	pKeepHot   = Param{Name: "keep-hot", Kind: Flag, Option: true, Help: "keep every range in memory (the default; for user ids)"}
	pHotRanges = Param{Name: "hot-ranges", Kind: Int, Option: true, Help: "keep the newest HOT-RANGES ranges hot, age the older ones"}
	pAge       = Param{Name: "age", Kind: String, Option: true,
		Help: "age a range once the time in its ids is older than AGE (e.g. 4320h, whole milliseconds)"}
	pEpochMs = Param{Name: "id-epoch-ms", Aliases: []string{"epoch-ms"}, Kind: Int, Option: true,
		Help: fmt.Sprintf("with --age: ids hold milliseconds since this Unix epoch (0..2^%d, default %d)", bits.TrailingZeros64(limits.MaxIDTimeMs), store.DefaultIDEpochMs)}
	pTimeShift = Param{Name: "id-time-shift", Aliases: []string{"time-shift"}, Kind: Uint, Option: true,
		Help: fmt.Sprintf("with --age: the time in an id is shifted left by this many bits (0..%d, default %d)", limits.MaxIDTimeShift, store.DefaultIDTimeShift)}
)

// optName is how the front end the input came from spells option name:
// --name in the CLI, NAME over RESP.
func optName(in *Input, name string) string {
	if in.CLI() {
		return "--" + name
	}
	return RESPOption(name)
}

// checkUserCounterName checks a counter name of the host's: valid, and in
// no package's namespace (store.ErrReserved).
func checkUserCounterName(in *Input) error {
	name := in.String("name")
	if err := checkName("counter name", name); err != nil {
		return err
	}
	return tallydb.CheckCounterName(name)
}

// checkName is store.ValidateName saying what the name is ("column
// name"), as the store's own lookups do.
func checkName(what, s string) error {
	err := store.ValidateName(s)
	switch {
	case err == nil:
		return nil
	case s == "":
		return fmt.Errorf("%w: empty %s", store.ErrInvalidName, what)
	}
	return fmt.Errorf("%w: %s %s", store.ErrInvalidName, what, strings.TrimPrefix(err.Error(), store.ErrInvalidName.Error()+": "))
}

// counterShape reads the options that shape a counter (counter add,
// business add): range-bits (unset: 0, the caller's default) and one age
// policy, keep-hot | hot-ranges K | age D [id-epoch-ms MS] [id-time-shift BITS]
// (none: a zero Age, the caller's default). It checks them together, as
// the store will.
func counterShape(in *Input) (store.CounterOptions, error) {
	var opts store.CounterOptions
	var policies []string
	for _, p := range []string{"keep-hot", "hot-ranges", "age"} {
		if hasParam(in, p) && in.Has(p) {
			policies = append(policies, optName(in, p))
		}
	}
	if len(policies) > 1 {
		return opts, Usagef("%s are mutually exclusive", strings.Join(policies, " and "))
	}
	if (in.Has("id-epoch-ms") || in.Has("id-time-shift")) && !in.Has("age") {
		return opts, Usagef("%s and %s go with %s", optName(in, "id-epoch-ms"), optName(in, "id-time-shift"), optName(in, "age"))
	}
	if in.Has("range-bits") {
		// NB: 0 would read as "size the ranges to the ids", and the store's
		// field is 8 bits wide: both refused here, not truncated.
		rb := in.Uint("range-bits")
		if rb < limits.MinRangeBits || rb > limits.MaxRangeBits {
			return opts, fmt.Errorf("%w: range bits %d (want %d..%d)", store.ErrInvalidOption, rb, limits.MinRangeBits, limits.MaxRangeBits)
		}
		opts.RangeBits = uint8(rb)
	}
	switch {
	case hasParam(in, "keep-hot") && in.Has("keep-hot"):
		opts.Age = store.AgePolicy{Kind: store.KeepHot}
	case in.Has("hot-ranges"):
		n := in.Int("hot-ranges")
		if n < 1 || n > 1<<31-1 {
			return opts, fmt.Errorf("%w: hot ranges %d (want 1..%d)", store.ErrInvalidOption, n, 1<<31-1)
		}
		opts.Age = store.AgePolicy{Kind: store.KeepNewest, HotRanges: int(n)}
	case in.Has("age"):
		d, err := time.ParseDuration(in.String("age"))
		if err != nil {
			return opts, Usagef("bad age %s: want a duration such as 4320h", quote.Input(in.String("age")))
		}
		shift := in.UintOr("id-time-shift", store.DefaultIDTimeShift)
		if shift > limits.MaxIDTimeShift {
			return opts, fmt.Errorf("%w: id time shift %d (want 0..%d)", store.ErrInvalidOption, shift, limits.MaxIDTimeShift)
		}
		opts.Age = store.AgePolicy{Kind: store.AgeByTime, MaxAge: d,
			IDEpochMs: in.IntOr("id-epoch-ms", store.DefaultIDEpochMs), IDTimeShift: uint8(shift)}
	}
	return opts, opts.Validate()
}

// hasParam reports whether in's command has a parameter named name.
func hasParam(in *Input, name string) bool {
	for _, p := range in.Command().Params {
		if p.Name == name {
			return true
		}
	}
	return false
}

// columnShape reads a column's hint and max (default 16 and 32 bits).
func columnShape(in *Input) (store.ColumnOptions, error) {
	hint, max := in.UintOr("hint", 16), in.UintOr("max", 32)
	// NB: 0 would read as the default, and the fields are 8 bits wide.
	if hint == 0 || hint > 255 {
		return store.ColumnOptions{}, fmt.Errorf("%w: column hint %d bits (want 8, 16 or 32)", store.ErrInvalidOption, hint)
	}
	if max == 0 || max > 255 {
		return store.ColumnOptions{}, fmt.Errorf("%w: column max %d bits (want 32 or 64)", store.ErrInvalidOption, max)
	}
	opts := store.ColumnOptions{HintBits: uint8(hint), MaxBits: uint8(max)}
	return opts, opts.Validate()
}

// CounterLine formats a counter's schema as one line, the format of
// "tally counter list" and TALLY.COUNTER LIST:
//
//	NAME range_bits=N policy=POLICY columns=COL:HINT/MAX,...
//
// POLICY is keep-hot, hot-ranges:K or age:DURATION:EPOCH_MS:TIME_SHIFT.
func CounterLine(ci store.CounterInfo) string {
	cols := make([]string, len(ci.Columns))
	for i, col := range ci.Columns {
		cols[i] = fmt.Sprintf("%s:%d/%d", col.Name, col.HintBits, col.MaxBits)
	}
	var policy string
	switch a := ci.Age; a.Kind {
	case store.KeepHot:
		policy = "keep-hot"
	case store.KeepNewest:
		policy = fmt.Sprintf("hot-ranges:%d", a.HotRanges)
	case store.AgeByTime:
		policy = fmt.Sprintf("age:%v:%d:%d", a.MaxAge.Round(time.Millisecond), a.IDEpochMs, a.IDTimeShift)
	default:
		policy = a.Kind.String()
	}
	return fmt.Sprintf("%s range_bits=%d policy=%s columns=%s", ci.Name, ci.RangeBits, policy, strings.Join(cols, ","))
}

// idColumn is one "ID" or "ID.COLUMN" argument.
type idColumn struct {
	id     uint64
	column string // "" for the whole row
}

// parseIDColumn parses "ID" or "ID.COLUMN" (the column name checked).
func parseIDColumn(arg string) (idColumn, error) {
	idStr, column, dotted := strings.Cut(arg, ".")
	if dotted && column == "" {
		return idColumn{}, Usagef("bad ID.COLUMN %s: missing COLUMN", quote.Input(arg))
	}
	id, err := strconv.ParseUint(idStr, 10, 64)
	if err != nil {
		return idColumn{}, Usagef("bad id %s: want an unsigned decimal integer below 2^64", quote.Input(idStr))
	}
	if dotted {
		if err := checkName("column name", column); err != nil {
			return idColumn{}, err
		}
	}
	return idColumn{id: id, column: column}, nil
}

// incrArgs are incr's arguments: NAME ID COLUMN [DELTA] or NAME
// ID.COLUMN [DELTA] (then DELTA is in the column slot).
type incrArgs struct {
	idColumn
	delta int64
}

func parseIncr(in *Input) (incrArgs, error) {
	ic, err := parseIDColumn(in.String("id"))
	if err != nil {
		return incrArgs{}, err
	}
	a := incrArgs{idColumn: ic, delta: in.IntOr("delta", 1)}
	switch {
	case ic.column == "" && !in.Has("column"):
		return a, Usagef("missing COLUMN (want NAME ID COLUMN [DELTA] or NAME ID.COLUMN [DELTA])")
	case ic.column == "":
		a.column = in.String("column")
		if err := checkName("column name", a.column); err != nil {
			return a, err
		}
	case in.Has("delta"):
		return a, Usagef("too many arguments: %d (want NAME ID.COLUMN [DELTA])", in.Int("delta"))
	case in.Has("column"): // NAME ID.COLUMN DELTA: the delta took COLUMN's place
		s := in.String("column")
		if a.delta, err = strconv.ParseInt(s, 10, 64); err != nil {
			return a, Usagef("bad delta %s: want a decimal integer (may be negative)", quote.Input(s))
		}
	}
	if in.Has("source") != in.Has("seq") {
		return a, Usagef("%s and %s go together", optName(in, "source"), optName(in, "seq"))
	}
	if in.Has("source") && in.String("source") == "" {
		return a, Usagef("%s needs a non-empty name", optName(in, "source"))
	}
	return a, nil
}

// incremented is incr's result.
type incremented struct {
	v       uint64
	once    bool // --source/--seq given
	applied bool
}

// getResult is what get read: one value per column argument, the rows'
// values in column order for the row arguments.
type getResult struct {
	args    []idColumn
	cols    []string
	rows    []uint64 // len(cols) values per row argument, in order
	colVals []uint64 // per argument; set for the ID.COLUMN ones
}

// counterCommands returns the counter and schema commands, then the
// business commands (business.go).
func counterCommands() []*Command {
	return append([]*Command{
		{
			CLI: "counter add", RESP: "TALLY.COUNTER ADD", Group: counterGroup, Mode: Admin, Open: OpenCreateStore,
			Summary:    "create a counter (creates the store if DIR is new)",
			Complexity: "O(1)",
			Params:     []Param{pCounterName, pRangeBits, pKeepHot, pHotRanges, pAge, pEpochMs, pTimeShift},
			Check: func(in *Input) error {
				if err := checkUserCounterName(in); err != nil {
					return err
				}
				_, err := counterShape(in)
				return err
			},
			Help: fmt.Sprintf(`Creates counter NAME, without columns (add them with "column add"). If DIR
does not exist or is empty, a new store is created in it. Prints nothing.
NAME is 1 to %d letters, digits, '_' or '-', not starting with '-'; names
in a package's namespace (users, likes_*, unread_*, ...) are reserved.
Everything is checked before the store is opened: a refused counter
creates no store and changes nothing.

Ranges: without --range-bits, ranges start at 32 bits and widen (up to 64)
when the ids leave few rows per range. Aging: --keep-hot (the default),
--hot-ranges K or --age DURATION, mutually exclusive; with --age the ids
are snowflake-like (milliseconds since --id-epoch-ms, default Twitter's,
shifted left by --id-time-shift bits). Over RESP the reply is OK.

Example:
  tally -d /var/lib/tally counter add posts --range-bits 40 --age 4320h
`, limits.MaxNameLen),
			Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
				opts, err := counterShape(in)
				if err != nil {
					return nil, err
				}
				return nil, db.Store().CreateCounter(in.String("name"), opts)
			},
			Text: counterNoText, Reply: counterOK,
		},
		{
			CLI: "counter list", RESP: "TALLY.COUNTER LIST", Group: counterGroup, Mode: Read, Open: OpenReadOnly,
			Summary:    "list counters with their policy and columns",
			Complexity: "O(N) where N is the number of counters",
			Help: `Prints one line per counter of the host's (not the packages' own):
  NAME range_bits=N policy=POLICY columns=COL:HINT/MAX,...
POLICY is keep-hot, hot-ranges:K or age:DURATION:EPOCH_MS:TIME_SHIFT;
HINT and MAX are a column's width hint and maximum in bits. Over RESP: an
array of those lines.

Example:
  $ tally -d /var/lib/tally counter list
  posts range_bits=40 policy=age:4320h0m0s:1288834974657:22 columns=reposts:16/32,likes:16/32
`,
			Run: func(_ context.Context, db *tallydb.DB, _ *Input) (any, error) {
				infos := tallydb.UserCounters(db.Store())
				lines := make([]string, len(infos))
				for i, ci := range infos {
					lines[i] = CounterLine(ci)
				}
				return lines, nil
			},
			Text: counterTextLines, Reply: counterReplyLines,
		},
		{
			CLI: "column add", RESP: "TALLY.COLUMN ADD", Group: counterGroup, Mode: Admin, Open: OpenExisting,
			Summary:    "add a column to a counter",
			Complexity: "O(1)",
			Params: []Param{pCounterName, {Name: "column", Kind: String},
				{Name: "hint", Kind: Uint, Option: true, Help: "width of a value in a memory row: 8, 16 or 32 (default 16); larger values stay exact"},
				{Name: "max", Kind: Uint, Option: true, Help: "values are bounded by 2^MAX-1: 32 or 64 (default 32)"}},
			Check: func(in *Input) error {
				if err := checkUserCounterName(in); err != nil {
					return err
				}
				if err := checkName("column name", in.String("column")); err != nil {
					return err
				}
				_, err := columnShape(in)
				return err
			},
			Help: fmt.Sprintf(`Adds COLUMN to counter NAME. Existing rows are not rewritten; the new column
reads 0 until written. Prints nothing (over RESP: OK). A counter has
at most %d columns; COLUMN is 1 to %d letters, digits, '_' or '-', not
starting with '-'.

Example:
  tally -d /var/lib/tally column add posts likes --hint 16 --max 32
`, limits.MaxColumns, limits.MaxNameLen),
			Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
				opts, err := columnShape(in)
				if err != nil {
					return nil, err
				}
				if _, err := tallydb.UserCounter(db.Store(), in.String("name")); err != nil {
					return nil, err
				}
				return nil, db.Store().AddColumn(in.String("name"), in.String("column"), opts)
			},
			Text: counterNoText, Reply: counterOK,
		},
		{
			CLI: "incr", RESP: "TALLY.INCR", Group: counterGroup, Mode: Write, Fast: true, Open: OpenExisting,
			Summary:    "add to one column of a row and print the new value",
			Complexity: "O(1)",
			Params: []Param{pCounterName, {Name: "id", Kind: String, RowKey: true}, {Name: "column", Kind: String, Optional: true},
				{Name: "delta", Kind: Int, Optional: true},
				{Name: "source", Kind: String, Option: true, Help: "with --seq: apply once per message of this source (a queue partition)"},
				{Name: "seq", Kind: Uint, Option: true, Help: "the message's sequence number in SOURCE, from 1, growing"}},
			Check: func(in *Input) error {
				if err := checkUserCounterName(in); err != nil {
					return err
				}
				_, err := parseIncr(in)
				return err
			},
			Help: `Adds DELTA (default 1, may be negative) to COLUMN of row ID of counter NAME
and prints the new value; ID.COLUMN may stand for ID COLUMN. A count never
goes below 0: a negative DELTA larger than the value leaves it at 0. A
result above the column's maximum is refused and changes nothing.

With --source S --seq N the increment is applied once per message: the
store remembers the highest N applied for source S (a queue partition, a
producer) and a redelivered or older N changes nothing; the current value
is printed followed by " duplicate". N starts at 1; each source's
sequences must grow in delivery order.

Over RESP, TALLY.INCR replies the new value; with SOURCE and SEQ, [value,
1] when applied and [value, 0] for a duplicate (as TALLY.HINCRBYONCE). A
column named source or seq is given as ID.COLUMN there.

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
			Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
				a, err := parseIncr(in)
				if err != nil {
					return nil, err
				}
				c, err := tallydb.UserCounter(db.Store(), in.String("name"))
				if err != nil {
					return nil, err
				}
				if in.Has("source") {
					v, applied, err := c.IncrOnce(a.id, a.column, a.delta, in.String("source"), in.Uint("seq"))
					return incremented{v: v, once: true, applied: applied}, err
				}
				v, err := c.Incr(a.id, a.column, a.delta)
				return incremented{v: v}, err
			},
			Text: func(w io.Writer, _ *Input, out any) error {
				r := out.(incremented)
				var err error
				if r.once && !r.applied {
					_, err = fmt.Fprintln(w, r.v, "duplicate")
				} else {
					_, err = fmt.Fprintln(w, r.v)
				}
				return err
			},
			Reply: func(w Replier, _ *Input, out any) {
				r := out.(incremented)
				if !r.once {
					w.WriteUint(r.v)
					return
				}
				w.WriteArray(2)
				w.WriteUint(r.v)
				if r.applied {
					w.WriteInt(1)
				} else {
					w.WriteInt(0)
				}
			},
		},
		{
			CLI: "set", RESP: "TALLY.SET", Group: counterGroup, Mode: Write, Fast: true, Open: OpenExisting,
			Summary:    "set every column of a row",
			Complexity: "O(N) where N is the number of columns",
			Params: []Param{pCounterName, {Name: "id", Kind: Uint, RowKey: true},
				{Name: "value", Kind: Uint, Optional: true, Multiple: true, Max: limits.MaxColumns}},
			Check: checkUserCounterName,
			Help: `Sets every column of row ID of counter NAME, in column order (see "counter
list"); give exactly one VALUE per column. Prints nothing (over RESP: OK).

Example:
  tally -d /var/lib/tally set posts 1234 10 0 7
`,
			Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
				name, vals := in.String("name"), in.Uints("value")
				c, err := tallydb.UserCounter(db.Store(), name)
				if err != nil {
					return nil, err
				}
				if cols := c.Columns(); len(cols) != len(vals) {
					return nil, fmt.Errorf("%w: set %s: got %d values, the counter has %d columns (%s)",
						store.ErrColumnCount, name, len(vals), len(cols), strings.Join(cols, " "))
				}
				return nil, c.Set(in.Uint("id"), vals...)
			},
			Text: counterNoText, Reply: counterOK,
		},
		{
			CLI: "get", RESP: "TALLY.GET", Group: counterGroup, Mode: Read, Fast: true, Open: OpenReadOnly,
			Summary:    "print rows, or single columns",
			Complexity: "O(N) where N is the number of ids",
			Params:     []Param{pCounterName, {Name: "id", Kind: String, Multiple: true, RowKey: true}},
			Check: func(in *Input) error {
				if err := checkUserCounterName(in); err != nil {
					return err
				}
				for _, s := range in.Strings("id") {
					if _, err := parseIDColumn(s); err != nil {
						return err
					}
				}
				return nil
			},
			Help: `Prints one line per ID argument, in argument order; an ID argument is a
row id or ID.COLUMN:
  ID            ->  ID col=v col=v ...   (every column, in column order)
  ID.COLUMN     ->  ID.COLUMN v
An id never written reads as zeros. Over RESP: an array with one element
per argument: the row's values in column order (an array, as TALLY.MGET),
or the column's value.

Example:
  $ tally -d /var/lib/tally get posts 1234 99 1234.likes
  1234 reposts=10 comments=0 likes=7
  99 reposts=0 comments=0 likes=0
  1234.likes 7
`,
			Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
				name, strs := in.String("name"), in.Strings("id")
				r := getResult{args: make([]idColumn, len(strs)), colVals: make([]uint64, len(strs))}
				var rowIDs []uint64
				for i, s := range strs {
					a, err := parseIDColumn(s)
					if err != nil {
						return nil, err
					}
					r.args[i] = a
					if a.column == "" {
						rowIDs = append(rowIDs, a.id)
					}
				}
				c, err := tallydb.UserCounter(db.Store(), name)
				if err != nil {
					return nil, err
				}
				// Everything is read before anything is printed: an error
				// prints no partial output.
				r.cols = c.Columns()
				if r.rows, err = c.MultiGet(rowIDs, nil); err != nil {
					return nil, err
				}
				if len(r.rows) != len(rowIDs)*len(r.cols) {
					return nil, fmt.Errorf("get %s: %d values for %d ids of %d columns", name, len(r.rows), len(rowIDs), len(r.cols))
				}
				for i, a := range r.args {
					if a.column != "" {
						if r.colVals[i], err = c.GetColumn(a.id, a.column); err != nil {
							return nil, err
						}
					}
				}
				return r, nil
			},
			Text: func(w io.Writer, _ *Input, out any) error {
				r := out.(getResult)
				var b strings.Builder
				row := 0
				for i, a := range r.args {
					if a.column != "" {
						fmt.Fprintf(&b, "%d.%s %d\n", a.id, a.column, r.colVals[i])
						continue
					}
					b.WriteString(strconv.FormatUint(a.id, 10))
					for j, name := range r.cols {
						fmt.Fprintf(&b, " %s=%d", name, r.rows[row*len(r.cols)+j])
					}
					b.WriteByte('\n')
					row++
				}
				_, err := io.WriteString(w, b.String())
				return err
			},
			Reply: func(w Replier, _ *Input, out any) {
				r := out.(getResult)
				w.WriteArray(len(r.args))
				row := 0
				for i, a := range r.args {
					if a.column != "" {
						w.WriteUint(r.colVals[i])
						continue
					}
					w.WriteArray(len(r.cols))
					for _, v := range r.rows[row*len(r.cols) : (row+1)*len(r.cols)] {
						w.WriteUint(v)
					}
					row++
				}
			},
		},
		{
			CLI: "delete", RESP: "TALLY.DELETE", Group: counterGroup, Mode: Write, Open: OpenExisting,
			Summary:    "delete rows (every column reads 0 afterwards)",
			Complexity: "O(N) where N is the number of ids",
			Params:     []Param{pCounterName, {Name: "id", Kind: Uint, Multiple: true, RowKey: true}},
			Check:      checkUserCounterName,
			Help: `Deletes the rows ID... of counter NAME, atomically. Prints nothing (over
RESP: OK; DEL counter:id ... is Redis's form, replying a count).

Example:
  tally -d /var/lib/tally delete posts 1234 99
`,
			Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
				name := in.String("name")
				if _, err := tallydb.UserCounter(db.Store(), name); err != nil {
					return nil, err
				}
				b := db.Store().NewBatch()
				defer b.Close()
				for _, id := range in.Uints("id") {
					if err := b.Delete(name, id); err != nil {
						return nil, err
					}
				}
				return nil, b.Commit()
			},
			Text: counterNoText, Reply: counterOK,
		},
	}, businessCommands()...)
}

// counterNoText prints nothing: the command's effect is its output.
func counterNoText(io.Writer, *Input, any) error { return nil }

// counterOK replies OK.
func counterOK(w Replier, _ *Input, _ any) { w.WriteOK() }

// counterTextLines prints a []string one per line.
func counterTextLines(w io.Writer, _ *Input, out any) error {
	lines := out.([]string)
	if len(lines) == 0 {
		return nil
	}
	_, err := io.WriteString(w, strings.Join(lines, "\n")+"\n")
	return err
}

// counterReplyLines replies a []string as an array of bulk strings.
func counterReplyLines(w Replier, _ *Input, out any) {
	lines := out.([]string)
	w.WriteArray(len(lines))
	for _, l := range lines {
		w.WriteBulkString(l)
	}
}
