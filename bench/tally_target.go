package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/tallydb/tally/bench/workload"
	"github.com/tallydb/tally/internal/procmem"
	"github.com/tallydb/tally/store"
)

// TallyRangeBits is the range width of the benchmark's counter: with the
// default 22-bit snowflake shift a range holds 2^26 ms (about 18.6 hours) of
// ids, so 180 days of posts make about 230 ranges.
const TallyRangeBits = 48

// TallySpecs returns tally in each durability mode.
func TallySpecs() []Spec {
	modes := []struct {
		d    store.Durability
		dur  Durability
		mode string
	}{
		{store.SyncAlways, DurAlways, "SyncAlways"},
		{store.SyncInterval, DurInterval, "SyncInterval 1s"},
		{store.NoSync, DurNone, "NoSync"},
	}
	var specs []Spec
	for _, m := range modes {
		specs = append(specs, Spec{Name: "tally", Durability: m.dur, Mode: m.mode, Tally: true,
			Open: func(dir string, w *workload.Workload) (Target, error) { return openTally(dir, w, m.d) }})
	}
	return specs
}

// TallyMaxAge is the age policy of the benchmark's counter: posts older
// than 30 days live in the cold tier, as a deployment would configure it for
// a workload whose reads are skewed to recent items.
const TallyMaxAge = 30 * 24 * time.Hour

// tallyTarget is a tally store with one counter "posts" of the workload's
// columns (16-bit width hint, 32-bit maximum), RangeBits TallyRangeBits,
// ranges older than TallyMaxAge aged into the cold tier (the store's clock
// is the workload's end time, so the split is the same on every run).
// Options other than Durability and the clock are the defaults.
type tallyTarget struct {
	dir   string
	opts  store.Options
	cols  []string
	db    *store.DB
	posts *store.Counter
	base  procmem.Mem // before Open
}

func openTally(dir string, w *workload.Workload, d store.Durability) (*tallyTarget, error) {
	end := w.Config().End
	t := &tallyTarget{dir: dir, opts: store.Options{Durability: d, Now: func() time.Time { return end }},
		base: procmem.Measure()}
	db, err := store.Open(dir, &t.opts)
	if err != nil {
		return nil, err
	}
	t.db = db
	l := w.Config().Layout
	age := store.AgePolicy{Kind: store.AgeByTime, MaxAge: TallyMaxAge, IDEpochMs: l.EpochMs, IDTimeShift: uint8(l.TimeShift)}
	if err := db.CreateCounter("posts", store.CounterOptions{RangeBits: TallyRangeBits, Age: age}); err != nil {
		db.Close()
		return nil, err
	}
	for c := 0; c < w.Columns(); c++ {
		name := fmt.Sprintf("c%d", c)
		if err := db.AddColumn("posts", name, store.ColumnOptions{HintBits: 16, MaxBits: 32}); err != nil {
			db.Close()
			return nil, err
		}
		t.cols = append(t.cols, name)
	}
	return t, t.counter()
}

func (t *tallyTarget) counter() error {
	c, err := t.db.Counter("posts")
	t.posts = c
	return err
}

// Load bulk-loads every item through DB.Load: ranges past the age policy
// are written straight into cold blocks, recent ones into hot tables and a
// checkpoint, so the run starts with an empty log, as after a bulk import.
func (t *tallyTarget) Load(w *workload.Workload) error {
	var in store.LoadRows
	w.Items(func(id uint64, vals []uint64) bool {
		if !workload.IsZero(vals) {
			in.IDs = append(in.IDs, id)
			in.Vals = append(in.Vals, vals...)
		}
		return true
	})
	_, err := t.db.Load(context.Background(), "posts", in, nil)
	return err
}

type tallyClient struct{ t *tallyTarget }

func (t *tallyTarget) NewClient() (Client, error) { return tallyClient{t}, nil }

func (c tallyClient) MultiGet(ids []uint64, dst []uint64) ([]uint64, error) {
	return c.t.posts.MultiGet(ids, dst)
}

func (c tallyClient) Incr(id uint64, col int, delta int64) error {
	_, err := c.t.posts.Incr(id, c.t.cols[col], delta)
	return err
}

func (c tallyClient) Close() error { return nil }

// Memory: Own is the store's accounting (hot tables, cold deltas and
// descriptors, the decoded block cache in use, and its Pebble instance's
// block cache, memtables and file cache: the Pebble parts the pebble-merge
// target counts); Heap and RSS are the process's growth since Open (see
// Memory).
func (t *tallyTarget) Memory() (Memory, error) {
	st := t.db.Stats()
	m := Memory{Own: st.BlockCache.Bytes + st.PebbleMemBytes}
	for _, c := range st.Counters {
		m.Own += c.MemBytes
	}
	grown := procmem.Measure().Sub(t.base)
	m.Heap, m.RSS = grown.Heap, grown.RSS
	if procmem.Cgo {
		m.Heap += st.PebbleManualBytes
	}
	return m, nil
}

// DiskBytes is every file of the store's Pebble instance.
func (t *tallyTarget) DiskBytes() (int64, error) { return int64(t.db.Stats().DiskBytes), nil }

// Reopen closes the store cleanly (Close checkpoints, untimed) and times
// Open: loading the checkpoint and replaying the log after it.
func (t *tallyTarget) Reopen() (time.Duration, error) {
	if err := t.db.Close(); err != nil {
		return 0, err
	}
	t.db = nil
	start := time.Now()
	db, err := store.Open(t.dir, &t.opts)
	d := time.Since(start)
	if err != nil {
		return d, err
	}
	t.db = db
	return d, t.counter()
}

func (t *tallyTarget) Close() error {
	if t.db == nil {
		return nil
	}
	err := t.db.Close()
	t.db = nil
	return err
}
