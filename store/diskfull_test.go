package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// TestDiskFullOpen reopens a store whose WAL must be flushed on a disk that
// refuses new sstables (issue 12, defect 2: Open never returned, Pebble's
// flush retried forever, each retry left a file behind). Open must fail
// with ErrDiskFull within seconds, a read-only Open must serve every
// acknowledged write, and once space is back the store opens, verifies and
// holds everything, in the same process (the abandoned Pebble instance let
// go of the directory lock).
func TestDiskFullOpen(t *testing.T) {
	mem := vfs.NewMem()
	db, err := Open("d", testOptions(mem))
	must(t, err)
	c := newPosts(t, db, 12)
	for i := uint64(0); i < 200; i++ {
		must(t, c.Set(i, i, i+1, i+2))
	}
	crashStop(t, db) // the writes are in the WAL only

	full := errnoFault(syscall.ENOSPC, func(op errorfs.Op) bool { return isTable(op.Path) && isWrite(op.Kind) })
	full.On()
	fs := faultFS(mem, full)
	start := time.Now()
	o := testOptions(fs)
	o.testOpenGrace = 200 * time.Millisecond
	_, err = openWithin(t, "d", o, 10*time.Second)
	if !errors.Is(err, ErrDiskFull) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("open on a full disk: %v (want ErrDiskFull wrapping ENOSPC)", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("open took %v to fail", d)
	}

	ro := testOptions(fs)
	ro.ReadOnly = true
	db, err = openWithin(t, "d", ro, 10*time.Second)
	must(t, err)
	c, err = db.Counter("posts")
	must(t, err)
	if got := get(t, c, 150); got[2] != 152 {
		t.Fatalf("read-only read on a full disk: %v", got)
	}
	if _, err := c.Incr(1, "likes", 1); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("write to a read-only store: %v", err)
	}
	must(t, db.Verify(context.Background()))
	must(t, db.Close())

	full.Off()
	db = openTest(t, fs, "d", nil)
	c, err = db.Counter("posts")
	must(t, err)
	for i := uint64(0); i < 200; i++ {
		if got := get(t, c, i); got[0] != i || got[2] != i+2 {
			t.Fatalf("row %d after space came back: %v", i, got)
		}
	}
	must(t, db.Verify(context.Background()))
}

