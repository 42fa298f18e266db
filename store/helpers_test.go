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

// openTest opens a store in dir on fs and closes it at cleanup.
func openTest(t testing.TB, fs vfs.FS, dir string, o *Options) *DB {
	t.Helper()
	if o == nil {
		o = testOptions(fs)
	}
	db, err := Open(dir, o)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	t.Cleanup(func() { db.Close() })
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
// damage or repair keys), with tally's Pebble settings.
func rawPebbleOptions(fs vfs.FS) *pebble.Options {
	e := newPebbleEnv(fs, newErrorLog())
	return e.pebbleOptions(&Options{MemTableSize: 4 << 20}, nil, true)
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
