package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// model is the plain in-memory reference the store is compared against.
type model struct {
	cols map[string][]Column
	rows map[string]map[uint64][]uint64
}

func (m *model) get(counter string, id uint64) []uint64 {
	out := make([]uint64, len(m.cols[counter]))
	copy(out, m.rows[counter][id])
	return out
}

// TestModel drives random sequences of every operation against the model,
// comparing every read, with checkpoints, clean reopens and crashes (clones of
// a crash-simulating filesystem that drop unsynced writes) at random points.
func TestModel(t *testing.T) {
	seeds := 6
	if testing.Short() {
		seeds = 2
	}
	for seed := 0; seed < seeds; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runModel(t, uint64(seed), 3000) })
	}
}

func runModel(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 42))
	fs := vfs.NewCrashableMem()
	opts := testOptions(fs)
	opts.CheckpointChunkRows = 7 // many chunks per checkpoint
	opts.ColdBlockSize = 48      // many blocks per cold range
	db, err := Open("m", opts)
	must(t, err)
	defer func() { db.Close() }()

	m := &model{cols: map[string][]Column{}, rows: map[string]map[uint64][]uint64{}}
	counters := []string{"posts", "users"}
	for i, name := range counters {
		must(t, db.CreateCounter(name, CounterOptions{RangeBits: uint8(8 + 4*i)}))
		m.rows[name] = map[uint64][]uint64{}
		col := Column{Name: "c0", HintBits: 8, MaxBits: 32}
		must(t, db.AddColumn(name, col.Name, ColumnOptions{HintBits: col.HintBits, MaxBits: col.MaxBits}))
		m.cols[name] = []Column{col}
	}
	// Ids cluster in a few ranges, with a stray far one now and then.
	randID := func() uint64 {
		if rng.IntN(20) == 0 {
			return rng.Uint64()
		}
		return uint64(rng.IntN(4))<<12 | uint64(rng.IntN(300))
	}
	randVal := func(c Column) uint64 {
		switch rng.IntN(10) {
		case 0:
			return 0
		case 1:
			return uint64(rng.IntN(1 << 17)) // past 8- and 16-bit hints
		case 2:
			return c.Max() - uint64(rng.IntN(3))
		}
		return uint64(rng.IntN(20))
	}
	verifyAll := func(where string) {
		t.Helper()
		must(t, db.Check())
		for _, name := range counters {
			c, err := db.Counter(name)
			must(t, err)
			ids := make([]uint64, 0, len(m.rows[name]))
			for id := range m.rows[name] {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			got, err := c.MultiGet(ids, nil)
			must(t, err)
			n := len(m.cols[name])
			for i, id := range ids {
				if want := m.get(name, id); !slices.Equal(got[i*n:i*n+n], want) {
					t.Fatalf("%s: %s %d = %v, want %v", where, name, id, got[i*n:i*n+n], want)
				}
			}
		}
	}

	sealed, merged := 0, 0
	for step := 0; step < steps; step++ {
		name := counters[rng.IntN(len(counters))]
		c, err := db.Counter(name)
		must(t, err)
		cols := m.cols[name]
		switch p := rng.IntN(100); {
		case p < 40: // Incr
			id, ci := randID(), rng.IntN(len(cols))
			delta := int64(rng.IntN(50)) - 20
			if rng.IntN(30) == 0 {
				delta = int64(rng.IntN(1 << 20))
			}
			cur := m.get(name, id)
			want := cur[ci]
			wantErr := false
			if delta < 0 {
				if uint64(-delta) >= cur[ci] {
					want = 0
				} else {
					want -= uint64(-delta)
				}
			} else if uint64(delta) > cols[ci].Max()-cur[ci] {
				wantErr = true
			} else {
				want += uint64(delta)
			}
			got, err := c.Incr(id, cols[ci].Name, delta)
			if wantErr {
				if err == nil {
					t.Fatalf("step %d: incr past max accepted", step)
				}
				break
			}
			must(t, err)
			if got != want {
				t.Fatalf("step %d: incr %s %d.%s %+d = %d, want %d", step, name, id, cols[ci].Name, delta, got, want)
			}
			cur[ci] = want
			m.put(name, id, cur)
		case p < 55: // Set
			id := randID()
			vals := make([]uint64, len(cols))
			for i := range vals {
				vals[i] = randVal(cols[i])
			}
			must(t, c.Set(id, vals...))
			m.put(name, id, vals)
		case p < 62: // Delete
			id := randID()
			if rng.IntN(2) == 0 && len(m.rows[name]) > 0 {
				for k := range m.rows[name] {
					id = k
					break
				}
			}
			must(t, c.Delete(id))
			delete(m.rows[name], id)
		case p < 70: // Batch over both counters
			b := db.NewBatch()
			type w struct {
				name string
				id   uint64
				vals []uint64
			}
			var pending []w
			for k := 0; k < 1+rng.IntN(5); k++ {
				bn := counters[rng.IntN(len(counters))]
				id := randID()
				cur := m.get(bn, id)
				for _, p := range pending {
					if p.name == bn && p.id == id {
						cur = slices.Clone(p.vals)
					}
				}
				ci := rng.IntN(len(m.cols[bn]))
				d := int64(rng.IntN(10))
				if uint64(d) > m.cols[bn][ci].Max()-cur[ci] {
					continue
				}
				must(t, b.Incr(bn, id, m.cols[bn][ci].Name, d))
				cur[ci] += uint64(d)
				pending = append(pending, w{bn, id, cur})
			}
			must(t, b.Commit())
			b.Close()
			for _, p := range pending {
				m.put(p.name, p.id, p.vals)
			}
		case p < 73: // AddColumn
			if len(cols) < 6 {
				col := Column{Name: fmt.Sprintf("c%d", len(cols)), HintBits: []uint8{8, 16, 32}[rng.IntN(3)], MaxBits: 64}
				must(t, db.AddColumn(name, col.Name, ColumnOptions{HintBits: col.HintBits, MaxBits: col.MaxBits}))
				m.cols[name] = append(cols, col)
			}
		case p < 89: // MultiGet of random ids
			ids := make([]uint64, 1+rng.IntN(12))
			for i := range ids {
				ids[i] = randID()
			}
			got, err := c.MultiGet(ids, nil)
			must(t, err)
			n := len(cols)
			for i, id := range ids {
				if want := m.get(name, id); !slices.Equal(got[i*n:i*n+n], want) {
					t.Fatalf("step %d: MultiGet %s %d = %v, want %v", step, name, id, got[i*n:i*n+n], want)
				}
			}
		case p < 91: // age one range into the cold tier
			m := c.cs.ranges.Load().m
			for rid := range m {
				must(t, db.SealRange(context.Background(), name, rid))
				if rs := c.cs.ranges.Load().m[rid]; rs.cold == nil {
					t.Fatalf("step %d: range %d not cold after seal: %s", step, rid, rs.shape())
				}
				sealed++
				break
			}
		case p < 92: // merge every cold delta
			must(t, db.Compact(context.Background()))
			for _, rs := range c.cs.ranges.Load().m {
				if rs.cold != nil && rs.delta != nil && rs.delta.Len() != 0 {
					t.Fatalf("step %d: delta of range %d not merged", step, rs.id)
				}
				if rs.cold != nil {
					merged++
				}
			}
		case p < 94:
			must(t, db.Checkpoint())
		case p < 97: // clean reopen
			must(t, db.Close())
			db, err = Open("m", opts)
			must(t, err)
			verifyAll(fmt.Sprintf("step %d after reopen", step))
		default: // crash: every write was synced (SyncAlways), so nothing may be lost
			crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(100), RNG: rand.New(rand.NewPCG(seed, uint64(step)))})
			db.Close()
			fs = crashed
			opts.FS = fs
			db, err = Open("m", opts)
			must(t, err)
			verifyAll(fmt.Sprintf("step %d after crash", step))
		}
	}
	verifyAll("end")
	if sealed == 0 || merged == 0 {
		t.Fatalf("cold paths not exercised: %d seals, %d merges", sealed, merged)
	}
}

func (m *model) put(counter string, id uint64, vals []uint64) {
	if allZero(vals) {
		delete(m.rows[counter], id)
		return
	}
	m.rows[counter][id] = slices.Clone(vals)
}
