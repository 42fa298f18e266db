package main

import (
	"errors"
	"flag"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"strings"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/internal/limits"
	"github.com/tallydb/tally/internal/quote"
	"github.com/tallydb/tally/server"
	"github.com/tallydb/tally/store"
)

var cmdCounterAdd = &command{
	name:     "counter add",
	synopsis: "create a counter (creates the store if DIR is new)",
	help: fmt.Sprintf(`Usage: tally -d DIR counter add NAME [--range-bits N]
           [--keep-hot | --hot-ranges K | --age DURATION [--id-epoch-ms MS] [--id-time-shift BITS]]

Creates counter NAME, without columns (add them with "column add"). If DIR
does not exist or is empty, a new store is created in it. Prints nothing.
NAME is 1 to %[1]d letters, digits, '_' or '-', not starting with '-'.
Everything is checked before the store is opened: a refused counter
creates no store and changes nothing.

Flags:
  --range-bits N        low id bits per row; a range holds the ids sharing
                        the bits above (%[2]d..%[3]d); fixed once given.
                        Without it ranges start at 32 bits and widen (up to
                        64) when the ids leave few rows per range
  --keep-hot            keep every range in memory (the default; for user ids)
  --hot-ranges K        keep the newest K ranges hot, age the older ones
  --age DURATION        age a range once the time in its ids is older than
                        DURATION (e.g. 4320h), a whole number of
                        milliseconds; ids are snowflake-like:
  --id-epoch-ms MS      ... milliseconds since this Unix epoch
                        (0..2^%[4]d, default 1288834974657, Twitter's)
  --id-time-shift BITS  ... shifted left by BITS (0..%[5]d, default 22)
The policy flags --keep-hot, --hot-ranges and --age are mutually exclusive.

Example:
  tally -d /var/lib/tally counter add posts --range-bits 40 --age 4320h
`, limits.MaxNameLen, limits.MinRangeBits, limits.MaxRangeBits, bits.TrailingZeros64(limits.MaxIDTimeMs), limits.MaxIDTimeShift),
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
	help: fmt.Sprintf(`Usage: tally -d DIR column add NAME COLUMN [--hint BITS] [--max BITS]

Adds COLUMN to counter NAME. Existing rows are not rewritten; the new column
reads 0 until written. Prints nothing. A counter has at most %[1]d columns;
COLUMN is 1 to %[2]d letters, digits, '_' or '-', not starting with '-'.

Flags:
  --hint BITS   width of a value in a memory row: 8, 16 or 32 (default 16);
                larger values are still exact, kept in an overflow table
  --max BITS    values are bounded by 2^BITS-1: 32 or 64 (default 32)

Example:
  tally -d /var/lib/tally column add posts likes --hint 16 --max 32
`, limits.MaxColumns, limits.MaxNameLen),
}

func init() {
	cmdCounterAdd.run = runCounterAdd
	cmdCounterList.run = runCounterList
	cmdColumnAdd.run = runColumnAdd
}

func runCounterAdd(e *env, args []string) error {
	fs := e.flags(cmdCounterAdd)
	shape := counterShapeFlags(fs)
	pos, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want exactly one counter NAME, got %d arguments", len(pos))
	}
	opts, err := shape()
	if err != nil {
		return err
	}
	// Check everything before the store is opened: Open creates the store
	// in a new directory, and a refused counter must leave none behind.
	name := pos[0]
	if err := store.ValidateName(name); err != nil {
		return err
	}
	if err := tallydb.CheckCounterName(name); err != nil {
		return err
	}
	if err := opts.Validate(); err != nil {
		return err
	}
	if _, err := e.options(); err != nil {
		return err
	}
	fresh, err := newStoreDir(e.dir)
	if err != nil {
		return err
	}
	db, err := e.open(true)
	if err == nil {
		err = closeDB(db, db.CreateCounter(name, opts))
	}
	if err != nil && fresh != nil {
		// Only what could not be checked beforehand gets here (an I/O
		// error): leave no half-made store behind.
		if rerr := fresh.remove(); rerr != nil {
			err = fmt.Errorf("%w (and %v)", err, rerr)
		}
	}
	return err
}

// freshDir is a store directory that did not exist, or was empty, before
// this command: everything in it is the command's own.
type freshDir struct {
	dir     string
	existed bool // the directory existed (empty); only its entries go
}

// newStoreDir returns the freshDir of dir if dir is missing or empty, nil
// if it holds something (a store, or files Open will refuse).
func newStoreDir(dir string) (*freshDir, error) {
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return &freshDir{dir: dir}, nil
	case err != nil:
		return nil, nil // not a readable directory: Open reports why
	case len(ents) == 0:
		return &freshDir{dir: dir, existed: true}, nil
	}
	return nil, nil
}

