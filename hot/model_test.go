package hot

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestModel drives random Put/Delete/AddColumn/Get sequences against a plain
// map and compares every read, calls Check after every step, and compares a
// full Range periodically.
func TestModel(t *testing.T) {
	seeds := 8
	if testing.Short() || raceEnabled {
		seeds = 1
	}
	for _, kb := range []uint{8, 12, 16, 20, 32, 40, 48, 56, 64} {
		for seed := range seeds {
			t.Run(fmt.Sprintf("bits%d/seed%d", kb, seed), func(t *testing.T) {
				t.Parallel()
				runModel(t, kb, uint64(seed))
			})
		}
	}
}

func runModel(t *testing.T, keyBits uint, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, uint64(keyBits)))
	widthChoices := []int{1, 2, 4}
	widths := make([]int, 1+rng.IntN(4))
	for i := range widths {
		widths[i] = widthChoices[rng.IntN(3)]
	}
	hint := 0
	if rng.IntN(3) == 0 {
		hint = rng.IntN(500)
	}
	tb := newTable(t, keyBits, widths, hint)
	mask := uint64(1)<<keyBits - 1

	// A key pool small enough to revisit keys often; for 8-bit tables it is
	// the whole domain so segments fill up completely.
	poolSize := 600
	if keyBits == 8 {
		poolSize = 256
	}
	pool := make([]uint64, poolSize)
	for i := range pool {
		switch {
		case keyBits == 8:
			pool[i] = uint64(i)
		case i%4 == 0:
			pool[i] = uint64(i) // dense low ids
		case i%4 == 1:
			pool[i] = mask - uint64(i)
		default:
			pool[i] = rng.Uint64() & mask
		}
	}
	randVal := func(c int) uint64 {
		ones := uint64(1)<<(8*uint(tb.widths[c])) - 1
		switch rng.IntN(10) {
		case 0, 1, 2:
			return 0
		case 3, 4, 5:
			return uint64(rng.IntN(10))
		case 6:
			return ones - 1 + uint64(rng.IntN(3)) // below, at, above all-ones
		case 7:
			return rng.Uint64() & ones
		case 8:
			return math.MaxUint64 - uint64(rng.IntN(2))
		default:
			return rng.Uint64()
		}
	}

	model := map[uint64][]uint64{}
	ncols := len(widths)
	steps := 1500
	if raceEnabled {
		steps = 400
	}
	buf := make([]uint64, 0, MaxColumns)
	for step := range steps {
		key := pool[rng.IntN(len(pool))]
		switch op := rng.IntN(100); {
		case op < 55:
			n := rng.IntN(ncols + 1)
			vals := make([]uint64, n)
			for c := range vals {
				vals[c] = randVal(c)
			}
			if err := tb.Put(key, vals); err != nil {
				t.Fatalf("step %d: Put: %v", step, err)
			}
			row := make([]uint64, ncols)
			copy(row, vals)
			if slices.ContainsFunc(row, func(v uint64) bool { return v != 0 }) {
				model[key] = row
			} else {
				delete(model, key)
			}
		case op < 80:
			if err := tb.Delete(key); err != nil {
				t.Fatalf("step %d: Delete: %v", step, err)
			}
			delete(model, key)
		case op < 82:
			if ncols < MaxColumns {
				w := widthChoices[rng.IntN(3)]
				if err := tb.AddColumn(w); err != nil {
					t.Fatalf("step %d: AddColumn: %v", step, err)
				}
				ncols++
				for k, row := range model {
					model[k] = append(row, 0)
				}
			}
		case op < 84:
			// Bad input never changes anything.
			// NB: a 64-bit table has no key out of range.
			outOfRange := keyBits < 64 && (tb.Put(mask+1+uint64(rng.IntN(10)), []uint64{1}) == nil || tb.Delete(mask+1) == nil)
			if outOfRange || tb.Put(key, make([]uint64, ncols+1)) == nil {
				t.Fatalf("step %d: bad input accepted", step)
			}
		default:
			// reads only
		}
		// Check walks every segment; thin it out for tables with thousands.
		if tb.NumSegments() <= 256 || step%25 == 0 {
			if err := tb.Check(); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
		}
		if tb.Len() != len(model) {
			t.Fatalf("step %d: Len %d, model %d", step, tb.Len(), len(model))
		}
		for range 4 {
			k := pool[rng.IntN(len(pool))]
			if rng.IntN(4) == 0 {
				k = rng.Uint64() & mask
			}
			compareRow(t, tb, k, model, ncols, buf)
		}
		if step%100 == 0 || step == steps-1 {
			compareRange(t, tb, model)
		}
		if step%5 == 0 {
			batch := make([]uint64, rng.IntN(40))
			for i := range batch {
				batch[i] = pool[rng.IntN(len(pool))]
				if rng.IntN(5) == 0 {
					batch[i] = rng.Uint64() & mask
				}
				if rng.IntN(20) == 0 {
					batch[i] = mask + 1 + uint64(rng.IntN(5)) // out of range: absent
				}
			}
			compareMany(t, tb, batch, model, ncols)
		}
	}
	for k := range model {
		compareRow(t, tb, k, model, ncols, buf)
	}
}

