package store

// The durable job queue.
//
// Background work that must survive a crash (fan-out of a post to millions
// of inboxes, backfill after a follow) is a job: a record in the job family
// (0x06) holding its kind, an optional coalescing key, a payload, and its
// progress (a cursor the handler interprets, chunks done, chunks in all).
//
//   - Enqueue adds a job inside a Batch, so "publish" and "fan out later"
//     commit together or not at all.
//   - A worker leases a job (in memory: leases die with the process, which
//     is what makes a job resumable after kill -9) and runs its kind's
//     handler. The handler works chunk by chunk: each chunk's writes go into
//     a Batch committed by JobRun.Commit together with the job's new
//     progress. A chunk is therefore applied exactly once: its effects and
//     the cursor that skips it are one Pebble batch. After a crash the job
//     is leased again and resumes at the first unfinished chunk.
//   - Jobs with the same key (say one follow pair) coalesce: enqueueing
//     replaces a job of that key that has not started, so the last one
//     wins, and jobs of one key never run at once (the next waits for the
//     running one), in enqueue order. Keys are one namespace across kinds,
//     so a follow's backfill and an unfollow's cleanup of one pair coalesce.
//   - A finished job's record is deleted by its last chunk's batch.
//   - Chunks are paced by Options.JobBytesPerSec (the compaction limiter's
//     token bucket), so a large fan-out does not starve foreground writes.
//
// Lock order: DB.commit before queue.mu. The queue's in-memory state
// changes only after Pebble accepted the batch that made the change (under
// DB.commit), or for leases, under queue.mu alone.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tallydb/tally/compaction"
	"github.com/tallydb/tally/internal/quote"
)

// Limits of a job.
const (
	// MaxJobKeyLen is the longest coalescing key.
	MaxJobKeyLen = 256
	// MaxJobPayloadLen is the largest payload or cursor.
	MaxJobPayloadLen = 1 << 20
)

// Errors of the job queue.
var (
	// ErrNoJobHandler is returned by RunJobs and WaitJob for jobs of a kind
	// nobody registered a handler for in this process.
	ErrNoJobHandler = errors.New("tally: no handler for job kind")
	// ErrLeaseLost is returned by JobRun.Commit when the run no longer
	// holds its job (it was released, finished, or the store closed).
	ErrLeaseLost = errors.New("tally: job lease lost")
)

// JobID identifies a job; ids grow in enqueue order.
type JobID uint64

// JobInfo describes a queued job.
type JobInfo struct {
	ID       JobID
	Kind     string
	Key      []byte
	Done     int64 // chunks finished
	Total    int64 // chunks in all (0: not known yet)
	Running  bool  // leased by a worker now
	Attempts int   // failed runs since Open
	LastErr  string
	Created  time.Time
}

// JobProgress is a job's progress after a chunk: where the next chunk
// starts (handler-defined), chunks done and in all, and whether the job is
// finished (its record is then deleted).
type JobProgress struct {
	Cursor   []byte
	Done     int64
	Total    int64
	Finished bool
}

// JobHandler runs one job: it reads the run's payload and cursor, and for
// each chunk fills a batch and calls run.Commit with the new progress,
// until a Commit with Finished. It should return promptly when ctx is done
// (the store is closing); the job then resumes at its last committed
// chunk. An error (or returning nil before finishing) counts a failed
// attempt; the job is retried later from its last committed chunk.
type JobHandler func(ctx context.Context, run *JobRun) error

// jobRecordVersion is the version byte of a job record.
const jobRecordVersion = 1

// jobRecord is the persisted state of one job, the value of a job family
// key (0x06 | id u64).
type jobRecord struct {
	id      JobID
	kind    string
	key     []byte
	payload []byte
	cursor  []byte
	done    int64
	total   int64
	created int64 // Unix ms
}

