package store

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// mergeAll merges framed operands (oldest first) the way Pebble would:
// starting from operand i0, MergeOlder for those before it and MergeNewer
// for those after, in an order drawn by rng; includesBase finishes.
func mergeAll(t testing.TB, ops [][]byte, rng *rand.Rand) ([]byte, bool) {
	t.Helper()
	mt := &mergerTable{}
	m := mt.pebbleMerger(mergerName)
	i0 := rng.IntN(len(ops))
	vm, err := m.Merge(nil, ops[i0])
	must(t, err)
	lo, hi := i0-1, i0+1
	for lo >= 0 || hi < len(ops) {
		if hi < len(ops) && (lo < 0 || rng.IntN(2) == 0) {
			must(t, vm.MergeNewer(ops[hi]))
			hi++
		} else {
			must(t, vm.MergeOlder(ops[lo]))
			lo--
		}
	}
	v, _, err := vm.Finish(true)
	must(t, err)
	if len(v) == 1 { // the empty value: nothing left
		return nil, true
	}
	return v, false
}

// mergeGrouped merges ops by random contiguous groups first (as a
// compaction that sees some operands and not the base would: Finish
// without base), then merges the groups' results.
func mergeGrouped(t testing.TB, ops [][]byte, rng *rand.Rand) ([]byte, bool) {
	t.Helper()
	mt := &mergerTable{}
	m := mt.pebbleMerger(mergerName)
	var groups [][]byte
	for i := 0; i < len(ops); {
		j := i + 1 + rng.IntN(len(ops)-i)
		vm, err := m.Merge(nil, ops[i])
		must(t, err)
		for _, o := range ops[i+1 : j] {
			must(t, vm.MergeNewer(o))
		}
		v, _, err := vm.Finish(false)
		must(t, err)
		groups = append(groups, v)
		i = j
	}
	return mergeAll(t, groups, rng)
}

// TestMergeAssociative checks every built-in operator: merging a random
// sequence of operands in random splits and random directions gives the
// same finished value (for the toplist: the same window of the truth), and
// that value matches a plain model.
func TestMergeAssociative(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for iter := 0; iter < 300; iter++ {
		n := 1 + rng.IntN(12)

		// add-int64
		var ops [][]byte
		var sum int64
		for range n {
			d := rng.Int64N(200) - 100
			sum += d
			ops = append(ops, AddOperand(nil, d))
		}
		a, delA := mergeAll(t, ops, rng)
		b, delB := mergeGrouped(t, ops, rng)
		if delA != delB || !bytes.Equal(a, b) {
			t.Fatalf("add: %x/%v vs %x/%v", a, delA, b, delB)
		}
		if got, _ := DecodeAdd(a); !delA && got != sum || delA && sum != 0 {
			t.Fatalf("add = %d (deleted %v), want %d", got, delA, sum)
		}

		// roaring32
		ops = ops[:0]
		truth := map[uint32]bool{}
		for range n {
			add, rm := roaring.New(), roaring.New()
			for range rng.IntN(20) {
				x := uint32(rng.IntN(300))
				if rng.IntN(3) == 0 {
					rm.Add(x)
				} else {
					add.Add(x)
				}
			}
			op, err := RoaringOperand(nil, add, rm)
			must(t, err)
			ops = append(ops, op)
			rm.AndNot(add)
			rm.Iterate(func(x uint32) bool { delete(truth, x); return true })
			add.Iterate(func(x uint32) bool { truth[x] = true; return true })
		}
		a, delA = mergeAll(t, ops, rng)
		b, delB = mergeGrouped(t, ops, rng)
		var want []uint32
		for x := range truth {
			want = append(want, x)
		}
		slices.Sort(want)
		for _, v := range [][]byte{a, b} {
			var got []uint32
			if v != nil {
				set, _, err := DecodeRoaring(v)
				must(t, err)
				got = set.ToArray()
			}
			if !slices.Equal(got, want) {
				t.Fatalf("roaring = %v, want %v", got, want)
			}
		}
		if delA != (len(want) == 0) || delB != delA {
			t.Fatalf("roaring deleted %v/%v with %d members", delA, delB, len(want))
		}

		// toplist: truth is newest-wins per key; every finished value must
		// be the truth restricted to keys ≥ its floor, with at most cap
		// live entries.
		capacity := 1 + rng.IntN(6)
		ops = ops[:0]
		live := map[uint64]uint64{}
		for range n {
			var es []TopEntry
			for range 1 + rng.IntN(6) {
				e := TopEntry{Key: uint64(rng.IntN(40)), Value: uint64(rng.IntN(1000))}
				e.Removed = rng.IntN(4) == 0
				es = append(es, e)
			}
			op, err := TopListOperand(nil, capacity, es)
			must(t, err)
			ops = append(ops, op)
			// The operand alone keeps the last entry per key.
			seen := map[uint64]bool{}
			for i := len(es) - 1; i >= 0; i-- {
				e := es[i]
				if seen[e.Key] {
					continue
				}
				seen[e.Key] = true
				if e.Removed {
					delete(live, e.Key)
				} else {
					live[e.Key] = e.Value
				}
			}
		}
		for _, merge := range []func(testing.TB, [][]byte, *rand.Rand) ([]byte, bool){mergeAll, mergeGrouped} {
			v, del := merge(t, ops, rng)
			checkTopWindow(t, v, del, live, capacity)
		}
	}
}

