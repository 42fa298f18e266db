package hot

import (
	"errors"
	"math"
	"slices"
	"testing"
)

// newTable creates a table and fails the test on error.
func newTable(t testing.TB, keyBits uint, widths []int, hint int) *Table {
	t.Helper()
	tb, err := New(keyBits, widths, hint)
	if err != nil {
		t.Fatalf("New(%d, %v, %d): %v", keyBits, widths, hint, err)
	}
	return tb
}

func check(t testing.TB, tb *Table) {
	t.Helper()
	if err := tb.Check(); err != nil {
		t.Fatal(err)
	}
}

func mustPut(t testing.TB, tb *Table, key uint64, vals ...uint64) {
	t.Helper()
	if err := tb.Put(key, vals); err != nil {
		t.Fatalf("Put(%d, %v): %v", key, vals, err)
	}
}

func TestNewBadLayout(t *testing.T) {
	for _, tc := range []struct {
		keyBits uint
		widths  []int
	}{
		{7, []int{2}},
		{65, []int{2}},
		{0, []int{2}},
		{32, nil},
		{32, []int{}},
		{32, []int{3}},
		{32, []int{2, 8}},
		{32, []int{0}},
		{32, []int{-1}},
		{32, make([]int, 17)},
	} {
		if _, err := New(tc.keyBits, tc.widths, 0); !errors.Is(err, ErrBadLayout) {
			t.Errorf("New(%d, %v) = %v, want ErrBadLayout", tc.keyBits, tc.widths, err)
		}
	}
	w16 := slices.Repeat([]int{1}, 16)
	for _, kb := range []uint{8, 9, 15, 16, 17, 23, 24, 32, 40, 47, 48, 56, 63, 64} {
		tb := newTable(t, kb, w16, 0)
		if tb.NumColumns() != 16 || tb.Len() != 0 {
			t.Fatalf("keyBits %d: NumColumns %d Len %d", kb, tb.NumColumns(), tb.Len())
		}
		if tb.storedBits%8 != 0 || tb.storedBits < 8 {
			t.Fatalf("keyBits %d: storedBits %d", kb, tb.storedBits)
		}
		check(t, tb)
	}
}

func TestSegmentGeometry(t *testing.T) {
	for kb, want := range map[uint]struct{ segs, keyBytes int }{
		8:  {1, 1},
		12: {16, 1},
		16: {256, 1},
		20: {4096, 1},
		24: {256, 2},
		32: {256, 3},
		40: {256, 4},
		48: {256, 5},
	} {
		tb := newTable(t, kb, []int{2, 2}, 0)
		if tb.NumSegments() != want.segs || tb.keyBytes != want.keyBytes {
			t.Errorf("keyBits %d: %d segments, %d key bytes; want %+v", kb, tb.NumSegments(), tb.keyBytes, want)
		}
	}
}

func TestMixBijective(t *testing.T) {
	for _, kb := range []uint{8, 12, 16} {
		m := newMixer(kb)
		seen := make([]bool, 1<<kb)
		for x := range uint64(1 << kb) {
			y := m.mix(x)
			if y > m.mask || seen[y] {
				t.Fatalf("bits %d: mix(%d) = %d repeats or out of range", kb, x, y)
			}
			seen[y] = true
			if m.unmix(y) != x {
				t.Fatalf("bits %d: unmix(mix(%d)) = %d", kb, x, m.unmix(y))
			}
		}
	}
	for _, kb := range []uint{17, 31, 32, 40, 48} {
		m := newMixer(kb)
		for x := range uint64(100000) {
			for _, k := range []uint64{x, m.mask - x, x * 0x12345 & m.mask} {
				if m.unmix(m.mix(k)) != k {
					t.Fatalf("bits %d: roundtrip of %d", kb, k)
				}
			}
		}
	}
}