func compareRow(t *testing.T, tb *Table, k uint64, model map[uint64][]uint64, ncols int, buf []uint64) {
	t.Helper()
	want, wantOK := model[k]
	if !wantOK {
		want = make([]uint64, ncols)
	}
	got, ok := tb.Get(k, buf)
	if ok != wantOK || !slices.Equal(got, want) {
		t.Fatalf("Get(%d) = %v, %v; want %v, %v", k, got, ok, want, wantOK)
	}
	c := int(k % uint64(ncols))
	if g := tb.GetColumn(k, c); g != want[c] {
		t.Fatalf("GetColumn(%d, %d) = %d, want %d", k, c, g, want[c])
	}
}

func compareRange(t *testing.T, tb *Table, model map[uint64][]uint64) {
	t.Helper()
	seen := 0
	tb.Range(func(k uint64, vals []uint64) bool {
		want, ok := model[k]
		if !ok || !slices.Equal(vals, want) {
			t.Fatalf("Range(%d) = %v, model %v %v", k, vals, want, ok)
		}
		seen++
		return true
	})
	if seen != len(model) {
		t.Fatalf("Range saw %d rows, model has %d", seen, len(model))
	}
}

// TestModelFill fills single small segments to capacity and empties them,
// exercising growth, tail pad exhaustion and long backward shifts.
func TestModelFill(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 99))
		tb := newTable(t, 8, []int{1}, 0)
		keys := rng.Perm(256)
		for i, k := range keys {
			mustPut(t, tb, uint64(k), uint64(i%250+1))
			if i%16 == 0 {
				check(t, tb)
			}
		}
		check(t, tb)
		if tb.Len() != 256 {
			t.Fatal(tb.Len())
		}
		rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		for i, k := range keys {
			if err := tb.Delete(uint64(k)); err != nil {
				t.Fatal(err)
			}
			if i%16 == 0 {
				check(t, tb)
			}
		}
		check(t, tb)
		if tb.Len() != 0 || tb.MemBytes() > 4096 {
			t.Fatalf("Len %d MemBytes %d", tb.Len(), tb.MemBytes())
		}
	}
}

func compareMany(t *testing.T, tb *Table, keys []uint64, model map[uint64][]uint64, ncols int) {
	t.Helper()
	vals, found := tb.GetMany(keys, nil, nil)
	if len(vals) != len(keys)*ncols || len(found) != len(keys) {
		t.Fatalf("GetMany: %d values, %d flags for %d keys", len(vals), len(found), len(keys))
	}
	for i, k := range keys {
		want, ok := model[k]
		if !ok {
			want = make([]uint64, ncols)
		}
		if found[i] != ok || !slices.Equal(vals[i*ncols:(i+1)*ncols], want) {
			t.Fatalf("GetMany key %d (%d): %v %v, want %v %v", i, k, vals[i*ncols:(i+1)*ncols], found[i], want, ok)
		}
	}
}