// appendJobRecord encodes a job record.
//
//	field      width      meaning
//	---------  ---------  ---------------------------------------------
//	version    1          jobRecordVersion
//	kind       uvarint+n  job kind (a handler name)
//	key        uvarint+n  coalescing key, empty if none
//	payload    uvarint+n  handler input
//	cursor     uvarint+n  where the next chunk starts, handler-defined
//	done       uvarint    chunks finished
//	total      uvarint    chunks in all, 0 if not known yet
//	created    uvarint    enqueue time, Unix ms
//	checksum   4          CRC-32C of everything before, big-endian
func appendJobRecord(dst []byte, r *jobRecord) []byte {
	start := len(dst)
	dst = append(dst, jobRecordVersion)
	dst = appendString(dst, r.kind)
	dst = appendBytes(dst, r.key)
	dst = appendBytes(dst, r.payload)
	dst = appendBytes(dst, r.cursor)
	dst = binary.AppendUvarint(dst, uint64(r.done))
	dst = binary.AppendUvarint(dst, uint64(r.total))
	dst = binary.AppendUvarint(dst, uint64(r.created))
	return appendChecksum(dst, start)
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func decodeJobRecord(id JobID, b []byte) (*jobRecord, error) {
	body, err := verifyChecksum(b, "job record")
	if err != nil {
		return nil, err
	}
	d := decoder{b: body, what: "job record"}
	if v := d.byte(); d.err == nil && v != jobRecordVersion {
		return nil, fmt.Errorf("%w: job record version %d", ErrCorrupt, v)
	}
	r := &jobRecord{id: id, kind: d.string()}
	r.key = []byte(d.string())
	r.payload = []byte(d.string())
	r.cursor = []byte(d.string())
	done, total, created := d.uvarint(), d.uvarint(), d.uvarint()
	if err := d.finish(); err != nil {
		return nil, err
	}
	if validName("", r.kind) != nil || len(r.key) > MaxJobKeyLen || len(r.payload) > MaxJobPayloadLen ||
		len(r.cursor) > MaxJobPayloadLen || done > 1<<62 || total > 1<<62 || created > 1<<62 {
		return nil, fmt.Errorf("%w: job record %d out of bounds", ErrCorrupt, id)
	}
	// Empty and absent are one thing: nil (Cursor is nil before the first
	// chunk, Key nil without coalescing).
	for _, p := range []*[]byte{&r.key, &r.payload, &r.cursor} {
		if len(*p) == 0 {
			*p = nil
		}
	}
	r.done, r.total, r.created = int64(done), int64(total), int64(created)
	return r, nil
}

func appendJobKey(dst []byte, id JobID) []byte {
	dst = append(dst, famJob)
	return binary.BigEndian.AppendUint64(dst, uint64(id))
}

func decodeJobKey(k []byte) (JobID, bool) {
	if len(k) != 9 || k[0] != famJob {
		return 0, false
	}
	return JobID(binary.BigEndian.Uint64(k[1:])), true
}

// jobState is a job in memory.
type jobState struct {
	rec       jobRecord
	leased    bool
	replaced  bool // a commit in flight replaces it: not leasable
	attempts  int
	lastErr   string
	notBefore time.Time // retry backoff
}

// queue is the in-memory state of the job family.
type queue struct {
	mu       sync.Mutex
	nextID   JobID
	jobs     map[JobID]*jobState
	order    []JobID            // every job's id, ascending; removed ones stay until compacted
	dead     int                // removed ids still in order
	byKey    map[string][]JobID // coalescing key -> its jobs, oldest first
	changed  chan struct{}      // closed and replaced on every change
	handlers map[string]JobHandler
	limiter  *compaction.Limiter
	tracker  compaction.Tracker // running jobs, for DB.Jobs
	finished int64              // jobs finished since Open
}

func (q *queue) init(bytesPerSec int64) {
	q.jobs = map[JobID]*jobState{}
	q.byKey = map[string][]JobID{}
	q.changed = make(chan struct{})
	q.handlers = map[string]JobHandler{}
	q.limiter = compaction.NewLimiter(bytesPerSec)
}

// reset forgets every job (a reopen reloads them from disk, reopen.go).
// Handlers, the limiter and the counts stay; the next id stays at least
// where it was, so no id given out before is given again.
func (q *queue) reset() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.jobs = map[JobID]*jobState{}
	q.order = nil
	q.dead = 0
	q.byKey = map[string][]JobID{}
	q.broadcastLocked()
}

// broadcastLocked wakes everyone waiting for a change. q.mu is held.
func (q *queue) broadcastLocked() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// addLocked installs a job. q.mu is held.
func (q *queue) addLocked(st *jobState) {
	q.jobs[st.rec.id] = st
	// Ids grow in enqueue order and Open loads them in key order, so
	// appending keeps order sorted.
	q.order = append(q.order, st.rec.id)
	if st.rec.key != nil {
		k := string(st.rec.key)
		q.byKey[k] = append(q.byKey[k], st.rec.id)
	}
	if st.rec.id > q.nextID {
		q.nextID = st.rec.id
	}
}

