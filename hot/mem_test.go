package hot

import (
	"runtime"
	"testing"
)

// heapAlloc returns the live heap after two collections (the second sweeps
// what the first found).
func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestMemBytesMatchesHeap checks that MemBytes covers everything a table
// holds: the heap grows by the accounting within 3%, for a large table
// (slot arrays above 32 KiB, rounded to pages by the allocator) and for
// many small ones (size classes, segment headers, overflow maps).
// Accounting that leaves out a structure, or counts slot arrays by the
// length asked for rather than what the allocator gave, fails it.
func TestMemBytesMatchesHeap(t *testing.T) {
	for _, tc := range []struct {
		name          string
		tables, rows  int
		keyBits       uint
		overflowEvery int
	}{
		{"large", 1, 2_000_000, 32, 100_000},
		{"small", 2000, 200, 24, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := heapAlloc()
			tables := make([]*Table, tc.tables)
			mem := 0
			r := wyrand(7)
			for i := range tables {
				tb := newTable(t, tc.keyBits, []int{2, 2}, 0)
				for k := range uint64(tc.rows) {
					v := 1 + r.next()%50
					if int(k)%tc.overflowEvery == 0 {
						v = 70000 // overflow map entry
					}
					if err := tb.Put(benchKey(k)&(1<<tc.keyBits-1), []uint64{v, 0}); err != nil {
						t.Fatal(err)
					}
				}
				tables[i] = tb
			}
			for _, tb := range tables {
				mem += tb.MemBytes()
			}
			mem += int(unsafeSizeofSlice(tables))
			grew := float64(heapAlloc() - before)
			ratio := grew / float64(mem)
			t.Logf("%s: heap grew %.0f B, MemBytes %d, ratio %.3f", tc.name, grew, mem, ratio)
			if ratio < 0.97 || ratio > 1.03 {
				t.Errorf("heap grew %.0f B, MemBytes says %d (ratio %.3f, want 1 ± 0.03)", grew, mem, ratio)
			}
			runtime.KeepAlive(tables)
		})
	}
}

func unsafeSizeofSlice(s []*Table) uintptr { return uintptr(cap(s)) * 8 }

// TestHintCostsNoMore: a table presized by a size hint (what the store's
// Load does) ends at the bytes per row of a table grown row by row, for
// every stored key width. (Presized for the whole hint it cost 5-16% more.)
func TestHintCostsNoMore(t *testing.T) {
	for _, kb := range []uint{32, 48, 64} {
		for _, n := range []int{66_000, 500_000} {
			bpr := func(hint int) float64 {
				tb := newTable(t, kb, []int{2, 2}, hint)
				r := wyrand(3)
				for i := range n {
					if err := tb.Put(r.next()&(1<<kb-1), []uint64{1 + uint64(i)%50, 1}); err != nil {
						t.Fatal(err)
					}
				}
				return float64(tb.MemBytes()) / float64(tb.Len())
			}
			grown, hinted := bpr(0), bpr(n)
			if hinted > grown*1.01 {
				t.Errorf("keyBits %d, %d rows: hinted %.2f B/row, grown %.2f", kb, n, hinted, grown)
			}
		}
	}
}
