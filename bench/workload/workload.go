package workload

import (
	"fmt"
	"math"
	"time"
)

// Defaults of Config, taken from the production reports in DESIGN.md.
const (
	DefaultItems            = 1_000_000
	DefaultColumns          = 3
	DefaultSpan             = 180 * 24 * time.Hour
	DefaultZeroFraction     = 0.55
	DefaultColumnZero       = 0.5
	DefaultAlpha            = 1.12
	DefaultMaxCount         = math.MaxUint32
	DefaultBatchSize        = 10
	DefaultWritesPerRead    = 0.05
	DefaultRecentFraction   = 0.05
	DefaultGraveDigFraction = 0.01
)

// DefaultEnd is the creation time of the newest item unless Config.End says
// otherwise. It is a fixed date so that a seed alone fixes every id.
var DefaultEnd = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Config describes a workload. The zero value of every field means its
// default, so Config{Seed: 1} is a complete workload.
type Config struct {
	// Seed fixes every id, count and operation. The default is 0 (a valid
	// seed like any other).
	Seed uint64
	// Items is the number of items, zero ones included. The default is
	// DefaultItems.
	Items uint64
	// Columns is the number of count columns per item (a post's reposts,
	// comments, likes). The default is 3.
	Columns int
	// Layout is the id layout. The default is DefaultLayout().
	Layout Layout
	// End is the creation time of the newest item. The default is
	// DefaultEnd.
	End time.Time
	// Span is the time over which the items were created, evenly: item 0 at
	// End-Span, the last item just before End. The default is 180 days.
	Span time.Duration
	// ZeroFraction is the probability that an item has never been counted
	// (every column 0). The default is 0.55.
	ZeroFraction float64
	// ColumnZeroFraction is the probability that a column other than the
	// first of a counted item is 0 (the first is always at least 1, so a
	// counted item has a non-zero row). The default is 0.5.
	ColumnZeroFraction float64
	// Alpha is the exponent of the power law of a non-zero count:
	// P(count ≥ k) = k^-Alpha. The default is 1.12.
	Alpha float64
	// MaxCount caps a generated count. The default is 2^32-1.
	MaxCount uint64
	// BatchSize is the number of ids a read asks for at once (a feed page).
	// The default is 10.
	BatchSize int
	// WritesPerRead is the number of writes per id read: 0.05 means 50,000
	// increments/s for 1,000,000 ids read/s, as in DESIGN.md. The default
	// is 0.05.
	WritesPerRead float64
	// RecentFraction is the mean age of a read or written item, as a
	// fraction of all items counted back from the newest (ages are
	// exponential). The default is 0.05.
	RecentFraction float64
	// GraveDigFraction is the probability that an operation picks an item
	// uniformly among all items instead ("grave digging"). The default is
	// 0.01.
	GraveDigFraction float64
}

// Workload is a generated data set and operation mix. It is immutable and
// safe for concurrent use; every value is a pure function of Config.
type Workload struct {
	cfg Config
	ids idSpace
	// Precomputed thresholds on 53-bit uniform integers.
	zeroBelow    uint64
	colZeroBelow uint64
	invAlpha     float64
}

// New checks cfg, fills its defaults and returns the workload.
func New(cfg Config) (*Workload, error) {
	if cfg.Items == 0 {
		cfg.Items = DefaultItems
	}
	if cfg.Columns == 0 {
		cfg.Columns = DefaultColumns
	}
	if cfg.Layout == (Layout{}) {
		cfg.Layout = DefaultLayout()
	}
	if cfg.End.IsZero() {
		cfg.End = DefaultEnd
	}
	if cfg.Span == 0 {
		cfg.Span = DefaultSpan
	}
	if cfg.ZeroFraction == 0 {
		cfg.ZeroFraction = DefaultZeroFraction
	}
	if cfg.ColumnZeroFraction == 0 {
		cfg.ColumnZeroFraction = DefaultColumnZero
	}
	if cfg.Alpha == 0 {
		cfg.Alpha = DefaultAlpha
	}
	if cfg.MaxCount == 0 {
		cfg.MaxCount = DefaultMaxCount
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.WritesPerRead == 0 {
		cfg.WritesPerRead = DefaultWritesPerRead
	}
	if cfg.RecentFraction == 0 {
		cfg.RecentFraction = DefaultRecentFraction
	}
	if cfg.GraveDigFraction == 0 {
		cfg.GraveDigFraction = DefaultGraveDigFraction
	}
	var errs []string
	if cfg.Columns < 1 || cfg.Columns > 255 {
		errs = append(errs, fmt.Sprintf("columns %d out of [1, 255]", cfg.Columns))
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"zero fraction", cfg.ZeroFraction}, {"column zero fraction", cfg.ColumnZeroFraction},
		{"recent fraction", cfg.RecentFraction}, {"grave-dig fraction", cfg.GraveDigFraction}} {
		if !(f.v >= 0 && f.v <= 1) {
			errs = append(errs, fmt.Sprintf("%s %v out of [0, 1]", f.name, f.v))
		}
	}
	if !(cfg.Alpha > 0) {
		errs = append(errs, fmt.Sprintf("alpha %v must be positive", cfg.Alpha))
	}
	if cfg.BatchSize < 1 {
		errs = append(errs, fmt.Sprintf("batch size %d must be positive", cfg.BatchSize))
	}
	if !(cfg.WritesPerRead >= 0) {
		errs = append(errs, fmt.Sprintf("writes per read %v must not be negative", cfg.WritesPerRead))
	}
	ids, err := newIDSpace(cfg.Layout, cfg.End.Add(-cfg.Span), cfg.Span, cfg.Items)
	if err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("workload: bad config: %v", errs)
	}
	return &Workload{
		cfg:          cfg,
		ids:          ids,
		zeroBelow:    uint64(cfg.ZeroFraction * (1 << 53)),
		colZeroBelow: uint64(cfg.ColumnZeroFraction * (1 << 53)),
		invAlpha:     1 / cfg.Alpha,
	}, nil
}

