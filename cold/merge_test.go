package cold

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// mergeResult is a merged range as a store would hold it: reused blocks
// served from the old bytes, rewritten ones from the new.
type mergeResult struct {
	desc      []byte
	src       *memSource
	reused    int
	rewritten int
}

// merge runs Merge over r (whose blocks are in old) and checks emit's
// contract: block numbers 0, 1, 2, ..., reuse numbers increasing and valid,
// block nil exactly when reusing.
func merge(t testing.TB, r *Reader, old *memSource, ncols int, cs []Change, opts BuildOptions) mergeResult {
	t.Helper()
	res := mergeResult{src: &memSource{blocks: map[uint32][]byte{}}}
	lastReuse := -1
	desc, err := Merge(r, ncols, cs, opts, func(n uint32, reuse int, blk []byte) error {
		if n != uint32(len(res.src.blocks)) {
			return fmt.Errorf("emit out of order: %d after %d blocks", n, len(res.src.blocks))
		}
		if reuse >= 0 {
			if blk != nil || reuse <= lastReuse || reuse >= r.Desc().NumBlocks() {
				return fmt.Errorf("block %d: bad reuse %d (last %d, block %d bytes)", n, reuse, lastReuse, len(blk))
			}
			lastReuse = reuse
			res.src.blocks[n] = old.blocks[uint32(reuse)]
			res.reused++
			return nil
		}
		if reuse != -1 || blk == nil {
			return fmt.Errorf("block %d: reuse %d with %d bytes", n, reuse, len(blk))
		}
		res.src.blocks[n] = append([]byte(nil), blk...)
		res.rewritten++
		return nil
	})
	if err != nil {
		t.Fatalf("Merge: %v", err)
	}
	res.desc = desc
	return res
}

// model is the plain in-memory truth a merged range is checked against.
type model map[uint64][]uint64

func modelOf(rows []Row) model {
	m := model{}
	for _, r := range rows {
		m[r.Key] = r.Vals
	}
	return m
}

func (m model) apply(cs []Change) {
	for _, c := range cs {
		if c.Deleted {
			delete(m, c.Key)
		} else {
			m[c.Key] = c.Vals
		}
	}
}

