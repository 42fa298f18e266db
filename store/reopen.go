package store

// Healing a failed store in place (Options.ReopenOnFailure, issue 16
// item 6).
//
// A failed WAL write or sync, or an error Pebble calls fatal, leaves the
// Pebble instance unable to write again: its LogWriter keeps the error. The
// only way on is a new instance, opened from the files on disk, and memory
// rebuilt by recovery, since memory may hold writes that were applied but
// never acknowledged (a write is visible a little before its fsync). Before
// this file a host had to Close and Open the store; now the healer does the
// same thing behind the *DB the host and the packages hold.
//
// # The healer
//
// A goroutine of its own (not one of the background loops, which a reopen
// stops and restarts) wakes when the instance fails (pebbleEnv.onFail) and
// then probes the disk once a second (pebbleEnv.probeReopen: the free
// space a writable Open needs to replay the WAL, where the filesystem
// reports it, and a 64 KiB write+sync+remove). When the probe passes it calls reopen. A reopen that
// fails leaves the store failed and the healer probing; one that finds
// damage (ErrCorrupt, ErrIncompatible) stops it: a restart would find the
// same.
//
// # The swap
//
// reopen stops the background loops and jobs, runs the hooks' Before,
// takes swap (which Stats, Check and Verify share) and every writer's lock
// (jobMu, ckpt, commit), so
// no write, checkpoint or job runs while the instance and the memory are
// replaced. Then:
//
//  1. The old instance is retired (pebbleEnv.retire): it is fenced, so it
//     changes nothing on disk any more and its directory lock is released,
//     but it stays open for the readers still in it.
//  2. A new Pebble instance is opened on the same directory (it replays the
//     WAL as an Open after a crash would) and published (DB.inst).
//  3. The in-memory state is reset and recovered from the new instance: a
//     new catalog, families' persisted records, the job queue, the sources,
//     the intents, the log sequence. The new catalog is published at the
//     end of recovery; the old counter states are marked dead, so Counter
//     handles and batches resolve to the new ones (Counter.state).
//  4. Generation is bumped, the locks are released, and the hooks' After
//     functions run (outside every store lock), each followed by its
//     Release; their Before functions ran before step 1, once the
//     background loops stopped, to keep the packages' own writers out
//     (OnReopen). Only then do the background loops and jobs restart: a
//     job handler reads its package's state, which is the state of
//     before the reopen until that package's After has reloaded it.
//  5. An After that fails (its package could not reload: a read error)
//     fails the store again before its Release lets the package's writers
//     in (failReload): writes return ErrFailed wrapping its error, so none
//     commits from the package's state of before the reopen, and no job
//     worker leases a job on it. The healer goes on probing and reopens
//     again, and every hook runs again; an error that wraps ErrCorrupt
//     stops it, as damage found by the reopen itself does
//     (TestHealReloadError, TestHealReloadCorrupt).
//
// # Readers during the swap
//
// Readers take no locks, so they must be safe on either side of the swap
// and never see an error made by it. They may read the old state until the
// swap and the recovered state after it:
//
//   - counter reads go through the catalog (an atomic pointer): the old one
//     until recovery publishes the new one. A reader that loaded an old
//     counter state finishes its read on it.
//   - family reads, iterators and snapshots take a reference on the
//     instance they use (acquire) and drop it when done; an iterator or
//     snapshot keeps reading the old instance until it is closed.
//   - cold block reads go through the instance their cold version was built
//     on: a reopen holds a reference on the old instance for every old cold
//     version a reader can still reach (the published ones and the retired
//     ones not yet released), dropped when the version is released.
//
// When the last reference on the old instance is dropped, it is closed (on
// a goroutine of the DB's: its Close does I/O). Until then, files the new
// instance removes (obsolete sstables after a compaction, old MANIFESTs
// and WALs) are held back (pebbleEnv.holdRemove) and removed once no
// retired instance is left, so an old reader never finds a table gone.
//
// # What the packages above must do
//
// A package that keeps state derived from durable state (an id allocator,
// a mirror of a family, a cache) may have derived it from a write the
// reopen discarded, or missed one the reopen found durable; and a write of
// its own that read state before the reopen must not commit after it. It
// registers a ReopenHook: Before takes the package's writer lock (its
// writers fail fast meanwhile, the store being failed), After reloads the
// state and returns the reload's error, and Release lets the lock go.
// Releasing in Release rather than at the end of After is what closes the
// window a failed reload would leave: a writer let in by After's own
// unlock, before the store had failed again, committed from the state the
// reload could not replace. Where a package has no such lock, it pins a
// batch to the generation it read in (Batch.SetGeneration; a batch is
// pinned to the generation of its NewBatch anyway): a batch of an older
// generation fails with ErrFailed. Counter and Family handles stay valid
// by design.
//
// # Alternatives not taken
//
// A reader lock (RWMutex) around every read would make the swap simpler
// but costs an atomic on a shared line per read, and an Iter held across
// a read would deadlock with a pending reopen. A reopen that waits for
// readers to drain before closing the old instance could wait forever
// under a steady read load. The instance reference costs one atomic add
// per family read (Pebble's own Get takes a mutex and two reference
// counts) and keeps the old instance's memory only as long as a reader is
// in it.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// instance is one Pebble instance of a DB and the env it reports into.
type instance struct {
	pdb *pebble.DB
	env *pebbleEnv
	// refs counts 1 while the instance is current, plus one per read in
	// flight, open Iter or Snapshot, and old cold version a reopen handed
	// it; instanceDead once the last reference is gone.
	refs    atomic.Int64
	drained chan struct{} // closed when refs reaches zero
	close   sync.Once
}

