package compaction

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Progress describes one running job.
type Progress struct {
	Kind    string // "seal" or "merge", or a queued job's kind
	Counter string // the counter, or what a queued job works on ("job 12 key ...")
	Range   uint64 // the range (seal, merge)
	Phase   string
	Done    int64 // rows (chunks of a queued job) processed
	Total   int64 // rows (chunks) to process, 0 if not known
	Started time.Time
}

// Tracker lists running jobs. It is safe for concurrent use.
type Tracker struct {
	mu   sync.Mutex
	jobs map[*Job]struct{}
	done atomic.Int64 // jobs finished since creation
}

// Job is one running job's progress handle.
type Job struct {
	t       *Tracker
	p       Progress
	done    atomic.Int64
	phaseMu sync.Mutex
}

// Start registers a job.
func (t *Tracker) Start(kind, counter string, rangeID uint64, total int64) *Job {
	j := &Job{t: t, p: Progress{Kind: kind, Counter: counter, Range: rangeID, Total: total, Started: time.Now(), Phase: "start"}}
	t.mu.Lock()
	if t.jobs == nil {
		t.jobs = map[*Job]struct{}{}
	}
	t.jobs[j] = struct{}{}
	t.mu.Unlock()
	return j
}

// Add records n more rows processed.
func (j *Job) Add(n int64) { j.done.Add(n) }

// SetTotal updates the amount of work the job has in all.
func (j *Job) SetTotal(n int64) {
	j.phaseMu.Lock()
	j.p.Total = n
	j.phaseMu.Unlock()
}

// SetPhase names the job's current step.
func (j *Job) SetPhase(p string) {
	j.phaseMu.Lock()
	j.p.Phase = p
	j.phaseMu.Unlock()
}

// Finish unregisters the job.
func (j *Job) Finish() {
	j.t.mu.Lock()
	delete(j.t.jobs, j)
	j.t.mu.Unlock()
	j.t.done.Add(1)
}

// Running returns the running jobs, oldest first.
func (t *Tracker) Running() []Progress {
	t.mu.Lock()
	out := make([]Progress, 0, len(t.jobs))
	for j := range t.jobs {
		j.phaseMu.Lock()
		p := j.p
		j.phaseMu.Unlock()
		p.Done = j.done.Load()
		out = append(out, p)
	}
	t.mu.Unlock()
	sort.Slice(out, func(a, b int) bool { return out[a].Started.Before(out[b].Started) })
	return out
}

// Finished returns the number of jobs finished so far.
func (t *Tracker) Finished() int64 { return t.done.Load() }