// TestPreflight: a writable Open that cannot have the space to flush the
// WAL it replays is refused before Pebble starts, and changes nothing.
func TestPreflight(t *testing.T) {
	mem := vfs.NewMem()
	db, err := Open("p", testOptions(mem))
	must(t, err)
	c := newPosts(t, db, 12)
	for i := uint64(0); i < 100; i++ {
		must(t, c.Set(i, i, 0, 0))
	}
	crashStop(t, db)
	mem.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 1 << 10, TotalBytes: 1 << 30, UsedBytes: 1<<30 - 1<<10})
	before := dirState(t, mem, "p")
	if _, err := Open("p", testOptions(mem)); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("open with 1 KiB free: %v", err)
	}
	if !mapsEqual(before, dirState(t, mem, "p")) {
		t.Fatal("the refused Open changed the directory")
	}
	ro := testOptions(mem)
	ro.ReadOnly = true
	db, err = Open("p", ro)
	must(t, err)
	must(t, db.Close())
	if !mapsEqual(before, dirState(t, mem, "p")) {
		t.Fatal("a read-only Open and Close changed the directory")
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestDiskFullReal fills a real filesystem (a small tmpfs; needs root and
// TALLY_DISKFULL_TEST=1): writes must end in ErrDiskFull within seconds,
// never hang or panic, reads of acknowledged writes keep working, a
// read-only Open works on the full disk, and once space is freed the store
// opens, verifies and holds every acknowledged write.
func TestDiskFullReal(t *testing.T) {
	if os.Getenv("TALLY_DISKFULL_TEST") == "" {
		t.Skip("set TALLY_DISKFULL_TEST=1 to fill a real (tmpfs) filesystem; needs root")
	}
	for _, free := range []int64{256 << 10, 1 << 20, 3 << 20, 6 << 20} {
		t.Run(fmt.Sprintf("free=%dKiB", free>>10), func(t *testing.T) { fillDisk(t, free) })
	}
	for _, free := range []int64{64 << 10, 256 << 10, 1 << 20} {
		t.Run(fmt.Sprintf("heal/free=%dKiB", free>>10), func(t *testing.T) { fillDiskHeal(t, free) })
	}
}

// fillDiskHeal fills a tmpfs under a store opened with ReopenOnFailure
// until its WAL write fails (a memtable larger than the space left, so no
// flush comes first), checks that writes stay refused and reads go on
// while the disk is full, frees the space and checks that writes resume
// through the same handle, without a restart, with every acknowledged
// batch there (and after a close and a new Open too).
func fillDiskHeal(t *testing.T, free int64) {
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v: %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	dir := filepath.Join(mnt, "store")
	opts := &Options{MemTableSize: 8 << 20, CacheSize: 4 << 20, CheckpointLogBytes: -1, CheckpointInterval: -1,
		CompactionInterval: -1, ReopenOnFailure: true}
	db, err := Open(dir, opts)
	must(t, err)
	defer db.Close()
	c := newPosts(t, db, 16)
	var st syscall.Statfs_t
	must(t, syscall.Statfs(mnt, &st))
	filler := filepath.Join(mnt, "filler")
	must(t, os.WriteFile(filler, make([]byte, int64(st.Bavail)*st.Bsize-free), 0o644))

	// Batch n sets rows n*100..n*100+99 to (n, k, 7).
	write := func(n uint64) error {
		b := db.NewBatch()
		defer b.Close()
		for k := uint64(0); k < 100; k++ {
			b.Set("posts", n*100+k, n, k, 7)
		}
		return b.Commit()
	}
	var acked uint64 // batches 0..acked-1 are acknowledged
	var werr error
	deadline := time.Now().Add(2 * time.Minute)
	for werr == nil && time.Now().Before(deadline) {
		within(t, "a write on a filling disk", 10*time.Second, func() {
			if werr = write(acked); werr == nil {
				acked++
			}
		})
	}
	if !errors.Is(werr, ErrFailed) || !errors.Is(werr, ErrDiskFull) {
		t.Fatalf("writes on a full disk ended with %v (want ErrFailed and ErrDiskFull: the WAL) after %d batches", werr, acked)
	}
	t.Logf("WAL failed after %d batches: %v", acked, werr)
	uncertain := acked // the batch that failed: present or absent after the reopen
	const after = 10   // batches written after the heal: uncertain+1..uncertain+after
	healed := false
	check := func(db *DB) {
		c, err := db.Counter("posts")
		must(t, err)
		for b := uint64(0); b < acked; b++ {
			if got := get(t, c, b*100+99); got[0] != b || got[1] != 99 {
				t.Fatalf("batch %d: %v", b, got)
			}
		}
		if got := get(t, c, uncertain*100+99); got[1] != 0 && got[1] != 99 {
			t.Fatalf("the uncertain batch: %v", got)
		}
		for b := uncertain + 1; healed && b <= uncertain+after; b++ {
			if got := get(t, c, b*100+99); got[0] != b || got[1] != 99 {
				t.Fatalf("batch %d (after the heal): %v", b, got)
			}
		}
	}
	time.Sleep(3 * probeInterval) // the disk stays full: no reopen
	if _, err := c.Incr(1, "likes", 1); !errors.Is(err, ErrFailed) {
		t.Fatalf("a write while the disk is full: %v", err)
	}
	if n := db.Stats().Reopens; n != 0 {
		t.Fatalf("%d reopens while the disk is full", n)
	}
	check(db) // reads go on
	must(t, os.Remove(filler))
	start := time.Now()
	deadline = time.Now().Add(30 * time.Second)
	for {
		_, err := c.Incr(1, "likes", 1)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrFailed) && !errors.Is(err, ErrDiskFull) {
			t.Fatalf("a write while healing: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes still refused 30s after the space was freed: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("writes resumed %v after the space was freed (%d reopens)", time.Since(start).Round(time.Millisecond), db.Stats().Reopens)
	for b := uncertain + 1; b <= uncertain+after; b++ {
		must(t, write(b))
	}
	healed = true
	check(db)
	must(t, db.Verify(context.Background()))
	must(t, db.Check())
	must(t, db.Close())
	db, err = Open(dir, opts)
	must(t, err)
	check(db)
	must(t, db.Verify(context.Background()))
	must(t, db.Close())
}

func fillDisk(t *testing.T, free int64) {
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v: %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	dir := filepath.Join(mnt, "store")
	opts := &Options{MemTableSize: 1 << 20, CacheSize: 4 << 20, CheckpointLogBytes: 512 << 10,
		CompactionInterval: -1}
	db, err := Open(dir, opts)
	must(t, err)
	c := newPosts(t, db, 16)

	// Leave free bytes.
	var st syscall.Statfs_t
	must(t, syscall.Statfs(mnt, &st))
	filler := filepath.Join(mnt, "filler")
	must(t, os.WriteFile(filler, make([]byte, int64(st.Bavail)*st.Bsize-free), 0o644))

	var acked uint64
	var werr error
	deadline := time.Now().Add(2 * time.Minute)
	for werr == nil && time.Now().Before(deadline) {
		within(t, "a write on a filling disk", 10*time.Second, func() {
			b := db.NewBatch()
			defer b.Close()
			for k := uint64(0); k < 100; k++ {
				b.Set("posts", acked*100+k, acked, k, 7)
			}
			if werr = b.Commit(); werr == nil {
				acked++
			}
		})
	}
	if !errors.Is(werr, ErrDiskFull) {
		t.Fatalf("writes on a full disk ended with %v (want ErrDiskFull) after %d batches", werr, acked)
	}
	t.Logf("disk full after %d batches: %v", acked, werr)
	within(t, "a second write", 5*time.Second, func() {
		if _, err := c.Incr(1, "likes", 1); !errors.Is(err, ErrDiskFull) {
			t.Errorf("second write: %v", err)
		}
	})
	check := func(db *DB) {
		c, err := db.Counter("posts")
		must(t, err)
		for b := uint64(0); b < acked; b += max(1, acked/50) {
			if got := get(t, c, b*100+99); got[0] != b || got[1] != 99 {
				t.Fatalf("batch %d: %v", b, got)
			}
		}
	}
	check(db)
	within(t, "Close on a full disk", 10*time.Second, func() { db.Close() })

	within(t, "Open on a full disk", 15*time.Second, func() {
		if db, err := Open(dir, opts); err == nil {
			t.Logf("open on the full disk: ok (enough space was left to recover)")
			db.Close()
		} else if !errors.Is(err, ErrDiskFull) {
			t.Errorf("open on a full disk: %v", err)
		} else {
			t.Logf("open on the full disk: %v", err)
		}
	})
	ro := *opts
	ro.ReadOnly = true
	within(t, "read-only Open on a full disk", 10*time.Second, func() {
		db, err := Open(dir, &ro)
		must(t, err)
		check(db)
		must(t, db.Verify(context.Background()))
		must(t, db.Close())
	})

	must(t, os.Remove(filler))
	db, err = Open(dir, opts)
	must(t, err)
	check(db)
	must(t, db.Verify(context.Background()))
	_, err = c.Incr(1, "likes", 1) // the old handle's DB is closed
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("old handle: %v", err)
	}
	must(t, db.Close())
}
