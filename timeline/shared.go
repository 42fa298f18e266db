package timeline

// Small fan-outs (issue 18 item 5): delivered in the publish's batch, or
// riding on one shared job.
//
// A post whose fan-out is small costs, as a job of its own, more in the
// job's fixed cost (the job record in the publish's batch, a lease, a
// chunk batch with the job's progress, the record's deletion) than in its
// deliveries: the posts phase of timelinebench (3M posts of authors with
// ~20 followers, ~4 of them in the push set) measured 91.9k deliveries/s,
// half of Redis's. So PublishMany sorts a post's fan-out by its size:
//
//  1. at most Options.InlineFanout inboxes (the author's followers in the
//     push set, read under the author's lock): the deliveries are merge
//     operands in the publish's own batch (deliverInline, posts.go). No
//     job; the post is in every inbox when Publish returns, and a crash
//     keeps both or neither.
//  2. an author with at most Options.SharedFanout followers: a marker
//     (tl_fanq: post id → author) in the publish's batch, and the shared
//     job, which delivers the posts of every marker in chunks of about
//     ChunkSize inboxes, deleting the markers in the chunk's batch. Many
//     posts share one lease and one progress record per chunk.
//  3. otherwise a fan-out job of its own (runFanout), as before.
//
// # The shared job's ordering rules
//
// A publisher enqueues a shared job in its batch unless one is queued and
// not started (shared.job); then it relies on that job. A publisher holds
// shared.gate shared from reading shared.job to after its commit; the job,
// when it starts, takes shared.gate exclusively to clear shared.job, and
// only then reads the markers. So every marker whose publisher relied on
// the job committed before the job read the markers, and a publisher that
// comes later enqueues a job of its own. (Two publishers may both enqueue
// one; the second finds fewer markers, or none.) The job is never replaced
// (no coalescing key), so DB.WaitJob(res.Job) returns once the post is
// delivered. The in-memory shared.job is only an economy: after a crash or
// a reopen it is 0 and the jobs in the queue run all the markers there
// are.
//
// Shared jobs run one at a time (shared.run), each from shared.low, the
// lowest marker no job has taken (a seek: scanning from the start would
// step over every marker deleted before, O(n²) over a run of posts). Two
// at once could both deliver a marker's post: harmless to inboxes and
// post records (an inbox entry is keyed by post; the record is
// rewritten), but twice the work (TestSharedJobsRunOneAtATime).
//
// A chunk is built and committed under the read locks of its posts'
// authors (and the graph lock's read side), which publish and unpublish
// take exclusively: a marker the chunk read is still there, its post is
// published (unpublish deletes the marker in its batch), and the post
// record the chunk rewrites cannot interleave with theirs. The push set is
// read after the post's commit, as a fan-out job reads it, so the
// activation argument of runFanout holds. A crash between chunks leaves
// the markers of the chunks not committed, and the job (durable since the
// publish's batch) runs them after the reopen; a chunk's deliveries and
// its markers' deletion commit together, so no post is delivered twice.

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tallydb/tally/store"
)

// jobShared is the kind of the shared fan-out job (no key, no payload).
const jobShared = "tl-fanout-shared"

// Defaults and limits of Options.SharedFanout.
const (
	DefaultSharedFanout = 1000
	MaxSharedFanout     = maxChunkSize
)

// fanqKey is the tl_fanq key of post: its id.
func fanqKey(dst []byte, post uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, pfxFanq), post)
}

// shareFanout adds to b, the batch publishing posts of author, their
// markers and, unless a shared job is queued and not started, a shared
// job. The caller holds the author's stripe, and must hold shared.gate
// shared from before this call until after the commit; after it, it calls
// sharedEnqueued with the batch's job ids. It returns the job the posts
// rely on (0: the one enqueued in b).
func (t *Timeline) shareFanout(b *store.Batch, author uint64, posts []uint64) (store.JobID, error) {
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], author)
	var k [9]byte
	low := posts[0]
	for _, p := range posts {
		if err := t.fam.fanq.Put(b, fanqKey(k[:0], p), v[:]); err != nil {
			return 0, err
		}
		low = min(low, p)
	}
	t.shared.mu.Lock()
	job := t.shared.job
	t.shared.low = min(t.shared.low, low)
	t.shared.mu.Unlock()
	if job != 0 {
		return job, nil
	}
	return 0, b.Enqueue(jobShared, nil, nil, 0)
}