// checkTopWindow checks a finished toplist against the truth.
func checkTopWindow(t testing.TB, v []byte, deleted bool, live map[uint64]uint64, capacity int) {
	t.Helper()
	var keys []uint64
	for k := range live {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool { return keys[a] > keys[b] })
	if deleted {
		if len(keys) != 0 {
			t.Fatalf("toplist deleted with live keys %v", keys)
		}
		return
	}
	l, err := DecodeTopList(v)
	must(t, err)
	if len(l.Entries) > capacity {
		t.Fatalf("toplist holds %d entries, cap %d", len(l.Entries), capacity)
	}
	var want []TopEntry
	for _, k := range keys {
		if k >= l.Floor {
			want = append(want, TopEntry{Key: k, Value: live[k]})
		}
	}
	if !slices.Equal(l.Entries, want) {
		t.Fatalf("toplist above floor %d = %v, want %v", l.Floor, l.Entries, want)
	}
	// Only a full window raises the floor: below cap entries the floor
	// must have been set by an earlier trim, never for nothing.
	if l.Floor > 0 && len(keys) > 0 && keys[0] < l.Floor && len(want) != 0 {
		t.Fatalf("toplist floor %d above all live keys but entries %v", l.Floor, want)
	}
}

// Merges through a real store: operands committed in many batches,
// flushed and compacted in between, read back equal to the model.
func TestMergeThroughPebble(t *testing.T) {
	fs := vfs.NewMem()
	inbox := FamilySpec{Name: "inbox", Prefix: 0xe3, MinKeyLen: 8, MaxKeyLen: 8, Merge: MergeTopList}
	set := FamilySpec{Name: "set", Prefix: 0xe4, MinKeyLen: 8, MaxKeyLen: 8, Merge: MergeRoaring}
	db := openFamilies(t, fs, inbox, set)
	fi, fset := family(t, db, "inbox"), family(t, db, "set")
	rng := rand.New(rand.NewPCG(1, 2))
	live := map[uint64]uint64{}
	members := map[uint32]bool{}
	const capacity = 20
	for round := 0; round < 40; round++ {
		b := db.NewBatch()
		var es []TopEntry
		for range 5 {
			e := TopEntry{Key: uint64(rng.IntN(100)), Value: uint64(rng.IntN(50))}
			e.Removed = rng.IntN(5) == 0
			es = append(es, e)
			if e.Removed {
				delete(live, e.Key)
			} else {
				live[e.Key] = e.Value
			}
		}
		op, err := TopListOperand(nil, capacity, es)
		must(t, err)
		must(t, fi.Merge(b, famKey(fi, 1), op))
		add, rm := roaring.New(), roaring.New()
		x := uint32(rng.IntN(1000))
		if rng.IntN(3) == 0 {
			rm.Add(x)
			delete(members, x)
		} else {
			add.Add(x)
			members[x] = true
		}
		op, err = RoaringOperand(nil, add, rm)
		must(t, err)
		must(t, fset.Merge(b, famKey(fset, 1), op))
		must(t, b.Commit())
		b.Close()
		if round%10 == 9 {
			must(t, db.pdb().Flush())
		}
		if round%20 == 19 {
			must(t, db.pdb().Compact(context.Background(), []byte{0xe3}, []byte{0xe5}, true))
		}
		v, ok := famGet(t, fi, famKey(fi, 1))
		checkTopWindow(t, v, !ok, live, capacity)
		v, ok = famGet(t, fset, famKey(fset, 1))
		var got []uint32
		if ok {
			bm, _, err := DecodeRoaring(v)
			must(t, err)
			got = bm.ToArray()
		}
		var want []uint32
		for m := range members {
			want = append(want, m)
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: set = %v, want %v", round, got, want)
		}
	}
	must(t, db.Verify(context.Background()))
}