const instanceDead = math.MinInt64 / 2

func newInstance(pdb *pebble.DB, env *pebbleEnv) *instance {
	in := &instance{pdb: pdb, env: env, drained: make(chan struct{})}
	in.refs.Store(1)
	return in
}

// tryRef takes a reference unless the instance is gone.
func (in *instance) tryRef() bool {
	if in.refs.Add(1) > 0 {
		return true
	}
	in.refs.Add(-1)
	return false
}

// unref drops a reference; the last one lets the instance be closed.
func (in *instance) unref() {
	if in.refs.Add(-1) == 0 && in.refs.CompareAndSwap(0, instanceDead) {
		close(in.drained)
	}
}

// acquire returns the current instance with a reference the caller drops
// with unref. It never fails: an instance is only gone once it was
// replaced, and then the next load finds its successor.
func (db *DB) acquire() *instance {
	for {
		if in := db.inst.Load(); in.tryRef() {
			return in
		}
	}
}

// healer is the DB's machinery for healing in place (see the file
// comment).
type healer struct {
	gen     atomic.Uint64 // Generation
	reopens atomic.Int64  // successful reopens since Open

	kick chan struct{} // a failure wakes the healer
	stop chan struct{} // closed by Close
	wg   sync.WaitGroup

	// mu guards what follows.
	mu      sync.Mutex
	retired []*instance // retired instances not yet closed
	held    []string    // removals held back while retired is not empty
	hooks   map[int]ReopenHook
	nextID  int
}

// Generation counts the reopens of this DB since Open (Options.
// ReopenOnFailure): 0 until the first. State derived from the store's data
// in one generation may include writes the reopen discarded; see OnReopen
// and Batch.Generation.
func (db *DB) Generation() uint64 { return db.heal.gen.Load() }

