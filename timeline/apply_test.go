package timeline

import (
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tallydb/tally/internal/testutil"
	"github.com/tallydb/tally/store"
)

// In a replicated store every write of a replicated command runs inside
// store.DB.ApplyEntry, and the n-th commit made on the store while an
// entry applies is numbered as that entry's n-th commit, unless it is
// node-local (Batch.SetLocal) or a job's progress. Reads (a user's return
// rebuilds their inbox, a stale read mark is renewed) and the expiry
// ticker commit from other goroutines, concurrently with the apply, and
// decide from this node's own state: their commits must be local, or they
// take the entry's numbers, and a re-apply of the entry (after a restart)
// skips them as duplicates, or skips the entry's own commits.

// applyTaken applies entry index around fn (a stand-in for a read that
// commits while the entry applies) and returns the apply mark the store
// holds afterwards.
func applyTaken(t *testing.T, e *env, index uint64, fn func() error) uint64 {
	t.Helper()
	must(t, e.db.ApplyEntry(index, fn))
	seq, _ := e.db.SourceSeq(store.ApplySource)
	return seq
}

// TestActivateIsNodeLocal: a home rebuild (activate) commits in two
// batches, and both are node-local. The second used to lose the flag
// (Batch.Reset forgets it): committed while an entry re-applies after a
// restart, it took a number the entry had already used and was skipped as
// a duplicate, leaving the user without a read mark while the in-memory
// push set had them and their pending marks were dropped from memory only.
func TestActivateIsNodeLocal(t *testing.T) {
	e := newEnv(t, Config{})
	_, err := e.tl.Follow(1, 2)
	must(t, err)
	_, err = e.tl.Publish(2, 100)
	must(t, err)
	e.run()
	if seq := applyTaken(t, e, 1, func() error {
		_, err := e.tl.MarkActive(1)
		return err
	}); seq != 0 {
		t.Errorf("apply mark %#x after a rebuild alone: the rebuild was numbered as entry 1's commit", seq)
	}

	// Entry 2 commits once (a follow); after a restart it re-applies, and
	// user 3's first home read rebuilds their inbox meanwhile.
	_, err = e.tl.Follow(3, 2)
	must(t, err)
	must(t, e.db.ApplyEntry(2, func() error {
		_, err := e.tl.Follow(4, 2)
		return err
	}))
	e.reopen()
	must(t, e.db.ApplyEntry(2, func() error {
		if _, err := e.tl.Follow(4, 2); err != nil {
			return err
		}
		_, err := e.tl.MarkActive(3)
		return err
	}))
	var buf [numCols]uint64
	r, err := e.tl.row(3, buf[:0])
	must(t, err)
	if r[colRead] == 0 {
		t.Fatal("user 3's rebuild was skipped as a commit of entry 2: no read mark")
	}
	if got := homeAll(t, e.tl, 3, 10); len(got) != 1 || got[0].Post != 100 {
		t.Fatalf("home of 3 = %v, want post 100", got)
	}
	e.check()
}

// TestTouchIsNodeLocal: the renewal of a stale read mark, made by a home
// read, is node-local: never an applying entry's commit.
func TestTouchIsNodeLocal(t *testing.T) {
	e := newEnv(t, Config{})
	_, err := e.tl.Follow(1, 2)
	must(t, err)
	_, err = e.tl.MarkActive(1)
	must(t, err)
	e.clock.Advance(2 * time.Hour) // the mark is stale, not expired
	if seq := applyTaken(t, e, 1, func() error {
		_, err := e.tl.Home(1, "", 10)
		return err
	}); seq != 0 {
		t.Errorf("apply mark %#x after a read mark's renewal: it was numbered as entry 1's commit", seq)
	}
	var buf [numCols]uint64
	r, err := e.tl.row(1, buf[:0])
	must(t, err)
	if want := e.tl.nowSec(); r[colRead] != want {
		t.Fatalf("read mark %d, want %d (renewed)", r[colRead], want)
	}
}

// TestExpireEnqueueIsNodeLocal: the expiry job's enqueue is node-local.
// The job works on this node's activity (read marks, the push set,
// inboxes, pending marks: all node-local), the ticker enqueues it from
// its own goroutine whenever it fires, and TL.EXPIRE, a replicated
// command, enqueues it inside the apply: numbered, a re-apply of that
// entry skipped the enqueue as a duplicate and found no job id.
func TestExpireEnqueueIsNodeLocal(t *testing.T) {
	e := newEnv(t, Config{})
	if seq := applyTaken(t, e, 1, func() error {
		_, err := e.tl.EnqueueExpire()
		return err
	}); seq != 0 {
		t.Errorf("apply mark %#x after an expiry enqueue: it was numbered as entry 1's commit", seq)
	}
	e.run()
	// Entry 2 is a follow and an expiry enqueue; after a restart it
	// re-applies: the enqueue runs again (expiry is idempotent).
	entry2 := func() error {
		if _, err := e.tl.Follow(1, 2); err != nil {
			return err
		}
		_, err := e.tl.EnqueueExpire()
		return err
	}
	must(t, e.db.ApplyEntry(2, entry2))
	e.run()
	e.reopen()
	must(t, e.db.ApplyEntry(2, entry2))
	e.run()
	e.check()
}