// sharedEnqueued records job, enqueued by a publish's committed batch, as
// the shared job later publishers rely on, unless one is recorded. The
// caller still holds shared.gate shared, so job has not started.
func (t *Timeline) sharedEnqueued(job store.JobID) {
	t.shared.mu.Lock()
	if t.shared.job == 0 {
		t.shared.job = job
	}
	t.shared.mu.Unlock()
}

// sharedItem is one marker a shared job's chunk delivers.
type sharedItem struct {
	post, author uint64
}

// runShared is the handler of jobShared: it delivers the posts of every
// marker in tl_fanq, in chunks of about ChunkSize inboxes (bounded by the
// authors' follower counts), each chunk committed with the deletion of
// its markers.
func (t *Timeline) runShared(ctx context.Context, run *store.JobRun) error {
	// One shared job at a time: two would both find a marker under the
	// authors' read locks and deliver its post twice.
	t.shared.run.Lock()
	defer t.shared.run.Unlock()
	// NB: before reading any marker (see the file's comment). The markers
	// of the publishers that relied on this job are at or above
	// shared.low, which they lowered; later markers lower it again for the
	// next job. A run that fails gives back the part it did not finish; a
	// crash or reopen sets shared.low to 0 (loadState).
	from, cfg, b := t.startShared(run)
	defer b.Close()
	finished := false
	defer func() {
		if !finished {
			t.shared.mu.Lock()
			t.shared.low = min(t.shared.low, from)
			t.shared.mu.Unlock()
		}
	}()
	it, err := t.fam.fanq.NewIter(&store.IterOptions{Lower: fanqKey(nil, from)})
	if err != nil {
		return err
	}
	done := run.Done()
	var chunk []sharedItem
	var followers uint64
	var buf [numCols]uint64
	for it.Next() {
		k, v := it.Key(), it.Value()
		if len(k) != 9 || len(v) != 8 {
			it.Close()
			return fmt.Errorf("%w: tl_fanq key %x value %x", store.ErrCorrupt, k, v)
		}
		item := sharedItem{post: binary.BigEndian.Uint64(k[1:]), author: binary.BigEndian.Uint64(v)}
		r, err := t.row(item.author, buf[:0])
		if err != nil {
			it.Close()
			return err
		}
		if len(chunk) > 0 && followers+r[colFollowers] > uint64(cfg.ChunkSize) {
			done++
			if err := t.sharedChunk(ctx, run, b, chunk, cfg, done, false); err != nil {
				it.Close()
				return err
			}
			from = item.post // the chunks below it committed
			if err := ctx.Err(); err != nil {
				it.Close()
				return err
			}
			chunk, followers = chunk[:0], 0
		}
		chunk = append(chunk, item)
		followers += r[colFollowers]
	}
	if err := closeIter(it); err != nil {
		return err
	}
	done++
	if err := t.sharedChunk(ctx, run, b, chunk, cfg, done, true); err != nil {
		return err
	}
	finished = true
	return nil
}

// startShared takes the markers from shared.low on for run (see
// runShared) and returns where they start, the config and the batch the
// run commits in. It holds graphMu's read side, as each chunk does: a
// store reopen reloads shared.low and the config in its ReopenHook.After,
// after the store takes writes again, and a run in between (a caller's
// RunJobs or WaitJob) started from the mirrors of before the reopen with
// a batch of the new generation. With the batch made here, a reopen after
// the start fails the run's next commit instead.
func (t *Timeline) startShared(run *store.JobRun) (from uint64, cfg Config, b *store.Batch) {
	graph := t.graphLock()
	defer graph()
	t.shared.gate.Lock()
	t.shared.mu.Lock()
	if t.shared.job == run.ID() {
		t.shared.job = 0
	}
	from = t.shared.low
	t.shared.low = math.MaxUint64
	t.shared.mu.Unlock()
	t.shared.gate.Unlock()
	return from, t.Config(), t.db.NewBatch()
}