// remove deletes what the command created in f.dir: the directory itself
// if it did not exist before, else its entries.
func (f *freshDir) remove() error {
	if _, err := os.Lstat(f.dir); errors.Is(err, os.ErrNotExist) {
		return nil // never created
	}
	if !f.existed {
		if err := os.RemoveAll(f.dir); err != nil {
			return fmt.Errorf("removing the new store %s failed: %w", f.dir, err)
		}
		return nil
	}
	ents, err := os.ReadDir(f.dir)
	if err != nil {
		return fmt.Errorf("cleaning the new store %s failed: %w", f.dir, err)
	}
	for _, ent := range ents {
		if err := os.RemoveAll(filepath.Join(f.dir, ent.Name())); err != nil {
			return fmt.Errorf("cleaning the new store %s failed: %w", f.dir, err)
		}
	}
	return nil
}

func runCounterList(e *env, args []string) error {
	fs := e.flags(cmdCounterList)
	pos, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("takes no arguments, got %s", quote.Input(strings.Join(pos, " ")))
	}
	db, err := e.openRead()
	if err != nil {
		return err
	}
	for _, ci := range tallydb.UserCounters(db) {
		fmt.Fprintln(e.stdout, counterLine(ci))
	}
	return closeDB(db, nil)
}

// counterLine formats one counter for "counter list": the format of
// TALLY.COUNTER LIST, from package server, so the two cannot drift.
func counterLine(ci store.CounterInfo) string { return server.CounterLine(ci) }

// counterShapeFlags defines the flags that shape a counter (counter add,
// business add): --range-bits (unset: 0, the store's or the business's
// default) and the age policy,
// --keep-hot | --hot-ranges K | --age D [--id-epoch-ms MS]
// [--id-time-shift BITS]. The returned function, called after parsing,
// checks them together and returns the options (a zero Age when no policy
// flag was given: the caller's default).
func counterShapeFlags(fs *flag.FlagSet) func() (store.CounterOptions, error) {
	rangeBits := fs.Uint("range-bits", 0, "")
	fs.Bool("keep-hot", false, "")
	hotRanges := fs.Int("hot-ranges", 0, "")
	age := fs.Duration("age", 0, "")
	epoch := fs.Int64("id-epoch-ms", store.DefaultIDEpochMs, "")
	shift := fs.Uint("id-time-shift", store.DefaultIDTimeShift, "")
	return func() (store.CounterOptions, error) {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		var policies []string
		for _, p := range []string{"keep-hot", "hot-ranges", "age"} {
			if set[p] {
				policies = append(policies, "--"+p)
			}
		}
		if len(policies) > 1 {
			return store.CounterOptions{}, usagef("%s are mutually exclusive", strings.Join(policies, " and "))
		}
		if (set["id-epoch-ms"] || set["id-time-shift"]) && !set["age"] {
			return store.CounterOptions{}, usagef("--id-epoch-ms and --id-time-shift go with --age")
		}
		opts := store.CounterOptions{}
		if set["range-bits"] {
			var err error
			if opts.RangeBits, err = uint8Flag("range-bits", *rangeBits, false,
				fmt.Sprintf("%d..%d", limits.MinRangeBits, limits.MaxRangeBits)); err != nil {
				return store.CounterOptions{}, err
			}
		}
		switch {
		case set["keep-hot"]:
			opts.Age = store.AgePolicy{Kind: store.KeepHot}
		case set["hot-ranges"]:
			opts.Age = store.AgePolicy{Kind: store.KeepNewest, HotRanges: *hotRanges}
		case set["age"]:
			s, err := uint8Flag("id-time-shift", *shift, true, fmt.Sprintf("0..%d", limits.MaxIDTimeShift))
			if err != nil {
				return store.CounterOptions{}, err
			}
			opts.Age = store.AgePolicy{Kind: store.AgeByTime, MaxAge: *age, IDEpochMs: *epoch, IDTimeShift: s}
		}
		return opts, nil
	}
}

// columnFlags defines --hint and --max (a column's width hint and maximum
// in bits) on fs, for column add and unread kind add; the function it
// returns reads them, after parsing, as store.ColumnOptions.
func columnFlags(fs *flag.FlagSet) func() (store.ColumnOptions, error) {
	hint := fs.Uint("hint", 16, "")
	max := fs.Uint("max", 32, "")
	return func() (opts store.ColumnOptions, err error) {
		if opts.HintBits, err = uint8Flag("hint", *hint, false, "8, 16 or 32"); err != nil {
			return opts, err
		}
		opts.MaxBits, err = uint8Flag("max", *max, false, "32 or 64")
		return opts, err
	}
}

func runColumnAdd(e *env, args []string) error {
	fs := e.flags(cmdColumnAdd)
	colOpts := columnFlags(fs)
	pos, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("want counter NAME and COLUMN, got %d arguments", len(pos))
	}
	opts, err := colOpts()
	if err != nil {
		return err
	}
	if err := store.ValidateName(pos[1]); err != nil {
		return err
	}
	if err := opts.Validate(); err != nil {
		return err
	}
	db, err := e.open(false)
	if err != nil {
		return err
	}
	if _, err := tallydb.UserCounter(db, pos[0]); err != nil {
		return closeDB(db, err)
	}
	return closeDB(db, db.AddColumn(pos[0], pos[1], opts))
}
