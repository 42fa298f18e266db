package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// healDeadline bounds the wait for a reopen in place: a few probe periods
// on a quiet machine; generous for a loaded one.
const healDeadline = 30 * time.Second

// healStore is a store opened with ReopenOnFailure on an errorfs over a
// crashable MemFS, with a counter and a family, and a model of every
// acknowledged batch: batch i adds 1 to posts row i%50 "likes" and puts
// key i in the family, atomically.
type healStore struct {
	t     *testing.T
	mem   *vfs.MemFS
	fault *errorfs.Toggle
	db    *DB
	c     *Counter
	fam   *Family
	likes map[uint64]uint64 // acknowledged likes per row
	keys  map[uint64]bool   // acknowledged family keys
	next  uint64
	// maybe is the batch whose commit failed after reaching Pebble: it is
	// either wholly present after the reopen or wholly absent.
	maybe []uint64
}

var healFamily = FamilySpec{Name: "heal", Prefix: 0x30, MinKeyLen: 8, MaxKeyLen: 8}

// newHealStore opens the store; ops selects the operations the fault
// fails while on. The probe file fails too while the fault is on: the
// disk is full until the test says otherwise.
func newHealStore(t *testing.T, errno syscall.Errno, ops func(op errorfs.Op) bool) *healStore {
	mem := vfs.NewCrashableMem()
	fault := errnoFault(errno, func(op errorfs.Op) bool {
		return ops(op) || (strings.HasSuffix(op.Path, probeFile) && isWrite(op.Kind))
	})
	o := testOptions(faultFS(mem, fault))
	o.ReopenOnFailure = true
	o.testProbeInterval = 20 * time.Millisecond
	o.Families = []FamilySpec{healFamily}
	db, err := Open("h", o)
	must(t, err)
	h := &healStore{t: t, mem: mem, fault: fault, db: db, likes: map[uint64]uint64{}, keys: map[uint64]bool{}}
	h.c = newPosts(t, db, 12)
	h.fam, err = db.Family(healFamily.Name)
	must(t, err)
	t.Cleanup(func() {
		if !db.closed.Load() {
			db.Close()
		}
	})
	return h
}

func healKey(i uint64) []byte { return binary.BigEndian.AppendUint64([]byte{healFamily.Prefix}, i) }

// write commits the next batch and records it in the model when it is
// acknowledged.
func (h *healStore) write() error {
	i := h.next
	h.next++
	b := h.db.NewBatch()
	defer b.Close()
	must(h.t, b.Incr("posts", i%50, "likes", 1))
	must(h.t, h.fam.Put(b, healKey(i), []byte("v")))
	err := b.Commit()
	if err == nil {
		h.likes[i%50]++
		h.keys[i] = true
	}
	return err
}

// check compares the store with the model: every acknowledged batch is
// there, the uncertain ones wholly or not at all, nothing else.
func (h *healStore) check(db *DB) {
	h.t.Helper()
	c, err := db.Counter("posts")
	must(h.t, err)
	fam, err := db.Family(healFamily.Name)
	must(h.t, err)
	for i := uint64(0); i < h.next; i++ {
		_, ok, err := fam.Get(healKey(i), nil)
		must(h.t, err)
		if h.keys[i] && !ok {
			h.t.Fatalf("acknowledged key %d is missing (of %d)", i, h.next)
		}
	}
	extra := map[uint64]uint64{}
	for _, i := range h.maybe {
		if h.keys[i] {
			continue // acknowledged after all (a trigger that wrote, then failed a flush)
		}
		_, ok, err := fam.Get(healKey(i), nil)
		must(h.t, err)
		if ok {
			extra[i%50]++
		}
	}
	for row := uint64(0); row < 50; row++ {
		v, err := c.GetColumn(row, "likes")
		must(h.t, err)
		if want := h.likes[row] + extra[row]; v != want {
			h.t.Fatalf("row %d likes = %d, want %d (acknowledged %d)", row, v, want, h.likes[row])
		}
	}
	for i := uint64(0); i < h.next; i++ {
		_, ok, err := fam.Get(healKey(i), nil)
		must(h.t, err)
		if h.keys[i] && !ok {
			h.t.Fatalf("acknowledged key %d is missing", i)
		}
	}
	must(h.t, db.Check())
	must(h.t, db.Verify(context.Background()))
}

