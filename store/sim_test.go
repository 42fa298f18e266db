package store

import (
	"context"
	"fmt"
	"github.com/tallydb/tally/internal/testutil"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestSimulation runs readers (Get, MultiGet), scanners (Scan),
// writers (Incr, Set, Delete,
// batches), seals, merges, checkpoints and Verify at once on a tiny block
// cache, in rounds, in the manner of bbolt's simulation_test.go. Between
// rounds the world stops, Check runs and every row is compared with the
// model; some rounds end in a clean reopen, some in a crash taken while
// everything runs (vfs.CrashClone), after which every acknowledged write
// must be there.
//
// The model: each key has one writer, which records a version before its
// write starts (the write may become visible from then on) and marks the
// previous version superseded when the write is acknowledged. A read that
// ran during the clock window [r0, r1] must return a version begun by r1
// and not superseded before r0. A crash clone is such a read of every key.
//
// TALLY_SIM_STEPS sets the number of rounds (default 60, 15 with -short).
func TestSimulation(t *testing.T) {
	rounds := 60
	if testing.Short() {
		rounds = 15
	}
	rounds = testutil.EnvInt(t, "TALLY_SIM_STEPS", rounds)
	seed, _ := testutil.EnvSeed(t, "TALLY_SIM_SEED", uint64(time.Now().UnixNano()))
	t.Logf("seed %d (TALLY_SIM_SEED to repeat), %d rounds", seed, rounds)
	newSim(t, seed).run(rounds)
}

const (
	simWriters   = 3
	simReaders   = 3
	simScanners  = 2
	simRanges    = 10
	simPerRange  = 48
	simRangeBits = 8
	simCols      = 3
)

type simVersion struct {
	vals  [simCols]uint64
	begin uint64 // clock before the write that made it started
	end   uint64 // clock when the next version was acknowledged; MaxUint64 until then
}

type simKey struct {
	mu   sync.Mutex
	vers []simVersion
}

// explains reports whether vals is a version of k possibly visible at some
// point of [r0, r1].
func (k *simKey) explains(vals []uint64, r0, r1 uint64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i := len(k.vers) - 1; i >= 0; i-- {
		v := &k.vers[i]
		if v.begin <= r1 && v.end > r0 && slices.Equal(v.vals[:], vals) {
			return true
		}
	}
	return false
}

// storedThroughout reports whether every version of k possibly visible at
// some point of [r0, r1] is non-zero: the row was stored for the whole
// window, so a scan over it must visit it.
func (k *simKey) storedThroughout(r0, r1 uint64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i := range k.vers {
		v := &k.vers[i]
		if v.begin <= r1 && v.end > r0 && v.vals == [simCols]uint64{} {
			return false
		}
	}
	return true
}

func (k *simKey) history() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := len(k.vers)
	return fmt.Sprint(k.vers[max(0, n-4):])
}

type sim struct {
	t     *testing.T
	rng   *rand.Rand
	fs    *vfs.MemFS
	opts  *Options
	clock atomic.Uint64
	ids   []uint64
	keys  map[uint64]*simKey

	// db and c change only between rounds, when no worker runs.
	db   *DB
	c    *Counter
	stop atomic.Bool
	fail chan error
	ops  atomic.Int64
}

func newSim(t *testing.T, seed uint64) *sim {
	s := &sim{t: t, rng: rand.New(rand.NewPCG(seed, 99)), fs: vfs.NewCrashableMem(), keys: map[uint64]*simKey{},
		fail: make(chan error, 16)}
	s.opts = testOptions(s.fs)
	s.opts.ColdBlockSize = 48
	s.opts.BlockCacheSize = 2 << 10 // a few blocks: most cold reads miss
	s.opts.CheckpointChunkRows = 9
	db, err := Open("sim", s.opts)
	must(t, err)
	s.db = db
	t.Cleanup(func() {
		if s.db != nil && !s.db.closed.Load() {
			if err := s.db.Check(); err != nil {
				t.Errorf("check at cleanup: %v", err)
			}
			if err := s.db.Close(); err != nil {
				t.Errorf("close at cleanup: %v", err)
			}
		}
	})
	must(t, db.CreateCounter("posts", CounterOptions{RangeBits: simRangeBits}))
	for i, hint := range []uint8{8, 16, 32} {
		must(t, db.AddColumn("posts", fmt.Sprint("c", i), ColumnOptions{HintBits: hint, MaxBits: 32}))
	}
	s.c, err = db.Counter("posts")
	must(t, err)
	for r := uint64(0); r < simRanges; r++ {
		for k := uint64(0); k < simPerRange; k++ {
			id := r<<simRangeBits | k*5
			s.ids = append(s.ids, id)
			s.keys[id] = &simKey{vers: []simVersion{{end: math.MaxUint64}}}
		}
	}
	return s
}

