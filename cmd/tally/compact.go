package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tallydb/tally/internal/quote"
	"github.com/tallydb/tally/store"
)

var cmdCompact = &command{
	name:     "compact",
	synopsis: "age due ranges into the cold tier and merge cold deltas now",
	help: `Usage: tally -d DIR compact [--bytes-per-sec N]

Runs every pending aging job (hot ranges the age policy says are old) and
merges every non-empty cold delta into new blocks, and waits for them. On a
terminal a progress line shows the running job. Then prints "key value"
lines, before and after:
  ranges_hot_before, ranges_cold_before, delta_rows_before
  ranges_hot, ranges_cold, delta_rows
  hot_rows, cold_rows      rows in each tier afterwards
  jobs_finished            aging and merge jobs run
  seconds                  wall time, 3 decimals

Flags:
  --bytes-per-sec N  pace the jobs' writes; the default, 0, is unpaced (the
                     store is offline, nobody waits for a read)

Example:
  $ tally -d /var/lib/tally compact
  ranges_hot_before 12
  ranges_cold_before 40
  delta_rows_before 310
  ranges_hot 4
  ranges_cold 48
  delta_rows 0
  hot_rows 180000
  cold_rows 2400000
  jobs_finished 9
  seconds 1.250
`,
}

var cmdVerify = &command{
	name:     "verify",
	synopsis: "check every schema record, cold block, checkpoint chunk and log record",
	help: `Usage: tally -d DIR verify

Walks everything the store has on disk: schema records, every cold range
(descriptor, each block's checksum, agreement of blocks with the index and
the presence set), the current checkpoint's chunks and the log, and every
key and value of the packages the store holds (timeline, unread, likes);
then each package's invariants: the follow graph in both directions and
its counts, outboxes against posts, inboxes; unread's snapshots against
the follow graph; likes' counts against sets, boards, user lists and
received totals. On success prints
"ok" and "key value" lines, exit 0:
  counters, ranges_hot, ranges_cold, rows, packages (the packages whose
  data the store holds, checked: timeline, unread, likes, or none), and
  with likes
  likes_businesses, likes_interrupted_loads N and a line
  "likes_interrupted_load BUSINESS" for each business whose "likes load" a
  crash interrupted: its item counts lag its likes (not damage: verify
  skips comparing them, and says on stderr that "tally -d DIR jobs wait",
  or any command that opens the store for writing, finishes the load)
On damage prints each problem on stderr as "tally: verify: PROBLEM" (at
most 100) and exits 1. A store too damaged to open fails at open, also
with exit 1.

Example:
  $ tally -d /var/lib/tally verify
  ok
  counters 2
  ranges_hot 4
  ranges_cold 48
  rows 2580000
`,
}

func init() {
	cmdCompact.run = runCompact
	cmdVerify.run = runVerify
}

// totals sums the tiers over every counter.
type totals struct {
	hotRanges, coldRanges        int
	hotRows, coldRows, deltaRows int
}

func sumStats(s store.Stats) totals {
	var t totals
	for _, c := range s.Counters {
		t.hotRanges += c.HotRanges
		t.coldRanges += c.ColdRanges
		t.hotRows += c.HotRows
		t.coldRows += c.ColdRows
		t.deltaRows += c.DeltaRows
	}
	return t
}

func runCompact(e *env, args []string) error {
	fs := e.flags(cmdCompact)
	rate := fs.Int64("bytes-per-sec", 0, "")
	pos, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("takes no arguments, got %s", quote.Input(strings.Join(pos, " ")))
	}
	if *rate < 0 {
		return usagef("bad --bytes-per-sec %d", *rate)
	}
	db, err := e.openCompact(*rate)
	if err != nil {
		return err
	}
	ctx, stop := e.interruptContext()
	defer stop()
	before := db.Stats()
	start := time.Now()
	err = compactWithProgress(ctx, e, db, e.stdout)
	el := time.Since(start)
	if err != nil {
		return closeDB(db, err)
	}
	after := db.Stats()
	b, a := sumStats(before), sumStats(after)
	w := e.stdout
	fmt.Fprintf(w, "ranges_hot_before %d\n", b.hotRanges)
	fmt.Fprintf(w, "ranges_cold_before %d\n", b.coldRanges)
	fmt.Fprintf(w, "delta_rows_before %d\n", b.deltaRows)
	fmt.Fprintf(w, "ranges_hot %d\n", a.hotRanges)
	fmt.Fprintf(w, "ranges_cold %d\n", a.coldRanges)
	fmt.Fprintf(w, "delta_rows %d\n", a.deltaRows)
	fmt.Fprintf(w, "hot_rows %d\n", a.hotRows)
	fmt.Fprintf(w, "cold_rows %d\n", a.coldRows)
	fmt.Fprintf(w, "jobs_finished %d\n", after.JobsFinished-before.JobsFinished)
	fmt.Fprintf(w, "seconds %.3f\n", el.Seconds())
	return closeDB(db, nil)
}

