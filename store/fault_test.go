package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// TestWALFailure fails the WAL's writes and syncs under a running store:
// the write that hits the failure is not acknowledged, later writes are
// refused with ErrFailed, and a reopen (on what reached the disk) holds
// every acknowledged write and nothing else.
func TestWALFailure(t *testing.T) {
	mem := vfs.NewCrashableMem()
	walFault := &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".log") && (op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileSync) {
			return errorfs.ErrInjected
		}
		return nil
	})}
	opts := testOptions(errorfs.Wrap(mem, walFault))
	db, err := Open("w", opts)
	must(t, err)
	c := newPosts(t, db, 12)
	for i := 0; i < 10; i++ {
		_, err := c.Incr(1, "likes", 1)
		must(t, err)
	}
	walFault.On()
	_, err = c.Incr(1, "likes", 1)
	if !errors.Is(err, ErrFailed) {
		t.Fatalf("incr with a failing WAL: %v", err)
	}
	if _, err := c.Incr(2, "likes", 1); !errors.Is(err, ErrFailed) {
		t.Fatalf("incr after the failure: %v", err)
	}
	if err := db.CreateCounter("x", CounterOptions{}); !errors.Is(err, ErrFailed) {
		t.Fatalf("create after the failure: %v", err)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{})
	db.Close()

	db2 := openTest(t, crashed, "w", nil)
	c2, err := db2.Counter("posts")
	must(t, err)
	if v, _ := c2.GetColumn(1, "likes"); v != 10 {
		t.Fatalf("after reopen likes = %d, want the 10 acknowledged", v)
	}
	if v, _ := c2.GetColumn(2, "likes"); v != 0 {
		t.Fatalf("refused write is present: %d", v)
	}
}

// injectFS is errorfs.Wrap that also injects into recycled WAL files
// (errorfs.FS.ReuseForWrite returns the file unwrapped).
type injectFS struct {
	*errorfs.FS
	inj errorfs.Injector
}

func faultFS(fs vfs.FS, inj errorfs.Injector) vfs.FS {
	return injectFS{errorfs.Wrap(fs, inj), inj}
}

func (fs injectFS) ReuseForWrite(oldname, newname string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, cat)
	if err != nil {
		return nil, err
	}
	return errorfs.WrapFile(f, errorfs.InjectorFunc(func(op errorfs.Op) error {
		op.Path = newname
		return fs.inj.MaybeError(op)
	})), nil
}

// errnoFault returns an errorfs injector that fails the operations ops
// accepts with errno while on.
func errnoFault(errno syscall.Errno, ops func(op errorfs.Op) bool) *errorfs.Toggle {
	return &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if ops(op) {
			return &os.PathError{Op: "inject", Path: op.Path, Err: errno}
		}
		return nil
	})}
}

func isWrite(k errorfs.OpKind) bool {
	switch k {
	case errorfs.OpCreate, errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFileSync,
		errorfs.OpFileSyncData, errorfs.OpFileSyncTo, errorfs.OpFileFlush, errorfs.OpReuseForWrite:
		return true
	}
	return false
}

