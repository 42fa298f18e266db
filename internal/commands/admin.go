package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/internal/quote"
	"github.com/tallydb/tally/store"
)

// Maintenance commands: the job queue, compaction, verify, checkpoints,
// stats and what recovery did. They take no positionals. The reports
// (stats, replay, jobs, compact) are "key value" lines: the CLI prints
// them, and over RESP they are one bulk string of the same lines, as
// INFO's. Served, they report the server's store: its log, its jobs, the
// recovery of its own Open.
//
// The long ones (compact, jobs wait, verify) run under Run's context: the
// CLI's ends at an interrupt, the server's at its shutdown. On a terminal
// the CLI draws their progress (Input.Progress).

const adminGroup = "server"

// lines is a report: the CLI prints it as it is, RESP replies it as one
// bulk string.
type lines string

func textLines(w io.Writer, _ *Input, out any) error {
	_, err := io.WriteString(w, string(out.(lines)))
	return err
}

func replyLines(w Replier, _ *Input, out any) { w.WriteBulkString(string(out.(lines))) }

// textUint prints "KEY N"; replyUint replies N.
func textUint(key string) func(io.Writer, *Input, any) error {
	return func(w io.Writer, _ *Input, out any) error {
		_, err := fmt.Fprintf(w, "%s %d\n", key, out.(uint64))
		return err
	}
}

// adminCommands returns the maintenance commands (statsCommand is in
// stats.go).
func adminCommands() []*Command {
	return []*Command{
		jobsCommand(), jobsWaitCommand(), compactCommand(), verifyCommand(),
		replayCommand(), statsCommand(), checkpointCommand(),
	}
}

func jobsCommand() *Command {
	return &Command{
		CLI: "jobs", RESP: "TALLY.JOBS LIST", Group: adminGroup, Mode: Read, Local: true, Open: OpenReadOnly,
		Summary:    "list queued background jobs (fan-outs, backfills) with done/total",
		Complexity: "O(N) where N is the number of queued jobs",
		Help: `Lists the store's queued jobs, oldest first, one line each:
  ID KIND pending|running DONE/TOTAL [attempts=N error=MSG] WHAT
then a last line "jobs N" (pending and running). DONE/TOTAL counts chunks
(TOTAL is 0 until the job knows it); WHAT says what the job does ("fan-out
of post 2001 by user 21", "backfill of user 21's posts into user 1's home
(follow)", "prune of day boards older than 7 days"). Jobs are durable:
they survive restarts and resume at their first unfinished chunk; "jobs
wait" runs them. Over RESP the reply is the same lines, one bulk string.

Example:
  $ tally -d /var/lib/tally jobs
  17 tl-fanout pending 3/10 fan-out of post 2001 by user 21
  jobs 1
`,
		Run: func(_ context.Context, db *tallydb.DB, _ *Input) (any, error) {
			var b strings.Builder
			jobs := db.Store().QueuedJobs()
			for _, j := range jobs {
				b.WriteString(formatJob(j, db.DescribeJob(j)))
				b.WriteByte('\n')
			}
			fmt.Fprintf(&b, "jobs %d\n", len(jobs))
			return lines(b.String()), nil
		},
		Text: textLines, Reply: replyLines,
	}
}

// formatJob is one line of "tally jobs": ID KIND STATE DONE/TOTAL
// [attempts=N error=E] WHAT, WHAT being what the job does in the user's
// words (its package's DescribeJob).
func formatJob(j store.JobInfo, what string) string {
	state := "pending"
	if j.Running {
		state = "running"
	}
	s := fmt.Sprintf("%d %s %s %d/%d", j.ID, j.Kind, state, j.Done, j.Total)
	if j.Attempts > 0 {
		s += fmt.Sprintf(" attempts=%d error=%s", j.Attempts, quote.Input(j.LastErr))
	}
	return s + " " + what
}