// Golden encodings: a change of a merge format fails here first.
func TestMergeGolden(t *testing.T) {
	top, err := TopListOperand(nil, 3, []TopEntry{{Key: 9, Value: 1}, {Key: 5, Value: 2, Removed: true}, {Key: 7, Value: 3}})
	must(t, err)
	bm := roaring.BitmapOf(1, 2, 70000)
	rg, err := RoaringOperand(nil, bm, roaring.BitmapOf(5))
	must(t, err)
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"add", AddOperand(nil, -2), "01fffffffffffffffe"},
		{"toplist", top, "0201030003f6ffffffffffffffff010202060205"},
		{"roaring", rg, "03011e3a300000020000000000010001000000180000001c0000000100020070113a3000000100000000000000100000000500"},
		{"family record", appendFamilyRecord(nil, &familyRecord{prefix: 0x20, name: "inbox", mergeID: 2, mergeName: "toplist"}), "012005696e626f780207746f706c697374eab7a1de"},
		{"job record", appendJobRecord(nil, &jobRecord{id: 3, kind: "fanout", key: []byte("k"), payload: []byte{1}, cursor: []byte{2}, done: 4, total: 9, created: 1700000000000}), "010666616e6f7574016b01010102040980d095ffbc318aefef03"},
		{"deferred list", appendDeferred(nil, [][]byte{{200, 1}, {5}}), "000202c8010105"},
		{"source mark", appendSourceMark(nil, 42), "01000000000000002a0484180d"},
	} {
		if got := hex.EncodeToString(tc.got); got != tc.want {
			t.Errorf("%s = %s, want %s", tc.name, got, tc.want)
		}
	}
}