// openCompact opens the store named by -d with compaction unpaced, or
// paced at rate bytes per second.
func (e *env) openCompact(rate int64) (*store.DB, error) {
	if e.served != nil {
		if rate > 0 {
			return nil, fmt.Errorf("%w: --bytes-per-sec (the server's compaction pace applies)", errNotRemote)
		}
		return e.open(false)
	}
	opts, err := e.options()
	if err != nil {
		return nil, err
	}
	opts.CompactionBytesPerSec = -1
	if rate > 0 {
		opts.CompactionBytesPerSec = rate
	}
	if err := mustBeStoreDir(e.dir); err != nil {
		return nil, err
	}
	return store.Open(e.dir, opts)
}

// compactWithProgress runs db.Compact, and on a terminal w redraws a line
// with the running job's progress until it returns.
func compactWithProgress(ctx context.Context, e *env, db *store.DB, w io.Writer) error {
	if !isTerminal(w) {
		return db.Compact(ctx)
	}
	done := make(chan error, 1)
	e.goSafe(func() { done <- db.Compact(ctx) })
	bar := newProgress(w, "compact", "rows", 0)
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			bar.finish()
			return err
		case <-tick.C:
			jobs := db.Jobs()
			if len(jobs) == 0 {
				continue
			}
			j := jobs[0]
			bar.label = j.Kind
			bar.unit = fmt.Sprintf("rows of %s range %d (%s)", j.Counter, j.Range, j.Phase)
			bar.total = max(j.Total, 1)
			bar.update(j.Done)
		}
	}
}

func runVerify(e *env, args []string) error {
	if err := parseNoArgs(e, cmdVerify, args); err != nil {
		return err
	}
	// Read-only: every package whose data exists is open, so its families
	// are declared (Verify decodes their values) and its invariants are
	// checked after the store's.
	db, err := e.openDB(openReadOnly)
	if err != nil {
		return err
	}
	ctx, stop := e.interruptContext()
	defer stop()
	if err := db.Verify(ctx); err != nil {
		if !errors.Is(err, store.ErrCorrupt) {
			return closeTally(db, err)
		}
		n := reportProblems(e.stderr, err)
		return closeTally(db, fmt.Errorf("verify: %d problems found", n))
	}
	s := db.Store().Stats()
	t := sumStats(s)
	fmt.Fprintln(e.stdout, "ok")
	fmt.Fprintf(e.stdout, "counters %d\n", len(s.Counters))
	fmt.Fprintf(e.stdout, "ranges_hot %d\n", t.hotRanges)
	fmt.Fprintf(e.stdout, "ranges_cold %d\n", t.coldRanges)
	fmt.Fprintf(e.stdout, "rows %d\n", t.hotRows+t.coldRows+t.deltaRows)
	var names []string
	for _, p := range db.Packages() {
		names = append(names, p.PackageName())
	}
	if len(names) == 0 {
		names = []string{"none"}
	}
	fmt.Fprintf(e.stdout, "packages %s\n", strings.Join(names, ","))
	if lk := db.Likes(); lk != nil {
		fmt.Fprintf(e.stdout, "likes_businesses %d\n", len(lk.Businesses()))
		// A crash during "likes load" leaves the counts of its business
		// behind its likes; verify (read-only) cannot finish the load, so
		// it names it and the command that does.
		names := lk.InterruptedLoads()
		fmt.Fprintf(e.stdout, "likes_interrupted_loads %d\n", len(names))
		for _, name := range names {
			fmt.Fprintf(e.stdout, "likes_interrupted_load %s\n", name)
			fmt.Fprintf(e.stderr, "tally: verify: the likes load of business %s was interrupted: its counts lag its likes "+
				"until \"tally -d %s jobs wait\" (or any command that opens the store for writing, or the same load again) finishes it\n",
				quote.Input(name), db.Store().Dir())
		}
	}
	return closeTally(db, nil)
}

// reportProblems prints each error joined in err on its own line and
// returns how many it printed.
func reportProblems(w io.Writer, err error) int {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	n := 0
	for _, p := range errs {
		// A package's Check joins its problems: one line each.
		for _, line := range strings.Split(p.Error(), "\n") {
			fmt.Fprintf(w, "tally: verify: %s\n", strings.TrimPrefix(line, "tally: "))
			n++
		}
	}
	return n
}
