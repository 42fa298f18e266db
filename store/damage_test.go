package store

import (
	"errors"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestOpenDamagedLogAndChunk damages a log record and a checkpoint chunk on
// disk: Open must fail with ErrCorrupt naming what is damaged, change
// nothing, and open normally once the bytes are restored.
func TestOpenDamagedLogAndChunk(t *testing.T) {
	for _, what := range []string{"log", "chunk", "schema"} {
		t.Run(what, func(t *testing.T) {
			fs := vfs.NewMem()
			db, err := Open("d", testOptions(fs))
			must(t, err)
			c := newPosts(t, db, 12)
			for i := uint64(0); i < 50; i++ {
				must(t, c.Set(i, i+1, 0, 0))
			}
			must(t, db.Checkpoint())
			_, err = c.Incr(3, "likes", 7) // one record after the checkpoint
			must(t, err)
			var lo, hi []byte
			switch what {
			case "log":
				lo, hi = []byte{famLog}, familyEnd(famLog)
			case "chunk":
				lo, hi = []byte{famCheckpoint}, familyEnd(famCheckpoint)
			case "schema":
				lo = appendMetaKey(nil, metaCounter)
				hi = prefixEnd(lo)
			}
			var key, good []byte
			must(t, db.scan(lo, hi, func(k, v []byte) error {
				if key == nil {
					key, good = slices.Clone(k), slices.Clone(v)
				}
				return nil
			}))
			if key == nil {
				t.Fatalf("no %s key", what)
			}
			bad := slices.Clone(good)
			bad[len(bad)/2] ^= 0x08
			must(t, db.pdb.Set(key, bad, pebble.Sync))
			// Crash-like stop: no checkpoint on the way out.
			db.stopBackground()
			db.closed.Store(true)
			must(t, db.pdb.Close())
			must(t, db.lock.Close())

			for range 2 { // the failed Open changed nothing: same error again
				_, err := Open("d", testOptions(fs))
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("open with a damaged %s: %v", what, err)
				}
			}
			// Restore the bytes through Pebble directly and open again.
			pdb, err := pebble.Open("d/db", rawPebbleOptions(fs))
			must(t, err)
			must(t, pdb.Set(key, good, pebble.Sync))
			must(t, pdb.Close())
			db = openTest(t, fs, "d", nil)
			c, err = db.Counter("posts")
			must(t, err)
			if got := get(t, c, 3); !slices.Equal(got, []uint64{4, 0, 7}) {
				t.Fatalf("row after repair = %v", got)
			}
		})
	}
}