// MustNew is New for tests and fixed configurations: it panics on a bad
// config.
func MustNew(cfg Config) *Workload {
	w, err := New(cfg)
	if err != nil {
		panic(err)
	}
	return w
}

// Config returns the configuration with its defaults filled in.
func (w *Workload) Config() Config { return w.cfg }

// Len returns the number of items, zero ones included.
func (w *Workload) Len() uint64 { return w.cfg.Items }

// Columns returns the number of columns per item.
func (w *Workload) Columns() int { return w.cfg.Columns }

// Counters returns the number of counter values, Len()*Columns(): every
// (item, column) cell, zero ones included, since all of them are read.
func (w *Workload) Counters() uint64 { return w.cfg.Items * uint64(w.cfg.Columns) }

// ID returns the id of item i (0 ≤ i < Len()). Ids strictly increase with i.
func (w *Workload) ID(i uint64) uint64 { return w.ids.id(i) }

// Values appends the Columns() counts of item i to dst[:0] and returns it.
func (w *Workload) Values(i uint64, dst []uint64) []uint64 {
	dst = dst[:0]
	h := mix(w.cfg.Seed, i)
	if h>>11 < w.zeroBelow {
		for c := 0; c < w.cfg.Columns; c++ {
			dst = append(dst, 0)
		}
		return dst
	}
	for c := 0; c < w.cfg.Columns; c++ {
		h = splitmix(h)
		if c > 0 && h>>11 < w.colZeroBelow {
			dst = append(dst, 0)
			continue
		}
		h = splitmix(h)
		dst = append(dst, w.powerLaw(h))
	}
	return dst
}

// powerLaw maps 64 random bits to floor(U^(-1/Alpha)) with U uniform in
// (0, 1], so P(v ≥ k) = k^-Alpha for k ≥ 1, capped at MaxCount.
func (w *Workload) powerLaw(h uint64) uint64 {
	u := float64(h>>11+1) / (1 << 53)
	v := math.Pow(u, -w.invAlpha)
	if v >= float64(w.cfg.MaxCount) {
		return w.cfg.MaxCount
	}
	return uint64(v)
}

// Items calls fn for every item in id order, zero items included, until fn
// returns false. vals holds Columns() counts and is reused between calls.
func (w *Workload) Items(fn func(id uint64, vals []uint64) bool) {
	vals := make([]uint64, 0, w.cfg.Columns)
	for i := uint64(0); i < w.cfg.Items; i++ {
		vals = w.Values(i, vals)
		if !fn(w.ids.id(i), vals) {
			return
		}
	}
}

// IsZero reports whether every value in vals is 0: such an item is not
// stored by a loader but is still read.
func IsZero(vals []uint64) bool {
	for _, v := range vals {
		if v != 0 {
			return false
		}
	}
	return true
}

// TailProbability returns the analytic probability that an item has a
// count above limit: (1-ZeroFraction) · (1 + (Columns-1)(1-ColumnZero)) ·
// (limit+1)^-Alpha, to first order.
func (w *Workload) TailProbability(limit uint64) float64 {
	c := w.cfg
	nonZeroCols := 1 + float64(c.Columns-1)*(1-c.ColumnZeroFraction)
	return (1 - c.ZeroFraction) * nonZeroCols * math.Pow(float64(limit)+1, -c.Alpha)
}

// splitmix is the SplitMix64 finalizer: a bijective 64-bit mixer.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

func mix(seed, i uint64) uint64 { return splitmix(splitmix(seed) ^ i*0xd1342543de82ef95) }
