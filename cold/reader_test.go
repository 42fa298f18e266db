package cold

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func slicesSort(s []uint64) { slices.Sort(s) }

// probes returns keys to look up: every present key, its neighbours, keys
// before the first and after the last, and random keys.
func probes(r *rand.Rand, rows []Row, keyBits int) []uint64 {
	var ps []uint64
	for _, row := range rows {
		ps = append(ps, row.Key, row.Key-1, row.Key+1)
	}
	ps = append(ps, 0, math.MaxUint64, 1<<keyBits, 1<<keyBits-1)
	for range 1000 {
		ps = append(ps, r.Uint64N(1<<keyBits))
	}
	return ps
}

func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		n, ncols, keyBits int
		dist              valueDist
		opts              BuildOptions
	}{
		{1, 1, 8, distPowerLaw, BuildOptions{}},
		{200, 1, 8, distExtremes, BuildOptions{TargetBlockSize: 64}},
		{5000, 2, 16, distPowerLaw, BuildOptions{TargetBlockSize: 1000}},
		{30000, 2, 16, distPowerLaw, BuildOptions{TargetBlockSize: 4096}}, // dense: bitmap chunks
		{20000, 2, 32, distPowerLaw, BuildOptions{TargetBlockSize: 4096, ZstdLevel: 1}},
		{10000, 3, 48, distUniform64, BuildOptions{TargetBlockSize: 2000, ZstdLevel: 9}},
		{3000, 16, 40, distExtremes, BuildOptions{}},
		{2000, 5, 63, distExtremes, BuildOptions{TargetBlockSize: 1}},
	} {
		t.Run(fmt.Sprintf("n%d_c%d_k%d_d%d", tc.n, tc.ncols, tc.keyBits, tc.dist), func(t *testing.T) {
			rows := genRows(r, tc.n, tc.ncols, tc.keyBits, tc.dist)
			rd, _ := open(t, rows, tc.ncols, tc.opts, NewCache(1<<20))
			checkReader(t, r, rd, rows, tc.keyBits)
		})
	}
}

func TestRoundTripMaxKey(t *testing.T) {
	rows := []Row{{0, []uint64{1}}, {1, []uint64{math.MaxUint64}}, {1 << 40, []uint64{7}}, {math.MaxUint64 - 1, []uint64{2}}, {math.MaxUint64, []uint64{3}}}
	for _, size := range []int{1, 1 << 20} {
		rd, _ := open(t, rows, 1, BuildOptions{TargetBlockSize: size}, nil)
		checkReader(t, rand.New(rand.NewPCG(3, 4)), rd, rows, 63)
	}
}

func TestEmptyRange(t *testing.T) {
	rd, src := open(t, nil, 2, BuildOptions{}, nil)
	if len(src.blocks) != 0 || rd.Desc().Rows() != 0 || rd.Desc().NumBlocks() != 0 {
		t.Fatalf("empty range has %d blocks", len(src.blocks))
	}
	if _, ok, err := rd.Get(5, nil); ok || err != nil {
		t.Fatalf("Get on empty range: %v %v", ok, err)
	}
	if err := rd.Verify(); err != nil {
		t.Fatal(err)
	}
}

