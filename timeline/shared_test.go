package timeline

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tallydb/tally/internal/testutil"
	"github.com/tallydb/tally/store"
)

// sharedWorld is 30 authors (1..30) with 2 to 6 followers each among
// users 100..139, every follower active, on a crashable store.
type sharedWorld struct {
	e         *env
	followers map[uint64][]uint64 // author -> followers
}

func newSharedWorld(t *testing.T, sync bool) *sharedWorld {
	e := &env{t: t, dir: "db", clock: newClock(), cfg: Config{InboxCap: 500, ChunkSize: 7}, sync: sync, inline: -1}
	e.st = testutil.OpenStore(t, vfs.NewCrashableMem(), e.hooks())
	w := &sharedWorld{e: e, followers: map[uint64][]uint64{}}
	rng := newRand(18)
	var edges []Edge
	var users []uint64
	for a := uint64(1); a <= 30; a++ {
		for _, i := range rng.Perm(40)[:2+rng.IntN(5)] {
			u := uint64(100 + i)
			edges = append(edges, Edge{u, a})
			w.followers[a] = append(w.followers[a], u)
		}
	}
	for u := uint64(100); u < 140; u++ {
		users = append(users, u)
	}
	_, err := e.tl.LoadFollows(t.Context(), edges, nil)
	must(t, err)
	_, err = e.tl.MarkActiveMany(t.Context(), users)
	must(t, err)
	e.st.Reopen() // synced
	return w
}

// publish publishes posts first.. of authors 1..30 in turn and checks
// they all ride on one shared job, which it returns.
func (w *sharedWorld) publish(t *testing.T, first uint64, n int) []uint64 {
	var posts []uint64
	var job uint64
	for i := range n {
		p := first + uint64(i)
		res, err := w.e.tl.Publish(uint64(1+i%30), p)
		must(t, err)
		if job == 0 {
			job = uint64(res.Job)
		}
		if res.Job == 0 || uint64(res.Job) != job {
			t.Fatalf("post %d rides on job %d, the first on %d", p, res.Job, job)
		}
		posts = append(posts, p)
	}
	return posts
}

// checkDelivered checks that every post still published is in each of
// its author's followers' inboxes exactly once, with the delivery count
// exact, and that no marker is left; it returns the posts kept.
func (w *sharedWorld) checkDelivered(t *testing.T, posts []uint64) []uint64 {
	t.Helper()
	var kept []uint64
	for _, p := range posts {
		a, published, err := w.e.tl.Owner(p)
		must(t, err)
		if !published {
			continue
		}
		kept = append(kept, p)
		info, _, err := w.e.tl.Post(p)
		must(t, err)
		if !info.FannedOut || info.Delivered != uint64(len(w.followers[a])) {
			t.Fatalf("post %d of %d: %+v, want %d deliveries", p, a, info, len(w.followers[a]))
		}
		for _, u := range w.followers[a] {
			n := 0
			for _, q := range inboxPosts(t, w.e.tl, u) {
				if q == p {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("post %d is %d times in the inbox of %d", p, n, u)
			}
		}
	}
	if ps, err := w.e.tl.sharedPosts(); err != nil || len(ps) > 0 {
		t.Fatalf("markers left: %v %v", ps, err)
	}
	return kept
}

// TestSharedFanoutCrashBeforeJob crashes after the posts' commits, before
// their shared job ran: under SyncAlways every post that returned is
// delivered after the reopen, exactly once.
func TestSharedFanoutCrashBeforeJob(t *testing.T) {
	w := newSharedWorld(t, true)
	posts := w.publish(t, 1000, 45)
	w.e.crash(newRand(2))
	if q := w.e.db.QueuedJobs(); len(q) != 1 || q[0].Kind != jobShared {
		t.Fatalf("queue after the crash: %+v", q)
	}
	w.e.run()
	if kept := w.checkDelivered(t, posts); len(kept) != len(posts) {
		t.Fatalf("%d of %d posts kept under SyncAlways", len(kept), len(posts))
	}
}

// TestSharedFanoutCrashInsideJob cuts the shared job after some chunks
// and crashes: synced, the committed chunks stay and the job resumes with
// the markers left; without fsync of the chunks (the posts were synced;
// the crash keeps each unsynced 4 KB block with probability one half) a
// chunk is kept with its markers' deletion or lost with them, and the
// resumed job delivers the posts of the chunks lost. Either way every post
// is delivered exactly once. (Measured: these crashes lose every unsynced
// chunk, which sit in the WAL's last block, so the job starts over.)
func TestSharedFanoutCrashInsideJob(t *testing.T) {
	for _, sync := range []bool{true, false} {
		for cut := 1; cut <= 12; cut += 2 {
			w := newSharedWorld(t, sync)
			posts := w.publish(t, 1000, 45)
			must(t, w.e.db.SyncWAL())
			run, err := w.e.db.LeaseJob(jobShared)
			must(t, err)
			ctx, cancel := context.WithCancel(t.Context())
			chunks := 0
			w.e.tl.testHook = func() {
				if chunks++; chunks == cut {
					cancel()
				}
			}
			err = w.e.tl.runShared(ctx, run)
			w.e.tl.testHook = nil
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("sync %v cut %d: shared job: %v", sync, cut, err)
			}
			left, err := w.e.tl.sharedPosts()
			must(t, err)
			if len(left) == 0 || len(left) == len(posts) {
				t.Fatalf("sync %v cut %d: %d of %d posts left: the cut is not inside the job", sync, cut, len(left), len(posts))
			}
			keep := 100
			if !sync {
				keep = 50
			}
			w.e.st.Crash(keep, newRand(uint64(cut)))
			after, err := w.e.tl.sharedPosts()
			must(t, err)
			if sync && !slices.Equal(after, left) || len(after) < len(left) {
				t.Fatalf("sync %v cut %d: %d posts wait after the crash, %d before", sync, cut, len(after), len(left))
			}
			w.e.run()
			if kept := w.checkDelivered(t, posts); len(kept) != len(posts) {
				t.Fatalf("sync %v cut %d: %d of %d posts kept", sync, cut, len(kept), len(posts))
			}
			t.Logf("sync %v cut after %d chunks: %d posts left for the resumed job, %d after the crash", sync, cut, len(left), len(after))
		}
	}
}

