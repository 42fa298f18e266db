package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestReadersDuringMerges is the reproduction of issue 12 defect 1: readers
// that miss a tiny block cache while merges replace a cold range's blocks
// must never see an error (they read blocks a merge already replaced) nor a
// value no write explains.
func TestReadersDuringMerges(t *testing.T) {
	fs := vfs.NewMem()
	opts := testOptions(fs)
	opts.ColdBlockSize = 64
	opts.BlockCacheSize = 1 // every block read misses the cache
	db := openTest(t, fs, "r", opts)
	c := newPosts(t, db, 12)
	const n = 600
	for i := uint64(0); i < n; i++ {
		must(t, c.Set(i*5, i+1, 7, 0))
	}
	ctx := context.Background()
	must(t, db.SealRange(ctx, "posts", 0))

	var stop atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]uint64, 10)
			var dst []uint64
			for k := uint64(r); !stop.Load(); k += 7 {
				id := (k % n) * 5
				v, err := c.Get(id, dst)
				if err != nil {
					errc <- err
					return
				}
				// Column "comments" is never written after the load: any
				// other value is a read of the wrong row or block.
				if v[1] != 7 || v[0] < id/5+1 {
					errc <- errors.New("Get read a value no write explains")
					return
				}
				for j := range ids {
					ids[j] = ((k + uint64(j)*31) % n) * 5
				}
				if dst, err = c.MultiGet(ids, dst); err != nil {
					errc <- err
					return
				}
				for j := range ids {
					if dst[j*3+1] != 7 {
						errc <- errors.New("MultiGet read a value no write explains")
						return
					}
				}
			}
		}()
	}
	deadline := time.Now().Add(500 * time.Millisecond)
	merges := 0
	for i := uint64(0); time.Now().Before(deadline); i++ {
		_, err := c.Incr((i*13%n)*5, "reposts", 1) // a delta for the next merge
		must(t, err)
		must(t, db.Compact(ctx))
		merges++
		if len(errc) > 0 {
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatalf("reader during %d merges: %v", merges, err)
	}
	t.Logf("%d merges", merges)
}

// --- helpers for lifetime tests ---

// stopHard closes db as a crash would: no checkpoint, no sweep.
func stopHard(t testing.TB, db *DB) {
	t.Helper()
	db.stopBackground()
	db.closed.Store(true)
	db.pebbleMu.Lock()
	db.pebbleClosed = true
	db.pebbleMu.Unlock()
	must(t, db.pdb().Close())
	must(t, db.lock.Close())
}

// editRaw opens the Pebble instance of the store in dir directly and runs
// edit on it (to damage or repair a store as a user or a bug might).
func editRaw(t testing.TB, fs vfs.FS, dir string, edit func(p *pebble.DB)) {
	t.Helper()
	p, err := pebble.Open(dir+"/db", rawPebbleOptions(fs))
	must(t, err)
	edit(p)
	must(t, p.Close())
}

func rawGet(t testing.TB, p pebble.Reader, key []byte) []byte {
	t.Helper()
	v, closer, err := p.Get(key)
	must(t, err)
	defer closer.Close()
	return slices.Clone(v)
}

// keysOf returns every key in [lo, hi).
func keysOf(t testing.TB, p pebble.Reader, lo, hi []byte) [][]byte {
	t.Helper()
	it, err := p.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	must(t, err)
	defer it.Close()
	var out [][]byte
	for ok := it.First(); ok; ok = it.Next() {
		out = append(out, slices.Clone(it.Key()))
	}
	must(t, it.Error())
	return out
}

// blocksOnDisk returns the block ids of (cid, rid) in Pebble.
func blocksOnDisk(t testing.TB, p pebble.Reader, cid uint32, rid uint64) []uint32 {
	t.Helper()
	prefix := appendColdBlockPrefix(nil, cid, rid)
	var ids []uint32
	for _, k := range keysOf(t, p, prefix, prefixEnd(prefix)) {
		ids = append(ids, binary.BigEndian.Uint32(k[13:]))
	}
	return ids
}

func intentsOnDisk(t testing.TB, p pebble.Reader) int {
	ip := appendMetaKey(nil, metaIntent)
	return len(keysOf(t, p, ip, prefixEnd(ip)))
}

// checkTidy fails unless db holds no intent and every cold range's blocks
// on disk are exactly the ones its value references.
func checkTidy(t testing.TB, db *DB, where string) {
	t.Helper()
	if n := intentsOnDisk(t, db.pdb()); n != 0 {
		t.Fatalf("%s: %d intents left", where, n)
	}
	for _, cs := range db.cat.Load().byID {
		for rid, rs := range cs.ranges.Load().m {
			var want []uint32
			if rs.cold != nil {
				want = slices.Sorted(slices.Values(rs.cold.v.blockIDs))
			}
			if got := blocksOnDisk(t, db.pdb(), cs.id, rid); !slices.Equal(got, want) {
				t.Fatalf("%s: %s range %d: blocks on disk %v, referenced %v", where, cs.name, rid, got, want)
			}
		}
	}
}

// rows is a plain model of one counter: id -> values.
type rows map[uint64][]uint64

func (m rows) set(t testing.TB, c *Counter, id uint64, vals ...uint64) {
	t.Helper()
	must(t, c.Set(id, vals...))
	m[id] = vals
}

func (m rows) incr(t testing.TB, c *Counter, id uint64, col int, d uint64) {
	t.Helper()
	cols := c.Columns()
	_, err := c.Incr(id, cols[col], int64(d))
	must(t, err)
	v := slices.Clone(m[id])
	if v == nil {
		v = make([]uint64, len(cols))
	}
	v[col] += d
	m[id] = v
}

func (m rows) clone() rows {
	out := rows{}
	for k, v := range m {
		out[k] = slices.Clone(v)
	}
	return out
}