// waitHealed writes until a write succeeds; every failure on the way must
// be ErrFailed or ErrDiskFull.
func (h *healStore) waitHealed() {
	h.t.Helper()
	deadline := time.Now().Add(healDeadline)
	for {
		err := h.write()
		if err == nil {
			return
		}
		if !errors.Is(err, ErrFailed) && !errors.Is(err, ErrDiskFull) {
			h.t.Fatalf("write while healing: %v", err)
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("writes still refused %v after the fault cleared: %v (stats errors %q)", healDeadline, err, h.db.Stats().Errors)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHealMatrix fails the WAL (writes, syncs), the MANIFEST and every
// write of a checkpoint, with ENOSPC and with EIO, under a store opened
// with ReopenOnFailure; then clears the fault. Writes are refused while
// the fault is on, and resume through the same handle once it is off,
// with every acknowledged batch present, the batch caught by the fault
// wholly present or absent, Check and Verify clean, and the same after a
// close and after a crash.
func TestHealMatrix(t *testing.T) {
	walWrite := func(op errorfs.Op) bool {
		return isWAL(op.Path) && (op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileWriteAt)
	}
	walSync := func(op errorfs.Op) bool {
		return isWAL(op.Path) && (op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData)
	}
	manifest := func(op errorfs.Op) bool { return strings.Contains(op.Path, "MANIFEST") && isWrite(op.Kind) }
	all := func(op errorfs.Op) bool { return isWrite(op.Kind) }
	writeTrigger := func(h *healStore) error { return h.write() }
	flushTrigger := func(h *healStore) error {
		if err := h.write(); err != nil {
			return err
		}
		if _, err := h.db.pdb().AsyncFlush(); err != nil {
			return err
		}
		deadline := time.Now().Add(healDeadline)
		for h.db.env().failed.Load() == nil && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		return h.db.writable()
	}
	for _, tg := range []struct {
		name    string
		ops     func(errorfs.Op) bool
		trigger func(*healStore) error
	}{
		{"WAL write", walWrite, writeTrigger},
		{"WAL sync", walSync, writeTrigger},
		{"MANIFEST", manifest, flushTrigger},
		{"checkpoint", all, func(h *healStore) error { return h.db.Checkpoint() }},
	} {
		for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EIO} {
			t.Run(fmt.Sprintf("%s/%s", tg.name, errno), func(t *testing.T) {
				h := newHealStore(t, errno, tg.ops)
				for range 30 {
					must(t, h.write())
				}
				must(t, h.db.Checkpoint())
				for range 20 {
					must(t, h.write())
				}
				h.fault.On()
				uncertain := h.next
				within(t, "the faulting operation", 10*time.Second, func() {
					if err := tg.trigger(h); err != nil {
						h.maybe = append(h.maybe, uncertain)
						if !errors.Is(err, ErrFailed) {
							t.Errorf("trigger: %v (want ErrFailed)", err)
						}
					}
				})
				if err := h.db.env().refusal(); err == nil || !errors.Is(err, ErrFailed) {
					t.Fatalf("store not failed by the fault: %v", err)
				}
				// While the disk stays full, writes stay refused and the
				// store is not reopened (the probe fails too).
				for range 5 {
					if err := h.write(); !errors.Is(err, ErrFailed) {
						t.Fatalf("write while failed: %v (want ErrFailed)", err)
					}
					time.Sleep(20 * time.Millisecond)
				}
				if n := h.db.Stats().Reopens; n != 0 {
					t.Fatalf("%d reopens while the fault is on", n)
				}
				gen := h.db.Generation()
				h.fault.Off()
				h.waitHealed()
				if h.db.Generation() == gen || h.db.Stats().Reopens == 0 {
					t.Fatalf("healed without a reopen: generation %d, reopens %d", h.db.Generation(), h.db.Stats().Reopens)
				}
				if !strings.Contains(strings.Join(h.db.Stats().Errors, "\n"), "reopened in place") {
					t.Errorf("no reopen event in Stats.Errors: %q", h.db.Stats().Errors)
				}
				for range 20 {
					must(t, h.write())
				}
				h.check(h.db)
				t.Logf("| %s | %s | reopens %d |", tg.name, errno, h.db.Stats().Reopens)

				crashed := h.mem.CrashClone(vfs.CrashCloneCfg{})
				must(t, h.db.Close())
				for _, img := range []vfs.FS{crashed, h.mem} {
					o := testOptions(img)
					o.Families = []FamilySpec{healFamily}
					db := openTest(t, img, "h", o)
					h.check(db)
					must(t, db.Close())
				}
			})
		}
	}
}

// TestHealOff: without ReopenOnFailure a failed store stays failed after
// the disk has room again (the behaviour a host that did not opt in
// keeps).
func TestHealOff(t *testing.T) {
	mem := vfs.NewCrashableMem()
	fault := errnoFault(syscall.ENOSPC, func(op errorfs.Op) bool { return isWAL(op.Path) && isWrite(op.Kind) })
	o := testOptions(faultFS(mem, fault))
	o.testProbeInterval = 10 * time.Millisecond
	db, err := Open("h", o)
	must(t, err)
	defer db.Close() // reports the failed WAL: not this test's subject
	c := newPosts(t, db, 12)
	fault.On()
	if _, err := c.Incr(1, "likes", 1); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("incr on a full disk: %v", err)
	}
	fault.Off()
	time.Sleep(100 * time.Millisecond)
	if _, err := c.Incr(1, "likes", 1); !errors.Is(err, ErrFailed) {
		t.Fatalf("incr after the disk has room, without ReopenOnFailure: %v (want ErrFailed)", err)
	}
	if db.Generation() != 0 {
		t.Fatalf("generation %d", db.Generation())
	}
}

// TestHealBatchAcrossReopen: a batch built before a reopen does not commit
// after it (its writes may rest on discarded state), and Counter handles
// made before the reopen read and write the recovered state.
func TestHealBatchAcrossReopen(t *testing.T) {
	h := newHealStore(t, syscall.ENOSPC, func(op errorfs.Op) bool { return isWAL(op.Path) && isWrite(op.Kind) })
	for range 10 {
		must(t, h.write())
	}
	stale := h.db.NewBatch()
	defer stale.Close()
	must(t, stale.Incr("posts", 1, "likes", 100))
	// A hook: Before runs before the swap, After after it, outside the
	// store's locks (it can write) and on the new generation.
	var mu sync.Mutex
	var events []string
	note := func(e string) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	unregister := h.db.OnReopen(ReopenHook{
		Before: func() { note(fmt.Sprintf("before %d", h.db.Generation())) },
		After: func(ok bool) error {
			_, err := h.c.Incr(49, "likes", 1)
			note(fmt.Sprintf("after %v %d %v", ok, h.db.Generation(), err))
			return nil
		},
	})
	h.fault.On()
	if err := h.write(); err != nil {
		h.maybe = append(h.maybe, h.next-1)
	}
	h.fault.Off()
	h.waitHealed()
	for deadline := time.Now().Add(healDeadline); ; time.Sleep(time.Millisecond) {
		mu.Lock()
		n := len(events)
		mu.Unlock()
		if n == 2 || time.Now().After(deadline) {
			break
		}
	}
	unregister()
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 2 || events[0] != "before 0" || events[1] != "after true 1 <nil>" {
		t.Fatalf("hook events %q", events)
	}
	h.likes[49]++
	if err := stale.Commit(); !errors.Is(err, ErrFailed) || !errors.Is(err, errReopened) {
		t.Fatalf("commit of a batch built before the reopen: %v", err)
	}
	stale.Reset()
	must(t, stale.Incr("posts", 1, "likes", 1))
	must(t, stale.Commit()) // a reset batch belongs to the new generation
	h.likes[1]++
	if _, err := h.c.Incr(2, "likes", 1); err != nil { // the handle from before the reopen
		t.Fatal(err)
	}
	h.likes[2]++
	h.check(h.db)
	if h.c.state() == h.c.cs || h.c.cs.dead.Load() == false {
		t.Fatalf("handle still on the old counter state")
	}
}

// TestHealConcurrentReaders fails and heals the store while readers read
// counters (hot and cold ranges), family keys, family iterations and
// snapshots, and writers write: no reader ever sees an error, writers see
// only ErrFailed or ErrDiskFull, and afterwards the store holds every
// acknowledged write.
func TestHealConcurrentReaders(t *testing.T) {
	h := newHealStore(t, syscall.ENOSPC, func(op errorfs.Op) bool { return isWAL(op.Path) && isWrite(op.Kind) })
	db := h.db
	// A cold range (range 3 of posts) for cold block reads.
	for i := uint64(0); i < 500; i++ {
		must(t, h.c.Set(3<<12|i, i, i, i))
	}
	must(t, db.SealRange(context.Background(), "posts", 3))
	for range 50 {
		must(t, h.write())
	}
	var stop atomic.Bool
	var readErr atomic.Pointer[error]
	fail := func(err error) { readErr.CompareAndSwap(nil, &err) }
	var wg sync.WaitGroup
	reader := func(fn func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if err := fn(); err != nil {
					fail(err)
					return
				}
			}
		}()
	}
	c := h.c
	reader(func() error { // hot counter reads
		_, err := c.Get(7, nil)
		return err
	})
	reader(func() error { // cold reads (blocks read again after the reopen: new reader ids)
		v, err := c.GetColumn(3<<12|uint64(time.Now().UnixNano()%500), "likes")
		if err == nil && v >= 500 {
			err = fmt.Errorf("cold row reads %d", v)
		}
		return err
	})
	reader(func() error { // family point reads
		_, ok, err := h.fam.Get(healKey(3), nil)
		if err == nil && !ok {
			err = errors.New("acknowledged family key 3 missing")
		}
		return err
	})
	reader(func() error { // family iteration
		it, err := h.fam.NewIter(nil)
		if err != nil {
			return err
		}
		n := 0
		for it.Next() {
			n++
		}
		if err := it.Close(); err != nil {
			return err
		}
		if n < 50 {
			return fmt.Errorf("iteration saw %d keys, 50 were acknowledged", n)
		}
		return nil
	})
	reader(func() error { // snapshots
		s, err := db.NewSnapshot()
		if err != nil {
			return err
		}
		_, _, err = s.Get(h.fam, healKey(10), nil)
		if cerr := s.Close(); err == nil {
			err = cerr
		}
		return err
	})
	reader(func() error { // stats
		db.Stats()
		return nil
	})
	// One writer: the model is not safe for concurrent use.
	var writeErrs atomic.Int64
	writer := func(d time.Duration) {
		end := time.Now().Add(d)
		for time.Now().Before(end) {
			before := h.next
			err := h.write()
			switch {
			case err == nil:
			case errors.Is(err, ErrFailed), errors.Is(err, ErrDiskFull):
				writeErrs.Add(1)
				if db.Generation() == 0 && len(h.maybe) == 0 {
					h.maybe = append(h.maybe, before) // the batch the fault caught
				}
			default:
				t.Errorf("write: %v", err)
				return
			}
		}
	}
	writer(50 * time.Millisecond)
	h.fault.On()
	writer(100 * time.Millisecond)
	h.fault.Off()
	h.waitHealed()
	writer(100 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if p := readErr.Load(); p != nil {
		t.Fatalf("a reader saw an error: %v", *p)
	}
	if writeErrs.Load() == 0 || db.Stats().Reopens == 0 {
		t.Fatalf("the fault did not fail and heal the store: %d write errors, %d reopens", writeErrs.Load(), db.Stats().Reopens)
	}
	h.check(db)
	if v, err := c.GetColumn(3<<12|42, "likes"); err != nil || v != 42 {
		t.Fatalf("cold row after the reopen: %d, %v", v, err)
	}
}