// TestKillSharedFanout kills a child process (SIGKILL) twice in the middle
// of a shared job delivering 3,000 small posts (300 authors with 3 to 8
// active followers, chunks of 50 inboxes), reopens, and checks that the
// job resumes with the markers the kill left and that, once it finished,
// every post is in each follower's inbox exactly once with its delivery
// count exact.
func TestKillSharedFanout(t *testing.T) {
	if dir := os.Getenv("TALLY_TL_KILL_SHARED_DIR"); dir != "" {
		killFanoutChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	dir := t.TempDir()
	db, err := store.Open(dir, &store.Options{JobWorkers: -1, Durability: store.NoSync})
	must(t, err)
	tl, err := New(db, &Options{Config: Config{ChunkSize: 50, InboxCap: 500}, ExpireInterval: -1, InlineFanout: -1})
	must(t, err)
	rng := newRand(18)
	followers := map[uint64][]uint64{}
	var edges []Edge
	for a := uint64(1); a <= 300; a++ {
		for _, i := range rng.Perm(1000)[:3+rng.IntN(6)] {
			u := uint64(1000 + i)
			edges = append(edges, Edge{u, a})
			followers[a] = append(followers[a], u)
		}
	}
	var users []uint64
	for u := uint64(1000); u < 2000; u++ {
		users = append(users, u)
	}
	_, err = tl.LoadFollows(t.Context(), edges, nil)
	must(t, err)
	_, err = tl.MarkActiveMany(t.Context(), users)
	must(t, err)
	const posts = 3000
	for i := range posts {
		_, err := tl.Publish(uint64(1+i%300), uint64(1<<40+i))
		must(t, err)
	}
	must(t, tl.Close())
	must(t, db.Close())

	left := posts
	var lastDone int64 // chunks the job had committed at the last kill
	for round := range 3 {
		res := testutil.RunChild(t, "TestKillSharedFanout", []string{"TALLY_TL_KILL_SHARED_DIR=" + dir}, func(line string) bool {
			f := strings.Fields(line)
			n, _ := strconv.ParseInt(f[len(f)-1], 10, 64)
			return round < 2 && n >= lastDone+20
		})
		if round < 2 && !res.Killed {
			t.Fatalf("round %d: the child finished before the kill (%v)", round, res.Err)
		}
		if round == 2 && res.Err != nil {
			t.Fatalf("last round: child: %v", res.Err)
		}
		db, err := store.Open(dir, &store.Options{JobWorkers: -1})
		must(t, err)
		tl, err := New(db, &Options{ExpireInterval: -1})
		must(t, err)
		waiting, err := tl.sharedPosts()
		must(t, err)
		jobs := db.QueuedJobs()
		if round < 2 {
			if len(jobs) != 1 || jobs[0].Kind != jobShared || len(waiting) == 0 || len(waiting) >= left {
				t.Fatalf("round %d: after the kill %d posts wait (%d before), queue %+v", round, len(waiting), left, jobs)
			}
			t.Logf("round %d: killed with %d posts waiting, at chunk %d", round, len(waiting), jobs[0].Done)
			left, lastDone = len(waiting), jobs[0].Done
		} else {
			if len(jobs) != 0 || len(waiting) != 0 {
				t.Fatalf("after the last round: %d posts wait, queue %+v", len(waiting), jobs)
			}
			must(t, tl.Check())
			inboxes := map[uint64][]uint64{}
			for u := uint64(1000); u < 2000; u++ {
				inboxes[u] = inboxPosts(t, tl, u)
			}
			for i := range posts {
				a, p := uint64(1+i%300), uint64(1<<40+i)
				info, _, err := tl.Post(p)
				must(t, err)
				if !info.FannedOut || info.Delivered != uint64(len(followers[a])) {
					t.Fatalf("post %d: %+v, want %d deliveries", p, info, len(followers[a]))
				}
				for _, u := range followers[a] {
					if n := len(slices.DeleteFunc(slices.Clone(inboxes[u]), func(q uint64) bool { return q != p })); n != 1 {
						t.Fatalf("post %d is %d times in the inbox of %d", p, n, u)
					}
				}
			}
		}
		must(t, tl.Close())
		must(t, db.Close())
	}
}

// TestSharedJobsRunOneAtATime runs two shared jobs at once on a reopened
// store (where both start from the first marker): each post must be
// delivered once, not once per job.
func TestSharedJobsRunOneAtATime(t *testing.T) {
	for round := range 5 {
		w := newSharedWorld(t, true)
		posts := w.publish(t, 1000, 45)
		w.e.tl.shared.mu.Lock()
		w.e.tl.shared.job = 0 // as if the first had started: the next publish enqueues another
		w.e.tl.shared.mu.Unlock()
		posts = append(posts, w.publish(t, 2000, 45)...)
		w.e.reopen()
		var runs []*store.JobRun
		for range 2 {
			run, err := w.e.db.LeaseJob(jobShared)
			must(t, err)
			if run == nil {
				t.Fatalf("round %d: fewer than two shared jobs queued: %+v", round, w.e.db.QueuedJobs())
			}
			runs = append(runs, run)
		}
		// Before the first job's first chunk commits, the second starts
		// from the first marker too (as when publishers lowered shared.low
		// meanwhile) and gets 30 ms to take the same markers. Without
		// shared.run it does, and each of their posts is delivered twice.
		errc := make(chan error, 2)
		var started atomic.Bool
		w.e.tl.testSharedCommit = func() {
			if started.CompareAndSwap(false, true) {
				w.e.tl.shared.mu.Lock()
				w.e.tl.shared.low = 0
				w.e.tl.shared.mu.Unlock()
				go func() { errc <- w.e.tl.runShared(t.Context(), runs[1]) }()
				time.Sleep(30 * time.Millisecond)
			}
		}
		errc <- w.e.tl.runShared(t.Context(), runs[0])
		for range runs {
			must(t, <-errc)
		}
		w.e.tl.testSharedCommit = nil
		w.checkDelivered(t, posts)
		// Inboxes and post records would not show a post delivered twice
		// (an inbox entry is keyed by post, the record is rewritten): the
		// deliveries made do.
		want := int64(0)
		for _, p := range posts {
			a, _, err := w.e.tl.Owner(p)
			must(t, err)
			want += int64(len(w.followers[a]))
		}
		if got := w.e.tl.stats.deliveries.Load(); got != want {
			t.Fatalf("round %d: %d deliveries made, want %d", round, got, want)
		}
	}
}
