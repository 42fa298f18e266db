package store

import (
	"sync/atomic"

	"github.com/tallydb/tally/hot"
)

// catalog is an immutable snapshot of the counters. Writers (holding
// DB.commit) build a new one and publish it; readers load it without locks.
type catalog struct {
	byName map[string]*counterState
	byID   map[uint32]*counterState
	nextID uint32
}

func (c *catalog) with(cs *counterState) *catalog {
	n := &catalog{
		byName: make(map[string]*counterState, len(c.byName)+1),
		byID:   make(map[uint32]*counterState, len(c.byID)+1),
		nextID: c.nextID,
	}
	for k, v := range c.byName {
		n.byName[k] = v
	}
	for k, v := range c.byID {
		n.byID[k] = v
	}
	n.byName[cs.name] = cs
	n.byID[cs.id] = cs
	if cs.id >= n.nextID {
		n.nextID = cs.id + 1
	}
	return n
}

// counterState is the in-memory state of one counter. Its immutable fields
// are set at creation; cols and ranges are copy-on-write snapshots replaced
// only by writers holding DB.commit, so readers never lock.
type counterState struct {
	id   uint32
	name string
	// schemaBits is the range width of the schema: the fixed width, or
	// under autoBits the width the counter started with. The current width
	// is the ranges snapshot's (rangeSet.bits).
	schemaBits uint
	autoBits   bool // the store may widen the ranges (widen.go)
	age        AgePolicy
	owner      atomic.Pointer[string] // CounterInfo.Owner; set once more by ClaimCounter
	// widen is the state of automatic widening (widen.go), guarded by
	// DB.commit.
	widen widenState

	cols   atomic.Pointer[colSet]
	ranges atomic.Pointer[rangeSet]
	// dead is set when a reopen replaced the catalog (reopen.go): handles
	// and batches find the counter's new state by id (DB.liveState).
	dead atomic.Bool
}

// liveState returns the state of cs's counter in the current catalog: cs
// itself unless a reopen replaced it. A counter the new catalog lacks
// (which a reopen cannot produce: schemas are synced before they are
// published) keeps its old state.
func (db *DB) liveState(cs *counterState) *counterState {
	for cs.dead.Load() {
		n := db.cat.Load().byID[cs.id]
		if n == nil || n == cs {
			return cs
		}
		cs = n
	}
	return cs
}

func newCounterState(ci *CounterInfo) *counterState {
	cs := &counterState{
		id:         ci.ID,
		name:       ci.Name,
		schemaBits: uint(ci.RangeBits),
		autoBits:   ci.AutoRangeBits,
		age:        ci.Age,
	}
	owner := ci.Owner
	cs.owner.Store(&owner)
	cs.cols.Store(newColSet(ci.Columns))
	cs.ranges.Store(newRangeSet(uint(ci.RangeBits), map[uint64]*rangeState{}))
	return cs
}

func (cs *counterState) info() CounterInfo {
	cols := cs.cols.Load()
	return CounterInfo{
		ID:            cs.id,
		Name:          cs.name,
		RangeBits:     uint8(cs.schemaBits),
		AutoRangeBits: cs.autoBits,
		Age:           cs.age,
		Columns:       append([]Column(nil), cols.cols...),
		Owner:         *cs.owner.Load(),
	}
}

// colSet is an immutable snapshot of a counter's columns.
type colSet struct {
	cols   []Column
	byName map[string]int
	widths []int // bytes per column in a hot row
	max    []uint64
}

func newColSet(cols []Column) *colSet {
	s := &colSet{cols: cols, byName: make(map[string]int, len(cols))}
	for i, c := range cols {
		s.byName[c.Name] = i
		s.widths = append(s.widths, int(c.HintBits/8))
		s.max = append(s.max, c.Max())
	}
	return s
}

// rangeSet is an immutable snapshot of a counter's ranges, replaced when a
// range is created or changes tier, or when the ranges are widened
// (widen.go). A range id is id >> bits, its key id & mask; a reader takes
// both from the snapshot it loaded, never from a later one.
type rangeSet struct {
	m    map[uint64]*rangeState
	bits uint   // range width: low id bits per range, 8..64
	mask uint64 // 1<<bits - 1
	// sorted caches the ids of m in increasing order for scans (scan.go's
	// sortedIDs); nil until the snapshot is first scanned.
	sorted atomic.Pointer[[]uint64]
}

func newRangeSet(bits uint, m map[uint64]*rangeState) *rangeSet {
	// NB: for bits = 64, 1<<bits is 0 in Go, so mask is all ones, and
	// id>>bits is 0: one range holds every id.
	return &rangeSet{m: m, bits: bits, mask: 1<<bits - 1}
}

// lookup returns the range holding id (nil if none exists yet) and id's key
// in it.
func (s *rangeSet) lookup(id uint64) (*rangeState, uint64) {
	return s.m[id>>s.bits], id & s.mask
}

// rangeBits returns the current range width. Writers (holding DB.commit)
// may use it with later snapshots; readers use their snapshot's bits.
func (cs *counterState) rangeBits() uint { return cs.ranges.Load().bits }

// lookupRange returns the range holding id, or nil if none exists yet.
func (cs *counterState) lookupRange(id uint64) *rangeState {
	rs, _ := cs.ranges.Load().lookup(id)
	return rs
}

// replaceRangeLocked publishes rs (nil removes the range). The caller holds
// DB.commit.
func (cs *counterState) replaceRangeLocked(rid uint64, rs *rangeState) {
	old := cs.ranges.Load()
	n := newRangeSet(old.bits, make(map[uint64]*rangeState, len(old.m)+1))
	for k, v := range old.m {
		n.m[k] = v
	}
	if rs == nil {
		delete(n.m, rid)
	} else {
		n.m[rid] = rs
	}
	cs.ranges.Store(n)
}

// ensureRangeLocked returns the range of id, creating an empty hot range if
// needed. The caller holds DB.commit.
func (cs *counterState) ensureRangeLocked(id uint64, sizeHint int) (*rangeState, error) {
	set := cs.ranges.Load()
	rid := id >> set.bits
	if rs := set.m[rid]; rs != nil {
		return rs, nil
	}
	t, err := hot.New(set.bits, cs.cols.Load().widths, sizeHint)
	if err != nil {
		return nil, err
	}
	rs := &rangeState{id: rid, hot: t}
	cs.replaceRangeLocked(rid, rs)
	return rs, nil
}

// readRow fills out (len = number of columns) with the row of id.
func (cs *counterState) readRow(id uint64, out []uint64) error {
	for {
		rs, key := cs.ranges.Load().lookup(id)
		if rs == nil {
			clear(out)
			return nil
		}
		// A merge replaced the range's blocks after the load: read the
		// current state (lifetime.go).
		if err := rs.readRow(key, out); err != errRetired {
			return err
		}
		if cs.dead.Load() {
			// A reopen replaced this state and released its versions: its
			// ranges never change again, so the caller must read the live
			// state (Counter.state), not loop here.
			return errRetired
		}
	}
}