func TestBasic(t *testing.T) {
	tb := newTable(t, 32, []int{2, 2}, 0)
	if v, ok := tb.Get(5, nil); ok || !slices.Equal(v, []uint64{0, 0}) {
		t.Fatalf("Get absent = %v, %v", v, ok)
	}
	mustPut(t, tb, 5, 1, 2)
	mustPut(t, tb, 0, 7)
	mustPut(t, tb, 1<<32-1, 0, 9)
	check(t, tb)
	if tb.Len() != 3 {
		t.Fatalf("Len %d", tb.Len())
	}
	for key, want := range map[uint64][]uint64{5: {1, 2}, 0: {7, 0}, 1<<32 - 1: {0, 9}} {
		got, ok := tb.Get(key, make([]uint64, 5))
		if !ok || !slices.Equal(got, want) {
			t.Errorf("Get(%d) = %v, %v; want %v", key, got, ok, want)
		}
		for c := range want {
			if g := tb.GetColumn(key, c); g != want[c] {
				t.Errorf("GetColumn(%d, %d) = %d", key, c, g)
			}
		}
	}
	// Overwrite, shorten, then zero (= delete).
	mustPut(t, tb, 5, 3)
	if got, _ := tb.Get(5, nil); !slices.Equal(got, []uint64{3, 0}) {
		t.Fatalf("after short Put: %v", got)
	}
	mustPut(t, tb, 5, 0, 0)
	if _, ok := tb.Get(5, nil); ok || tb.Len() != 2 {
		t.Fatalf("zero Put did not delete: ok %v Len %d", ok, tb.Len())
	}
	mustPut(t, tb, 5)
	if err := tb.Delete(0); err != nil {
		t.Fatal(err)
	}
	if err := tb.Delete(0); err != nil { // absent: no-op
		t.Fatal(err)
	}
	check(t, tb)
	if tb.Len() != 1 {
		t.Fatalf("Len %d", tb.Len())
	}
	if err := tb.Delete(1<<32 - 1); err != nil {
		t.Fatal(err)
	}
	check(t, tb)
	if tb.Len() != 0 || tb.slotBytes.Load() != 0 {
		t.Fatalf("empty table holds Len %d slot bytes %d", tb.Len(), tb.slotBytes.Load())
	}
}

func TestBadInput(t *testing.T) {
	tb := newTable(t, 16, []int{1, 4}, 0)
	mustPut(t, tb, 3, 1, 1)
	if err := tb.Put(1<<16, []uint64{1}); !errors.Is(err, ErrKeyRange) {
		t.Errorf("Put big key: %v", err)
	}
	if err := tb.Put(math.MaxUint64, []uint64{1}); !errors.Is(err, ErrKeyRange) {
		t.Errorf("Put max key: %v", err)
	}
	if err := tb.Delete(1 << 16); !errors.Is(err, ErrKeyRange) {
		t.Errorf("Delete big key: %v", err)
	}
	if err := tb.Put(3, []uint64{1, 2, 3}); !errors.Is(err, ErrColumn) {
		t.Errorf("Put 3 values: %v", err)
	}
	if v, ok := tb.Get(1<<16, nil); ok || !slices.Equal(v, []uint64{0, 0}) {
		t.Errorf("Get big key = %v, %v", v, ok)
	}
	for _, c := range []int{-1, 2, 100} {
		if v := tb.GetColumn(3, c); v != 0 {
			t.Errorf("GetColumn(3, %d) = %d", c, v)
		}
	}
	if v := tb.GetColumn(1<<16, 0); v != 0 {
		t.Errorf("GetColumn big key = %d", v)
	}
	for _, w := range []int{0, 3, 8, -2} {
		if err := tb.CanAddColumn(w); !errors.Is(err, ErrBadLayout) {
			t.Errorf("CanAddColumn(%d) = %v", w, err)
		}
		if err := tb.AddColumn(w); !errors.Is(err, ErrBadLayout) {
			t.Errorf("AddColumn(%d) = %v", w, err)
		}
	}
	for tb.NumColumns() < MaxColumns {
		n := tb.NumColumns()
		if err := tb.CanAddColumn(1); err != nil || tb.NumColumns() != n {
			t.Fatalf("CanAddColumn at %d columns: %v, now %d columns", n, err, tb.NumColumns())
		}
		if err := tb.AddColumn(1); err != nil {
			t.Fatal(err)
		}
	}
	if err := tb.CanAddColumn(1); !errors.Is(err, ErrBadLayout) {
		t.Errorf("CanAddColumn at %d: %v", MaxColumns, err)
	}
	if err := tb.AddColumn(1); !errors.Is(err, ErrBadLayout) {
		t.Errorf("column %d: %v", MaxColumns+1, err)
	}
	tb.RangeSegment(-1, func(uint64, []uint64) bool { t.Error("visited"); return true })
	tb.RangeSegment(tb.NumSegments(), func(uint64, []uint64) bool { t.Error("visited"); return true })
	check(t, tb)
	if got, ok := tb.Get(3, nil); !ok || len(got) != MaxColumns || got[0] != 1 || got[1] != 1 {
		t.Errorf("row after bad input: %v %v", got, ok)
	}
}

