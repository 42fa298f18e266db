package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// mergeTopListManySort is the toplist merge as it was before the k-way
// merge (issue 18 item 5): decode every payload, append every entry, sort
// by key (newest operand first for one key), keep the first of each key,
// trim and re-encode. TestTopListMergeKWay holds the merge to it.
func mergeTopListManySort(payloads [][]byte) ([]byte, error) {
	type tagged struct {
		e   TopEntry
		src int // operand index: higher is newer
	}
	var all []tagged
	var floor uint64
	capacity := 0
	for i, p := range payloads {
		l, err := decodeTopList(p)
		if err != nil {
			return nil, err
		}
		floor = max(floor, l.Floor)
		capacity = l.Cap
		for _, e := range l.Entries {
			all = append(all, tagged{e, i})
		}
	}
	slices.SortFunc(all, func(a, b tagged) int {
		switch {
		case a.e.Key > b.e.Key:
			return -1
		case a.e.Key < b.e.Key:
			return 1
		}
		return b.src - a.src
	})
	out := &TopList{Cap: capacity, Floor: floor, Entries: make([]TopEntry, 0, min(len(all), 2*capacity+8))}
	live := 0
	for i, t := range all {
		if i > 0 && all[i-1].e.Key == t.e.Key {
			continue
		}
		if t.e.Key < out.Floor || live == out.Cap {
			break
		}
		out.Entries = append(out.Entries, t.e)
		if !t.e.Removed {
			if live++; live == out.Cap {
				out.Floor = t.e.Key
			}
		}
	}
	return appendTopList(nil, out), nil
}

// randomTopPayload returns a toplist payload: an operand of random entries
// (tombstones, typed entries, keys from a small or a wide range), or, half
// the time, several such operands merged by the reference, which gives a
// list with a floor.
func randomTopPayload(rng *rand.Rand) []byte {
	one := func() []byte {
		capacity := 1 + rng.IntN(12)
		if rng.IntN(8) == 0 {
			capacity = 1 + rng.IntN(900)
		}
		span := uint64(40)
		if rng.IntN(4) == 0 {
			span = 1 << 62
		}
		base := uint64(rng.IntN(3)) * span / 2
		es := make([]TopEntry, rng.IntN(2*capacity+3))
		for i := range es {
			es[i] = TopEntry{Key: base + rng.Uint64N(span), Value: rng.Uint64N(1 << uint(1+rng.IntN(62))), Removed: rng.IntN(5) == 0}
			if rng.IntN(6) == 0 {
				es[i].Kind, es[i].Ref, es[i].RefValue = uint8(1+rng.IntN(3)), rng.Uint64(), rng.Uint64N(MaxTopValue)
			}
		}
		op, err := TopListOperand(nil, capacity, es)
		if err != nil {
			panic(err)
		}
		return op[1:]
	}
	if rng.IntN(2) == 0 {
		return one()
	}
	ps := make([][]byte, 1+rng.IntN(4))
	for i := range ps {
		ps[i] = one()
	}
	p, err := mergeTopListManySort(ps)
	if err != nil {
		panic(err)
	}
	return p
}

// TestTopListMergeKWay: the k-way merge gives the reference's bytes for
// random sequences of operands and merged lists (tombstones, typed
// entries, floors, caps that differ between operands), pairwise
// (mergeTopList) and many at once; for damaged payloads (a byte changed,
// a truncation, a trailing byte) it fails exactly when the reference does,
// and otherwise gives its bytes.
func TestTopListMergeKWay(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 5))
	rounds := 3000
	if testing.Short() {
		rounds = 500
	}
	for round := range rounds {
		ps := make([][]byte, 1+rng.IntN(10))
		for i := range ps {
			ps[i] = randomTopPayload(rng)
		}
		if round%3 == 0 { // damage one payload
			i := rng.IntN(len(ps))
			ps[i] = damagePayload(rng, ps[i])
		}
		want, werr := mergeTopListManySort(ps)
		got, err := mergeTopListMany(ps)
		if (err != nil) != (werr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("round %d, %d payloads %x:\nk-way %x (err %v)\nreference %x (err %v)", round, len(ps), ps, got, err, want, werr)
		}
		if len(ps) >= 2 {
			want, werr := mergeTopListManySort(ps[:2])
			got, err := mergeTopList(ps[0], ps[1])
			if (err != nil) != (werr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("round %d, pairwise %x:\nk-way %x (err %v)\nreference %x (err %v)", round, ps[:2], got, err, want, werr)
			}
		}
	}
}