// oddShard is a Remote for tests: odd users live here (shard 1), even
// ones on shard 2; messages to other shards are dropped.
type oddShard struct{}

func (oddShard) Local(u uint64) bool { return u%2 == 1 }
func (oddShard) ShardOf(u uint64) uint32 {
	if u%2 == 1 {
		return 1
	}
	return 2
}
func (oddShard) Send(*store.Batch, uint32, [][]byte) error { return nil }

// TestReappliedInstallKeepsPendingMarks is the pending-marks drift that
// cluster.TestShardedCluster found after node restarts (seeds 3, 6, 15,
// 21: "pending marks differ from their in-memory index", a mark in
// memory that the store lacks). InstallCopy (TL.XBACKFILL, a replicated
// entry) gives every live local follower a pending mark, in memory before
// its commit. A restarted replica re-applies the entry at its store's
// AppliedIndex; when that is an install, its commit is skipped as a
// duplicate, but the in-memory marks stayed, although the backfill jobs
// had long dropped the stored ones.
func TestReappliedInstallKeepsPendingMarks(t *testing.T) {
	e := &env{t: t, dir: "db", clock: newClock(), inline: -1, shared: -1, remote: oddShard{}}
	e.st = testutil.OpenStore(t, vfs.NewMem(), e.hooks())
	_, err := e.tl.MarkActive(1)
	must(t, err)
	must(t, e.db.ApplyEntry(1, func() error {
		_, err := e.tl.Follow(1, 2) // 2 lives on shard 2
		return err
	}))
	e.run()
	install := func() error {
		return e.tl.InstallCopy(2, 1, []Entry{{Post: 100, Author: 2}})
	}
	must(t, e.db.ApplyEntry(2, install))
	if !e.tl.pendingHas(1, 2) {
		t.Fatal("the install gave live follower 1 no pending mark")
	}
	e.run() // the backfill: the mark goes
	e.check()
	e.reopen()
	must(t, e.db.ApplyEntry(2, install)) // the restarted replica's re-apply
	e.check()
	if got := homeAll(t, e.tl, 1, 10); len(got) != 1 || got[0].Post != 100 {
		t.Fatalf("home of 1 = %v, want post 100", got)
	}
}

// TestReappliedPipelineEntry: one entry may carry a client's pipeline, so
// a re-applied entry's first commands see the state its later commands
// left. A post published and removed in one entry is, on the re-apply, a
// post to publish again ("again": in the removed set) whose commit is a
// duplicate: the in-memory removed set must keep the post, as the store
// does, and a shared fan-out must not look for a job id the skipped
// commit never got.
func TestReappliedPipelineEntry(t *testing.T) {
	for _, shared := range []int{64, -1} {
		e := &env{t: t, dir: "db", clock: newClock(), inline: -1, shared: shared}
		e.st = testutil.OpenStore(t, vfs.NewMem(), e.hooks())
		_, err := e.tl.Follow(2, 1)
		must(t, err)
		entry := func() error {
			if _, err := e.tl.Publish(1, 100); err != nil {
				return err
			}
			_, _, err := e.tl.Unpublish(1, 100)
			return err
		}
		must(t, e.db.ApplyEntry(1, entry))
		e.run()
		e.reopen()
		must(t, e.db.ApplyEntry(1, entry))
		e.run()
		e.check()
		if got := homeAll(t, e.tl, 2, 10); len(got) != 0 {
			t.Fatalf("shared %d: home of 2 = %v, want empty", shared, got)
		}
		e.close()
	}
}

// TestReappliedMuteKeepsPairs: a mute or unmute whose commit is a
// duplicate changes no in-memory pair. (The first apply of the entry
// stands for a crash after its first commit, the mute: the re-apply's
// mute finds the pair and commits nothing, so the unmute's commit takes
// the mute's number and is skipped; it took the pair out of memory only.)
func TestReappliedMuteKeepsPairs(t *testing.T) {
	e := newEnv(t, Config{})
	_, err := e.tl.Follow(1, 2)
	must(t, err)
	mute := func() error {
		_, err := e.tl.Mute(1, 2)
		return err
	}
	must(t, e.db.ApplyEntry(1, mute))
	e.reopen()
	must(t, e.db.ApplyEntry(1, func() error {
		if err := mute(); err != nil {
			return err
		}
		_, err := e.tl.Unmute(1, 2)
		return err
	}))
	e.check()
}

// TestReappliedOriginalGoneKeepsRemoved: a TL.XGONE whose commit is a
// duplicate leaves the in-memory removed set as the store has it. (As in
// TestReappliedMuteKeepsPairs, the re-apply's follow finds the edge and
// commits nothing, so XGONE's commit takes its number.)
func TestReappliedOriginalGoneKeepsRemoved(t *testing.T) {
	e := &env{t: t, dir: "db", clock: newClock(), inline: -1, shared: -1, remote: oddShard{}}
	e.st = testutil.OpenStore(t, vfs.NewMem(), e.hooks())
	follow := func() error {
		_, err := e.tl.Follow(1, 3)
		return err
	}
	must(t, e.db.ApplyEntry(1, follow))
	e.reopen()
	must(t, e.db.ApplyEntry(1, func() error {
		if err := follow(); err != nil {
			return err
		}
		_, err := e.tl.OriginalGone(2, 100) // 2 lives on shard 2
		return err
	}))
	e.check()
}

