package store

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestAllocs checks the steady-state read and write paths allocate nothing
// per operation (DESIGN.md quality bar).
func TestAllocs(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocation counts (not meaningful under -race)")
	}
	for _, d := range []Durability{SyncAlways, SyncInterval, NoSync} {
		fs := vfs.NewMem()
		o := testOptions(fs)
		o.Durability = d
		db := openTest(t, fs, "a", o)
		c := newPosts(t, db, 16)
		ids := []uint64{1, 2, 3, 1 << 20, 5, 6, 7, 8, 9, 10}
		for _, id := range ids {
			must(t, c.Set(id, 1, 2, 3))
		}
		dst := make([]uint64, 64)
		check := func(name string, f func()) {
			f() // warm up pools
			// AllocsPerRun counts the whole process's allocations and
			// divides by the runs, rounding down: a burst of a background
			// goroutine (a WAL rotation, a flush) once fails 200 runs
			// (seen in CI: "Incr (sync): 1.0"), while an allocation per
			// operation fails any number of runs.
			if n := testing.AllocsPerRun(2000, f); n != 0 {
				t.Errorf("%s (%s): %.1f allocs/op", name, d, n)
			}
		}
		check("Get", func() { c.Get(3, dst) })
		check("GetColumn", func() { c.GetColumn(3, "likes") })
		check("MultiGet", func() { c.MultiGet(ids, dst) })
		check("Incr", func() { c.Incr(3, "likes", 1) })
	}

	// Cold reads (blocks cached) reference the cold version: no
	// allocation either.
	fs := vfs.NewMem()
	db := openTest(t, fs, "c", testOptions(fs))
	c := newPosts(t, db, 16)
	ids := []uint64{1, 2, 3, 5, 6, 7, 8, 9, 10, 1000}
	for _, id := range ids {
		must(t, c.Set(id, 1, 2, 3))
	}
	must(t, db.SealRange(context.Background(), "posts", 0))
	dst := make([]uint64, 64)
	for name, f := range map[string]func(){
		"cold Get":      func() { c.Get(3, dst) },
		"cold MultiGet": func() { c.MultiGet(ids, dst) },
	} {
		f()
		if n := testing.AllocsPerRun(200, f); n != 0 {
			t.Errorf("%s: %.1f allocs/op", name, n)
		}
	}
}