func (s *sim) failf(format string, args ...any) {
	select {
	case s.fail <- fmt.Errorf(format, args...):
	default:
	}
	s.stop.Store(true)
}

// run drives the rounds.
func (s *sim) run(rounds int) {
	for round := 0; round < rounds && !s.t.Failed(); round++ {
		crash := s.rng.IntN(5) == 0
		var wg sync.WaitGroup
		s.stop.Store(false)
		s.ops.Store(0)
		for w := range simWriters {
			wg.Add(1)
			go s.writer(&wg, w, s.rng.Uint64())
		}
		for range simReaders {
			wg.Add(1)
			go s.reader(&wg, s.rng.Uint64())
		}
		for range simScanners {
			wg.Add(1)
			go s.scanner(&wg, s.rng.Uint64())
		}
		wg.Add(1)
		go s.jobs(&wg, s.rng.Uint64())

		// Let the round run, crashing in the middle of it sometimes.
		target := int64(150 + s.rng.IntN(300))
		for s.ops.Load() < target && !s.stop.Load() {
			time.Sleep(200 * time.Microsecond)
		}
		var clone *vfs.MemFS
		var c0, c1 uint64
		if crash {
			c0 = s.clock.Add(1)
			clone = s.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: s.rng.IntN(101), RNG: s.rng})
			c1 = s.clock.Add(1)
		}
		s.stop.Store(true)
		wg.Wait()
		select {
		case err := <-s.fail:
			s.t.Fatalf("round %d: %v", round, err)
		default:
		}

		// The world is quiet: Check, compare, maybe reopen.
		where := fmt.Sprintf("round %d", round)
		switch {
		case crash:
			stopHard(s.t, s.db)
			s.fs = clone
			s.reopen(where + " crash")
			s.compare(where+" after crash", c0, c1, true)
		case s.rng.IntN(4) == 0:
			must(s.t, s.db.Close())
			s.reopen(where + " reopen")
			fallthrough
		default:
			now := s.clock.Add(1)
			s.compare(where, now, now, false)
		}
	}
	must(s.t, s.db.Verify(context.Background()))
}

func (s *sim) reopen(where string) {
	s.opts.FS = s.fs
	db, err := Open("sim", s.opts)
	if err != nil {
		s.t.Fatalf("%s: open: %v", where, err)
	}
	s.db = db
	if s.c, err = db.Counter("posts"); err != nil {
		s.t.Fatal(err)
	}
	if u := db.Stats().Recovery.Unaccounted; u != nil {
		s.t.Fatalf("%s: unaccounted data after open: %v", where, u)
	}
}

// compare checks every key against the model with Check first; after a
// crash the model is rebased on what survived.
func (s *sim) compare(where string, r0, r1 uint64, rebase bool) {
	if err := s.db.Check(); err != nil {
		s.t.Fatalf("%s: check: %v", where, err)
	}
	got, err := s.c.MultiGet(s.ids, nil)
	if err != nil {
		s.t.Fatalf("%s: multiget: %v", where, err)
	}
	for i, id := range s.ids {
		vals := got[i*simCols : (i+1)*simCols]
		k := s.keys[id]
		if !k.explains(vals, r0, r1) {
			s.t.Fatalf("%s: id %d = %v, model %s (window %d-%d)", where, id, vals, k.history(), r0, r1)
		}
		if rebase {
			k.mu.Lock()
			var v simVersion
			copy(v.vals[:], vals)
			v.end = math.MaxUint64
			k.vers = append(k.vers[:0], v)
			k.mu.Unlock()
		}
	}
}