// removeLocked drops a job. q.mu is held.
func (q *queue) removeLocked(id JobID) {
	st := q.jobs[id]
	if st == nil {
		return
	}
	delete(q.jobs, id)
	if q.dead++; q.dead > len(q.order)/2 {
		live := q.order[:0]
		for _, x := range q.order {
			if q.jobs[x] != nil {
				live = append(live, x)
			}
		}
		clear(q.order[len(live):])
		q.order, q.dead = live, 0
	}
	if st.rec.key != nil {
		k := string(st.rec.key)
		ids := q.byKey[k]
		for i, x := range ids {
			if x == id {
				ids = append(ids[:i], ids[i+1:]...)
				break
			}
		}
		if len(ids) == 0 {
			delete(q.byKey, k)
		} else {
			q.byKey[k] = ids
		}
	}
}

// loadQueue reads every job record (Open).
func (db *DB) loadQueue() error {
	q := &db.queue
	q.mu.Lock()
	defer q.mu.Unlock()
	return db.scan([]byte{famJob}, familyEnd(famJob), func(k, v []byte) error {
		id, ok := decodeJobKey(k)
		if !ok {
			return fmt.Errorf("%w: job key %x", ErrCorrupt, k)
		}
		rec, err := decodeJobRecord(id, v)
		if err != nil {
			return fmt.Errorf("job %d: %w", id, err)
		}
		q.addLocked(&jobState{rec: *rec})
		return nil
	})
}

// jobEnqueue is a job added to a batch.
type jobEnqueue struct {
	kind    string
	key     []byte
	payload []byte
	total   int64
}

// Enqueue adds a job of kind to the batch; it is written when the batch
// commits, atomically with the rest of it. key, if not nil, coalesces: the
// job replaces a job of the same key that has not started yet, and waits
// for one that is running. payload is the handler's input; total the
// number of chunks if known (0 otherwise). JobIDs returns the new jobs'
// ids after Commit.
func (b *Batch) Enqueue(kind string, key, payload []byte, total int64) error {
	if err := validName("job kind", kind); err != nil {
		return b.fail(err)
	}
	if len(key) > MaxJobKeyLen {
		return b.fail(fmt.Errorf("%w: job key of %d bytes (limit %d)", ErrValueTooLarge, len(key), MaxJobKeyLen))
	}
	if len(payload) > MaxJobPayloadLen {
		return b.fail(fmt.Errorf("%w: job payload of %d bytes (limit %d)", ErrValueTooLarge, len(payload), MaxJobPayloadLen))
	}
	if total < 0 {
		return b.fail(fmt.Errorf("%w: job total %d", ErrValueRange, total))
	}
	var k []byte
	if len(key) > 0 {
		k = bytes.Clone(key)
	}
	b.jobs = append(b.jobs, jobEnqueue{kind: kind, key: k, payload: bytes.Clone(payload), total: total})
	return nil
}

// JobIDs returns the ids of the jobs the batch enqueued, after Commit.
func (b *Batch) JobIDs() []JobID { return b.jobIDs }

// jobProgress is a chunk's progress riding in a batch (JobRun.Commit).
type jobProgress struct {
	run *JobRun
	rec jobRecord // the record after the chunk
	fin bool
}

// queueCommit is the queue's part of a commit between Pebble's acceptance
// and memory: apply it after Pebble took the batch, abort it otherwise.
type queueCommit struct {
	q        *queue
	b        *Batch
	added    []*jobState
	replaced []*jobState
}