// TestTopListFinishFastPath: finishing a list without tombstones returns
// the payload itself, and a list with some drops them, as decoding,
// filtering and encoding does.
func TestTopListFinishFastPath(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 6))
	for range 1000 {
		p := randomTopPayload(rng)
		got, err := finishTopList(p)
		must(t, err)
		l, err := decodeTopList(p)
		must(t, err)
		live := slices.DeleteFunc(slices.Clone(l.Entries), func(e TopEntry) bool { return e.Removed })
		var want []byte
		if len(live) > 0 || l.Floor != 0 {
			want = appendTopList(nil, &TopList{Cap: l.Cap, Floor: l.Floor, Entries: live})
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("finish %x = %x, want %x", p, got, want)
		}
	}
}

// BenchmarkTopListMerge compares the k-way merge with the reference on
// what an inbox compaction merges: a list of 800 entries (the inbox) and
// k newer operands of one or two new entries each, and on k interleaved
// operands of 100 entries.
func BenchmarkTopListMerge(b *testing.B) {
	inbox := func(n int, base uint64) []byte {
		es := make([]TopEntry, n)
		for i := range es {
			es[i] = TopEntry{Key: base + uint64(i)*37, Value: 1 + uint64(i*7919)%300_000}
		}
		op, err := TopListOperand(nil, 800, es)
		must(b, err)
		return op[1:]
	}
	cases := map[string][][]byte{}
	for _, k := range []int{1, 4, 16} {
		ps := [][]byte{inbox(800, 1<<40)}
		for i := range k {
			ps = append(ps, inbox(1+i%2, 1<<40+800*37+uint64(i)*100))
		}
		cases[fmt.Sprintf("inbox+%d", k)] = ps
	}
	var inter [][]byte
	for i := range 8 {
		inter = append(inter, inbox(100, 1<<40+uint64(i)))
	}
	cases["interleaved8x100"] = inter
	for _, name := range []string{"inbox+1", "inbox+4", "inbox+16", "interleaved8x100"} {
		ps := cases[name]
		for _, m := range []struct {
			name string
			f    func([][]byte) ([]byte, error)
		}{{"kway", mergeTopListMany}, {"sort", mergeTopListManySort}} {
			b.Run(name+"/"+m.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := m.f(ps); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestIterRoaring: Iter.Roaring returns each key's set as DecodeRoaring
// of its value does (the one the read's check decoded, then, asked
// again, a fresh decode), over operands merged in memtables and in
// sstables, and a key holding a damaged value stops the iteration with
// ErrCorrupt.
func TestIterRoaring(t *testing.T) {
	fs := vfs.NewMem()
	set := FamilySpec{Name: "set", Prefix: 0xe4, MinKeyLen: 8, MaxKeyLen: 8, Merge: MergeRoaring}
	db := openFamilies(t, fs, set)
	f := family(t, db, "set")
	rng := rand.New(rand.NewPCG(18, 7))
	want := map[uint64][]uint32{}
	for round := range 30 {
		b := db.NewBatch()
		k := uint64(rng.IntN(5))
		add := roaring.New()
		for range 1 + rng.IntN(20) {
			add.Add(uint32(rng.IntN(1 << 20)))
		}
		op, err := RoaringOperand(nil, add, nil)
		must(t, err)
		must(t, f.Merge(b, famKey(f, k), op))
		must(t, b.Commit())
		b.Close()
		want[k] = slices.Compact(slices.Sorted(slices.Values(append(want[k], add.ToArray()...))))
		if round%10 == 9 {
			must(t, db.pdb().Flush())
		}
	}
	it, err := f.NewIter(nil)
	must(t, err)
	n := 0
	for it.Next() {
		k := binary.BigEndian.Uint64(it.Key()[1:])
		bm, err := it.Roaring()
		must(t, err)
		again, err := it.Roaring()
		must(t, err)
		if !slices.Equal(bm.ToArray(), want[k]) || !slices.Equal(again.ToArray(), want[k]) {
			t.Fatalf("key %d: %v and %v, want %v", k, bm.ToArray(), again.ToArray(), want[k])
		}
		bm.Add(1 << 30) // the caller's to modify
		n++
	}
	must(t, it.Close())
	if n != len(want) {
		t.Fatalf("iterated %d keys, want %d", n, len(want))
	}
	// A damaged value, written under the family's prefix behind its back.
	b := db.NewBatch()
	must(t, b.pebble().Set(famKey(f, 99), []byte{MergeRoaring.ID, roaringVersion, 5, 1, 2}, nil))
	must(t, b.Commit())
	b.Close()
	it, err = f.NewIter(nil)
	must(t, err)
	for it.Next() {
	}
	if err := it.Close(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a damaged value: %v, want ErrCorrupt", err)
	}
}

// TestTopListMergeAbove checks the fast path of a two-payload merge
// (mergeTopListAbove: newer entries added above an older list) against
// the reference merge, on lists of that shape and near it (a tombstone,
// a key not above, a floor, a typed entry, damage), and that it takes
// most of the lists of its shape.
func TestTopListMergeAbove(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 28))
	list := func(capacity int, lo, hi uint64, removed, typed bool) []byte {
		es := make([]TopEntry, 1+rng.IntN(2*capacity+2))
		for i := range es {
			es[i] = TopEntry{Key: lo + rng.Uint64N(hi-lo), Value: rng.Uint64N(1 << uint(1+rng.IntN(62)))}
			es[i].Removed = removed && rng.IntN(4) == 0
			if typed && rng.IntN(4) == 0 {
				es[i].Kind, es[i].Ref, es[i].RefValue = 1, rng.Uint64(), rng.Uint64N(MaxTopValue)
			}
		}
		op, err := TopListOperand(nil, capacity, es)
		must(t, err)
		return op[1:]
	}
	fast := 0
	rounds := 4000
	for round := range rounds {
		capacity := 1 + rng.IntN(40)
		span := uint64(1000)
		if rng.IntN(4) == 0 {
			span = 1 << 60
		}
		older := list(1+rng.IntN(40), 1, span, rng.IntN(2) == 0, rng.IntN(8) == 0)
		if rng.IntN(3) == 0 { // a list with a floor: older merged and trimmed
			var err error
			older, err = mergeTopListManySort([][]byte{older, list(1+rng.IntN(8), 1, span, true, false)})
			must(t, err)
		}
		var it topListIter
		must(t, it.init(older))
		top, ok, err := it.next()
		must(t, err)
		lo := top.Key + 1
		if !ok || rng.IntN(6) == 0 {
			lo = 1 // not above (or nothing to be above)
		}
		newer := list(capacity, lo, lo+span, rng.IntN(8) == 0, rng.IntN(8) == 0)
		ps := [][]byte{older, newer}
		if round%5 == 0 { // damage one payload
			i := rng.IntN(2)
			ps[i] = damagePayload(rng, ps[i])
		}
		want, werr := mergeTopListManySort(ps)
		if _, ok := mergeTopListAbove(nil, ps[0], ps[1]); ok {
			fast++
			if werr != nil {
				t.Fatalf("round %d: fast path merged %x, the reference fails: %v", round, ps, werr)
			}
		}
		got, err := mergeTopListMany(ps)
		if (err != nil) != (werr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("round %d, payloads %x:\ngot %x (err %v)\nreference %x (err %v)", round, ps, got, err, want, werr)
		}
		// Appended to a buffer holding bytes already, as a pooled merger does.
		pre := []byte("prefix")
		got2, err := mergeTopListManyTo(bytes.Clone(pre), ps)
		if err == nil && (!bytes.HasPrefix(got2, pre) || !bytes.Equal(got2[len(pre):], want)) {
			t.Fatalf("round %d: appended %x, want %q + %x", round, got2, pre, want)
		}
	}
	if fast < rounds/5 {
		t.Fatalf("the fast path took %d of %d merges", fast, rounds)
	}
	t.Logf("the fast path took %d of %d merges", fast, rounds)
}

// damagePayload returns a copy of p with one random byte flipped, its
// tail cut, or a byte appended.
func damagePayload(rng *rand.Rand, p []byte) []byte {
	p = bytes.Clone(p)
	switch rng.IntN(3) {
	case 0:
		p[rng.IntN(len(p))] ^= byte(1 + rng.IntN(255))
	case 1:
		p = p[:rng.IntN(len(p))]
	default:
		p = append(p, byte(rng.IntN(256)))
	}
	return p
}