func jobsWaitCommand() *Command {
	return &Command{
		// Every package whose data exists is open, so its job handlers
		// (fan-outs, backfills, prunes) are registered; nothing is created.
		CLI: "jobs wait", RESP: "TALLY.JOBS WAIT", Group: adminGroup, Mode: Admin, Local: true, Open: OpenExisting,
		Summary:    "run every queued job to completion, with a progress bar",
		Complexity: "O(N) where N is the work of the queued jobs",
		Help: `Runs every queued job to completion in this process (a progress bar on a
terminal counts chunks), then prints "finished N" and exits 0. A job that
fails, or a job of a kind no package of this build handles, stops the wait:
the error names it and the exit status is 1; the job stays queued and
resumes at its first unfinished chunk next time. Ctrl-C stops between
chunks, losing nothing. Over RESP the reply is N, an integer; the wait
ends with the server's shutdown.

Example:
  $ tally -d /var/lib/tally jobs wait
  finished 3
`,
		Run: func(ctx context.Context, db *tallydb.DB, in *Input) (any, error) {
			return waitJobs(ctx, db.Store(), in.Progress())
		},
		Text: textUint("finished"), Reply: replyUint,
	}
}

// waitJobs runs every queued job and returns how many finished, drawing
// the chunks done on p (if not nil).
func waitJobs(ctx context.Context, db *store.DB, p Progress) (uint64, error) {
	before := db.Stats().Queue.Finished
	totals := map[store.JobID]int64{}
	var total int64
	for _, j := range db.QueuedJobs() {
		t := max(j.Total, 1)
		totals[j.ID] = t
		total += t
	}
	err := db.RunJobs(ctx, func(now []store.JobInfo) {
		if p == nil {
			return
		}
		left := map[store.JobID]int64{}
		for _, j := range now {
			left[j.ID] = j.Done
		}
		var done int64
		for id, t := range totals {
			if d, ok := left[id]; ok {
				done += min(d, t)
			} else {
				done += t // finished
			}
		}
		p.Update("jobs", "chunks", done, total)
	})
	if p != nil {
		p.Finish()
	}
	if err != nil {
		return 0, err
	}
	return uint64(db.Stats().Queue.Finished - before), nil
}

// Tiers is the ranges and rows of every counter, summed by tier.
type Tiers struct {
	HotRanges, ColdRanges        int
	HotRows, ColdRows, DeltaRows int
}

// SumTiers sums the tiers over every counter of s (stats, compact, the
// demo's report).
func SumTiers(s store.Stats) Tiers {
	var t Tiers
	for _, c := range s.Counters {
		t.HotRanges += c.HotRanges
		t.ColdRanges += c.ColdRanges
		t.HotRows += c.HotRows
		t.ColdRows += c.ColdRows
		t.DeltaRows += c.DeltaRows
	}
	return t
}