// ReopenHook is how a package above the store follows a reopen in place
// (OnReopen). Its functions run on the healer's goroutine, for every
// reopen attempt: Before in registration order; After then Release,
// hook by hook, in reverse order.
type ReopenHook struct {
	// Before runs before the reopen takes any store lock, once the
	// store's background loops and jobs have stopped: the package takes
	// the locks that keep its own writers out, so that none reads state
	// before the reopen and commits after it (they fail fast meanwhile:
	// the store is failed). It must not wait for a store write.
	Before func()
	// After runs once the reopen is over, outside every store lock (it
	// may read and write the store), with what Before took still held:
	// the package reloads what it derived from the store. reopened is
	// false when the store is failed as After runs: the reopen failed
	// (the store stays failed, and is tried again later), or an After
	// that ran before this one failed. The store takes writes again
	// before the first After runs; the background job workers restart
	// only once every After returned, but a job a caller runs itself
	// (RunJobs, WaitJob) may run meanwhile: a handler that reads what
	// After reloads holds the lock Before takes.
	//
	// An error means the package could not reload: its state is that of
	// before the reopen and must not decide a write. When reopened, the
	// store fails again before Release runs (every write returns
	// ErrFailed wrapping the error; reads go on as on any failed store),
	// so no writer of the package commits from the stale state, and the
	// healer reopens again later, running every hook again. An error
	// that wraps ErrCorrupt stops the healer, as damage the reopen
	// itself finds does: a restart would find the same.
	After func(reopened bool) error
	// Release runs right after After (whatever it returned) and releases
	// what Before took.
	Release func()
}

// OnReopen registers h for every reopen of the DB (Options.
// ReopenOnFailure). Packages that keep state derived from the store
// reload it in h.After. The returned function unregisters h.
func (db *DB) OnReopen(h ReopenHook) (unregister func()) {
	hl := &db.heal
	hl.mu.Lock()
	defer hl.mu.Unlock()
	if hl.hooks == nil {
		hl.hooks = map[int]ReopenHook{}
	}
	id := hl.nextID
	hl.nextID++
	hl.hooks[id] = h
	return func() {
		hl.mu.Lock()
		delete(hl.hooks, id)
		hl.mu.Unlock()
	}
}

// errReopened fails a batch built before a reopen: its decisions may rest
// on state the reopen discarded.
var errReopened = errors.New("the store was reopened after a failure while this batch was built; build it again")

// newEnv returns the env of a new Pebble instance of db.
func (db *DB) newEnv() *pebbleEnv {
	o := db.opts
	env := newPebbleEnv(o.FS, db.errs, db.dir, o.MemTableSize)
	if o.testOpenGrace > 0 {
		env.grace = o.testOpenGrace
	}
	if o.testProbeInterval > 0 {
		env.probeGap = o.testProbeInterval
	}
	env.holdRemove = db.holdRemove
	if o.ReopenOnFailure && !o.ReadOnly {
		env.onFail = db.kickHealer
	}
	return env
}

func (db *DB) kickHealer() {
	select {
	case db.heal.kick <- struct{}{}:
	default:
	}
}

// startHealer starts the healer of a DB opened with ReopenOnFailure.
func (db *DB) startHealer() {
	if !db.opts.ReopenOnFailure || db.opts.ReadOnly {
		return
	}
	db.heal.wg.Add(1)
	go db.healLoop()
	if db.env().failed.Load() != nil {
		db.kickHealer()
	}
}

// stopHealer stops the healer and waits for a reopen in progress.
func (db *DB) stopHealer() {
	select {
	case <-db.heal.stop:
	default:
		close(db.heal.stop)
	}
	db.heal.wg.Wait()
}

func (db *DB) healLoop() {
	defer db.heal.wg.Done()
	for {
		select {
		case <-db.heal.stop:
			return
		case <-db.heal.kick:
		}
		if !db.healOnce() {
			return
		}
	}
}

// healOnce probes until the disk takes writes and the reopen succeeds. It
// returns false when the DB closes or the reopen found damage.
func (db *DB) healOnce() bool {
	t := time.NewTicker(db.env().probeGap)
	defer t.Stop()
	for db.env().failed.Load() != nil {
		select {
		case <-db.heal.stop:
			return false
		case <-t.C:
		}
		if !db.env().probeReopen() {
			continue
		}
		err := db.reopenHooked()
		if err == nil {
			continue
		}
		db.bgError(fmt.Errorf("tally: reopen after a failure: %w", err))
		if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrIncompatible) || errors.Is(err, ErrClosed) {
			return false // a restart would find the same: the healer stops
		}
	}
	return true
}

