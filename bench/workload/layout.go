package workload

import (
	"errors"
	"fmt"
	"math/bits"
	"time"
)

// TwitterEpochMs is the epoch of Twitter's snowflake ids
// (2010-11-04T01:42:54.657Z), the default Layout epoch.
const TwitterEpochMs = 1288834974657

// DefaultTimeShift is the number of low bits below the timestamp in the
// default Layout, as in Twitter's snowflake (10 bits of worker and 12 bits
// of sequence, here treated as one 22-bit sequence).
const DefaultTimeShift = 22

// Layout describes a snowflake-like time-ordered 64-bit id:
//
//	bits 63 … TimeShift   milliseconds since EpochMs
//	bits TimeShift-1 … 0  sequence within that millisecond
//
// Ids therefore grow with creation time, and the creation time of an id can
// be read back from it (TimeOf), which is what age policies key on.
type Layout struct {
	// EpochMs is the Unix time in milliseconds that timestamp 0 stands for.
	// The default is TwitterEpochMs.
	EpochMs int64
	// TimeShift is the number of sequence bits below the timestamp.
	// The default is DefaultTimeShift.
	TimeShift uint
}

// DefaultLayout returns the Twitter-like layout: TwitterEpochMs, 22 bits of
// sequence.
func DefaultLayout() Layout {
	return Layout{EpochMs: TwitterEpochMs, TimeShift: DefaultTimeShift}
}

// Validate reports whether the layout can encode ids.
func (l Layout) Validate() error {
	if l.TimeShift == 0 || l.TimeShift > 40 {
		return fmt.Errorf("workload: layout time shift %d out of [1, 40]", l.TimeShift)
	}
	return nil
}

// MaxSeq is the largest sequence number one millisecond can hold.
func (l Layout) MaxSeq() uint64 { return 1<<l.TimeShift - 1 }

// ID returns the id created at t with the given sequence number. Times before
// the epoch are clamped to the epoch; seq is masked to the sequence bits.
func (l Layout) ID(t time.Time, seq uint64) uint64 {
	ms := t.UnixMilli() - l.EpochMs
	if ms < 0 {
		ms = 0
	}
	return uint64(ms)<<l.TimeShift | seq&l.MaxSeq()
}

// FirstID returns the smallest id created at or after t: the boundary an age
// policy compares ids against ("older than t" is id < FirstID(t)).
func (l Layout) FirstID(t time.Time) uint64 { return l.ID(t, 0) }

// TimeOf returns the creation time encoded in id, to the millisecond.
func (l Layout) TimeOf(id uint64) time.Time {
	return time.UnixMilli(int64(id>>l.TimeShift) + l.EpochMs).UTC()
}

// idSpace generates n ids evenly over the milliseconds [startMs, startMs+spanMs):
// item i is created at millisecond floor(i*spanMs/n) after the start and gets
// the next free sequence number in that millisecond. Ids are strictly
// increasing in i, and the i-th id is computed in O(1) so that readers can
// pick items by index without a table.
type idSpace struct {
	layout  Layout
	startMs uint64 // ms since layout epoch of item 0
	spanMs  uint64
	n       uint64
}

var errTooDense = errors.New("workload: more items per millisecond than the layout's sequence bits hold")

func newIDSpace(l Layout, start time.Time, span time.Duration, n uint64) (idSpace, error) {
	if err := l.Validate(); err != nil {
		return idSpace{}, err
	}
	spanMs := uint64(span / time.Millisecond)
	if spanMs == 0 || n == 0 {
		return idSpace{}, fmt.Errorf("workload: need a span of at least 1ms and at least one item (span %v, items %d)", span, n)
	}
	startMs := start.UnixMilli() - l.EpochMs
	if startMs < 0 {
		return idSpace{}, fmt.Errorf("workload: start %v is before the layout epoch", start)
	}
	// The busiest millisecond holds ceil(n/spanMs) items.
	if (n+spanMs-1)/spanMs > l.MaxSeq()+1 {
		return idSpace{}, errTooDense
	}
	if (uint64(startMs)+spanMs)>>(64-l.TimeShift) != 0 {
		return idSpace{}, fmt.Errorf("workload: span ends past the largest timestamp of a %d-bit shift", l.TimeShift)
	}
	return idSpace{layout: l, startMs: uint64(startMs), spanMs: spanMs, n: n}, nil
}

// msOf returns the millisecond offset of item i: floor(i*spanMs/n).
func (s idSpace) msOf(i uint64) uint64 {
	hi, lo := bits.Mul64(i, s.spanMs)
	q, _ := bits.Div64(hi, lo, s.n)
	return q
}

// firstIndex returns the smallest item index whose millisecond is m:
// ceil(m*n/spanMs).
func (s idSpace) firstIndex(m uint64) uint64 {
	hi, lo := bits.Mul64(m, s.n)
	q, r := bits.Div64(hi, lo, s.spanMs)
	if r != 0 {
		q++
	}
	return q
}

// id returns the id of item i (0 ≤ i < n).
func (s idSpace) id(i uint64) uint64 {
	m := s.msOf(i)
	seq := i - s.firstIndex(m)
	return (s.startMs+m)<<s.layout.TimeShift | seq
}