// prepareLocked writes the batch's enqueues and progress into pb. The
// caller holds DB.commit.
func (q *queue) prepareLocked(db *DB, b *Batch, pb *pebble.Batch) (queueCommit, error) {
	qc := queueCommit{q: q, b: b}
	if len(b.jobs) == 0 && b.progress == nil {
		return qc, nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if p := b.progress; p != nil {
		st := q.jobs[p.rec.id]
		if st == nil || !st.leased || p.run.released {
			return qc, fmt.Errorf("%w: job %d", ErrLeaseLost, p.rec.id)
		}
		key := appendJobKey(nil, p.rec.id)
		var err error
		if p.fin {
			err = pb.Delete(key, nil)
		} else {
			err = pb.Set(key, appendJobRecord(nil, &p.rec), nil)
		}
		if err != nil {
			return qc, err
		}
	}
	now := db.opts.Now().UnixMilli()
	id := q.nextID
	for _, e := range b.jobs {
		id++
		st := &jobState{rec: jobRecord{id: id, kind: e.kind, key: e.key, payload: e.payload, total: e.total, created: now}}
		if e.key != nil {
			// Replace a job of the key that has not started: in the
			// queue, or enqueued earlier in this batch.
			for _, old := range q.byKey[string(e.key)] {
				if o := q.jobs[old]; !o.leased && !o.replaced {
					o.replaced = true
					qc.replaced = append(qc.replaced, o)
					if err := pb.Delete(appendJobKey(nil, old), nil); err != nil {
						qc.abortLocked()
						return qc, err
					}
				}
			}
			for _, a := range qc.added {
				if !a.replaced && bytes.Equal(a.rec.key, e.key) {
					a.replaced = true
					if err := pb.Delete(appendJobKey(nil, a.rec.id), nil); err != nil {
						qc.abortLocked()
						return qc, err
					}
				}
			}
		}
		if err := pb.Set(appendJobKey(nil, id), appendJobRecord(nil, &st.rec), nil); err != nil {
			qc.abortLocked()
			return qc, err
		}
		qc.added = append(qc.added, st)
	}
	return qc, nil
}

func (qc *queueCommit) abortLocked() {
	for _, o := range qc.replaced {
		o.replaced = false
	}
}

// abort undoes prepareLocked after Pebble refused the batch.
func (qc *queueCommit) abort() {
	if qc.q == nil || len(qc.replaced) == 0 {
		return
	}
	qc.q.mu.Lock()
	qc.abortLocked()
	qc.q.mu.Unlock()
}

// apply publishes the batch's queue changes once Pebble took the batch.
func (qc *queueCommit) apply() {
	b := qc.b
	if qc.q == nil || len(b.jobs) == 0 && b.progress == nil {
		return
	}
	q := qc.q
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, o := range qc.replaced {
		q.removeLocked(o.rec.id)
	}
	b.jobIDs = b.jobIDs[:0]
	for _, a := range qc.added {
		if a.replaced { // replaced later in the same batch: never written
			q.nextID = max(q.nextID, a.rec.id)
			continue
		}
		q.addLocked(a)
		b.jobIDs = append(b.jobIDs, a.rec.id)
	}
	if p := b.progress; p != nil {
		if p.fin {
			q.removeLocked(p.rec.id)
			q.finished++
			p.run.released = true
		} else if st := q.jobs[p.rec.id]; st != nil {
			st.rec = p.rec
		}
		if p.run.job != nil {
			p.run.job.Add(p.rec.done - p.run.rec.done)
			p.run.job.SetTotal(p.rec.total)
		}
		p.run.rec = p.rec
	}
	q.broadcastLocked()
}

// RegisterJobHandler sets the handler of a job kind. Background workers
// (Options.JobWorkers) run jobs of registered kinds; RunJobs and WaitJob
// run them in the caller. A kind has one handler; registering it again
// replaces it.
func (db *DB) RegisterJobHandler(kind string, h JobHandler) error {
	if err := validName("job kind", kind); err != nil {
		return err
	}
	if h == nil {
		return fmt.Errorf("%w: nil handler for job kind %q", ErrInvalidOption, kind)
	}
	q := &db.queue
	q.mu.Lock()
	q.handlers[kind] = h
	q.broadcastLocked()
	q.mu.Unlock()
	return nil
}

// JobRun is a leased job. Only the lease holder commits its progress.
type JobRun struct {
	db       *DB
	rec      jobRecord
	released bool // guarded by queue.mu
	job      *compaction.Job
}

// ID returns the job's id.
func (r *JobRun) ID() JobID { return r.rec.id }

// Kind returns the job's kind.
func (r *JobRun) Kind() string { return r.rec.kind }

// Key returns the job's coalescing key (nil if none).
func (r *JobRun) Key() []byte { return r.rec.key }

// Payload returns the job's payload.
func (r *JobRun) Payload() []byte { return r.rec.payload }

// Cursor returns where the next chunk starts (nil before the first).
func (r *JobRun) Cursor() []byte { return r.rec.cursor }

// Done returns the chunks finished so far.
func (r *JobRun) Done() int64 { return r.rec.done }

// Total returns the chunks in all (0 if not known).
func (r *JobRun) Total() int64 { return r.rec.total }

// Superseded reports whether a newer job with the same key is queued; a
// handler may then finish early, since the newer one decides the outcome.
func (r *JobRun) Superseded() bool {
	if r.rec.key == nil {
		return false
	}
	q := &r.db.queue
	q.mu.Lock()
	defer q.mu.Unlock()
	ids := q.byKey[string(r.rec.key)]
	return len(ids) > 0 && ids[len(ids)-1] != r.rec.id
}

// Commit commits b, a chunk's writes, together with the job's progress p,
// atomically: after a crash the job resumes after this chunk and never
// applies it again. It waits for the job pacing limiter first. A finished
// job is removed and the run ends. b is reset afterwards (Close it when
// done, as any batch).
func (r *JobRun) Commit(ctx context.Context, b *Batch, p JobProgress) error {
	if len(p.Cursor) > MaxJobPayloadLen {
		return fmt.Errorf("%w: job cursor of %d bytes (limit %d)", ErrValueTooLarge, len(p.Cursor), MaxJobPayloadLen)
	}
	if p.Done < 0 || p.Total < 0 {
		return fmt.Errorf("%w: job progress %d/%d", ErrValueRange, p.Done, p.Total)
	}
	n := 64
	if b.pb != nil {
		n += len(b.pb.Repr())
	}
	if err := r.db.queue.limiter.Wait(ctx, n); err != nil {
		return err
	}
	rec := r.rec
	rec.cursor = bytes.Clone(p.Cursor)
	rec.done, rec.total = p.Done, p.Total
	b.progress = &jobProgress{run: r, rec: rec, fin: p.Finished}
	err := b.Commit()
	b.Reset()
	return err
}

// LeaseJob leases the oldest runnable job of one of kinds (any kind if
// none given): not running, not waiting for a job of its key, not backing
// off after a failure. It returns nil when there is none. The caller runs
// it and calls Release.
func (db *DB) LeaseJob(kinds ...string) (*JobRun, error) {
	if err := db.writable(); err != nil {
		return nil, err
	}
	q := &db.queue
	q.mu.Lock()
	defer q.mu.Unlock()
	st := q.nextRunnableLocked(time.Now(), func(k string) bool {
		if len(kinds) == 0 {
			return true
		}
		for _, x := range kinds {
			if x == k {
				return true
			}
		}
		return false
	})
	if st == nil {
		return nil, nil
	}
	return q.leaseLocked(db, st), nil
}

func (q *queue) leaseLocked(db *DB, st *jobState) *JobRun {
	st.leased = true
	r := &JobRun{db: db, rec: st.rec}
	what := fmt.Sprintf("job %d", st.rec.id)
	if st.rec.key != nil {
		what += fmt.Sprintf(" key %s", quote.Input(string(st.rec.key)))
	}
	r.job = q.tracker.Start(st.rec.kind, what, 0, st.rec.total)
	r.job.Add(st.rec.done)
	r.job.SetPhase("running")
	q.broadcastLocked()
	return r
}

// nextRunnableLocked returns the oldest job that may run now and whose kind
// ok accepts. q.mu is held.
func (q *queue) nextRunnableLocked(now time.Time, ok func(kind string) bool) *jobState {
	return q.firstLocked(func(st *jobState) bool { return q.runnableLocked(st, now) && ok(st.rec.kind) })
}

// firstLocked returns the oldest job ok accepts. It walks jobs in id order
// and stops at the first match: the jobs it passes over are the few that
// run, back off or wait for an older job of their key, so leasing stays
// cheap however long the queue (a scan of every job per lease made
// draining n jobs cost n²). q.mu is held.
func (q *queue) firstLocked(ok func(*jobState) bool) *jobState {
	for len(q.order) > 0 && q.jobs[q.order[0]] == nil { // removed: drop
		q.order = q.order[1:]
		q.dead--
	}
	for _, id := range q.order {
		if st := q.jobs[id]; st != nil && ok(st) {
			return st
		}
	}
	return nil
}

// runnableLocked reports whether st may be leased now: not running, not
// being replaced, not backing off, and the oldest job of its key. q.mu is
// held.
func (q *queue) runnableLocked(st *jobState, now time.Time) bool {
	if st.leased || st.replaced || now.Before(st.notBefore) {
		return false
	}
	return st.rec.key == nil || q.byKey[string(st.rec.key)][0] == st.rec.id
}

// Release gives a run's lease back. A nil err means the run committed its
// last chunk (or stopped because the store is closing); otherwise the
// failed attempt is counted and the job waits before it is retried.
func (r *JobRun) Release(err error) {
	q := &r.db.queue
	q.mu.Lock()
	defer q.mu.Unlock()
	if r.job != nil {
		r.job.Finish()
		r.job = nil
	}
	if r.released {
		return
	}
	r.released = true
	st := q.jobs[r.rec.id]
	if st == nil {
		return
	}
	st.leased = false
	if err != nil {
		st.attempts++
		st.lastErr = err.Error()
		backoff := min(time.Duration(1<<min(st.attempts, 10))*50*time.Millisecond, 30*time.Second)
		st.notBefore = time.Now().Add(backoff)
	}
	q.broadcastLocked()
}

// runJob runs a leased job with its kind's handler and releases it.
func (db *DB) runJob(ctx context.Context, r *JobRun) error {
	q := &db.queue
	q.mu.Lock()
	h := q.handlers[r.rec.kind]
	q.mu.Unlock()
	if h == nil {
		err := fmt.Errorf("%w %q (job %d)", ErrNoJobHandler, r.rec.kind, r.rec.id)
		r.Release(err)
		return err
	}
	err := h(ctx, r)
	q.mu.Lock()
	finished := r.released
	q.mu.Unlock()
	switch {
	case finished:
		err = nil
	case err == nil && ctx.Err() == nil:
		err = fmt.Errorf("tally: job %d (%s) handler returned before finishing", r.rec.id, r.rec.kind)
	case ctx.Err() != nil:
		err = nil // closing: resume on the next Open, not a failure
	}
	if err != nil {
		err = fmt.Errorf("tally: job %d (%s): %w", r.rec.id, r.rec.kind, err)
	}
	r.Release(err)
	return err
}

// RunJobs runs every queued job in the caller's goroutine (together with
// background workers, if any) until the queue is empty, and returns nil.
// It stops with an error at the first job that fails, or when the only
// jobs left are of kinds without a handler (ErrNoJobHandler, naming them).
// progress, if not nil, is called every 100ms with the queue's jobs, from
// one goroutine.
func (db *DB) RunJobs(ctx context.Context, progress func([]JobInfo)) error {
	return db.waitJobs(ctx, func(*jobRecord) bool { return true }, progress)
}

// WaitJob waits until job id is finished (or gone, as when a newer job of
// its key replaced it), running it in the caller's goroutine if no worker
// has it, after the older jobs of its key. An unknown id returns nil.
func (db *DB) WaitJob(ctx context.Context, id JobID) error {
	q := &db.queue
	q.mu.Lock()
	st := q.jobs[id]
	var key []byte
	if st != nil {
		key = st.rec.key
	}
	q.mu.Unlock()
	if st == nil {
		return nil
	}
	return db.waitJobs(ctx, func(r *jobRecord) bool {
		return r.id == id || key != nil && r.id < id && bytes.Equal(r.key, key)
	}, nil)
}

// waitJobs runs or waits for the jobs in accepts until none is left. Jobs
// of a key wait for older ones, so waiting for a job includes the older
// jobs it depends on.
func (db *DB) waitJobs(ctx context.Context, accepts func(*jobRecord) bool, progress func([]JobInfo)) error {
	q := &db.queue
	if progress != nil {
		// Progress comes from one goroutine, every 100ms, also while a long
		// job runs chunk by chunk (a call per job would miss those, and
		// listing the queue per job would cost n² for n jobs).
		tctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-tctx.Done():
					return
				case <-t.C:
					progress(db.QueuedJobs())
				}
			}
		}()
		defer func() { cancel(); <-done }()
	}
	for {
		if err := db.writable(); err != nil {
			return err
		}
		q.mu.Lock()
		now := time.Now()
		st := q.firstLocked(func(c *jobState) bool { // the oldest runnable job we wait for
			return accepts(&c.rec) && q.runnableLocked(c, now) && q.handlers[c.rec.kind] != nil
		})
		if st != nil {
			run := q.leaseLocked(db, st)
			q.mu.Unlock()
			if err := db.runJob(ctx, run); err != nil {
				return err
			}
			continue
		}
		// Nothing to run here: done, stuck on kinds without a handler, or
		// waiting for other workers and backoffs.
		var wanted, noHandler []string
		for _, c := range q.jobs {
			if !accepts(&c.rec) {
				continue
			}
			wanted = append(wanted, c.rec.kind)
			if q.handlers[c.rec.kind] == nil {
				noHandler = append(noHandler, fmt.Sprintf("%q (job %d)", c.rec.kind, c.rec.id))
			}
		}
		changed := q.changed
		q.mu.Unlock()
		switch {
		case len(wanted) == 0:
			return nil
		case len(noHandler) == len(wanted):
			sort.Strings(noHandler)
			return fmt.Errorf("%w %s", ErrNoJobHandler, strings.Join(noHandler, ", "))
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// QueuedJobs returns every queued job (pending and running), oldest first.
func (db *DB) QueuedJobs() []JobInfo {
	q := &db.queue
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]JobInfo, 0, len(q.jobs))
	for _, st := range q.jobs {
		if st.replaced {
			continue
		}
		out = append(out, JobInfo{
			ID: st.rec.id, Kind: st.rec.kind, Key: st.rec.key,
			Done: st.rec.done, Total: st.rec.total, Running: st.leased,
			Attempts: st.attempts, LastErr: st.lastErr,
			Created: time.UnixMilli(st.rec.created),
		})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

// jobWorker runs jobs of registered kinds until the store closes.
func (db *DB) jobWorker() {
	defer db.bg.wg.Done()
	q := &db.queue
	for {
		// Close cancels jobCtx before it waits for the workers: a run
		// cut short by it must not be leased again.
		if db.jobCtx.Err() != nil {
			return
		}
		q.mu.Lock()
		now := time.Now()
		st := q.nextRunnableLocked(now, func(k string) bool { return q.handlers[k] != nil })
		var run *JobRun
		wait := time.Second
		if st != nil && db.writable() == nil {
			run = q.leaseLocked(db, st)
		} else {
			for _, s := range q.jobs { // wake for the earliest retry
				if !s.leased && s.notBefore.After(now) {
					wait = min(wait, s.notBefore.Sub(now))
				}
			}
		}
		changed := q.changed
		q.mu.Unlock()
		if run != nil {
			if err := db.runJob(db.jobCtx, run); err != nil {
				db.bgError(err)
			}
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-db.bg.stop:
			t.Stop()
			return
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// checkQueue verifies the queue's in-memory invariants (Check).
func (db *DB) checkQueue() error {
	q := &db.queue
	q.mu.Lock()
	defer q.mu.Unlock()
	live := 0
	for i, id := range q.order {
		if i > 0 && q.order[i-1] >= id {
			return fmt.Errorf("tally: job queue: order not ascending at %d", i)
		}
		if q.jobs[id] != nil {
			live++
		}
	}
	if live != len(q.jobs) || len(q.order)-live != q.dead {
		return fmt.Errorf("tally: job queue: order holds %d live and %d dead ids for %d jobs (dead count %d)",
			live, len(q.order)-live, len(q.jobs), q.dead)
	}
	n := 0
	for k, ids := range q.byKey {
		if len(ids) == 0 {
			return fmt.Errorf("tally: job queue: empty key list %q", k)
		}
		pending := 0
		for i, id := range ids {
			st := q.jobs[id]
			if st == nil || string(st.rec.key) != k {
				return fmt.Errorf("tally: job queue: key %q lists job %d it does not hold", k, id)
			}
			if i > 0 && ids[i-1] >= id {
				return fmt.Errorf("tally: job queue: key %q jobs out of order", k)
			}
			if i > 0 && st.leased {
				return fmt.Errorf("tally: job queue: job %d of key %q runs before an older one", id, k)
			}
			if !st.leased && !st.replaced {
				pending++
			}
		}
		if pending > 1 {
			return fmt.Errorf("tally: job queue: key %q has %d pending jobs (coalescing failed)", k, pending)
		}
		n += len(ids)
	}
	for id, st := range q.jobs {
		if st.rec.id != id {
			return fmt.Errorf("tally: job queue: job %d filed under %d", st.rec.id, id)
		}
		if id > q.nextID {
			return fmt.Errorf("tally: job queue: job %d above next id %d", id, q.nextID)
		}
		if st.rec.key != nil {
			n--
		}
	}
	if n != 0 {
		return errors.New("tally: job queue: key index and jobs disagree")
	}
	return nil
}
