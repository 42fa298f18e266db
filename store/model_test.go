package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// model is the plain in-memory reference the store is compared against.
type model struct {
	cols  map[string][]Column
	rows  map[string]map[uint64][]uint64
	plain map[uint64][]byte // family "plain"
	sums  map[uint64]int64  // family "sums" (MergeAdd), zero sums absent
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
	opts.Families = []FamilySpec{testPlain, testSum}
	db, err := Open("m", opts)
	must(t, err)
	defer func() { db.Close() }()

	m := &model{cols: map[string][]Column{}, rows: map[string]map[uint64][]uint64{},
		plain: map[uint64][]byte{}, sums: map[uint64]int64{}}
	fams := func() (*Family, *Family) {
		pf, err := db.Family("plain")
		must(t, err)
		sf, err := db.Family("sums")
		must(t, err)
		return pf, sf
	}
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
	verifyFamilies := func(where string) {
		t.Helper()
		pf, sf := fams()
		got := map[uint64][]byte{}
		it, err := pf.NewIter(nil)
		must(t, err)
		for it.Next() {
			got[binary.BigEndian.Uint64(it.Key()[1:])] = slices.Clone(it.Value())
		}
		must(t, it.Close())
		if len(got) != len(m.plain) {
			t.Fatalf("%s: plain holds %d keys, want %d", where, len(got), len(m.plain))
		}
		for k, v := range m.plain {
			if !bytes.Equal(got[k], v) {
				t.Fatalf("%s: plain %d = %q, want %q", where, k, got[k], v)
			}
		}
		n := 0
		it, err = sf.NewIter(nil)
		must(t, err)
		for it.Next() {
			k := binary.BigEndian.Uint64(it.Key()[1:])
			sum, err := DecodeAdd(it.Value())
			must(t, err)
			if sum != m.sums[k] {
				t.Fatalf("%s: sum %d = %d, want %d", where, k, sum, m.sums[k])
			}
			n++
		}
		must(t, it.Close())
		if n != len(m.sums) {
			t.Fatalf("%s: sums holds %d keys, want %d", where, n, len(m.sums))
		}
	}
	verifyAll := func(where string) {
		t.Helper()
		must(t, db.Check())
		verifyFamilies(where)
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

	sealed, merged, famOps := 0, 0, 0
	famKeyOf := func(f *Family) []byte { return famKey(f, uint64(rng.IntN(64))) }
	for step := 0; step < steps; step++ {
		if rng.IntN(4) == 0 {
			famOps++
			runModelFamilyStep(t, rng, db, m, fams, famKeyOf, step)
			continue
		}
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
	if sealed == 0 || merged == 0 || famOps == 0 {
		t.Fatalf("paths not exercised: %d seals, %d merges, %d family steps", sealed, merged, famOps)
	}
}

// runModelFamilyStep does one random family operation, or a mixed batch of
// a counter op and family writes, and compares reads with the model.
func runModelFamilyStep(t *testing.T, rng *rand.Rand, db *DB, m *model, fams func() (*Family, *Family),
	famKeyOf func(*Family) []byte, step int) {
	pf, sf := fams()
	id := func(k []byte) uint64 { return binary.BigEndian.Uint64(k[1:]) }
	switch p := rng.IntN(100); {
	case p < 25: // Put
		b := db.NewBatch()
		k := famKeyOf(pf)
		v := []byte(fmt.Sprintf("v%d", rng.IntN(1000)))
		must(t, pf.Put(b, k, v))
		must(t, b.Commit())
		b.Close()
		m.plain[id(k)] = v
	case p < 35: // Delete
		b := db.NewBatch()
		k := famKeyOf(pf)
		must(t, pf.Delete(b, k))
		must(t, b.Commit())
		b.Close()
		delete(m.plain, id(k))
	case p < 40: // DeleteRange
		b := db.NewBatch()
		lo, hi := uint64(rng.IntN(64)), uint64(rng.IntN(64))
		if lo > hi {
			lo, hi = hi, lo
		}
		if lo == hi {
			hi++
		}
		must(t, pf.DeleteRange(b, famKey(pf, lo), famKey(pf, hi)))
		must(t, b.Commit())
		b.Close()
		for k := range m.plain {
			if k >= lo && k < hi {
				delete(m.plain, k)
			}
		}
	case p < 60: // Merge
		b := db.NewBatch()
		k := famKeyOf(sf)
		d := int64(rng.IntN(20)) - 8
		must(t, sf.Merge(b, k, AddOperand(nil, d)))
		must(t, b.Commit())
		b.Close()
		if m.sums[id(k)] += d; m.sums[id(k)] == 0 {
			delete(m.sums, id(k))
		}
	case p < 75: // mixed batch: a counter op, a put, a merge; sometimes refused
		b := db.NewBatch()
		cid := uint64(rng.IntN(300))
		cur := m.get("posts", cid)
		d := int64(rng.IntN(5))
		if uint64(d) > m.cols["posts"][0].Max()-cur[0] {
			d = 0 // keep clear of the column's maximum
		}
		k1, k2 := famKeyOf(pf), famKeyOf(sf)
		v := []byte(fmt.Sprintf("m%d", step))
		must(t, b.Incr("posts", cid, "c0", d))
		must(t, pf.Put(b, k1, v))
		must(t, sf.Merge(b, k2, AddOperand(nil, 3)))
		bad := rng.IntN(5) == 0
		if bad { // a bad write refuses the whole batch
			pf.Put(b, []byte{0x01}, v)
		}
		err := b.Commit()
		b.Close()
		if bad {
			if !errors.Is(err, ErrFamilyKey) {
				t.Fatalf("step %d: bad mixed batch: %v", step, err)
			}
			break
		}
		must(t, err)
		cur[0] += uint64(d)
		m.put("posts", cid, cur)
		m.plain[id(k1)] = v
		if m.sums[id(k2)] += 3; m.sums[id(k2)] == 0 {
			delete(m.sums, id(k2))
		}
	case p < 85: // Get
		k := famKeyOf(pf)
		v, ok, err := pf.Get(k, nil)
		must(t, err)
		if want, wok := m.plain[id(k)]; ok != wok || !bytes.Equal(v, want) {
			t.Fatalf("step %d: get %d = %q %v, want %q %v", step, id(k), v, ok, want, wok)
		}
	default: // bounded scan, either way
		lo := uint64(rng.IntN(64))
		hi := lo + uint64(rng.IntN(20))
		rev := rng.IntN(2) == 0
		it, err := pf.NewIter(&IterOptions{Lower: famKey(pf, lo), Upper: famKey(pf, hi), Reverse: rev})
		must(t, err)
		var got []uint64
		for it.Next() {
			got = append(got, id(it.Key()))
		}
		must(t, it.Close())
		var want []uint64
		for k := range m.plain {
			if k >= lo && k < hi {
				want = append(want, k)
			}
		}
		slices.Sort(want)
		if rev {
			slices.Reverse(want)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: scan [%d,%d) rev=%v = %v, want %v", step, lo, hi, rev, got, want)
		}
	}
}

func (m *model) put(counter string, id uint64, vals []uint64) {
	if allZero(vals) {
		delete(m.rows[counter], id)
		return
	}
	m.rows[counter][id] = slices.Clone(vals)
}
