package store

import (
	"context"
	"runtime"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestMemBytesMatchesHeap checks that Stats' MemBytes covers what the hot
// tier holds: loading rows grows the live heap by the accounting within
// 10%, for one large range and for many small ones (per-range costs). The
// store is on the real filesystem (a MemFS keeps files on the Go heap) and
// warmed up by a first load and checkpoint, so Pebble's own buffers are in
// the baseline; what Pebble allocates per write is the rest of the margin.
// Before the accounting counted allocator size classes and range states
// (commit 5cb8b63), they measured 1.06 and 1.16.
func TestMemBytesMatchesHeap(t *testing.T) {
	for _, tc := range []struct {
		name   string
		bits   uint8
		rows   int
		stride uint64
	}{
		{"one range", 0, 2_000_000, 1},
		{"many ranges", 12, 200_000, 97}, // ~4,700 ranges of ~42 rows
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A memtable that takes the whole load: no flush or compaction
			// (whose Go-side buffers would count) runs during it.
			db := openTest(t, vfs.Default, t.TempDir(), &Options{DisableBackground: true, MemTableSize: 128 << 20})
			must(t, db.CreateCounter("posts", CounterOptions{RangeBits: tc.bits}))
			must(t, db.AddColumn("posts", "likes", ColumnOptions{}))
			must(t, db.AddColumn("posts", "reposts", ColumnOptions{}))
			load := func(from, n int) {
				in := LoadRows{IDs: make([]uint64, n), Vals: make([]uint64, 2*n)}
				for i := range n {
					in.IDs[i] = uint64(from+i) * tc.stride
					in.Vals[2*i], in.Vals[2*i+1] = 1+uint64(i)%50, uint64(i)%3
				}
				_, err := db.Load(context.Background(), "posts", in, nil)
				must(t, err)
				// The checkpoint's flush would still hold Pebble's
				// sstable-writing buffers (a heap profile showed 2.6 MB).
				must(t, db.Flush())
			}
			load(1<<40, 1000) // warm-up, in ranges of its own
			mem0 := counterStats(t, db, "posts").MemBytes
			heap0 := liveHeap()
			load(0, tc.rows)
			heap1 := liveHeap()
			mem := counterStats(t, db, "posts").MemBytes - mem0
			grew := float64(heap1) - float64(heap0)
			ratio := grew / float64(mem)
			t.Logf("%s: heap grew %.0f B, MemBytes grew %d (%.2f B/row), ratio %.3f", tc.name, grew, mem, float64(mem)/float64(tc.rows), ratio)
			if ratio < 0.9 || ratio > 1.1 {
				t.Errorf("heap grew %.0f B, MemBytes %d: ratio %.3f, want 1 ± 0.1", grew, mem, ratio)
			}
		})
	}
}