// checkRange checks every property a merged range must have: it decodes,
// Verify passes, Iter yields exactly the model, Get finds every model key
// with its values (padded to ncols) and none of probes absent from the
// model, and every block is within the target size or holds one row.
func checkRange(t *testing.T, res mergeResult, want model, ncols int, probes []uint64, target int) *Reader {
	t.Helper()
	d, err := DecodeDesc(res.desc)
	if err != nil {
		t.Fatalf("DecodeDesc: %v", err)
	}
	if d.NumColumns() != ncols || d.Rows() != uint64(len(want)) {
		t.Fatalf("desc has %d cols, %d rows; want %d, %d", d.NumColumns(), d.Rows(), ncols, len(want))
	}
	r := NewReader(2, d, res.src, NewCache(64<<20)) // Get decodes a block per key without one
	if err := r.Verify(); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	n := 0
	prev := uint64(0)
	err = r.Iter(func(k uint64, vals []uint64) error {
		w, ok := want[k]
		if !ok || (n > 0 && k <= prev) {
			return fmt.Errorf("Iter: unexpected key %d after %d", k, prev)
		}
		if !equalPadded(vals, w) {
			return fmt.Errorf("Iter: key %d = %v, want %v", k, vals, w)
		}
		prev = k
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != len(want) {
		t.Fatalf("Iter yielded %d rows, want %d", n, len(want))
	}
	var buf []uint64
	for k, w := range want {
		got, ok, err := r.Get(k, buf)
		if err != nil || !ok || !equalPadded(got, w) {
			t.Fatalf("Get(%d) = %v, %v, %v; want %v", k, got, ok, err, w)
		}
		buf = got
	}
	for _, k := range probes {
		if _, in := want[k]; in {
			continue
		}
		if got, ok, err := r.Get(k, buf); err != nil || ok {
			t.Fatalf("Get(absent %d) = %v, %v, %v", k, got, ok, err)
		}
	}
	for b := range uint32(d.NumBlocks()) {
		blk, err := DecodeBlock(res.src.blocks[b])
		if err != nil {
			t.Fatal(err)
		}
		if blk.n > 1 && blk.n*blk.rowW > target {
			t.Fatalf("block %d: %d rows x %d bytes exceeds target %d", b, blk.n, blk.rowW, target)
		}
	}
	return r
}

// equalPadded compares a row read back (ncols values) with a model row that
// may be narrower (written before columns were added).
func equalPadded(got, want []uint64) bool {
	for i, v := range got {
		var w uint64
		if i < len(want) {
			w = want[i]
		}
		if v != w {
			return false
		}
	}
	return len(got) >= len(want)
}

func randVals(r *rand.Rand, ncols int) []uint64 {
	v := make([]uint64, ncols)
	for {
		var any uint64
		for c := range v {
			v[c] = powerLaw(r, 0.4)
			any |= v[c]
		}
		if any != 0 {
			return v
		}
	}
}

// randChanges draws a change set for d's range (keys in m): updates and
// deletes of present keys, deletes of absent keys, inserts before the first
// key, in gaps between blocks, inside spans and after the last key, and
// sometimes the deletion of whole blocks.
func randChanges(r *rand.Rand, d *Desc, m model, ncols, nchanges int, keyBits int) []Change {
	space := uint64(1) << keyBits
	keys := slices.Sorted(func(yield func(uint64) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	})
	byKey := map[uint64]Change{}
	put := func(c Change) { byKey[c.Key] = c }
	for range nchanges {
		switch r.IntN(8) {
		case 0, 1: // update a present key
			if len(keys) > 0 {
				put(Change{Key: keys[r.IntN(len(keys))], Vals: randVals(r, ncols)})
			}
		case 2: // delete a present key
			if len(keys) > 0 {
				put(Change{Key: keys[r.IntN(len(keys))], Deleted: true})
			}
		case 3: // delete a key that may well be absent
			put(Change{Key: r.Uint64N(space), Deleted: true})
		case 4: // insert anywhere
			put(Change{Key: r.Uint64N(space), Vals: randVals(r, ncols)})
		case 5: // insert before the first or after the last key
			if len(keys) > 0 && keys[0] > 0 && r.IntN(2) == 0 {
				put(Change{Key: r.Uint64N(keys[0]), Vals: randVals(r, ncols)})
			} else if len(keys) > 0 && keys[len(keys)-1] < space-1 {
				k := keys[len(keys)-1] + 1 + r.Uint64N(space-1-keys[len(keys)-1])
				put(Change{Key: k, Vals: randVals(r, ncols)})
			}
		case 6: // insert between two blocks
			if nb := d.NumBlocks(); nb > 1 {
				b := r.IntN(nb - 1)
				if lo, hi := d.lasts[b]+1, d.firsts[b+1]; lo < hi {
					put(Change{Key: lo + r.Uint64N(hi-lo), Vals: randVals(r, ncols)})
				}
			}
		case 7: // delete a whole block, rarely
			if nb := d.NumBlocks(); nb > 0 && r.IntN(4) == 0 {
				b := uint32(r.IntN(nb))
				for _, k := range keys[d.starts[b]:d.starts[b+1]] {
					put(Change{Key: k, Deleted: true})
				}
			}
		}
	}
	cs := make([]Change, 0, len(byKey))
	for _, c := range byKey {
		cs = append(cs, c)
	}
	slices.SortFunc(cs, func(a, b Change) int {
		if a.Key < b.Key {
			return -1
		}
		if a.Key > b.Key {
			return 1
		}
		return 0
	})
	return cs
}

// TestMergeRandom applies rounds of random change sets to random ranges,
// each round merging into the previous round's result (so reused blocks
// get reused again), and checks every key against a model.
func TestMergeRandom(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 40
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(seed), 99))
			ncols := 1 + r.IntN(3)
			keyBits := []int{12, 16, 20, 32}[r.IntN(4)]
			n := r.IntN(3000)
			target := []int{16, 64, 256, 1024, 4096}[r.IntN(5)]
			opts := BuildOptions{TargetBlockSize: target}
			rows := genRows(r, n, ncols, keyBits, distPowerLaw)
			rd, src := open(t, rows, ncols, opts, nil)
			m := modelOf(rows)
			for round := range 4 {
				d := rd.Desc()
				newCols := ncols
				if r.IntN(6) == 0 && ncols < MaxColumns {
					newCols = ncols + 1 + r.IntN(2)
				}
				cs := randChanges(r, d, m, newCols, []int{0, 1, 3, 30, 300}[r.IntN(5)], keyBits)
				res := merge(t, rd, src, newCols, cs, opts)
				if newCols > ncols && d.NumBlocks() > 0 && res.reused != 0 {
					t.Fatalf("round %d: schema change reused %d blocks", round, res.reused)
				}
				m.apply(cs)
				probes := make([]uint64, 0, 64+len(cs))
				for _, c := range cs {
					probes = append(probes, c.Key)
				}
				for range 64 {
					probes = append(probes, r.Uint64N(1<<keyBits))
				}
				rd = checkRange(t, res, m, newCols, probes, target)
				src, ncols = res.src, newCols
			}
		})
	}
}