// FuzzMergeOperands feeds arbitrary operands to every built-in operator's
// decoder and merge: they must return an error, never panic, and a value
// they accept must merge with itself.
func FuzzMergeOperands(f *testing.F) {
	top, _ := TopListOperand(nil, 3, []TopEntry{{Key: 9, Value: 1}, {Key: 5, Removed: true}})
	rg, _ := RoaringOperand(nil, roaring.BitmapOf(1, 2, 70000), roaring.BitmapOf(5))
	for _, s := range [][]byte{AddOperand(nil, 5), top, rg, {2, 1, 1, 0, 1, 0, 0}, {3, 1, 0}, appendDeferred(nil, [][]byte{{200, 1}, top})} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// Pebble's merger must accept anything (it defers what it cannot
		// merge) and never fail.
		m := (&mergerTable{}).pebbleMerger(mergerName)
		vm, err := m.Merge(nil, b)
		if err != nil {
			t.Fatalf("merger refused an operand: %v", err)
		}
		if err := vm.MergeNewer(AddOperand(nil, 1)); err != nil {
			t.Fatal(err)
		}
		if err := vm.MergeOlder(b); err != nil {
			t.Fatal(err)
		}
		if _, _, err := vm.Finish(true); err != nil {
			t.Fatalf("merger finish failed: %v", err)
		}
		if len(b) > 0 && b[0] == deferredID {
			if ops, err := decodeDeferred(b); err == nil {
				again, err := decodeDeferred(appendDeferred(nil, ops))
				if err != nil || len(again) != len(ops) {
					t.Fatalf("deferred list does not round-trip: %x: %v", b, err)
				}
				for i := range ops {
					if !bytes.Equal(ops[i], again[i]) {
						t.Fatalf("deferred list operand %d changed: %x", i, b)
					}
				}
			}
		}
		if len(b) == 0 || b[0] >= FirstCustomMergeID {
			return
		}
		op := builtinMergers[b[0]]
		if op == nil {
			return
		}
		if err := op.check(b); err != nil || len(b) == 1 {
			return // invalid, or the empty value (no payload to merge)
		}
		if op.MergeMany != nil {
			many, err := op.MergeMany([][]byte{b[1:], b[1:], b[1:]})
			if err != nil || op.Check(many) != nil {
				t.Fatalf("%s: MergeMany of a valid payload: %v", op.Name, err)
			}
		}
		out, err := op.Merge(b[1:], b[1:])
		if err != nil {
			t.Fatalf("%s: merge of a valid payload with itself: %v", op.Name, err)
		}
		if err := op.Check(out); err != nil {
			t.Fatalf("%s: merge produced an invalid payload: %v", op.Name, err)
		}
		if op.Finish != nil {
			if fin, err := op.Finish(out); err != nil || fin != nil && op.Check(fin) != nil {
				t.Fatalf("%s: finish: %v", op.Name, err)
			}
		}
	})
}