// within runs fn and fails the test if it has not returned after d: a
// fault must end in an error, never a hang.
func within(t *testing.T, what string, d time.Duration, fn func()) {
	t.Helper()
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		fn()
	}()
	select {
	case p := <-done:
		if p != nil {
			t.Fatalf("%s panicked: %v", what, p)
		}
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

// TestFaultMatrix fails each write path of a running store, with ENOSPC and
// with EIO: WAL writes, WAL syncs, flushes, compactions, checkpoints and
// MANIFEST writes. In every case the failing operation returns a named
// error within seconds (ErrDiskFull for ENOSPC, ErrFailed otherwise), later
// writes are refused at once rather than queued behind Pebble, reads keep
// returning the acknowledged values, Close returns, and a reopen of what
// reached the disk (a crash image) holds every acknowledged write. Where the
// failure is one Pebble can get over (sstable writes), clearing the fault
// lets writes resume without a reopen.
func TestFaultMatrix(t *testing.T) {
	type target struct {
		name string
		ops  func(op errorfs.Op) bool
		// trigger makes the store hit the fault; it returns the error the
		// store reported (nil if the fault only shows in later writes).
		trigger func(t *testing.T, db *DB, c *Counter) error
		// recovers: Pebble retries and writes resume once the fault is gone.
		recovers bool
	}
	incr := func(t *testing.T, db *DB, c *Counter) error {
		_, err := c.Incr(1, "likes", 1)
		return err
	}
	// flush makes Pebble flush a memtable that holds a write (not counted
	// as acknowledged: it may be refused) and waits for the outcome.
	flush := func(t *testing.T, db *DB, c *Counter) error {
		if err := c.Set(500, 1, 1, 1); err != nil {
			return err
		}
		if _, err := db.pdb().AsyncFlush(); err != nil {
			return err
		}
		for range 100 {
			if err := db.writable(); err != nil {
				return err
			}
			time.Sleep(10 * time.Millisecond)
		}
		return nil
	}
	targets := []target{
		{"WAL write", func(op errorfs.Op) bool {
			return isWAL(op.Path) && (op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileWriteAt)
		}, incr, false},
		{"WAL sync", func(op errorfs.Op) bool {
			return isWAL(op.Path) && (op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData)
		}, incr, false},
		{"flush", func(op errorfs.Op) bool { return isTable(op.Path) && isWrite(op.Kind) }, flush, true},
		// Sstable writes fail after the memtables were flushed, so the
		// first to fail are compactions'. Pebble's manual Compact may wait
		// behind its own failing automatic compactions: bounded by ctx.
		{"compaction", func(op errorfs.Op) bool { return isTable(op.Path) && isWrite(op.Kind) },
			func(t *testing.T, db *DB, c *Counter) error {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				err := db.pdb().Compact(ctx, []byte{0}, []byte{0xff}, false)
				if r := db.env().refusal(); r != nil {
					return r
				}
				return err
			}, true},
		{"checkpoint", func(op errorfs.Op) bool { return isWrite(op.Kind) },
			func(t *testing.T, db *DB, c *Counter) error { return db.Checkpoint() }, false},
		{"MANIFEST", func(op errorfs.Op) bool {
			return strings.Contains(op.Path, "MANIFEST") && isWrite(op.Kind)
		}, flush, false},
	}
	for _, tg := range targets {
		for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EIO} {
			t.Run(fmt.Sprintf("%s/%s", tg.name, errno), func(t *testing.T) {
				mem := vfs.NewCrashableMem()
				fault := errnoFault(errno, tg.ops)
				o := testOptions(faultFS(mem, fault))
				o.testProbeInterval = 100 * time.Millisecond
				db, err := Open("f", o)
				must(t, err)
				c := newPosts(t, db, 12)
				acked := 0
				for i := uint64(0); i < 40; i++ {
					must(t, c.Set(100+i, i, i, i))
					if i%10 == 9 {
						must(t, db.pdb().Flush()) // L0 files for the compaction
					}
				}
				for range 20 {
					_, err := c.Incr(1, "likes", 1)
					must(t, err)
					acked++
				}
				must(t, db.pdb().Flush()) // nothing left for a compaction to wait for
				named := ErrFailed
				if errno == syscall.ENOSPC {
					named = ErrDiskFull
				}
				fault.On()
				uncertain := 0 // writes that failed after reaching Pebble
				var triggerErr, laterErr error
				within(t, "the faulting operation", 10*time.Second, func() {
					if triggerErr = tg.trigger(t, db, c); triggerErr != nil {
						uncertain++
						if !errors.Is(triggerErr, named) {
							t.Errorf("trigger: %v (want %v)", triggerErr, named)
						}
					}
				})
				// Writes now fail fast with a named error (for faults that
				// show at the filesystem), or succeed (a compaction whose
				// failure Pebble keeps to itself).
				within(t, "a write after the fault", 10*time.Second, func() {
					for range 3 {
						_, err := c.Incr(1, "likes", 1)
						switch {
						case err == nil:
							acked++
						case errors.Is(err, named):
							laterErr = err
						default:
							t.Errorf("write after the fault: %v (want nil or %v)", err, named)
						}
					}
				})
				// Reads still see the acknowledged values.
				if v, err := c.GetColumn(1, "likes"); err != nil || v < uint64(acked) {
					t.Fatalf("read after the fault: %d, %v (acknowledged %d)", v, err, acked)
				}
				if v, err := c.GetColumn(105, "likes"); err != nil || v != 5 {
					t.Fatalf("read after the fault: %d, %v", v, err)
				}
				within(t, "Verify after the fault", 10*time.Second, func() {
					if err := db.Verify(context.Background()); err != nil {
						t.Errorf("verify after the fault: %v", err)
					}
				})
				// Pebble's background errors reach Stats (issue 12, defect
				// 9), not stderr.
				st := db.Stats()
				if tg.name != "WAL write" && tg.name != "WAL sync" && len(st.Errors) == 0 {
					t.Errorf("no background error in Stats after a failed %s", tg.name)
				}
				if laterErr != nil && st.WriteError == "" {
					t.Errorf("writes are refused (%v) but Stats.WriteError is empty", laterErr)
				}
				if tg.recovers {
					fault.Off()
					deadline := time.Now().Add(10 * time.Second)
					for db.writable() != nil && time.Now().Before(deadline) {
						db.pdb().AsyncFlush()
						time.Sleep(20 * time.Millisecond)
					}
					if err := db.writable(); err != nil {
						t.Fatalf("writes still refused after the fault cleared: %v", err)
					}
					_, err := c.Incr(1, "likes", 1)
					must(t, err)
					acked++
				}
				t.Logf("| %s | %s | %v | %v | %v |", tg.name, errno, triggerErr, laterErr, db.env().abandon.Load())
				crashed := mem.CrashClone(vfs.CrashCloneCfg{})
				within(t, "Close", 10*time.Second, func() { db.Close() })
				fault.Off()

				for _, img := range []vfs.FS{crashed, mem} {
					db2 := openTest(t, img, "f", nil)
					c2, err := db2.Counter("posts")
					must(t, err)
					v, err := c2.GetColumn(1, "likes")
					must(t, err)
					if v < uint64(acked) || v > uint64(acked+uncertain) {
						t.Fatalf("after reopen likes = %d, acknowledged %d", v, acked)
					}
					must(t, db2.Verify(context.Background()))
					must(t, db2.Close())
				}
			})
		}
	}
}

// TestErrorLog: background errors are kept, deduplicated and rate-limited,
// so a flush failing on every retry cannot flood Stats.
func TestErrorLog(t *testing.T) {
	l := newErrorLog()
	for range 50 {
		l.add(errors.New("same"))
	}
	for i := range 1000 {
		l.add(fmt.Errorf("distinct %d", i))
	}
	list, total := l.list()
	if total != 1050 || len(list) > maxErrors || list[0] != "same (50 times)" {
		t.Fatalf("total %d, kept %d: %q", total, len(list), list)
	}
	if list[len(list)-1] != fmt.Sprintf("distinct %d", maxErrors-2) {
		t.Fatalf("rate limit: newest kept %q", list[len(list)-1])
	}
}
