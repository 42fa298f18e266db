package main

import (
	"fmt"

	"github.com/tallydb/tally/internal/quote"
	"github.com/tallydb/tally/store"
)

var cmdJobs = &command{
	name:     "jobs",
	synopsis: "list queued background jobs (fan-outs, backfills) with done/total",
	help: `Usage: tally -d DIR jobs

Lists the store's queued jobs, oldest first, one line each:
  ID KIND pending|running DONE/TOTAL [attempts=N error=MSG] WHAT
then a last line "jobs N" (pending and running). DONE/TOTAL counts chunks
(TOTAL is 0 until the job knows it); WHAT says what the job does ("fan-out
of post 2001 by user 21", "backfill of user 21's posts into user 1's home
(follow)", "prune of day boards older than 7 days"). Jobs are durable:
they survive restarts and resume at their first unfinished chunk; "jobs
wait" runs them.

Example:
  $ tally -d /var/lib/tally jobs
  17 tl-fanout pending 3/10 fan-out of post 2001 by user 21
  jobs 1
`,
}

var cmdJobsWait = &command{
	name:     "jobs wait",
	synopsis: "run every queued job to completion, with a progress bar",
	help: `Usage: tally -d DIR jobs wait

Runs every queued job to completion in this process (a progress bar on a
terminal counts chunks), then prints "finished N" and exits 0. A job that
fails, or a job of a kind no package of this build handles, stops the wait:
the error names it and the exit status is 1; the job stays queued and
resumes at its first unfinished chunk next time. Ctrl-C stops between
chunks, losing nothing.

Example:
  $ tally -d /var/lib/tally jobs wait
  finished 3
`,
}

func init() {
	cmdJobs.run = runJobs
	cmdJobsWait.run = runJobsWait
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

func runJobs(e *env, args []string) error {
	if err := parseNoArgs(e, cmdJobs, args); err != nil {
		return err
	}
	db, err := e.openDB(openReadOnly)
	if err != nil {
		return err
	}
	jobs := db.Store().QueuedJobs()
	for _, j := range jobs {
		fmt.Fprintln(e.stdout, formatJob(j, db.DescribeJob(j)))
	}
	fmt.Fprintf(e.stdout, "jobs %d\n", len(jobs))
	return closeTally(db, nil)
}

func runJobsWait(e *env, args []string) error {
	if err := parseNoArgs(e, cmdJobsWait, args); err != nil {
		return err
	}
	// Every package whose data exists is open, so its job handlers
	// (fan-outs, backfills, prunes) are registered; nothing is created.
	tdb, err := e.openDB(openExisting)
	if err != nil {
		return err
	}
	db := tdb.Store()
	return closeTally(tdb, func() error {
		ctx, stop := e.interruptContext()
		defer stop()
		start := db.QueuedJobs()
		before := db.Stats().Queue.Finished
		totals := map[store.JobID]int64{}
		var total int64
		for _, j := range start {
			t := max(j.Total, 1)
			totals[j.ID] = t
			total += t
		}
		bar := newProgress(e.stdout, "jobs", "chunks", total)
		err = db.RunJobs(ctx, func(now []store.JobInfo) {
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
			bar.update(done)
		})
		bar.finish()
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "finished %d\n", db.Stats().Queue.Finished-before)
		return nil
	}())
}
