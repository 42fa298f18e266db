package bench

import (
	"fmt"
	"time"

	"github.com/tallydb/tally/bench/workload"
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

// tallyTarget is a tally store with one counter "posts" of the workload's
// columns (16-bit width hint, 32-bit maximum), RangeBits TallyRangeBits,
// every range kept hot. Options other than Durability are the defaults.
type tallyTarget struct {
	dir   string
	opts  store.Options
	cols  []string
	db    *store.DB
	posts *store.Counter
}

func openTally(dir string, w *workload.Workload, d store.Durability) (*tallyTarget, error) {
	t := &tallyTarget{dir: dir, opts: store.Options{Durability: d}}
	db, err := store.Open(dir, &t.opts)
	if err != nil {
		return nil, err
	}
	t.db = db
	if err := db.CreateCounter("posts", store.CounterOptions{RangeBits: TallyRangeBits}); err != nil {
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

// Load sets every non-zero item through batches of 4096 rows, then
// checkpoints so the run starts with an empty log, as after a bulk import.
func (t *tallyTarget) Load(w *workload.Workload) error {
	b := t.db.NewBatch()
	defer b.Close()
	var err error
	w.Items(func(id uint64, vals []uint64) bool {
		if workload.IsZero(vals) {
			return true
		}
		if err = b.Set("posts", id, vals...); err != nil {
			return false
		}
		if b.Len() >= 4096 {
			err = b.Commit()
			b.Reset()
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	if b.Len() > 0 {
		if err := b.Commit(); err != nil {
			return err
		}
	}
	return t.db.Checkpoint()
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

// MemBytes is the memory of the hot tables as the store reports it (rows,
// slots and overflow maps); Pebble's block cache and memtables are not
// counted.
func (t *tallyTarget) MemBytes() (int64, error) {
	var n int64
	for _, c := range t.db.Stats().Counters {
		n += c.MemBytes
	}
	return n, nil
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