// reopenHooked runs reopen between the hooks' Before and After.
func (db *DB) reopenHooked() error {
	hl := &db.heal
	hl.mu.Lock()
	ids := make([]int, 0, len(hl.hooks))
	for id := range hl.hooks {
		ids = append(ids, id)
	}
	slices.Sort(ids) // registration order
	hooks := make([]ReopenHook, 0, len(ids))
	for _, id := range ids {
		hooks = append(hooks, hl.hooks[id])
	}
	hl.mu.Unlock()
	// Jobs stop before Before: a job handler may wait for the lock a
	// Before takes. Before runs before swap: a package's check may hold
	// its lock while it waits for DB.Check.
	db.jobCancel()
	db.stopBackground()
	for _, h := range hooks {
		if h.Before != nil {
			h.Before()
		}
	}
	db.swap.Lock()
	err := db.reopen()
	db.swap.Unlock()
	ok := err == nil
	var reloadErrs []error
	for i := len(hooks) - 1; i >= 0; i-- {
		h := hooks[i]
		if h.After != nil {
			if herr := h.After(ok); herr != nil {
				reloadErrs = append(reloadErrs, herr)
				if ok {
					// NB: before Release: the package's writers wait for
					// it and must find the store failed.
					db.failReload(herr)
					ok = false
				}
			}
		}
		if h.Release != nil {
			h.Release()
		}
	}
	// The background loops and jobs restart whatever happened (a failed
	// store's loops only find writes refused, and no worker leases a job
	// while the store is failed, as after a failed reload: no job runs on
	// state a package could not reload), and only now: a job run before a
	// package's After reloaded its state decided its writes from state of
	// before the reopen (TestHealJobsAfterHooks).
	db.restartBackground()
	if err == nil && len(reloadErrs) > 0 {
		err = fmt.Errorf("reload after the reopen: %w", errors.Join(reloadErrs...))
	}
	return err
}

// failReload fails the store after a reopen whose hook could not reload
// the package's state (ReopenHook.After): every write returns ErrFailed
// wrapping err until the healer's next reopen succeeds with every hook.
func (db *DB) failReload(err error) {
	db.env().fail(fmt.Errorf("tally: a package could not reload its state after the store reopened: %w", err))
}

// restartBackground starts the background loops and jobs again after a
// reopen stopped them.
func (db *DB) restartBackground() {
	db.jobMu.Lock() // runJobs reads jobCtx under it
	defer db.jobMu.Unlock()
	db.jobCtx, db.jobCancel = context.WithCancel(context.Background())
	db.bg.stop = make(chan struct{})
	db.startBackground()
}

// reopen replaces the failed Pebble instance and the in-memory state (see
// the file comment). On error the store stays failed. The caller holds
// swap and stopped the background loops and jobs; it restarts them once
// the hooks' After functions ran.
func (db *DB) reopen() error {
	db.jobMu.Lock()
	defer db.jobMu.Unlock()
	db.ckpt.Lock()
	defer db.ckpt.Unlock()
	db.commit.Lock()
	defer db.commit.Unlock()
	if db.closed.Load() {
		return ErrClosed
	}
	start := time.Now()
	old := db.inst.Load()
	cause := old.env.refusal()

	// 1. Retire the old instance; from here the new one's removals wait.
	db.heal.mu.Lock()
	if !slices.Contains(db.heal.retired, old) {
		db.heal.retired = append(db.heal.retired, old)
	}
	db.heal.mu.Unlock()
	old.env.retire()

	// 2. A new instance on the same directory.
	o := db.opts
	env := db.newEnv()
	pdir := o.FS.PathJoin(db.dir, pebbleDir)
	cache := pebble.NewCache(pebbleCacheSize(o))
	defer cache.Unref()
	popts := env.pebbleOptions(o, cache, true)
	popts.Merger = db.mergers.pebbleMerger(pebbleMergerName(o.FS, pdir))
	pdb, err := env.openPebble(pdir, popts)
	if err != nil {
		return err
	}
	nw := newInstance(pdb, env)
	db.inst.Store(nw)
	db.heal.wg.Add(1)
	go db.closeWhenDrained(old)
	defer old.unref() // its "current" reference, once its cold versions hold it

	// 3. Memory from disk. Recovery publishes the new catalog only when it
	// succeeds; until then readers keep the old one, whose cold versions
	// keep their "current" references (their blocks, should the old
	// instance close first, are read through the new one).
	oldCat := db.cat.Load()
	oldRetired := db.resetState()
	if err := db.recoverGuarded(false); err != nil {
		env.fail(fmt.Errorf("tally: recover after reopen: %w", err))
		return err
	}
	db.holdColdVersions(old, oldCat, oldRetired)
	for _, cs := range oldCat.byID {
		cs.dead.Store(true)
	}

	// 4. Published.
	db.heal.gen.Add(1)
	n := db.heal.reopens.Add(1)
	db.errs.add(fmt.Errorf("tally: store reopened in place (reopen %d, %v) after: %v", n, time.Since(start).Round(time.Millisecond), cause))
	return nil
}

