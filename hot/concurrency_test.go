package hot

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentReadersOneWriter toggles keys between two full rows (one with
// overflowed cells) and deletion while readers check that every read is one
// of the states, never a mix. The writer also grows segments (fresh keys)
// and adds columns. Run with -race.
func TestConcurrentReadersOneWriter(t *testing.T) {
	tb := newTable(t, 32, []int{2, 4}, 0)
	const nkeys = 64
	keys := make([]uint64, nkeys)
	for i := range keys {
		keys[i] = uint64(i) * 0x01000193 & (1<<32 - 1)
	}
	rowA := []uint64{7, 70000}
	rowB := []uint64{math.MaxUint64, 1 << 40} // both cells overflowed
	var stop atomic.Bool
	var wg sync.WaitGroup
	var reads atomic.Int64
	// The writer starts once every reader has made a read, so the reads
	// overlap the writes however the goroutines are scheduled (on a loaded
	// machine the writer could otherwise finish before a reader ran).
	var started sync.WaitGroup
	for r := range 4 {
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			first := true
			defer func() {
				if first { // a reader that returned before its first read
					started.Done()
				}
			}()
			buf := make([]uint64, 0, MaxColumns)
			for i := r; !stop.Load(); i++ {
				k := keys[i%nkeys]
				got, ok := tb.Get(k, buf)
				a, b := got[0], got[1]
				switch {
				case !ok && a == 0 && b == 0:
				case ok && a == rowA[0] && b == rowA[1]:
				case ok && a == rowB[0] && b == rowB[1]:
				default:
					t.Errorf("torn read of %d: %v %v", k, got, ok)
					return
				}
				if c := tb.GetColumn(k, 1); c != 0 && c != rowA[1] && c != rowB[1] {
					t.Errorf("torn GetColumn of %d: %d", k, c)
					return
				}
				if i%64 == 0 {
					many, fs := tb.GetMany(keys[i%32:i%32+20], nil, nil)
					nc := len(many) / len(fs) // 3 once the writer adds a column
					for j := range fs {
						a, b := many[j*nc], many[j*nc+1]
						if !(!fs[j] && a == 0 && b == 0 || fs[j] && a == rowA[0] && b == rowA[1] ||
							fs[j] && a == rowB[0] && b == rowB[1]) {
							t.Errorf("torn GetMany: %v %v", many[j*nc:j*nc+nc], fs[j])
							return
						}
					}
				}
				if i%512 == 0 {
					tb.Range(func(key uint64, vals []uint64) bool {
						return vals[0] != 0 || vals[1] != 0 || len(vals) < 2
					})
				}
				reads.Add(1)
				if first {
					first = false
					started.Done()
				}
			}
		}()
	}
	started.Wait()
	filler := uint64(1 << 31)
	for i := range 20000 {
		k := keys[i%nkeys]
		var err error
		switch i % 3 {
		case 0:
			err = tb.Put(k, rowA)
		case 1:
			err = tb.Put(k, rowB)
		default:
			err = tb.Delete(k)
		}
		if err != nil {
			t.Fatal(err)
		}
		// Growth and migration happen under readers too.
		if err := tb.Put(filler, []uint64{1}); err != nil {
			t.Fatal(err)
		}
		filler += 0x9E37
		if i == 10000 {
			if err := tb.AddColumn(1); err != nil {
				t.Fatal(err)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	check(t, tb)
	if reads.Load() == 0 {
		t.Fatal("readers never ran")
	}
}

// TestAllocs checks the steady-state paths allocate nothing.
func TestAllocs(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation")
	}
	tb := newTable(t, 32, []int{2, 2}, 10000)
	for k := range uint64(5000) {
		mustPut(t, tb, k*7919, k+1, 1<<20) // second column overflowed
	}
	buf := make([]uint64, 0, 4)
	k := uint64(0)
	if a := testing.AllocsPerRun(1000, func() {
		buf, _ = tb.Get(k*7919, buf)
		buf, _ = tb.Get(k*7919+1, buf) // absent
		k = (k + 1) % 5000
	}); a != 0 {
		t.Errorf("Get: %v allocs", a)
	}
	batch := make([]uint64, 10)
	mvals, mfound := make([]uint64, 0, 20), make([]bool, 0, 10)
	if a := testing.AllocsPerRun(1000, func() {
		for i := range batch {
			batch[i] = (k + uint64(i)) * 7919
		}
		mvals, mfound = tb.GetMany(batch, mvals, mfound)
		k = (k + 1) % 5000
	}); a != 0 {
		t.Errorf("GetMany: %v allocs", a)
	}
	if a := testing.AllocsPerRun(1000, func() {
		_ = tb.GetColumn(k*7919, 1)
		k = (k + 1) % 5000
	}); a != 0 {
		t.Errorf("GetColumn: %v allocs", a)
	}
	vals := []uint64{3, 4}
	over := []uint64{3, 1 << 21}
	if a := testing.AllocsPerRun(1000, func() {
		_ = tb.Put(k*7919, vals)
		_ = tb.Put(k*7919, over) // update of an existing overflow entry
		k = (k + 1) % 5000
	}); a != 0 {
		t.Errorf("Put: %v allocs", a)
	}
}

// TestConcurrentWriters runs writers on disjoint keys, AddColumn and
// readers at once; the end state must be exactly what each writer wrote.
func TestConcurrentWriters(t *testing.T) {
	tb := newTable(t, 24, []int{1}, 0)
	const perWriter = 3000
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range uint64(perWriter) {
				k := i*3 + uint64(w)
				if err := tb.Put(k, []uint64{k%300 + 1}); err != nil {
					t.Error(err)
					return
				}
				if i%7 == 0 {
					if err := tb.Delete(k); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 5 {
			if err := tb.AddColumn(2); err != nil {
				t.Error(err)
			}
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		keys := make([]uint64, 12)
		for i := range 2000 {
			for j := range keys {
				keys[j] = uint64(i*12+j) % (3 * perWriter)
			}
			tb.GetMany(keys, nil, nil)
		}
	}()
	wg.Wait()
	check(t, tb)
	for k := range uint64(3 * perWriter) {
		got, ok := tb.Get(k, nil)
		deleted := (k/3)%7 == 0
		if ok == deleted || len(got) != 6 || (!deleted && got[0] != k%300+1) {
			t.Fatalf("Get(%d) = %v %v, deleted %v", k, got, ok, deleted)
		}
	}
}
