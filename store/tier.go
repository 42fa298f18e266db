package store

import (
	"fmt"

	"github.com/tallydb/tally/hot"
	"github.com/tallydb/tally/internal/limits"
)

// rangeState is one id range of a counter in one of three shapes:
//
//	shape     hot       delta     frozen   cold     reads                    writes go to
//	--------  --------  --------  -------  -------  -----------------------  ------------
//	hot       live      nil       nil      nil      hot                      hot
//	sealing   frozen    live      nil      nil      delta, hot               delta
//	cold      nil       nil/live  nil/set  reader   delta, frozen, blocks    delta
//
// A cold range's delta is created by its first write after the seal (or
// merge): most aged ranges are never written again and should cost no
// table.
//
// "frozen" is a delta being merged into new blocks. A rangeState is immutable
// once published (the tables it points to are not): a change of shape
// publishes a new rangeState, so a reader that loaded the old one keeps a
// consistent view.
//
// A delta row has one more leading column than the counter: 1 marks a row
// deleted (all zero) since the seal, 0 a live row. Deleted rows must be kept
// as markers because the blocks underneath still hold them.
//
// A cold range's blocks belong to its coldVersion, shared by every
// rangeState of the range until a merge replaces it; a reader references
// the version for the length of a cold read (lifetime.go).
type rangeState struct {
	id     uint64
	hot    *hot.Table
	delta  *hot.Table
	frozen *hot.Table
	cold   *coldVersion
}

const deltaDeleted = 1

func (rs *rangeState) tier() string {
	switch {
	case rs.cold != nil:
		return "cold"
	case rs.delta != nil:
		return "sealing"
	}
	return "hot"
}

// newDeltaTable returns an empty delta for a range of cs.
func newDeltaTable(cs *counterState) (*hot.Table, error) {
	return hot.New(cs.rangeBits(), append([]int{1}, cs.cols.Load().widths...), 0)
}

// readDelta reads key from a delta table: found reports whether the delta
// decides the row (live or deleted).
func readDelta(t *hot.Table, key uint64, out []uint64) bool {
	var tmp [limits.MaxTableColumns]uint64
	row, ok := t.Get(key, tmp[:0])
	if !ok {
		return false
	}
	if row[0] == deltaDeleted {
		clear(out)
		return true
	}
	n := copy(out, row[1:])
	clear(out[n:])
	return true
}

// readRow fills out with the row of key (the low id bits). It returns
// errRetired if the cold version was released under it (the caller reads
// the current rangeState again).
func (rs *rangeState) readRow(key uint64, out []uint64) error {
	if rs.cold == nil {
		return rs.readRowRefd(key, out)
	}
	if !rs.cold.ref() {
		return errRetired
	}
	err := rs.readRowRefd(key, out)
	rs.cold.unref()
	return err
}

// readRowRefd is readRow for a caller holding a reference on rs.cold.
func (rs *rangeState) readRowRefd(key uint64, out []uint64) error {
	if rs.delta != nil && readDelta(rs.delta, key, out) {
		return nil
	}
	if rs.frozen != nil && readDelta(rs.frozen, key, out) {
		return nil
	}
	if rs.cold != nil {
		var tmp [MaxColumns]uint64
		row, _, err := rs.cold.reader.Get(key, tmp[:0])
		if err != nil {
			clear(out)
			return coldReadError(err)
		}
		n := copy(out, row)
		clear(out[n:])
		return nil
	}
	var tmp [MaxColumns]uint64
	row, _ := rs.hot.Get(key, tmp[:0])
	n := copy(out, row)
	clear(out[n:])
	return nil
}

// put stores a row's after-image in the range's writable table; a cold
// range must have its delta (ensureDeltaLocked).
func (rs *rangeState) put(key uint64, vals []uint64) error {
	if rs.delta == nil {
		if rs.hot == nil {
			return fmt.Errorf("tally: range %d: write to a cold range without a delta", rs.id)
		}
		return rs.hot.Put(key, vals)
	}
	var tmp [limits.MaxTableColumns]uint64
	row := tmp[:1+len(vals)]
	if allZero(vals) {
		row[0] = deltaDeleted
	} else {
		copy(row[1:], vals)
	}
	return rs.delta.Put(key, row)
}

// ensureDeltaLocked returns rs, or, for a cold range without a delta, its
// replacement with an empty delta, published. The caller holds DB.commit
// (or is recovering, alone).
func (cs *counterState) ensureDeltaLocked(rs *rangeState) (*rangeState, error) {
	if rs.cold == nil || rs.delta != nil {
		return rs, nil
	}
	delta, err := newDeltaTable(cs)
	if err != nil {
		return nil, err
	}
	n := *rs
	n.delta = delta
	cs.replaceRangeLocked(rs.id, &n)
	return &n, nil
}

// addColumnLocked widens every table of the range. Blocks keep their column
// count; columns past it read 0 until written (into the delta).
func (rs *rangeState) addColumnLocked(width int) error {
	for _, t := range []*hot.Table{rs.hot, rs.delta, rs.frozen} {
		if t != nil {
			if err := t.AddColumn(width); err != nil {
				return err
			}
		}
	}
	return nil
}