// writer owns the keys whose index ≡ w mod simWriters.
func (s *sim) writer(wg *sync.WaitGroup, w int, seed uint64) {
	defer wg.Done()
	rng := rand.New(rand.NewPCG(seed, 1))
	var mine []uint64
	for i, id := range s.ids {
		if i%simWriters == w {
			mine = append(mine, id)
		}
	}
	randVal := func() uint64 {
		switch rng.IntN(6) {
		case 0:
			return 0
		case 1:
			return uint64(rng.IntN(1 << 20)) // past 8- and 16-bit hints
		}
		return uint64(rng.IntN(40))
	}
	for !s.stop.Load() {
		s.ops.Add(1)
		n := 1
		if rng.IntN(4) == 0 {
			n = 2 + rng.IntN(3)
		}
		// Pick distinct keys, compute their next versions.
		type change struct {
			id   uint64
			k    *simKey
			next [simCols]uint64
			op   int // 0 incr, 1 set, 2 delete
			col  int
			d    int64
		}
		var chs []change
		for len(chs) < n {
			id := mine[rng.IntN(len(mine))]
			if slices.ContainsFunc(chs, func(c change) bool { return c.id == id }) {
				continue
			}
			k := s.keys[id]
			k.mu.Lock()
			cur := k.vers[len(k.vers)-1].vals
			k.mu.Unlock()
			ch := change{id: id, k: k, next: cur, op: rng.IntN(10)}
			switch {
			case ch.op < 6:
				ch.op, ch.col, ch.d = 0, rng.IntN(simCols), int64(rng.IntN(30))-10
				if v := int64(cur[ch.col]) + ch.d; v < 0 {
					ch.next[ch.col] = 0
				} else {
					ch.next[ch.col] = uint64(v)
				}
			case ch.op < 9:
				ch.op = 1
				for c := range ch.next {
					ch.next[c] = randVal()
				}
			default:
				ch.op = 2
				ch.next = [simCols]uint64{}
			}
			chs = append(chs, ch)
		}
		c, db := s.c, s.db
		begin := s.clock.Add(1)
		for _, ch := range chs {
			ch.k.mu.Lock()
			ch.k.vers = append(ch.k.vers, simVersion{vals: ch.next, begin: begin, end: math.MaxUint64})
			ch.k.mu.Unlock()
		}
		var err error
		if n == 1 {
			ch := chs[0]
			switch ch.op {
			case 0:
				var got uint64
				got, err = c.Incr(ch.id, fmt.Sprint("c", ch.col), ch.d)
				if err == nil && got != ch.next[ch.col] {
					err = fmt.Errorf("incr %d c%d %+d = %d, want %d", ch.id, ch.col, ch.d, got, ch.next[ch.col])
				}
			case 1:
				err = c.Set(ch.id, ch.next[:]...)
			case 2:
				err = c.Delete(ch.id)
			}
		} else {
			b := db.NewBatch()
			for _, ch := range chs {
				switch ch.op {
				case 0:
					b.Incr("posts", ch.id, fmt.Sprint("c", ch.col), ch.d)
				case 1:
					b.Set("posts", ch.id, ch.next[:]...)
				case 2:
					b.Delete("posts", ch.id)
				}
			}
			err = b.Commit()
			b.Close()
		}
		end := s.clock.Add(1)
		if err != nil {
			s.failf("writer %d: %v", w, err)
			return
		}
		for _, ch := range chs {
			ch.k.mu.Lock()
			ch.k.vers[len(ch.k.vers)-2].end = end
			ch.k.mu.Unlock()
		}
	}
}