// sharedChunk delivers the posts of chunk, under the read locks of their
// authors, and commits the deliveries, the posts' records (fanned, with
// their delivery counts) and the deletion of their markers with the job's
// progress; with fin, the job's end.
func (t *Timeline) sharedChunk(ctx context.Context, run *store.JobRun, b *store.Batch, chunk []sharedItem, cfg Config, done int64, fin bool) error {
	graph := t.graphLock()
	defer graph()
	authors := make([]uint64, len(chunk))
	for i, c := range chunk {
		authors[i] = c.author
	}
	unlock := t.rlockAuthors(authors)
	defer unlock()
	var delivered int64
	var key [9]byte
	for _, c := range chunk {
		// Under the author's lock a marker that is still there is the
		// publish's: an unpublish deletes it (and a publish again writes
		// a new one) while holding the lock exclusively.
		_, ok, err := t.fam.fanq.Get(fanqKey(key[:0], c.post), nil)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		n, err := t.deliverPost(b, c.author, c.post, cfg)
		if err != nil {
			return err
		}
		if err := t.fam.posts.Put(b, postKey(nil, c.post), appendPost(nil, postRecord{author: c.author, delivered: n, fanned: true})); err != nil {
			return err
		}
		if err := t.fam.fanq.Delete(b, fanqKey(key[:0], c.post)); err != nil {
			return err
		}
		delivered += int64(n)
	}
	if t.testSharedCommit != nil {
		t.testSharedCommit()
	}
	if err := run.Commit(ctx, b, store.JobProgress{Done: done, Total: done + 1, Finished: fin}); err != nil {
		return err
	}
	t.stats.deliveries.Add(delivered)
	if t.testHook != nil && !fin {
		t.testHook()
	}
	return nil
}

// deliverPost adds to b an inbox operand with post for every follower of
// author in the push set, and returns how many.
func (t *Timeline) deliverPost(b *store.Batch, author, post uint64, cfg Config) (uint64, error) {
	aOrd, err := t.ordOf(author)
	if err != nil || aOrd == 0 {
		return 0, err
	}
	var buf [64]uint32
	targets, err := t.pushFollowers(aOrd, buf[:0])
	if err != nil || len(targets) == 0 {
		return 0, err
	}
	m, _, err := t.outboxMeta(author, post)
	if err != nil {
		return 0, err
	}
	operand := deliveryOperand(cfg.InboxCap, []store.TopEntry{m.entry(post, author)})
	var key [5]byte
	for _, o := range targets {
		if err := t.fam.inbox.Merge(b, inboxKey(key[:0], o), operand); err != nil {
			return 0, err
		}
	}
	return uint64(len(targets)), nil
}

// sharedPosts returns the posts waiting for the shared job, in id order.
func (t *Timeline) sharedPosts() ([]uint64, error) {
	if t.fam.fanq == nil { // a read-only store from before tl_fanq
		return nil, nil
	}
	var out []uint64
	err := t.scan(t.fam.fanq, nil, func(k, _ []byte) bool {
		out = append(out, binary.BigEndian.Uint64(k[1:]))
		return true
	})
	return out, err
}

// sharedWaiting reports whether post waits for the shared job.
func (t *Timeline) sharedWaiting(post uint64) (bool, error) {
	if t.fam.fanq == nil {
		return false, nil
	}
	var k [9]byte
	_, ok, err := t.fam.fanq.Get(fanqKey(k[:0], post), nil)
	return ok, err
}