// TestMergeFewChangesRewriteFew checks the point of Merge: one change
// rewrites one old block (into at most two new ones, if it splits) and
// reuses all the others.
func TestMergeFewChangesRewriteFew(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	rows := genRows(r, 20000, 2, 24, distPowerLaw)
	opts := BuildOptions{TargetBlockSize: 512}
	rd, src := open(t, rows, 2, opts, nil)
	d := rd.Desc()
	nb := d.NumBlocks()
	if nb < 50 {
		t.Fatalf("only %d blocks", nb)
	}
	for i := range 100 {
		m := modelOf(rows)
		cs := randChanges(r, d, m, 2, 1, 24)
		res := merge(t, rd, src, 2, cs, opts)
		m.apply(cs)
		checkRange(t, res, m, 2, []uint64{r.Uint64N(1 << 24)}, opts.TargetBlockSize)
		if res.rewritten > 2 || res.reused < nb-1 {
			t.Fatalf("change %d (%+v): %d blocks rewritten, %d of %d reused", i, cs, res.rewritten, res.reused, nb)
		}
	}
	// No changes: every block reused and the same descriptor bytes.
	res := merge(t, rd, src, 2, nil, opts)
	if res.rewritten != 0 || res.reused != nb {
		t.Fatalf("empty merge: %d rewritten, %d reused of %d", res.rewritten, res.reused, nb)
	}
	_, descBytes := build(t, rows, 2, opts)
	if !bytes.Equal(res.desc, descBytes) {
		t.Fatal("empty merge changed the descriptor")
	}
	// Deleting an absent key is a no-op.
	res = merge(t, rd, src, 2, []Change{{Key: rows[10].Key + 1, Deleted: true}}, opts)
	if res.rewritten != 0 && rows[11].Key != rows[10].Key+1 {
		t.Fatalf("deleting an absent key rewrote %d blocks", res.rewritten)
	}
}