// TestHealStopsOnDamage: a reopen that finds damage (here a garbled
// OPTIONS file, ErrCorrupt before Pebble opens) leaves the store failed,
// reports why in Stats.Errors, and stops the healer: a restart would find
// the same, so it does not try again every second.
func TestHealStopsOnDamage(t *testing.T) {
	h := newHealStore(t, syscall.ENOSPC, func(op errorfs.Op) bool { return isWAL(op.Path) && isWrite(op.Kind) })
	must(t, h.write())
	h.fault.On()
	if err := h.write(); !errors.Is(err, ErrFailed) {
		t.Fatalf("write with a failing WAL: %v", err)
	}
	names, err := h.mem.List("h/db")
	must(t, err)
	for _, n := range names {
		if strings.HasPrefix(n, "OPTIONS-") {
			f, err := h.mem.Create("h/db/"+n, vfs.WriteCategoryUnspecified)
			must(t, err)
			_, err = f.Write([]byte("[Options]\n  merger=garbled\n"))
			must(t, err)
			must(t, f.Close())
		}
	}
	h.fault.Off()
	deadline := time.Now().Add(healDeadline)
	for !strings.Contains(strings.Join(h.db.Stats().Errors, "\n"), "reopen after a failure") {
		if time.Now().After(deadline) {
			t.Fatalf("no failed reopen reported: %q", h.db.Stats().Errors)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := h.write(); !errors.Is(err, ErrFailed) {
		t.Fatalf("write after a reopen found damage: %v", err)
	}
	// The healer stopped: it does not try again.
	within(t, "the healer stopping", 10*time.Second, h.db.heal.wg.Wait)
	total := h.db.Stats().ErrorsTotal
	time.Sleep(10 * 20 * time.Millisecond) // ten probe periods
	if n := h.db.Stats().ErrorsTotal; n != total || h.db.Stats().Reopens != 0 {
		t.Fatalf("the healer went on after finding damage: errors %d -> %d, reopens %d", total, n, h.db.Stats().Reopens)
	}
}

// TestHealJobsAfterHooks: the background job workers restart only after
// every ReopenHook.After has returned. A package reloads what it derived
// from the store in its After; a job that ran before that read the
// package's state of before the reopen and wrote decisions from it (the
// timeline's expiry job dropped the pending marks its stale index listed,
// none of the ones a failed-but-durable follow had stored). A job is
// queued, its handler registered once the store failed (so it runs first
// after the reopen); the hook's After waits until the job ran (the fault)
// or no background goroutine is left (they wait for the hooks).
func TestHealJobsAfterHooks(t *testing.T) {
	mem := vfs.NewCrashableMem()
	fault := errnoFault(syscall.ENOSPC, func(op errorfs.Op) bool {
		return isWAL(op.Path) && isWrite(op.Kind) || strings.HasSuffix(op.Path, probeFile) && isWrite(op.Kind)
	})
	o := testOptions(faultFS(mem, fault))
	o.DisableBackground = false
	o.JobWorkers = 1
	o.Durability = SyncAlways
	o.ReopenOnFailure = true
	o.testProbeInterval = 20 * time.Millisecond
	o.Families = []FamilySpec{healFamily}
	db, err := Open("h", o)
	must(t, err)
	defer db.Close()
	b := db.NewBatch()
	defer b.Close()
	must(t, b.Enqueue("after", nil, nil, 1))
	must(t, b.Commit())
	var inWindow, jobRan atomic.Bool
	ran, afterDone := make(chan struct{}, 1), make(chan struct{})
	defer db.OnReopen(ReopenHook{After: func(ok bool) error {
		if ok {
			defer close(afterDone)
		}
		for ok {
			if jobRan.Load() {
				inWindow.Store(true)
				return nil
			}
			buf := make([]byte, 1<<20)
			// A worker, running or not yet started, was created there.
			if !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "created by github.com/tallydb/tally/store.(*DB).startBackground") {
				return nil
			}
			time.Sleep(time.Millisecond)
		}
		return nil
	}})()
	fam, err := db.Family(healFamily.Name)
	must(t, err)
	fault.On()
	b.Reset()
	must(t, fam.Put(b, healKey(1), []byte("v")))
	if err := b.Commit(); !errors.Is(err, ErrFailed) && !errors.Is(err, ErrDiskFull) {
		t.Fatalf("commit with a failing WAL: %v", err)
	}
	must(t, db.RegisterJobHandler("after", func(ctx context.Context, run *JobRun) error {
		jobRan.Store(true)
		ran <- struct{}{}
		b := db.NewBatch()
		defer b.Close()
		return run.Commit(ctx, b, JobProgress{Done: 1, Total: 1, Finished: true})
	}))
	fault.Off()
	<-ran // after the reopen, a worker ran the job
	<-afterDone
	if inWindow.Load() {
		t.Fatal("a job ran after the reopen before the hooks' After returned")
	}
	if db.Generation() == 0 {
		t.Fatal("the job ran without a reopen")
	}
}

// reloadHook is a ReopenHook whose After fails while fail says so,
// recording what each call saw.
type reloadHook struct {
	db   *DB
	fail func(call int) error
	// calls, afterOK and refused are read once failed is closed or the
	// store has healed.
	mu       sync.Mutex
	befores  int
	afterOK  []bool
	refused  []error // Writable as each Release ran
	released chan struct{}
}

func (r *reloadHook) hook() ReopenHook {
	return ReopenHook{
		Before: func() {
			r.mu.Lock()
			r.befores++
			r.mu.Unlock()
		},
		After: func(ok bool) error {
			r.mu.Lock()
			r.afterOK = append(r.afterOK, ok)
			n := len(r.afterOK)
			r.mu.Unlock()
			return r.fail(n)
		},
		Release: func() {
			r.mu.Lock()
			r.refused = append(r.refused, r.db.Writable())
			r.mu.Unlock()
			r.released <- struct{}{}
		},
	}
}

// TestHealReloadError: a reopen succeeds but a package's ReopenHook.After
// cannot reload its state (here an injected error). The store must not
// take writes decided from the package's state of before the reopen:
// before the hook's Release it is failed again (writes refused with
// ErrFailed wrapping the package's error, reads going on), the healer
// reopens again once the disk takes writes, every hook runs again, and
// the store then takes writes, with every acknowledged batch present and
// Check clean. Before After returned an error, the reload's failure was
// dropped: the store took writes on the stale state, and nothing reloaded
// it again.
func TestHealReloadError(t *testing.T) {
	h := newHealStore(t, syscall.ENOSPC, func(op errorfs.Op) bool { return isWAL(op.Path) && isWrite(op.Kind) })
	for range 10 {
		must(t, h.write())
	}
	errReload := errors.New("injected: the package's family read failed")
	r := &reloadHook{db: h.db, released: make(chan struct{}, 4)}
	r.fail = func(call int) error {
		if call == 1 {
			// The disk (and the probe) fail again until the test clears
			// it: the store stays failed for the checks below.
			h.fault.On()
			return errReload
		}
		return nil
	}
	defer h.db.OnReopen(r.hook())()
	h.failWriteAndWait(t, r)

	if g := h.db.Generation(); g != 1 {
		t.Fatalf("generation %d after one reopen", g)
	}
	err := h.write()
	if !errors.Is(err, ErrFailed) || !errors.Is(err, errReload) {
		t.Fatalf("write after a reopen whose reload failed: %v (want ErrFailed wrapping %v)", err, errReload)
	}
	if err := h.db.Writable(); !errors.Is(err, ErrFailed) || !errors.Is(err, errReload) {
		t.Fatalf("Writable after a reopen whose reload failed: %v", err)
	}
	if _, err := h.c.GetColumn(3, "likes"); err != nil {
		t.Fatalf("read on the failed store: %v", err)
	}
	if _, _, err := h.fam.Get(healKey(3), nil); err != nil {
		t.Fatalf("family read on the failed store: %v", err)
	}
	r.mu.Lock()
	if len(r.refused) != 1 || !errors.Is(r.refused[0], errReload) {
		t.Fatalf("Writable as the failed hook's Release ran: %v", r.refused)
	}
	r.mu.Unlock()

	h.fault.Off()
	h.waitHealed()
	within(t, "the second reopen's hook", healDeadline, func() { <-r.released })
	r.mu.Lock()
	if r.befores != 2 || len(r.afterOK) != 2 || !r.afterOK[0] || !r.afterOK[1] || r.refused[1] != nil {
		t.Fatalf("hook calls: %d befores, afters %v, writable at release %v", r.befores, r.afterOK, r.refused)
	}
	r.mu.Unlock()
	if g := h.db.Generation(); g != 2 {
		t.Fatalf("generation %d after the second reopen", g)
	}
	if !strings.Contains(strings.Join(h.db.Stats().Errors, "\n"), "could not reload its state") {
		t.Fatalf("the failed reload is not reported: %q", h.db.Stats().Errors)
	}
	for range 5 {
		must(t, h.write())
	}
	h.check(h.db)
}

// TestHealReloadCorrupt: a hook whose reload finds damage (ErrCorrupt)
// fails the store and stops the healer, as a reopen that finds damage
// does: a restart would find the same.
func TestHealReloadCorrupt(t *testing.T) {
	h := newHealStore(t, syscall.ENOSPC, func(op errorfs.Op) bool { return isWAL(op.Path) && isWrite(op.Kind) })
	must(t, h.write())
	errDamage := fmt.Errorf("%w: injected: a package record is damaged", ErrCorrupt)
	r := &reloadHook{db: h.db, released: make(chan struct{}, 4), fail: func(int) error { return errDamage }}
	defer h.db.OnReopen(r.hook())()
	h.failWriteAndWait(t, r)
	within(t, "the healer stopping", healDeadline, h.db.heal.wg.Wait)
	if err := h.write(); !errors.Is(err, ErrFailed) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("write after a reload found damage: %v", err)
	}
	if n := h.db.Stats().Reopens; n != 1 {
		t.Fatalf("%d reopens, want 1", n)
	}
}

// failWriteAndWait writes once with the fault on (a write whose outcome is
// unknown joins h.maybe), turns it off and waits for the reopen to run r's
// hook.
func (h *healStore) failWriteAndWait(t *testing.T, r *reloadHook) {
	t.Helper()
	h.fault.On()
	if err := h.write(); err != nil {
		h.maybe = append(h.maybe, h.next-1)
	}
	h.fault.Off()
	within(t, "the reopen's hook", healDeadline, func() { <-r.released })
}