// TestReappliedRemoteFollowers is the lost cross-shard follow that
// cluster.TestDeterministicShards found with lossy crashes (TALLY_DETSIM_
// LOSSY=1, seed 16 at the time: a replica lacked follower 3 of user 6).
// One TALLY.XRECV entry carries several TL.XFOLLOWER messages, each of
// them one numbered commit (the followers' new ordinals are node-local,
// not numbered). A crash keeps the entry's first commit and loses the
// rest (store/apply.go rule 3 allows it); the restarted replica applies
// the entry again. Rule 2: the re-apply must make the same numbered
// commits in the same order. RemoteFollower used to look the edge up and
// return without a commit when the follower was in the set already, so on
// the re-apply the first message made no commit, the second took the
// first's number, was skipped as a duplicate, and its follower was lost.
func TestReappliedRemoteFollowers(t *testing.T) {
	e := &env{t: t, dir: "db", clock: newClock(), inline: -1, shared: -1, remote: oddShard{}}
	fs := vfs.NewCrashableMem()
	e.st = testutil.OpenStore(t, fs, e.hooks())
	followers := []uint64{2, 4, 6} // on shard 2; author 1 lives here
	// msg runs the entry's i-th message, as Streams.Receive does.
	msg := func(i int) error {
		_, err := e.tl.RemoteFollower(1, followers[i], 2, true)
		return err
	}
	must(t, e.db.ApplyEntry(1, func() error {
		if err := msg(0); err != nil {
			return err
		}
		// The first commit (and the ordinal before it) reach the disk;
		// the others stay in the WAL's unsynced tail.
		if err := e.db.SyncWAL(); err != nil {
			return err
		}
		for i := 1; i < len(followers); i++ {
			if err := msg(i); err != nil {
				return err
			}
		}
		return nil
	}))
	e.st.RestartOn(fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}))
	if got := e.db.AppliedIndex(); got != 1 {
		t.Fatalf("AppliedIndex %d after the crash, want 1 (the entry's first commit survives)", got)
	}
	got, err := e.tl.FollowersPage(1, "", 10)
	must(t, err)
	if len(got.IDs) != 1 {
		t.Fatalf("followers of 1 after the crash = %v, want only the first (the crash lost the rest)", got.IDs)
	}
	must(t, e.db.ApplyEntry(1, func() error { // the re-apply
		for i := range followers {
			if err := msg(i); err != nil {
				return err
			}
		}
		return nil
	}))
	e.check()
	got, err = e.tl.FollowersPage(1, "", 10)
	must(t, err)
	if !slices.Equal(got.IDs, followers) {
		t.Fatalf("followers of 1 after the re-apply = %v, want %v", got.IDs, followers)
	}
	byShard, err := e.tl.RemoteFollowers(1)
	must(t, err)
	if byShard[2] != uint64(len(followers)) {
		t.Fatalf("followers of 1 on shard 2 = %d, want %d", byShard[2], len(followers))
	}
}

// TestReappliedInstallThenFollower: the lost follower of lossy seed 107
// of cluster.TestDeterministicShards. One TALLY.XRECV entry carries
// TL.XBACKFILL (InstallCopy) and then TL.XFOLLOWER. A crash keeps the
// install's commit and loses the follower's; on the re-apply the install
// finds its copy in place and its batch was empty, and an empty batch
// commits nothing and takes no apply number: the follower's commit took
// the install's number and was skipped as a duplicate (rule 2).
func TestReappliedInstallThenFollower(t *testing.T) {
	e := &env{t: t, dir: "db", clock: newClock(), inline: -1, shared: -1, remote: oddShard{}}
	fs := vfs.NewCrashableMem()
	e.st = testutil.OpenStore(t, fs, e.hooks())
	entry := func(crashPoint bool) func() error {
		return func() error {
			// Author 2 lives on shard 2; nobody here follows them.
			if err := e.tl.InstallCopy(2, 1, []Entry{{Post: 100, Author: 2}}); err != nil {
				return err
			}
			if crashPoint {
				if err := e.db.SyncWAL(); err != nil {
					return err
				}
			}
			_, err := e.tl.RemoteFollower(1, 4, 2, true)
			return err
		}
	}
	must(t, e.db.ApplyEntry(1, entry(true)))
	e.st.RestartOn(fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}))
	must(t, e.db.ApplyEntry(1, entry(false)))
	e.check()
	got, err := e.tl.FollowersPage(1, "", 10)
	must(t, err)
	if !slices.Equal(got.IDs, []uint64{4}) {
		t.Fatalf("followers of 1 after the re-apply = %v, want [4]", got.IDs)
	}
}
