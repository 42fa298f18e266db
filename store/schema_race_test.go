package store

// Issue 16's race tests for schema adds: CreateCounter and AddColumn check
// and write under DB.commit, so concurrent adds of one name create it once
// (the others get ErrExists and change nothing), and a column added while
// writers and readers run loses and invents nothing.

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestSchemaAddRace creates one counter name, then adds one column name,
// from several goroutines at once, many times.
func TestSchemaAddRace(t *testing.T) {
	fs := vfs.NewMem()
	db := openTest(t, fs, "db", nil)
	const rounds, racers = 30, 4
	for r := range rounds {
		name := fmt.Sprintf("c%d", r)
		for _, add := range []func() error{
			func() error { return db.CreateCounter(name, CounterOptions{RangeBits: 16}) },
			func() error { return db.AddColumn(name, "x", ColumnOptions{HintBits: 8}) },
		} {
			var ok, exists atomic.Int32
			var other atomic.Value
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range racers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					switch err := add(); {
					case err == nil:
						ok.Add(1)
					case errors.Is(err, ErrExists):
						exists.Add(1)
					default:
						other.Store(err)
					}
				}()
			}
			close(start)
			wg.Wait()
			if ok.Load() != 1 || exists.Load() != racers-1 || other.Load() != nil {
				t.Fatalf("round %d: %d succeeded, %d ErrExists, other %v", r, ok.Load(), exists.Load(), other.Load())
			}
		}
		c, err := db.Counter(name)
		must(t, err)
		if cols := c.Columns(); len(cols) != 1 || cols[0] != "x" {
			t.Fatalf("round %d: columns %v", r, cols)
		}
	}
	infos := db.Counters()
	must(t, db.Close())
	db = openTest(t, fs, "db", nil)
	if got := db.Counters(); fmt.Sprint(got) != fmt.Sprint(infos) {
		t.Fatalf("schema after reopen:\n%v\nwant:\n%v", got, infos)
	}
}

// TestAddColumnWhileWriting adds columns while writers increment and set
// rows and readers read them: every acknowledged increment is there, every
// row reads with the columns it had plus zeros, and Check holds, before
// and after a reopen.
func TestAddColumnWhileWriting(t *testing.T) {
	fs := vfs.NewMem()
	db := openTest(t, fs, "db", nil)
	must(t, db.CreateCounter("w", CounterOptions{RangeBits: 16}))
	must(t, db.AddColumn("w", "a", ColumnOptions{HintBits: 8}))
	c, err := db.Counter("w")
	must(t, err)
	const writers, ids, added = 3, 64, 12
	var incrs [writers]int64
	var stop atomic.Bool
	var progress atomic.Int64 // increments and sets so far, to pace the adds
	var wg sync.WaitGroup
	errc := make(chan error, writers+2)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				id := uint64(w*ids + i%ids)
				if _, err := c.Incr(id, "a", 1); err != nil {
					errc <- err
					return
				}
				incrs[w]++
				progress.Add(1)
			}
		}()
	}
	wg.Add(1)
	go func() { // whole-row sets of ids no writer increments
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			vals := make([]uint64, c.NumColumns())
			for k := range vals {
				vals[k] = 7
			}
			err := c.Set(uint64(writers*ids+i%8), vals...)
			if err != nil && !errors.Is(err, ErrColumnCount) { // a column came between NumColumns and Set
				errc <- err
				return
			}
			progress.Add(1)
		}
	}()
	wg.Add(1)
	go func() { // readers see whole rows, never a value nobody wrote
		defer wg.Done()
		var buf []uint64
		for i := 0; !stop.Load(); i++ {
			row, err := c.Get(uint64(writers*ids+i%8), buf[:0])
			if err != nil {
				errc <- err
				return
			}
			for _, v := range row {
				if v != 0 && v != 7 {
					errc <- fmt.Errorf("set row reads %v", row)
					return
				}
			}
			buf = row
		}
	}()
	for k := range added {
		for p := progress.Load(); progress.Load() < p+200 && len(errc) == 0; {
			runtime.Gosched()
		}
		must(t, db.AddColumn("w", fmt.Sprintf("b%d", k), ColumnOptions{HintBits: 16}))
	}
	stop.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	verify := func() {
		t.Helper()
		c, err := db.Counter("w")
		must(t, err)
		if n := c.NumColumns(); n != 1+added {
			t.Fatalf("%d columns, want %d", n, 1+added)
		}
		for w := range writers {
			var sum int64
			for i := range ids {
				row, err := c.Get(uint64(w*ids+i), nil)
				must(t, err)
				sum += int64(row[0])
				for k, v := range row[1:] {
					if v != 0 {
						t.Fatalf("row %d: column b%d reads %d, nobody wrote it", w*ids+i, k, v)
					}
				}
			}
			if sum != incrs[w] {
				t.Fatalf("writer %d: %d increments acknowledged, rows sum to %d", w, incrs[w], sum)
			}
		}
		must(t, db.Check())
	}
	verify()
	must(t, db.Close())
	db = openTest(t, fs, "db", nil)
	verify()
}