// TestMergeGapAttach pins where a key between two blocks goes.
func TestMergeGapAttach(t *testing.T) {
	// Target 8 bytes, one 1-byte column: 8 rows a block. Keys 0,10,...,230:
	// blocks [0..70], [80..150], [160..230].
	var rows []Row
	for k := uint64(0); k < 240; k += 10 {
		rows = append(rows, Row{Key: k, Vals: []uint64{1}})
	}
	opts := BuildOptions{TargetBlockSize: 8}
	rd, src := open(t, rows, 1, opts, nil)
	if rd.Desc().NumBlocks() != 3 {
		t.Fatalf("%d blocks", rd.Desc().NumBlocks())
	}
	v := []uint64{2}
	for _, tc := range []struct {
		name string
		cs   []Change
		want []int // reuse of each new block
	}{
		{"gap joins earlier", []Change{{Key: 75, Vals: v}}, []int{-1, -1, 1, 2}}, // 9 rows: split in two
		{"gap joins later if only it changes", []Change{{Key: 75, Vals: v}, {Key: 100, Vals: v}}, []int{0, -1, -1, 2}},
		{"gap joins earlier if both change", []Change{{Key: 50, Deleted: true}, {Key: 75, Vals: v}, {Key: 100, Vals: v}}, []int{-1, -1, 2}},
		{"before first", []Change{{Key: 0, Deleted: true}}, []int{-1, 1, 2}},
		{"after last", []Change{{Key: 1000, Vals: v}}, []int{0, 1, -1, -1}},
		{"empty block disappears", []Change{{Key: 80, Deleted: true}, {Key: 90, Deleted: true}, {Key: 100, Deleted: true}, {Key: 110, Deleted: true}, {Key: 120, Deleted: true}, {Key: 130, Deleted: true}, {Key: 140, Deleted: true}, {Key: 150, Deleted: true}}, []int{0, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []int
			_, err := Merge(rd, 1, tc.cs, opts, func(_ uint32, reuse int, _ []byte) error {
				got = append(got, reuse)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("reuse per new block = %v, want %v", got, tc.want)
			}
			m := modelOf(rows)
			m.apply(tc.cs)
			checkRange(t, merge(t, rd, src, 1, tc.cs, opts), m, 1, []uint64{75, 1000}, 8)
		})
	}
}

// TestMergeSmallCarried checks that a block shrunk by deletes joins the
// next block when that one is rewritten too.
func TestMergeSmallCarried(t *testing.T) {
	var rows []Row
	for k := range uint64(64) {
		rows = append(rows, Row{Key: k, Vals: []uint64{1}})
	}
	opts := BuildOptions{TargetBlockSize: 16}
	rd, src := open(t, rows, 1, opts, nil) // 4 blocks of 16
	var cs []Change
	for k := uint64(0); k < 14; k++ { // block 0 keeps 2 rows
		cs = append(cs, Change{Key: k, Deleted: true})
	}
	cs = append(cs, Change{Key: 20, Vals: []uint64{3}}) // block 1 rewritten
	res := merge(t, rd, src, 1, cs, opts)
	if res.rewritten != 2 || res.reused != 2 { // 18 rows: two blocks of 9
		t.Fatalf("%d rewritten, %d reused", res.rewritten, res.reused)
	}
	m := modelOf(rows)
	m.apply(cs)
	checkRange(t, res, m, 1, nil, 16)
}

func TestMergeEmpty(t *testing.T) {
	opts := BuildOptions{TargetBlockSize: 64}
	rd, src := open(t, nil, 2, opts, nil)
	cs := []Change{{Key: 3, Vals: []uint64{1, 0}}, {Key: 9, Deleted: true}, {Key: 1 << 40, Vals: []uint64{0, 5}}}
	res := merge(t, rd, src, 2, cs, opts)
	m := model{}
	m.apply(cs)
	rd2 := checkRange(t, res, m, 2, []uint64{9}, 64)
	// And delete everything again.
	res = merge(t, rd2, res.src, 2, []Change{{Key: 3, Deleted: true}, {Key: 1 << 40, Deleted: true}}, opts)
	checkRange(t, res, model{}, 2, []uint64{3, 1 << 40}, 64)
	if res.rewritten+res.reused != 0 {
		t.Fatalf("empty range has %d blocks", res.rewritten+res.reused)
	}
}

func TestMergeErrors(t *testing.T) {
	rows := []Row{{Key: 1, Vals: []uint64{1, 1}}, {Key: 5, Vals: []uint64{2, 2}}}
	rd, _ := open(t, rows, 2, BuildOptions{}, nil)
	emit := func(uint32, int, []byte) error { return nil }
	for _, tc := range []struct {
		ncols int
		cs    []Change
		want  error
	}{
		{1, nil, ErrBadArgument},
		{17, nil, ErrBadArgument},
		{2, []Change{{Key: 3, Vals: []uint64{1, 1}}, {Key: 3, Deleted: true}}, ErrUnsorted},
		{2, []Change{{Key: 4, Vals: []uint64{1, 1}}, {Key: 3, Vals: []uint64{1, 1}}}, ErrUnsorted},
		{2, []Change{{Key: 3, Vals: []uint64{0, 0}}}, ErrBadRow},
		{3, []Change{{Key: 3, Vals: []uint64{1, 1}}}, ErrBadRow},
	} {
		if _, err := Merge(rd, tc.ncols, tc.cs, BuildOptions{}, emit); !errors.Is(err, tc.want) {
			t.Errorf("Merge(ncols %d, %+v) = %v, want %v", tc.ncols, tc.cs, err, tc.want)
		}
	}
	boom := errors.New("boom")
	if _, err := Merge(rd, 2, nil, BuildOptions{}, func(uint32, int, []byte) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("emit error: %v", err)
	}
}

// TestMergeCorruptBlock checks a rewritten block is checked, not laundered:
// a block whose keys disagree with the descriptor fails the merge.
func TestMergeCorruptBlock(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	rows := genRows(r, 200, 1, 16, distPowerLaw)
	opts := BuildOptions{TargetBlockSize: 64}
	src, _ := build(t, rows, 1, opts)
	// Same first/last keys and row count, one inner key moved: only the
	// key checksum can tell.
	moved := slices.Clone(rows)
	moved[1] = Row{Key: rows[1].Key + 1, Vals: rows[1].Vals}
	if moved[1].Key == rows[2].Key {
		t.Skip("keys adjacent")
	}
	_, descBytes := build(t, moved, 1, opts)
	d, err := DecodeDesc(descBytes)
	if err != nil {
		t.Fatal(err)
	}
	rd := NewReader(1, d, src, nil)
	_, err = Merge(rd, 1, []Change{{Key: rows[0].Key, Vals: []uint64{7}}}, opts, func(uint32, int, []byte) error { return nil })
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Merge over mismatched block: %v, want ErrCorrupt", err)
	}
	delete(src.blocks, 0)
	_, err = Merge(rd, 1, []Change{{Key: rows[0].Key, Vals: []uint64{7}}}, opts, func(uint32, int, []byte) error { return nil })
	if !errors.Is(err, ErrMissingBlock) {
		t.Fatalf("Merge over missing block: %v, want ErrMissingBlock", err)
	}
}

