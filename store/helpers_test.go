package store

import (
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// testOptions returns options on an in-memory filesystem with background
// work disabled, so a test controls every checkpoint.
func testOptions(fs vfs.FS) *Options {
	return &Options{FS: fs, DisableBackground: true, CacheSize: 8 << 20, MemTableSize: 4 << 20}
}

// openTest opens a store in dir on fs; at cleanup it runs Check and closes
// it, failing the test if either fails (bbolt's btesting style). A test
// that closed the store itself is left alone.
func openTest(t testing.TB, fs vfs.FS, dir string, o *Options) *DB {
	t.Helper()
	if o == nil {
		o = testOptions(fs)
	}
	db, err := Open(dir, o)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if db.closed.Load() {
			return
		}
		if err := db.Check(); err != nil {
			t.Errorf("check at cleanup: %v", err)
		}
		if err := db.Close(); err != nil {
			t.Errorf("close at cleanup: %v", err)
		}
	})
	return db
}

// newPosts creates counter "posts" with columns reposts/comments/likes.
func newPosts(t testing.TB, db *DB, rangeBits uint8) *Counter {
	t.Helper()
	must(t, db.CreateCounter("posts", CounterOptions{RangeBits: rangeBits}))
	must(t, db.AddColumn("posts", "reposts", ColumnOptions{HintBits: 16}))
	must(t, db.AddColumn("posts", "comments", ColumnOptions{HintBits: 16}))
	must(t, db.AddColumn("posts", "likes", ColumnOptions{HintBits: 8, MaxBits: 64}))
	c, err := db.Counter("posts")
	must(t, err)
	return c
}

// rawPebbleOptions opens a store's Pebble directory directly (tests that
// damage or repair keys), with tally's Pebble settings and Merger (Pebble
// refuses another Merger name than the store was created with).
func rawPebbleOptions(fs vfs.FS) *pebble.Options {
	e := newPebbleEnv(fs, newErrorLog(), "", 4<<20)
	o := e.pebbleOptions(&Options{MemTableSize: 4 << 20}, nil, true)
	o.Merger = (&mergerTable{}).pebbleMerger(mergerName)
	return o
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func get(t testing.TB, c *Counter, id uint64) []uint64 {
	t.Helper()
	v, err := c.Get(id, nil)
	must(t, err)
	return v
}

// crashStop stops db the way a crash would, after Pebble closed its files
// (its WAL ends with a clean EOF trailer): no checkpoint, no cleanup.
func crashStop(t testing.TB, db *DB) {
	t.Helper()
	db.stopBackground()
	db.closed.Store(true)
	must(t, db.pdb().Close())
	must(t, db.lock.Close())
}

// cloneFS copies every file under dir of src into a new MemFS.
func cloneFS(t testing.TB, src vfs.FS, dir string) *vfs.MemFS {
	t.Helper()
	dst := vfs.NewMem()
	var walk func(d string)
	walk = func(d string) {
		must(t, dst.MkdirAll(d, 0o755))
		names, err := src.List(d)
		must(t, err)
		for _, n := range names {
			p := src.PathJoin(d, n)
			st, err := src.Stat(p)
			must(t, err)
			if st.IsDir() {
				walk(p)
				continue
			}
			must(t, vfs.CopyAcrossFS(src, p, dst, p))
		}
	}
	walk(dir)
	return dst
}

// dirState returns every file under dir with its contents, to check that a
// failed Open changed nothing.
func dirState(t testing.TB, fs vfs.FS, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(d string)
	walk = func(d string) {
		names, err := fs.List(d)
		must(t, err)
		for _, n := range names {
			p := fs.PathJoin(d, n)
			st, err := fs.Stat(p)
			must(t, err)
			if st.IsDir() {
				out[p+"/"] = ""
				walk(p)
				continue
			}
			out[p] = string(readFile(t, fs, p))
		}
	}
	walk(dir)
	return out
}

func readFile(t testing.TB, fs vfs.FS, path string) []byte {
	t.Helper()
	f, err := fs.Open(path)
	must(t, err)
	defer f.Close()
	st, err := f.Stat()
	must(t, err)
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && st.Size() > 0 {
		t.Fatal(err)
	}
	return b
}

// flipByte XORs the byte at off of path with mask.
func flipByte(t testing.TB, fs vfs.FS, path string, off int64, mask byte) {
	t.Helper()
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	must(t, err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, off)
	must(t, err)
	b[0] ^= mask
	_, err = f.WriteAt(b, off)
	must(t, err)
	must(t, f.Sync())
}

// openWithin opens a store and fails the test if Open takes longer than d
// (a hang) or panics.
func openWithin(t testing.TB, dir string, o *Options, d time.Duration) (*DB, error) {
	t.Helper()
	type result struct {
		db  *DB
		err error
		p   any
	}
	ch := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			r.p = recover()
			ch <- r
		}()
		r.db, r.err = Open(dir, o)
	}()
	select {
	case r := <-ch:
		if r.p != nil {
			t.Fatalf("open %s panicked: %v", dir, r.p)
		}
		return r.db, r.err
	case <-time.After(d):
		t.Fatalf("open %s did not return within %v", dir, d)
	}
	return nil, nil
}

// exhaustive reports whether TALLY_FAULT_EXHAUSTIVE asks for every byte of
// every file instead of a sample.
func exhaustive() bool { return os.Getenv("TALLY_FAULT_EXHAUSTIVE") != "" }

// sampleOffsets returns the offsets of a file of size bytes to damage: the
// first and last edge bytes (headers, footers) and n drawn uniformly from
// the rest. TALLY_FAULT_EXHAUSTIVE=1 takes every byte of files up to 16 KiB
// and 4096 of larger ones.
func sampleOffsets(size int64, n, edge int, rng *rand.Rand) []int64 {
	e := int64(edge)
	if exhaustive() {
		if size > 16<<10 {
			n, e = 4096, 256
		} else {
			n = int(size)
		}
	}
	if size <= int64(n)+2*e {
		out := make([]int64, size)
		for i := range out {
			out[i] = int64(i)
		}
		return out
	}
	var out []int64
	for i := int64(0); i < e; i++ {
		out = append(out, i, size-1-i)
	}
	for range n {
		out = append(out, e+rng.Int64N(size-2*e))
	}
	return out
}