// checkReader compares every read path of rd against rows.
func checkReader(t *testing.T, r *rand.Rand, rd *Reader, rows []Row, keyBits int) {
	t.Helper()
	want := make(map[uint64][]uint64, len(rows))
	for _, row := range rows {
		want[row.Key] = row.Vals
	}
	d := rd.Desc()
	if d.Rows() != uint64(len(rows)) {
		t.Fatalf("Rows() = %d, want %d", d.Rows(), len(rows))
	}
	if err := rd.Verify(); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	ps := probes(r, rows, min(keyBits, 63))
	var dst []uint64
	for _, k := range ps {
		var ok bool
		var err error
		dst, ok, err = rd.Get(k, dst)
		if err != nil {
			t.Fatalf("Get(%d): %v", k, err)
		}
		w, present := want[k]
		if ok != present || d.Contains(k) != present {
			t.Fatalf("Get(%d) found=%v Contains=%v, want %v", k, ok, d.Contains(k), present)
		}
		if present && !slices.Equal(dst, w) {
			t.Fatalf("Get(%d) = %v, want %v", k, dst, w)
		}
	}
	// MultiGet in batches of varying size, shuffled.
	r.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
	nc := d.NumColumns()
	for len(ps) > 0 {
		n := min(len(ps), 1+r.IntN(50))
		batch := ps[:n]
		ps = ps[n:]
		found := make([]bool, n)
		out, err := rd.MultiGet(batch, []uint64{9, 9, 9}, found)
		if err != nil {
			t.Fatalf("MultiGet: %v", err)
		}
		for i, k := range batch {
			w, present := want[k]
			if found[i] != present {
				t.Fatalf("MultiGet found[%d] (key %d) = %v", i, k, found[i])
			}
			got := out[i*nc : (i+1)*nc]
			if !present {
				w = make([]uint64, nc)
			}
			if !slices.Equal(got, w) {
				t.Fatalf("MultiGet key %d = %v, want %v", k, got, w)
			}
		}
	}
	i := 0
	if err := rd.Iter(func(k uint64, vals []uint64) error {
		if k != rows[i].Key || !slices.Equal(vals, rows[i].Vals) {
			return fmt.Errorf("Iter row %d = %d %v, want %d %v", i, k, vals, rows[i].Key, rows[i].Vals)
		}
		i++
		return nil
	}); err != nil || i != len(rows) {
		t.Fatalf("Iter: %v after %d rows", err, i)
	}
	i = 0
	for k := range d.Keys() {
		if k != rows[i].Key {
			t.Fatalf("Keys[%d] = %d, want %d", i, k, rows[i].Key)
		}
		i++
	}
	if i != len(rows) {
		t.Fatalf("Keys yielded %d", i)
	}
	for b := range uint32(d.NumBlocks()) {
		blk, err := rd.block(b)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := d.BlockFor(blk.FirstKey()); !ok || got != b {
			t.Fatalf("BlockFor(first of %d) = %d %v", b, got, ok)
		}
		if got, ok := d.BlockFor(blk.LastKey()); !ok || got != b {
			t.Fatalf("BlockFor(last of %d) = %d %v", b, got, ok)
		}
	}
}

func TestBuildErrors(t *testing.T) {
	emit := func(uint32, []byte) error { return nil }
	for _, tc := range []struct {
		rows []Row
		want error
	}{
		{[]Row{{1, []uint64{1}}, {1, []uint64{1}}}, ErrUnsorted},
		{[]Row{{2, []uint64{1}}, {1, []uint64{1}}}, ErrUnsorted},
		{[]Row{{math.MaxUint64, []uint64{1}}, {0, []uint64{1}}}, ErrUnsorted},
		{[]Row{{1, []uint64{0}}}, ErrBadRow},
		{[]Row{{1, []uint64{1, 2}}}, ErrBadRow},
	} {
		if _, err := Build(tc.rows, 1, BuildOptions{}, emit); !errors.Is(err, tc.want) {
			t.Errorf("Build(%v) = %v, want %v", tc.rows, err, tc.want)
		}
	}
	for _, o := range []BuildOptions{{TargetBlockSize: -1}, {ZstdLevel: 23}} {
		if _, err := NewBuilder(1, o, emit); !errors.Is(err, ErrBadArgument) {
			t.Errorf("NewBuilder(%+v) = %v", o, err)
		}
	}
	if _, err := NewBuilder(17, BuildOptions{}, emit); !errors.Is(err, ErrBadArgument) {
		t.Errorf("NewBuilder(17 cols) = %v", err)
	}
	boom := errors.New("boom")
	b, _ := NewBuilder(1, BuildOptions{TargetBlockSize: 1}, func(uint32, []byte) error { return boom })
	b.Add(1, []uint64{1})
	if err := b.Add(2, []uint64{1}); !errors.Is(err, boom) {
		t.Fatalf("emit error not returned: %v", err)
	}
	if _, err := b.Finish(); !errors.Is(err, boom) {
		t.Fatalf("emit error not sticky: %v", err)
	}
}