// reader reads random keys with Get and MultiGet and checks each against
// the model's versions of its read window.
func (s *sim) reader(wg *sync.WaitGroup, seed uint64) {
	defer wg.Done()
	rng := rand.New(rand.NewPCG(seed, 2))
	var dst []uint64
	ids := make([]uint64, 0, 16)
	for !s.stop.Load() {
		s.ops.Add(1)
		ids = ids[:0]
		n := 1 + rng.IntN(12)
		if rng.IntN(3) == 0 { // a feed page: ids of one or two ranges
			base := s.ids[rng.IntN(len(s.ids))]
			for len(ids) < n {
				ids = append(ids, s.ids[(slices.Index(s.ids, base)+rng.IntN(2*simPerRange))%len(s.ids)])
			}
		} else {
			for len(ids) < n {
				ids = append(ids, s.ids[rng.IntN(len(s.ids))])
			}
		}
		c := s.c
		r0 := s.clock.Add(1)
		var err error
		if n == 1 && rng.IntN(2) == 0 {
			dst, err = c.Get(ids[0], dst)
		} else {
			dst, err = c.MultiGet(ids, dst)
		}
		r1 := s.clock.Add(1)
		if err != nil {
			s.failf("reader: %v", err)
			return
		}
		for i, id := range ids {
			if vals := dst[i*simCols : (i+1)*simCols]; !s.keys[id].explains(vals, r0, r1) {
				s.failf("reader: id %d = %v, model %s (window %d-%d)", id, vals, s.keys[id].history(), r0, r1)
				return
			}
		}
	}
}

// scanner scans the whole counter in pages of random sizes while the others
// run. Each row must be a version of its page's window, ids must increase,
// and a completed scan must have visited every key stored for its whole
// window: exactly once, then, since ids increase.
func (s *sim) scanner(wg *sync.WaitGroup, seed uint64) {
	defer wg.Done()
	rng := rand.New(rand.NewPCG(seed, 4))
	ctx := context.Background()
	for !s.stop.Load() {
		c := s.c
		start := s.clock.Add(1)
		visited := map[uint64]bool{}
		last, any := uint64(0), false
		for from := uint64(0); !s.stop.Load(); {
			s.ops.Add(1)
			limit := 1 + rng.IntN([]int{1, 4, 40, 600}[rng.IntN(4)])
			r0 := s.clock.Add(1)
			type row struct {
				id   uint64
				vals [simCols]uint64
			}
			var page []row
			next, err := c.Scan(ctx, from, limit, func(id uint64, vals []uint64) bool {
				var r row
				r.id = id
				copy(r.vals[:], vals)
				page = append(page, r)
				return true
			})
			r1 := s.clock.Add(1)
			if err != nil {
				s.failf("scanner: scan from %d: %v", from, err)
				return
			}
			if len(page) > limit || (next != 0 && len(page) < limit) {
				s.failf("scanner: page from %d limit %d: %d rows, next %d", from, limit, len(page), next)
				return
			}
			for _, r := range page {
				k := s.keys[r.id]
				switch {
				case k == nil:
					s.failf("scanner: id %d was never written", r.id)
				case any && r.id <= last || r.id < from:
					s.failf("scanner: id %d after %d (page from %d)", r.id, last, from)
				case !k.explains(r.vals[:], r0, r1):
					s.failf("scanner: id %d = %v, model %s (window %d-%d)", r.id, r.vals, k.history(), r0, r1)
				default:
					last, any = r.id, true
					visited[r.id] = true
					continue
				}
				return
			}
			if next == 0 {
				end := s.clock.Add(1)
				for _, id := range s.ids {
					if !visited[id] && s.keys[id].storedThroughout(start, end) {
						s.failf("scanner: id %d stored for the whole scan (%d-%d) was not visited, model %s",
							id, start, end, s.keys[id].history())
						return
					}
				}
				break
			}
			from = next
		}
	}
}

// jobs seals, merges, checkpoints and verifies while the others run.
func (s *sim) jobs(wg *sync.WaitGroup, seed uint64) {
	defer wg.Done()
	rng := rand.New(rand.NewPCG(seed, 3))
	ctx := context.Background()
	for !s.stop.Load() {
		db := s.db
		var err error
		switch p := rng.IntN(10); {
		case p < 4:
			err = db.SealRange(ctx, "posts", uint64(rng.IntN(simRanges)))
		case p < 7:
			err = db.Compact(ctx)
		case p < 9:
			err = db.Checkpoint()
		default:
			err = db.Verify(ctx)
		}
		if err != nil {
			s.failf("jobs: %v", err)
			return
		}
	}
}