func TestOverflow(t *testing.T) {
	tb := newTable(t, 24, []int{1, 2, 4}, 0)
	ones := []uint64{0xff, 0xffff, 0xffffffff}
	var cases []uint64
	for _, o := range ones {
		cases = append(cases, o-1, o, o+1, 2*o)
	}
	cases = append(cases, 1<<32, 1<<40, math.MaxUint64-1, math.MaxUint64)
	key := uint64(0)
	want := map[uint64][]uint64{}
	for _, v := range cases {
		for c := range 3 {
			row := []uint64{1, 2, 3}
			row[c] = v
			mustPut(t, tb, key, row...)
			want[key] = row
			key += 12345
		}
	}
	check(t, tb)
	if tb.ovEntries.Load() == 0 {
		t.Fatal("no overflow entries")
	}
	for k, w := range want {
		if got, ok := tb.Get(k, nil); !ok || !slices.Equal(got, w) {
			t.Fatalf("Get(%d) = %v, want %v", k, got, w)
		}
		for c := range w {
			if got := tb.GetColumn(k, c); got != w[c] {
				t.Fatalf("GetColumn(%d, %d) = %d, want %d", k, c, got, w[c])
			}
		}
	}
	// Overflow to inline, inline to overflow, overflow to overflow, delete.
	for k, w := range want {
		mustPut(t, tb, k, 1, 2, 3)
		check(t, tb)
		mustPut(t, tb, k, w...)
		mustPut(t, tb, k, w[2], w[0], math.MaxUint64)
		check(t, tb)
		if got := tb.GetColumn(k, 2); got != math.MaxUint64 {
			t.Fatalf("GetColumn = %d", got)
		}
		if err := tb.Delete(k); err != nil {
			t.Fatal(err)
		}
		check(t, tb)
	}
	if tb.Len() != 0 || tb.ovEntries.Load() != 0 || tb.ovMaps.Load() != 0 {
		t.Fatalf("after deletes: Len %d overflow entries %d maps %d", tb.Len(), tb.ovEntries.Load(), tb.ovMaps.Load())
	}
	// An overflowed-only row is stored (all-ones is not empty).
	mustPut(t, tb, 9, 0, 0, 1<<32)
	check(t, tb)
	if got, ok := tb.Get(9, nil); !ok || got[2] != 1<<32 {
		t.Fatalf("Get(9) = %v %v", got, ok)
	}
}

func TestAddColumnLazy(t *testing.T) {
	tb := newTable(t, 20, []int{2}, 0)
	for k := range uint64(2000) {
		mustPut(t, tb, k*7, k+1)
	}
	before := tb.slotBytes.Load()
	if err := tb.AddColumn(4); err != nil {
		t.Fatal(err)
	}
	check(t, tb)
	if tb.slotBytes.Load() != before {
		t.Fatal("AddColumn rewrote rows eagerly")
	}
	if tb.NumColumns() != 2 {
		t.Fatal(tb.NumColumns())
	}
	for k := range uint64(2000) {
		got, ok := tb.Get(k*7, nil)
		if !ok || !slices.Equal(got, []uint64{k + 1, 0}) {
			t.Fatalf("Get(%d) = %v %v", k*7, got, ok)
		}
	}
	// A Put migrates its segment only.
	mustPut(t, tb, 7, 5, 1<<33)
	check(t, tb)
	migrated := 0
	for i := range tb.segs {
		if tb.segs[i].mu.ncols == 2 {
			migrated++
		}
	}
	if migrated != 1 {
		t.Fatalf("%d segments migrated, want 1", migrated)
	}
	if got, _ := tb.Get(7, nil); !slices.Equal(got, []uint64{5, 1 << 33}) {
		t.Fatalf("Get(7) = %v", got)
	}
	if got, _ := tb.Get(14, nil); !slices.Equal(got, []uint64{3, 0}) {
		t.Fatalf("Get(14) = %v", got)
	}
	n := 0
	tb.Range(func(k uint64, v []uint64) bool {
		n++
		if len(v) != 2 {
			t.Fatalf("Range vals %v", v)
		}
		return true
	})
	if n != 2000 {
		t.Fatalf("Range visited %d", n)
	}
}

