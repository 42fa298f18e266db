package main

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/tallydb/tally/store"
)

// Snowflake defaults for --age: Twitter's epoch and 22 sequence bits.
const (
	defaultIDEpochMs   = 1288834974657
	defaultIDTimeShift = 22
)

var cmdCounterAdd = &command{
	name:     "counter add",
	synopsis: "create a counter (creates the store if DIR is new)",
	help: `Usage: tally -d DIR counter add NAME [--range-bits N]
           [--keep-hot | --hot-ranges K | --age DURATION [--id-epoch-ms MS] [--id-time-shift BITS]]

Creates counter NAME, without columns (add them with "column add"). If DIR
does not exist or is empty, a new store is created in it. Prints nothing.

Flags:
  --range-bits N        low id bits per row; a range holds the ids sharing
                        the bits above (8..48, default 32)
  --keep-hot            keep every range in memory (the default; for user ids)
  --hot-ranges K        keep the newest K ranges hot, age the older ones
  --age DURATION        age a range once the time in its ids is older than
                        DURATION (e.g. 4320h); ids are snowflake-like:
  --id-epoch-ms MS      ... milliseconds since this Unix epoch (default
                        1288834974657, Twitter's)
  --id-time-shift BITS  ... shifted left by BITS (default 22)
The policy flags --keep-hot, --hot-ranges and --age are mutually exclusive.

Example:
  tally -d /var/lib/tally counter add posts --range-bits 40 --age 4320h
`,
}

var cmdCounterList = &command{
	name:     "counter list",
	synopsis: "list counters with their policy and columns",
	help: `Usage: tally -d DIR counter list

Prints one line per counter:
  NAME range_bits=N policy=POLICY columns=COL:HINT/MAX,...
POLICY is keep-hot, hot-ranges:K or age:DURATION:EPOCH_MS:TIME_SHIFT;
HINT and MAX are a column's width hint and maximum in bits.

Example:
  $ tally -d /var/lib/tally counter list
  posts range_bits=40 policy=age:4320h0m0s:1288834974657:22 columns=reposts:16/32,likes:16/32
`,
}

var cmdColumnAdd = &command{
	name:     "column add",
	synopsis: "add a column to a counter",
	help: `Usage: tally -d DIR column add NAME COLUMN [--hint BITS] [--max BITS]

Adds COLUMN to counter NAME. Existing rows are not rewritten; the new column
reads 0 until written. Prints nothing.

Flags:
  --hint BITS   width of a value in a memory row: 8, 16 or 32 (default 16);
                larger values are still exact, kept in an overflow table
  --max BITS    values are bounded by 2^BITS-1: 32 or 64 (default 32)

Example:
  tally -d /var/lib/tally column add posts likes --hint 16 --max 32
`,
}

func init() {
	cmdCounterAdd.run = runCounterAdd
	cmdCounterList.run = runCounterList
	cmdColumnAdd.run = runColumnAdd
}

func runCounterAdd(e *env, args []string) error {
	fs := e.flags(cmdCounterAdd)
	rangeBits := fs.Uint("range-bits", 32, "")
	keepHot := fs.Bool("keep-hot", false, "")
	hotRanges := fs.Int("hot-ranges", 0, "")
	age := fs.Duration("age", 0, "")
	epoch := fs.Int64("id-epoch-ms", defaultIDEpochMs, "")
	shift := fs.Uint("id-time-shift", defaultIDTimeShift, "")
	pos, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want exactly one counter NAME, got %d arguments", len(pos))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var policies []string
	for _, p := range []string{"keep-hot", "hot-ranges", "age"} {
		if set[p] {
			policies = append(policies, "--"+p)
		}
	}
	if len(policies) > 1 {
		return usagef("%s are mutually exclusive", strings.Join(policies, " and "))
	}
	if (set["id-epoch-ms"] || set["id-time-shift"]) && !set["age"] {
		return usagef("--id-epoch-ms and --id-time-shift go with --age")
	}
	opts := store.CounterOptions{}
	if opts.RangeBits, err = uint8Flag("range-bits", *rangeBits, false); err != nil {
		return err
	}
	switch {
	case set["hot-ranges"]:
		opts.Age = store.AgePolicy{Kind: store.KeepNewest, HotRanges: *hotRanges}
	case set["age"]:
		s, err := uint8Flag("id-time-shift", *shift, true)
		if err != nil {
			return err
		}
		opts.Age = store.AgePolicy{Kind: store.AgeByTime, MaxAge: *age, IDEpochMs: *epoch, IDTimeShift: s}
	default:
		_ = keepHot // KeepHot is the zero policy
	}
	db, err := e.open(true)
	if err != nil {
		return err
	}
	return closeDB(db, db.CreateCounter(pos[0], opts))
}

func runCounterList(e *env, args []string) error {
	fs := e.flags(cmdCounterList)
	pos, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("takes no arguments, got %q", strings.Join(pos, " "))
	}
	db, err := e.openRead()
	if err != nil {
		return err
	}
	for _, ci := range db.Counters() {
		fmt.Fprintln(e.stdout, counterLine(ci))
	}
	return closeDB(db, nil)
}

// counterLine formats one counter for "counter list".
func counterLine(ci store.CounterInfo) string {
	cols := make([]string, len(ci.Columns))
	for i, c := range ci.Columns {
		cols[i] = fmt.Sprintf("%s:%d/%d", c.Name, c.HintBits, c.MaxBits)
	}
	return fmt.Sprintf("%s range_bits=%d policy=%s columns=%s",
		ci.Name, ci.RangeBits, policyString(ci.Age), strings.Join(cols, ","))
}

func policyString(a store.AgePolicy) string {
	switch a.Kind {
	case store.KeepHot:
		return "keep-hot"
	case store.KeepNewest:
		return fmt.Sprintf("hot-ranges:%d", a.HotRanges)
	case store.AgeByTime:
		return fmt.Sprintf("age:%v:%d:%d", a.MaxAge.Round(time.Millisecond), a.IDEpochMs, a.IDTimeShift)
	}
	return a.Kind.String()
}

func runColumnAdd(e *env, args []string) error {
	fs := e.flags(cmdColumnAdd)
	hint := fs.Uint("hint", 16, "")
	max := fs.Uint("max", 32, "")
	pos, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("want counter NAME and COLUMN, got %d arguments", len(pos))
	}
	var opts store.ColumnOptions
	if opts.HintBits, err = uint8Flag("hint", *hint, false); err != nil {
		return err
	}
	if opts.MaxBits, err = uint8Flag("max", *max, false); err != nil {
		return err
	}
	db, err := e.open(false)
	if err != nil {
		return err
	}
	return closeDB(db, db.AddColumn(pos[0], pos[1], opts))
}
