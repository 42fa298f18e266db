package store

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tallydb/tally/internal/testutil"
)

// TestOpenFormat1Store opens a store written by the build before intents
// (commit 6e46852; testdata/format1-store.tar.gz): counter posts, 10 range
// bits, columns reposts/comments/likes with 16-bit hints; rows i = 0, 9,
// 18, ... < 4096 set to (i+1, i%5, i%7); ranges 0 and 1 sealed; likes += 100
// for i = 0, 30, ... < 1024 then merged; a checkpoint; then, in the log
// only, reposts += 1000 for i = 1024, 1084, ... < 2048 and deletes of
// i = 2048, 2138, ... < 4096; the process exited without Close. An old
// store simply has no intents: it must open, read every row, verify, and
// take seals, merges and checkpoints of the new build.
func TestOpenFormat1Store(t *testing.T) {
	dir := t.TempDir()
	untar(t, filepath.Join("testdata", "format1-store.tar.gz"), dir)
	m := rows{}
	for i := uint64(0); i < 4096; i += 9 {
		m[i] = []uint64{i + 1, i % 5, i % 7}
	}
	for i := uint64(0); i < 1024; i += 30 {
		if m[i] == nil {
			m[i] = make([]uint64, 3)
		}
		m[i][2] += 100
	}
	for i := uint64(1024); i < 2048; i += 60 {
		if m[i] == nil {
			m[i] = make([]uint64, 3)
		}
		m[i][0] += 1000
	}
	for i := uint64(2048); i < 4096; i += 90 {
		delete(m, i)
	}
	every := make([]uint64, 4096)
	for i := range every {
		every[i] = uint64(i)
	}
	opts := &Options{FS: vfs.Default, DisableBackground: true, ColdBlockSize: 64}
	ctx := context.Background()
	for round := range 2 {
		db := openTest(t, vfs.Default, dir, opts)
		if u := db.Stats().Recovery.Unaccounted; u != nil {
			t.Fatalf("round %d: unaccounted %v", round, u)
		}
		c, err := db.Counter("posts")
		must(t, err)
		m.check(t, c, "format 1 store", every...)
		must(t, db.Verify(ctx))
		// The new build's jobs on the old store: a seal, a merge, a
		// checkpoint; the next round reopens it.
		m.incr(t, c, 9, 1, 5)
		m.incr(t, c, 2052, 1, 5)
		must(t, db.SealRange(ctx, "posts", 2))
		must(t, db.Compact(ctx))
		must(t, db.Checkpoint())
		m.check(t, c, "after jobs", every...)
		checkTidy(t, db, "after jobs")
		must(t, db.Close())
	}
}

// untar extracts a gzipped tar of regular files and directories into dir.
func untar(t *testing.T, path, dir string) { testutil.Untar(t, path, dir) }