// resetState empties what recovery rebuilds, and returns the retired cold
// versions of the old instance. The caller holds every writer's lock.
func (db *DB) resetState() []*coldVersion {
	db.recovery = RecoveryStats{}
	db.sources = map[string]uint64{}
	db.queue.reset()
	db.life.diskMu.Lock()
	db.life.intents = map[uint64]*intent{}
	db.life.diskMu.Unlock()
	db.life.mu.Lock()
	retired := db.life.retired
	db.life.retired = nil
	db.life.mu.Unlock()
	db.logBytes.Store(0)
	db.logRecords.Store(0)
	db.unsynced.Store(false)
	db.ckpt.tierChanges = db.tierChanges.Load()
	return retired
}

// holdColdVersions keeps the old instance open while a reader can still
// reach a cold version built on it: each one published in the old catalog
// or retired and not yet released takes a reference on it, dropped when
// the version is released. The published ones then lose their "current"
// reference (the new catalog has versions of its own); the retired ones'
// obsolete blocks are recovery's business now, not sweep's.
func (db *DB) holdColdVersions(old *instance, cat *catalog, retired []*coldVersion) {
	hold := func(cv *coldVersion) {
		old.refs.Add(1) // old is alive: the caller holds its current reference
		cv.hold.Store(old)
		if cv.released.Load() && cv.hold.CompareAndSwap(old, nil) {
			old.unref()
		}
	}
	for _, cv := range retired {
		cv.obsolete = nil
		hold(cv)
	}
	for _, cs := range cat.byID {
		for _, rs := range cs.ranges.Load().m {
			if rs.cold != nil {
				hold(rs.cold)
				rs.cold.unref()
			}
		}
	}
}

// closeWhenDrained closes a retired instance once its last reader is gone
// (or the DB closes), then lets the removals it held back go.
func (db *DB) closeWhenDrained(in *instance) {
	defer db.heal.wg.Done()
	select {
	case <-in.drained:
	case <-db.heal.stop:
	}
	db.closeInstance(in)
}

// closeInstance closes in once. A retired instance is removed from the
// list, and when none is left the held removals run.
func (db *DB) closeInstance(in *instance) error {
	var err error
	in.close.Do(func() {
		err = in.env.closePebble(in.pdb)
		db.heal.mu.Lock()
		db.heal.retired = slices.DeleteFunc(db.heal.retired, func(x *instance) bool { return x == in })
		var held []string
		if len(db.heal.retired) == 0 {
			held, db.heal.held = db.heal.held, nil
		}
		db.heal.mu.Unlock()
		for _, name := range held {
			db.opts.FS.Remove(name) // a file already gone is fine
		}
	})
	return err
}

// holdRemove holds back a removal while a retired instance may still read
// the file (pebbleEnv.holdRemove).
func (db *DB) holdRemove(name string) bool {
	db.heal.mu.Lock()
	defer db.heal.mu.Unlock()
	if len(db.heal.retired) == 0 {
		return false
	}
	db.heal.held = append(db.heal.held, name)
	return true
}

// closeRetired closes every retired instance still open (Close: no reader
// may use the DB any more).
func (db *DB) closeRetired() {
	db.heal.mu.Lock()
	retired := slices.Clone(db.heal.retired)
	db.heal.mu.Unlock()
	for _, in := range retired {
		db.closeInstance(in)
	}
}