func TestRangeStop(t *testing.T) {
	tb := newTable(t, 32, []int{4}, 0)
	for k := range uint64(1000) {
		mustPut(t, tb, k<<20|k, k+1)
	}
	seen := map[uint64]uint64{}
	tb.Range(func(k uint64, v []uint64) bool {
		if _, dup := seen[k]; dup {
			t.Fatalf("key %d twice", k)
		}
		seen[k] = v[0]
		return true
	})
	if len(seen) != 1000 {
		t.Fatalf("Range saw %d", len(seen))
	}
	for k := range uint64(1000) {
		if seen[k<<20|k] != k+1 {
			t.Fatalf("Range key %d = %d", k<<20|k, seen[k<<20|k])
		}
	}
	calls := 0
	tb.Range(func(uint64, []uint64) bool { calls++; return calls < 10 })
	if calls != 10 {
		t.Fatalf("Range did not stop: %d calls", calls)
	}
	total := 0
	for i := range tb.NumSegments() {
		tb.RangeSegment(i, func(uint64, []uint64) bool { total++; return true })
	}
	if total != 1000 {
		t.Fatalf("RangeSegment total %d", total)
	}
}

func TestSizeHintAndMem(t *testing.T) {
	tb := newTable(t, 32, []int{2, 2}, 100000)
	check(t, tb)
	empty := newTable(t, 32, []int{2, 2}, 0)
	if empty.MemBytes() > 32<<10 {
		t.Fatalf("empty table holds %d bytes", empty.MemBytes())
	}
	base := tb.slotBytes.Load()
	for k := range uint64(60000) { // a hint presizes for 3/4 of it
		mustPut(t, tb, k*2654435761&(1<<32-1), 1, 1)
	}
	check(t, tb)
	if tb.slotBytes.Load() != base {
		t.Fatalf("hinted table grew: %d -> %d bytes", base, tb.slotBytes.Load())
	}
	if tb.MemBytes() <= int(base) {
		t.Fatal("MemBytes below slot bytes")
	}
}

func TestCheckDetects(t *testing.T) {
	tb := newTable(t, 16, []int{2}, 0)
	for k := range uint64(100) {
		mustPut(t, tb, k, k+1)
	}
	check(t, tb)
	// Corrupt: store an all-ones cell with no overflow entry.
	var sg *segment
	for i := range tb.segs {
		if tb.segs[i].mu.count > 0 {
			sg = &tb.segs[i]
			break
		}
	}
	p := -1
	for i := range int(sg.mu.nslots) {
		if !tb.emptyAt(sg.mu.slots, i*int(sg.mu.rowBytes), 2) {
			p = i * int(sg.mu.rowBytes)
			break
		}
	}
	saved := append([]byte(nil), sg.mu.slots[p:p+3]...)
	sg.mu.slots[p+1], sg.mu.slots[p+2] = 0xff, 0xff
	if err := tb.Check(); err == nil {
		t.Fatal("Check missed an all-ones cell without overflow")
	}
	copy(sg.mu.slots[p:], saved)
	sg.mu.slots[p+1], sg.mu.slots[p+2] = 0, 0
	if err := tb.Check(); err == nil {
		t.Fatal("Check missed a stored all-zero row")
	}
	copy(sg.mu.slots[p:], saved)
	sg.mu.count++
	if err := tb.Check(); err == nil {
		t.Fatal("Check missed a bad count")
	}
	sg.mu.count--
	check(t, tb)
}

func TestHugeHintClamped(t *testing.T) {
	tb := newTable(t, 8, []int{1}, 1<<40)
	check(t, tb)
	if tb.MemBytes() > 1<<12 {
		t.Fatalf("hint of 2^40 rows for a 256-key table holds %d bytes", tb.MemBytes())
	}
}