// TestMergeToNothingThenFlush: a key written with Put, merged to nothing
// (a MergeAdd sum of 0) and followed by another merged key in the same
// flush made Pebble v2.1.7's compaction iterator panic when the store asked
// it to delete the key (DeletableValueMerger; reproduction by the likes
// package). The store now leaves the empty value: the flush works, the key
// reads as absent, the next sums right. It runs in a child process, since
// the panic happened on Pebble's own goroutine.
func TestMergeToNothingThenFlush(t *testing.T) {
	if dir := os.Getenv("TALLY_MERGE_NOTHING_CHILD"); dir != "" {
		db, err := Open(dir, &Options{Families: []FamilySpec{testSum}, Durability: NoSync})
		if err != nil {
			t.Fatal(err)
		}
		f, _ := db.Family("sums")
		for _, step := range []func(b *Batch){
			func(b *Batch) { f.Put(b, famKey(f, 1), AddOperand(nil, 1)) },
			func(b *Batch) {
				f.Merge(b, famKey(f, 1), AddOperand(nil, -1))
				f.Merge(b, famKey(f, 2), AddOperand(nil, 1))
			},
			func(b *Batch) { f.Merge(b, famKey(f, 2), AddOperand(nil, 1)) },
		} {
			b := db.NewBatch()
			step(b)
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
			b.Close()
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		_, ok1, err1 := f.Get(famKey(f, 1), nil)
		v2, ok2, err2 := f.Get(famKey(f, 2), nil)
		sum, _ := DecodeAdd(v2)
		fmt.Printf("flushed: 1 present %v (%v), 2 = %d present %v (%v)\n", ok1, err1, sum, ok2, err2)
		os.Exit(0)
	}
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMergeToNothingThenFlush$", "-test.count=1")
	cmd.Env = append(os.Environ(), "TALLY_MERGE_NOTHING_CHILD="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if want := "flushed: 1 present false (<nil>), 2 = 2 present true (<nil>)"; err != nil || !strings.Contains(string(out), want) {
		t.Fatalf("child: %v\n%s\nwant %q", err, out, want)
	}
}

// TestTopListTyped: typed entries (Kind, Ref, RefValue) survive operands,
// merges both ways and finishing; a list of kind-0 entries keeps version
// 1's bytes (TestMergeGolden), one typed entry makes it version 2, and a
// version 2 payload with a truncated reference is refused.
func TestTopListTyped(t *testing.T) {
	typed := TopEntry{Key: 8, Value: 4, Kind: 2, Ref: 3, RefValue: 1 << 62}
	a, err := TopListOperand(nil, 3, []TopEntry{{Key: 9, Value: 1}, typed})
	must(t, err)
	if got := hex.EncodeToString(a); got != "0202030002f6ffffffffffffffff01020001080203808080808080808040" {
		t.Errorf("typed operand = %s", got)
	}
	b, err := TopListOperand(nil, 3, []TopEntry{{Key: 7, Value: 5}, {Key: 9, Removed: true}})
	must(t, err)
	for _, m := range []func() ([]byte, error){
		func() ([]byte, error) { return mergeTopList(a[1:], b[1:]) },
		func() ([]byte, error) { return mergeTopListMany([][]byte{a[1:], b[1:]}) },
	} {
		v, err := m()
		must(t, err)
		v, err = finishTopList(v)
		must(t, err)
		l, err := DecodeTopList(append([]byte{MergeTopList.ID}, v...))
		must(t, err)
		want := []TopEntry{typed, {Key: 7, Value: 5}}
		if !slices.Equal(l.Entries, want) {
			t.Fatalf("merged %v, want %v", l.Entries, want)
		}
	}
	if _, err := DecodeTopList(a[:len(a)-3]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated typed entry: %v, want ErrCorrupt", err)
	}
	if _, err := DecodeTopList([]byte{MergeTopList.ID, 3, 3, 0, 0}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("version 3: %v, want ErrCorrupt", err)
	}
}

// TestTopListReader: the streaming reader returns what DecodeTopList
// returns, entry by entry, for untyped and typed lists and operands with
// tombstones; it stops wherever the caller stops; every damage that
// DecodeTopList refuses (each truncation, each single-byte change, a
// trailing byte) is refused by a reader read to the end, and the entries
// it returned before are the intact value's; reading a page allocates
// nothing.
func TestTopListReader(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 8))
	for round := range 300 {
		var es []TopEntry
		for range rng.IntN(60) {
			e := TopEntry{Key: 1 + rng.Uint64N(1<<rng.IntN(63)), Value: rng.Uint64N(MaxTopValue)}
			if round%2 == 1 && rng.IntN(3) == 0 {
				e.Kind, e.Ref, e.RefValue = uint8(1+rng.IntN(3)), rng.Uint64(), rng.Uint64()
			}
			e.Removed = rng.IntN(5) == 0
			es = append(es, e)
		}
		v, err := TopListOperand(nil, 1+rng.IntN(50), es)
		must(t, err)
		want, err := DecodeTopList(v)
		must(t, err)
		r, err := ReadTopList(v)
		must(t, err)
		if r.Cap() != want.Cap || r.Floor() != want.Floor || r.Len() != len(want.Entries) {
			t.Fatalf("header %d/%d/%d, want %d/%d/%d", r.Cap(), r.Floor(), r.Len(), want.Cap, want.Floor, len(want.Entries))
		}
		stop := rng.IntN(len(want.Entries) + 1)
		for i := range stop {
			e, ok := r.Next()
			if !ok || e != want.Entries[i] {
				t.Fatalf("entry %d = %v %v, want %v", i, e, ok, want.Entries[i])
			}
		}
		if stop == len(want.Entries) {
			if e, ok := r.Next(); ok || r.Err() != nil {
				t.Fatalf("past the end: %v %v %v", e, ok, r.Err())
			}
		}

		// Damage: DecodeTopList refuses ⇔ a full read refuses, and what was
		// read before the refusal is a prefix of the intact entries.
		damaged := [][]byte{append(slices.Clone(v), 0)}
		for n := range len(v) {
			damaged = append(damaged, v[:n])
		}
		for range 20 {
			d := slices.Clone(v)
			d[rng.IntN(len(d))] ^= byte(1 + rng.IntN(255))
			damaged = append(damaged, d)
		}
		for _, d := range damaged {
			full, derr := DecodeTopList(d)
			r, rerr := ReadTopList(d)
			var got []TopEntry
			if rerr == nil {
				for e, ok := r.Next(); ok; e, ok = r.Next() {
					got = append(got, e)
				}
				rerr = r.Err()
			}
			if (derr == nil) != (rerr == nil) {
				t.Fatalf("value %x: DecodeTopList %v, reader %v", d, derr, rerr)
			}
			if rerr != nil && !errors.Is(rerr, ErrCorrupt) {
				t.Fatalf("value %x: reader %v, want ErrCorrupt", d, rerr)
			}
			if derr == nil && !slices.Equal(got, full.Entries) {
				t.Fatalf("value %x: reader %v, DecodeTopList %v", d, got, full.Entries)
			}
			if derr != nil && len(d) > 0 && len(d) < len(v) && !slices.Equal(got, want.Entries[:len(got)]) {
				t.Fatalf("truncated to %d: reader gave %v before refusing, want a prefix of %v", len(d), got, want.Entries)
			}
			if len(d) > 0 && d[0] == MergeTopList.ID {
				if err := checkTopList(d[1:]); (err == nil) != (derr == nil) {
					t.Fatalf("value %x: checkTopList %v, DecodeTopList %v", d, err, derr)
				}
			}
		}
	}

	es := make([]TopEntry, 800)
	for i := range es {
		es[i] = TopEntry{Key: uint64(1000 + i), Value: uint64(i % 50), Kind: uint8(i % 2), Ref: uint64(i % 2 * 7), RefValue: uint64(i % 2 * 9)}
	}
	v, err := TopListOperand(nil, 800, es)
	must(t, err)
	if n := testing.AllocsPerRun(100, func() {
		r, err := ReadTopList(v)
		must(t, err)
		for range 21 {
			if _, ok := r.Next(); !ok {
				t.Fatal(r.Err())
			}
		}
		must(t, checkTopList(v[1:]))
	}); n != 0 {
		t.Fatalf("a page read and a check allocate %v times, want 0", n)
	}
}