func TestBlockLen(t *testing.T) {
	src, _ := build(t, goldenRows, 2, BuildOptions{TargetBlockSize: 8})
	total := 0
	for _, b := range src.blocks {
		total += BlockLen(b)
	}
	if total != len(goldenRows) {
		t.Fatalf("BlockLen sums to %d, want %d", total, len(goldenRows))
	}
	if BlockLen(nil) != 0 || BlockLen([]byte{1, 1}) != 0 {
		t.Fatal("BlockLen of a short header")
	}
}

// BenchmarkMerge1000 merges 1,000 changes (700 updates, 150 deletes, 150
// inserts, at random keys) into the realistic range (TALLY_BENCH_ROWS,
// default 2M rows) and reports how many blocks were re-encoded, against a
// full rebuild (BenchmarkBuild).
func BenchmarkMerge1000(b *testing.B) {
	rows := realisticRows()
	rd := realisticReader(b, nil)
	r := rand.New(rand.NewPCG(3, 3))
	byKey := map[uint64]Change{}
	for len(byKey) < 1000 {
		switch i := r.IntN(20); {
		case i < 14:
			k := rows[r.IntN(len(rows))].Key
			byKey[k] = Change{Key: k, Vals: []uint64{powerLaw(r, 0.3), 1}}
		case i < 17:
			k := rows[r.IntN(len(rows))].Key
			byKey[k] = Change{Key: k, Deleted: true}
		default:
			k := uint64(r.Uint32())
			if !rd.Desc().Contains(k) {
				byKey[k] = Change{Key: k, Vals: []uint64{1, powerLaw(r, 0.3)}}
			}
		}
	}
	cs := make([]Change, 0, len(byKey))
	for _, c := range byKey {
		cs = append(cs, c)
	}
	slices.SortFunc(cs, func(a, b Change) int { return cmp.Compare(a.Key, b.Key) })
	b.Run("incremental", func(b *testing.B) {
		b.ReportAllocs()
		var rewritten, total, written int
		var cpu threadCPU
		cpu.start()
		for range b.N {
			rewritten, total, written = 0, 0, 0
			_, err := Merge(rd, 2, cs, BuildOptions{}, func(_ uint32, reuse int, blk []byte) error {
				total++
				if reuse < 0 {
					rewritten++
					written += len(blk)
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		cpu.report(b)
		b.ReportMetric(float64(rewritten), "blocks-rewritten")
		b.ReportMetric(float64(total), "blocks-total")
		b.ReportMetric(float64(written), "block-bytes-written")
		b.ReportMetric(float64(rd.Desc().NumBlocks()), "blocks-before")
	})
	// What the store did before Merge (compaction.MergeRows, then Build):
	// read every row, apply the changes, re-encode every block.
	b.Run("rebuild", func(b *testing.B) {
		b.ReportAllocs()
		var written int
		var cpu threadCPU
		cpu.start()
		for range b.N {
			written = 0
			bld, err := NewBuilder(2, BuildOptions{}, func(_ uint32, blk []byte) error {
				written += len(blk)
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			ci := 0
			add := func(c Change) error {
				if c.Deleted {
					return nil
				}
				return bld.Add(c.Key, c.Vals)
			}
			err = rd.Iter(func(k uint64, vals []uint64) error {
				for ; ci < len(cs) && cs[ci].Key < k; ci++ {
					if err := add(cs[ci]); err != nil {
						return err
					}
				}
				if ci < len(cs) && cs[ci].Key == k {
					ci++
					return add(cs[ci-1])
				}
				return bld.Add(k, vals)
			})
			for ; err == nil && ci < len(cs); ci++ {
				err = add(cs[ci])
			}
			if err == nil {
				_, err = bld.Finish()
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		cpu.report(b)
		b.ReportMetric(float64(written), "block-bytes-written")
	})
}