func compactCommand() *Command {
	return &Command{
		CLI: "compact", RESP: "TALLY.COMPACT", Group: adminGroup, Mode: Admin, Local: true, Open: OpenExisting,
		Summary:    "age due ranges into the cold tier and merge cold deltas now",
		Complexity: "O(N) where N is the rows of the ranges aged or merged",
		Params: []Param{{Name: "bytes-per-sec", Kind: Int, Option: true,
			Help: "pace the jobs' writes (CLI only); the default, 0, is unpaced"},
			{Name: "disk", Kind: Flag, Option: true,
				Help: "then flush and compact the whole LSM (after a bulk load: reads stop walking its unmerged files)"}},
		Help: `Runs every pending aging job (hot ranges the age policy says are old) and
merges every non-empty cold delta into new blocks, and waits for them. On a
terminal a progress line shows the running job. Then prints "key value"
lines, before and after:
  ranges_hot_before, ranges_cold_before, delta_rows_before
  ranges_hot, ranges_cold, delta_rows
  hot_rows, cold_rows      rows in each tier afterwards
  jobs_finished            aging and merge jobs run
  seconds                  wall time, 3 decimals
With --disk (DISK over RESP) it then flushes Pebble's memtables and
compacts its whole key space into the last level, as RocksDB's CompactRange
over everything or kvrocks's COMPACT does, and adds
  table_bytes_before, table_bytes   Pebble's data files before and after
After a bulk load (tally load, tally likes load) the loaded keys sit in
files that every read walks until background compaction merges them; a
disk compaction settles them at once. It rewrites every file: it is
maintenance, run when the disk has room for a second copy.
The CLI opens the store unpaced (it is offline, nobody waits for a read)
unless --bytes-per-sec N paces the jobs' writes. A running server's store
keeps its own pace: there, and over RESP, --bytes-per-sec (BYTESPERSEC) is
refused. Over RESP the reply is the same lines, one bulk string.

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
		Check: func(in *Input) error {
			if !in.Has("bytes-per-sec") {
				return nil
			}
			if !in.CLI() {
				return Usagef("BYTESPERSEC is not possible over RESP (the server's compaction pace applies)")
			}
			if n := in.Int("bytes-per-sec"); n < 0 {
				return Usagef("bad --bytes-per-sec %d: want 0 (unpaced) or more", n)
			}
			return nil
		},
		StoreOptions: func(in *Input, o *store.Options) error {
			rate := in.Int("bytes-per-sec")
			if o == nil {
				if rate > 0 {
					return errors.New("--bytes-per-sec (the server's compaction pace applies)")
				}
				return nil
			}
			o.CompactionBytesPerSec = -1
			if rate > 0 {
				o.CompactionBytesPerSec = rate
			}
			return nil
		},
		Run: func(ctx context.Context, db *tallydb.DB, in *Input) (any, error) {
			s := db.Store()
			before := s.Stats()
			start := time.Now()
			err := compact(ctx, s, in.Progress())
			if err == nil && in.Has("disk") {
				err = s.CompactDisk(ctx)
			}
			el := time.Since(start)
			if err != nil {
				return nil, err
			}
			after := s.Stats()
			b, a := SumTiers(before), SumTiers(after)
			var w strings.Builder
			fmt.Fprintf(&w, "ranges_hot_before %d\n", b.HotRanges)
			fmt.Fprintf(&w, "ranges_cold_before %d\n", b.ColdRanges)
			fmt.Fprintf(&w, "delta_rows_before %d\n", b.DeltaRows)
			fmt.Fprintf(&w, "ranges_hot %d\n", a.HotRanges)
			fmt.Fprintf(&w, "ranges_cold %d\n", a.ColdRanges)
			fmt.Fprintf(&w, "delta_rows %d\n", a.DeltaRows)
			fmt.Fprintf(&w, "hot_rows %d\n", a.HotRows)
			fmt.Fprintf(&w, "cold_rows %d\n", a.ColdRows)
			fmt.Fprintf(&w, "jobs_finished %d\n", after.JobsFinished-before.JobsFinished)
			fmt.Fprintf(&w, "seconds %.3f\n", el.Seconds())
			if in.Has("disk") {
				fmt.Fprintf(&w, "table_bytes_before %d\n", before.TableBytes)
				fmt.Fprintf(&w, "table_bytes %d\n", after.TableBytes)
			}
			return lines(w.String()), nil
		},
		Text: textLines, Reply: replyLines,
	}
}

// compactProgressEvery is how often compact reports the running job.
const compactProgressEvery = 100 * time.Millisecond

// compact runs db.Compact, reporting the running job to p (if not nil)
// until it returns.
func compact(ctx context.Context, db *store.DB, p Progress) error {
	if p == nil {
		return db.Compact(ctx)
	}
	// NB: Compact runs on this goroutine, so a panic in it is reported as
	// the command's; the poller only reads the job list.
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(compactProgressEvery)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				jobs := db.Jobs()
				if len(jobs) == 0 {
					continue
				}
				j := jobs[0]
				p.Update(j.Kind, fmt.Sprintf("rows of %s range %d (%s)", j.Counter, j.Range, j.Phase), j.Done, max(j.Total, 1))
			}
		}
	}()
	err := db.Compact(ctx)
	close(stop)
	<-stopped
	p.Finish()
	return err
}

// verified is what a verify that found no damage reports.
type verified struct {
	dir                             string
	counters, hotRanges, coldRanges int
	rows                            int
	packages                        []string
	likes                           bool
	businesses                      int
	interrupted                     []string // businesses whose likes load a crash interrupted
}

func verifyCommand() *Command {
	return &Command{
		// Read-only: every package whose data exists is open, so its
		// families are declared (Verify decodes their values) and its
		// invariants are checked after the store's.
		CLI: "verify", RESP: "TALLY.VERIFY", Group: adminGroup, Mode: Read, Local: true, Open: OpenReadOnly,
		Summary:    "check every schema record, cold block, checkpoint chunk and log record",
		Complexity: "O(N) where N is the size of the store",
		Help: `Walks everything the store has on disk: schema records, every cold range
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
with exit 1. Over RESP the reply is OK, or an error reply with the same
problems (the first names the damaged key or file).

Example:
  $ tally -d /var/lib/tally verify
  ok
  counters 2
  ranges_hot 4
  ranges_cold 48
  rows 2580000
`,
		Run: func(ctx context.Context, db *tallydb.DB, _ *Input) (any, error) {
			if err := db.Verify(ctx); err != nil {
				if errors.Is(err, store.ErrCorrupt) {
					return nil, newDamageError(err)
				}
				return nil, err
			}
			s := db.Store().Stats()
			t := SumTiers(s)
			v := verified{dir: db.Store().Dir(), counters: len(s.Counters), hotRanges: t.HotRanges,
				coldRanges: t.ColdRanges, rows: t.HotRows + t.ColdRows + t.DeltaRows}
			for _, p := range db.Packages() {
				v.packages = append(v.packages, p.PackageName())
			}
			if lk := db.Likes(); lk != nil {
				v.likes = true
				v.businesses = len(lk.Businesses())
				v.interrupted = lk.InterruptedLoads()
			}
			return v, nil
		},
		Text: textVerified,
		Reply: func(w Replier, _ *Input, _ any) {
			w.WriteOK()
		},
	}
}

func textVerified(w io.Writer, in *Input, out any) error {
	v := out.(verified)
	var b strings.Builder
	b.WriteString("ok\n")
	fmt.Fprintf(&b, "counters %d\n", v.counters)
	fmt.Fprintf(&b, "ranges_hot %d\n", v.hotRanges)
	fmt.Fprintf(&b, "ranges_cold %d\n", v.coldRanges)
	fmt.Fprintf(&b, "rows %d\n", v.rows)
	names := v.packages
	if len(names) == 0 {
		names = []string{"none"}
	}
	fmt.Fprintf(&b, "packages %s\n", strings.Join(names, ","))
	if v.likes {
		fmt.Fprintf(&b, "likes_businesses %d\n", v.businesses)
		// A crash during "likes load" leaves the counts of its business
		// behind its likes; verify (read-only) cannot finish the load, so
		// it names it and the command that does.
		fmt.Fprintf(&b, "likes_interrupted_loads %d\n", len(v.interrupted))
		for _, name := range v.interrupted {
			fmt.Fprintf(&b, "likes_interrupted_load %s\n", name)
			fmt.Fprintf(in.Stderr(), "tally: verify: the likes load of business %s was interrupted: its counts lag its likes "+
				"until \"tally -d %s jobs wait\" (or any command that opens the store for writing, or the same load again) finishes it\n",
				quote.Input(name), v.dir)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// damageError is a verify that found damage: its message is the CLI's
// report, one line per problem ("tally: verify: PROBLEM") and a last line
// counting them; over RESP the lines are one error reply (line breaks
// become spaces), the first naming the damaged key or file. It matches
// store.ErrCorrupt.
type damageError struct {
	err      error
	problems []string
}

// newDamageError lists the problems joined in err, one per line of each
// (a package's Check joins its problems: one line each).
func newDamageError(err error) *damageError {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	d := &damageError{err: err}
	for _, p := range errs {
		for _, line := range strings.Split(p.Error(), "\n") {
			d.problems = append(d.problems, strings.TrimPrefix(line, "tally: "))
		}
	}
	return d
}

func (d *damageError) Error() string {
	var b strings.Builder
	for _, p := range d.problems {
		fmt.Fprintf(&b, "tally: verify: %s\n", p)
	}
	fmt.Fprintf(&b, "tally: verify: %d problems found", len(d.problems))
	return b.String()
}

func (d *damageError) Unwrap() error { return d.err }

func replayCommand() *Command {
	return &Command{
		CLI: "replay", RESP: "TALLY.REPLAY", Group: adminGroup, Mode: Read, Local: true, Open: OpenReadOnly,
		Summary:    "open the store (recovering it) and report what recovery did",
		Complexity: "O(N) where N is the number of counters (the figures are the store's stats)",
		Help: `Opens the store read-only, which loads the newest checkpoint and replays the
log after it in memory, reports what that took, and closes it without
writing anything (run "checkpoint" to fold the log into a checkpoint; a
writable Open also cleans up after interrupted jobs, and "verify" reports
data nothing accounts for). Against a running server (and over RESP) it
reports what the server's own Open recovered, at its start.
Prints "key value" lines:
  checkpoint_seq    log sequence the loaded checkpoint includes
  chunks_loaded     checkpoint chunks read
  rows_loaded       rows loaded from them
  records_replayed  log records replayed after the checkpoint
  last_seq          sequence of the last log record
  duration          wall time of Open (a Go duration, e.g. 12.5ms)
Over RESP the reply is the same lines, one bulk string.

Example:
  $ tally -d /var/lib/tally replay
  checkpoint_seq 1200
  chunks_loaded 4
  rows_loaded 180000
  records_replayed 35
  last_seq 1235
  duration 41.2ms
`,
		Run: func(_ context.Context, db *tallydb.DB, _ *Input) (any, error) {
			r := db.Store().Stats().Recovery
			var w strings.Builder
			fmt.Fprintf(&w, "checkpoint_seq %d\n", r.CheckpointSeq)
			fmt.Fprintf(&w, "chunks_loaded %d\n", r.ChunksLoaded)
			fmt.Fprintf(&w, "rows_loaded %d\n", r.RowsLoaded)
			fmt.Fprintf(&w, "records_replayed %d\n", r.RecordsReplayed)
			fmt.Fprintf(&w, "last_seq %d\n", r.LastSeq)
			fmt.Fprintf(&w, "duration %v\n", r.Duration)
			return lines(w.String()), nil
		},
		Text: textLines, Reply: replyLines,
	}
}

func checkpointCommand() *Command {
	return &Command{
		CLI: "checkpoint", RESP: "TALLY.CHECKPOINT", Group: adminGroup, Mode: Admin, Local: true, Open: OpenExisting,
		Summary:    "write a checkpoint now",
		Complexity: "O(N) where N is the rows of the hot tables",
		Help: `Writes every hot table to disk so the log before it can be dropped, then
prints the sequence the checkpoint includes:
  checkpoint_seq N
Over RESP the reply is N, an integer.

Example:
  $ tally -d /var/lib/tally checkpoint
  checkpoint_seq 1235
`,
		Run: func(_ context.Context, db *tallydb.DB, _ *Input) (any, error) {
			if err := db.Store().Checkpoint(); err != nil {
				return nil, err
			}
			return db.Store().Stats().CheckpointSeq, nil
		},
		Text: textUint("checkpoint_seq"), Reply: replyUint,
	}
}