// BenchmarkTopListRead compares, on an inbox of 800 entries (untyped, and
// with every tenth entry a repost), what a page of 20 pays: the full
// decode (DecodeTopList), the check a read of the key runs (checkTopList)
// and the streaming reader stopped after 21 entries.
func BenchmarkTopListRead(b *testing.B) {
	for _, typed := range []bool{false, true} {
		es := make([]TopEntry, 800)
		for i := range es {
			es[i] = TopEntry{Key: 1<<40 + uint64(i)*37, Value: 1 + uint64(i*7919)%300_000}
			if typed && i%10 == 0 {
				es[i].Kind, es[i].Ref, es[i].RefValue = 1, 1<<40-uint64(i), 1+uint64(i)%300_000
			}
		}
		v, err := TopListOperand(nil, 800, es)
		must(b, err)
		name := fmt.Sprintf("typed=%v", typed)
		b.Run(name+"/decode", func(b *testing.B) {
			for b.Loop() {
				if _, err := DecodeTopList(v); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/check", func(b *testing.B) {
			for b.Loop() {
				if err := checkTopList(v[1:]); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/page", func(b *testing.B) {
			for b.Loop() {
				r, err := ReadTopList(v)
				if err != nil {
					b.Fatal(err)
				}
				for range 21 {
					r.Next()
				}
			}
		})
	}
}

// TestValueMergerPool checks the pooled mergers: a value Finish returns
// stays intact until its Closer runs, however many merges run meanwhile,
// a merger reused after Close merges as a fresh one does, and a second
// Close of one Closer does not pool its merger twice.
func TestValueMergerPool(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	m := (&mergerTable{}).pebbleMerger(mergerName)
	operand := func() []byte {
		es := make([]TopEntry, 1+rng.IntN(20))
		for i := range es {
			es[i] = TopEntry{Key: 1 + rng.Uint64N(1000), Value: 1 + rng.Uint64N(50), Removed: rng.IntN(8) == 0}
		}
		op, err := TopListOperand(nil, 1+rng.IntN(30), es)
		must(t, err)
		return op
	}
	type held struct {
		v, want []byte
		c       io.Closer
	}
	var open []held
	for round := range 400 {
		ops := make([][]byte, 1+rng.IntN(5))
		payloads := make([][]byte, len(ops))
		for i := range ops {
			ops[i] = operand()
			payloads[i] = ops[i][1:]
		}
		vm, err := m.Merge(nil, ops[0])
		must(t, err)
		for _, o := range ops[1:] {
			must(t, vm.MergeNewer(o))
		}
		v, c, err := vm.Finish(false)
		must(t, err)
		want, err := mergeTopListMany(payloads)
		must(t, err)
		want = append([]byte{MergeTopList.ID}, want...)
		if len(ops) == 1 {
			want = ops[0]
		}
		if !bytes.Equal(v, want) {
			t.Fatalf("round %d: merged %x, want %x", round, v, want)
		}
		open = append(open, held{v, bytes.Clone(want), c})
		for len(open) > 0 && rng.IntN(2) == 0 { // close some, in any order
			i := rng.IntN(len(open))
			h := open[i]
			if !bytes.Equal(h.v, h.want) {
				t.Fatalf("round %d: a value changed before its Closer ran: %x, want %x", round, h.v, h.want)
			}
			must(t, h.c.Close())
			must(t, h.c.Close()) // a second Close is a no-op
			open = append(open[:i], open[i+1:]...)
		}
	}
	a, b := valueMergerPool.Get(), valueMergerPool.Get()
	if a == b {
		t.Fatal("one merger pooled twice")
	}
}

// TestTopListDeliveriesNeverEmpty checks the rule the timeline's inboxes
// rely on (timeline's package doc, "Sentinels"): operands that only add
// entries, mixed with operands that remove entries and add a key-0
// entry, merge in any grouping to a value that is never the empty one
// (which Pebble v2.1.7's compaction cannot take as a deletion).
func TestTopListDeliveriesNeverEmpty(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for round := range 2000 {
		capacity := 1 + rng.IntN(6)
		ops := make([][]byte, 1+rng.IntN(8))
		for i := range ops {
			var es []TopEntry
			remove := rng.IntN(3) == 0
			for range 1 + rng.IntN(3) {
				es = append(es, TopEntry{Key: 1 + rng.Uint64N(12), Value: 1 + rng.Uint64N(4), Removed: remove})
			}
			if remove {
				es = append(es, TopEntry{}) // the sentinel
			}
			op, err := TopListOperand(nil, capacity, es)
			must(t, err)
			ops[i] = op
		}
		for _, merge := range []func(testing.TB, [][]byte, *rand.Rand) ([]byte, bool){mergeAll, mergeGrouped} {
			if _, empty := merge(t, ops, rng); empty {
				t.Fatalf("round %d: operands %x merged to nothing", round, ops)
			}
		}
	}
}