// check compares every row of the model, and ids in also (which must read
// zeros unless the model holds them).
func (m rows) check(t testing.TB, c *Counter, where string, also ...uint64) {
	t.Helper()
	ids := slices.Collect(maps.Keys(m))
	ids = append(ids, also...)
	for _, id := range ids {
		want := m[id]
		if want == nil {
			want = make([]uint64, c.NumColumns())
		}
		got, err := c.Get(id, nil)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("%s: row %d = %v (%v), want %v", where, id, got, err, want)
		}
	}
}

// TestInterruptedJobsCleanedUp crashes the store at every step of a seal,
// a merge (with a reader holding the old blocks), a cold Load and a
// checkpoint, as a power cut (only synced data survives) and as a killed
// process (everything written survives): the next Open deletes exactly
// what the interrupted operation left (its intent says what), nothing
// else, and reads every acknowledged row.
func TestInterruptedJobsCleanedUp(t *testing.T) {
	steps := []string{
		"seal: intent written", "seal: blocks written", "seal: switched",
		"merge: intent written", "merge: blocks written", "merge: switched", "merge: retired",
		"load: intent written", "load: blocks written",
		"checkpoint: intent written", "checkpoint: chunks written", "checkpoint: finished",
	}
	// Steps at which an intent is on disk (the merge's obsolete intent
	// waits for the reader holding the old version).
	wantIntents := map[string]bool{}
	for _, s := range steps {
		wantIntents[s] = !strings.HasSuffix(s, "finished") && s != "seal: switched"
	}
	for _, step := range steps {
		for _, keep := range []int{0, 100} {
			t.Run(fmt.Sprintf("%s/unsynced=%d%%", step, keep), func(t *testing.T) {
				fs := vfs.NewCrashableMem()
				opts := testOptions(fs)
				opts.ColdBlockSize = 64
				m := rows{}
				var clone *vfs.MemFS
				var atClone rows
				var db *DB
				opts.testHookStep = func(s string) {
					if s == step && clone == nil {
						if keep == 100 {
							// A killed process: whatever Pebble wrote
							// (its WAL buffer included) survives.
							must(t, db.pdb().LogData(nil, pebble.Sync))
						}
						clone = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: keep, RNG: rand.New(rand.NewPCG(1, 2))})
						atClone = m.clone() // every acknowledged write is synced
					}
				}
				var err error
				db, err = Open("j", opts)
				must(t, err)
				c := newPosts(t, db, 12)
				for _, base := range []uint64{0, 1 << 12} {
					for i := uint64(0); i < 300; i++ {
						id := base + i*5
						m.set(t, c, id, id+1, 7, id%3)
					}
				}
				ctx := context.Background()
				must(t, db.Checkpoint())
				must(t, db.SealRange(ctx, "posts", 0))
				for i := uint64(0); i < 40; i++ { // a delta over many blocks
					m.incr(t, c, i*35, 0, 2)
				}
				// A reader inside the old version: the merge's replaced
				// blocks must wait for it.
				old := c.cs.lookupRange(0).cold
				old.ref()
				must(t, db.Compact(ctx)) // merges range 0's delta
				m.incr(t, c, 5, 0, 1)
				must(t, db.Checkpoint())
				// A cold Load into new range 3 (older than the two
				// newest ranges, so the policy ages it).
				m.set(t, c, 9<<12, 1, 1, 1)
				c.cs.age = AgePolicy{Kind: KeepNewest, HotRanges: 1}
				var in LoadRows
				var loaded []uint64
				for i := uint64(0); i < 200; i++ {
					in.IDs = append(in.IDs, 3<<12|i*7)
					in.Vals = append(in.Vals, i+1, 2, 3)
					loaded = append(loaded, 3<<12|i*7)
				}
				st, err := db.Load(ctx, "posts", in, nil)
				must(t, err)
				if st.ColdRanges != 1 {
					t.Fatalf("load built %d cold ranges", st.ColdRanges)
				}
				for i, id := range in.IDs {
					m[id] = in.Vals[i*3 : i*3+3]
				}
				old.unref()
				if clone == nil {
					t.Fatalf("step %q never reached", step)
				}
				stopHard(t, db)

				var leftIntents int
				editRaw(t, clone.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(3, 4))}), "j", func(p *pebble.DB) {
					leftIntents = intentsOnDisk(t, p)
				})
				opts.FS, opts.testHookStep = clone, nil
				db2 := openTest(t, clone, "j", opts)
				if got := db2.Stats().Recovery.IntentsResolved; got != leftIntents || wantIntents[step] && got == 0 {
					t.Fatalf("%d intents on disk, Open resolved %d", leftIntents, got)
				}
				c2, err := db2.Counter("posts")
				must(t, err)
				if u := db2.Stats().Recovery.Unaccounted; u != nil {
					t.Fatalf("unaccounted after a crash: %v", u)
				}
				atClone.check(t, c2, "after reopen", loaded...)
				checkTidy(t, db2, "after reopen")
				must(t, db2.Verify(ctx))
			})
		}
	}
}

// BenchmarkColdVersionRef measures what the reader protocol adds to a cold
// read: one ref and one unref of the range's version (per Get, or per run
// of a MultiGet's ids in one range). The parallel form has every goroutine
// on the same version, the worst case for the shared counter's cache line.
func BenchmarkColdVersionRef(b *testing.B) {
	cv := &coldVersion{}
	cv.refs.Store(1)
	b.Run("serial", func(b *testing.B) {
		for range b.N {
			if !cv.ref() {
				b.Fatal("ref failed")
			}
			cv.unref()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if !cv.ref() {
					b.Fatal("ref failed")
				}
				cv.unref()
			}
		})
	})
}
