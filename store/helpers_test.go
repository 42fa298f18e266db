package store

import (
	"testing"

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

// rawPebbleOptions opens a store's Pebble instance directly (to damage or
// repair bytes underneath tally): Pebble refuses a Merger name other than
// the one the store was created with.
func rawPebbleOptions(fs vfs.FS) *pebble.Options {
	return &pebble.Options{FS: fs, Logger: quietLogger{}, Merger: (&mergerTable{}).pebbleMerger(mergerName)}
}
