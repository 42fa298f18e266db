package store

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestPebbleCacheKeepsBlocks checks that Pebble's block cache keeps the
// blocks it reads once memtables have been allocated: Pebble reserves its
// memtables from the cache's capacity, and a cache of CacheSize alone held
// no block at all after two memtables (every read went to the files).
func TestPebbleCacheKeepsBlocks(t *testing.T) {
	fs := vfs.NewMem()
	o := testOptions(fs)
	o.CacheSize, o.MemTableSize = 1<<20, 1<<20
	o.Families = []FamilySpec{testPlain}
	db := openTest(t, fs, "d", o)
	f := family(t, db, "plain")
	// Several memtables' worth, so Pebble allocates a second one (and
	// keeps a flushed one to recycle), then everything in sstables.
	val := make([]byte, 64)
	const keys = 80_000
	for start := 0; start < keys; start += 1000 {
		b := db.NewBatch()
		for id := start; id < start+1000; id++ {
			must(t, f.Put(b, famKey(f, uint64(id)), val))
		}
		must(t, b.Commit())
	}
	must(t, db.Flush())
	if n := db.pdb().Metrics().Flush.Count; n < 3 {
		t.Fatalf("%d flushes: the test wants memtables rotated", n)
	}
	for _, id := range []uint64{7, keys / 2, keys - 3} {
		key := famKey(f, id)
		famGet(t, f, key) // may read the blocks from the file
		before := db.pdb().Metrics().BlockCache
		famGet(t, f, key)
		after := db.pdb().Metrics().BlockCache
		if after.Misses != before.Misses || after.Hits == before.Hits {
			t.Errorf("key %d read again: block cache hits %d→%d, misses %d→%d (size %d of %d bytes): want hits only",
				id, before.Hits, after.Hits, before.Misses, after.Misses, after.Size, pebbleCacheSize(db.opts))
		}
	}
}
