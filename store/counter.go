package store

import (
	"fmt"
	"github.com/tallydb/tally/hot"
	"sync/atomic"
)

// Counter is a handle on one counter. It is safe for concurrent use.
//
// The handle outlives a reopen (Options.ReopenOnFailure): it resolves to the
// counter's recovered state on its first call after one (state).
type Counter struct {
	db *DB
	cs *counterState // the state it was made with
	// cur is the state in use: cs until a reopen replaced it.
	cur atomic.Pointer[counterState]
}

// state returns the counter's current state: one atomic load, plus a
// catalog lookup on the first call after a reopen.
func (c *Counter) state() *counterState {
	cs := c.cur.Load()
	if cs == nil {
		cs = c.cs
	}
	if cs.dead.Load() {
		cs = c.db.liveState(cs)
		c.cur.Store(cs)
	}
	return cs
}

// Name returns the counter's name.
func (c *Counter) Name() string { return c.cs.name }

// Info returns the counter's current schema.
func (c *Counter) Info() CounterInfo { return c.state().info() }

// RowBytes is what a row costs in the counter's hot tables at its current
// range width and columns (CounterStats.TargetBytesPerRow), read without
// walking the ranges as Stats does.
func (c *Counter) RowBytes() float64 {
	cs := c.state()
	return hot.ExpectedBytesPerRow(cs.rangeBits(), cs.cols.Load().widths)
}

// NumColumns returns the current number of columns.
func (c *Counter) NumColumns() int { return len(c.state().cols.Load().cols) }

// Columns returns the current column names in order.
func (c *Counter) Columns() []string {
	cols := c.state().cols.Load().cols
	names := make([]string, len(cols))
	for i, col := range cols {
		names[i] = col.Name
	}
	return names
}

func grow(dst []uint64, n int) []uint64 {
	if cap(dst) < n {
		return make([]uint64, n)
	}
	return dst[:n]
}

// Get returns every column of row id, in column order, in dst[:0] (grown if
// needed). An id never written reads as zeros. It does not allocate when dst
// has room for NumColumns values.
func (c *Counter) Get(id uint64, dst []uint64) ([]uint64, error) {
	if c.db.closed.Load() {
		return dst[:0], ErrClosed
	}
	for {
		cs := c.state()
		dst = grow(dst, len(cs.cols.Load().cols))
		if err := cs.readRow(id, dst); err != errRetired {
			return dst, err
		}
		// cs died in a reopen: read the live state.
	}
}

// GetColumn returns one column of row id.
func (c *Counter) GetColumn(id uint64, column string) (uint64, error) {
	if c.db.closed.Load() {
		return 0, ErrClosed
	}
	cs := c.state()
	cols := cs.cols.Load()
	col, ok := cols.byName[column]
	if !ok {
		return 0, columnNotFound(cs, column)
	}
	var tmp [MaxColumns]uint64
	row := tmp[:len(cols.cols)]
	if err := cs.readRow(id, row); err == errRetired {
		return c.GetColumn(id, column) // cs died in a reopen: read the live state
	} else if err != nil {
		return 0, err
	}
	return row[col], nil
}

// MultiGet returns every column of every id, row-major (len(ids) ×
// NumColumns values, the row of ids[i] at i*NumColumns), in dst[:0] (grown if
// needed). This is the hot path of a feed page.
func (c *Counter) MultiGet(ids []uint64, dst []uint64) ([]uint64, error) {
	if c.db.closed.Load() {
		return dst[:0], ErrClosed
	}
	cs := c.state()
	n := len(cs.cols.Load().cols)
	dst = grow(dst, len(ids)*n)
	ranges := cs.ranges.Load()
	for i := 0; i < len(ids); {
		rid := ids[i] >> ranges.bits
		rs := ranges.m[rid]
		// A feed page's ids cluster in a few recent ranges: take the run of
		// ids in this range.
		j := i + 1
		for j < len(ids) && ids[j]>>ranges.bits == rid {
			j++
		}
		err := cs.multiGetRange(rs, ids[i:j], dst[i*n:j*n], n, ranges.mask)
		if err == errRetired {
			if cs.dead.Load() {
				// A reopen replaced the counter's state: read everything
				// again from the live one (its ranges never change again).
				return c.MultiGet(ids, dst)
			}
			// A merge replaced the range's blocks after the load: read
			// this run again from the current state (lifetime.go).
			ranges = cs.ranges.Load()
			continue
		}
		if err != nil {
			return dst, err
		}
		i = j
	}
	return dst, nil
}

// multiGetRange reads the rows of ids, all in range rs (nil: none), into
// out (n values per id); mask is the key mask of the snapshot rs came from.
// It returns errRetired, having read nothing for sure, if rs's cold version
// was released under it.
func (cs *counterState) multiGetRange(rs *rangeState, ids []uint64, out []uint64, n int, mask uint64) error {
	if rs == nil {
		clear(out)
		return nil
	}
	if rs.cold == nil && rs.delta == nil && rs.hot.NumColumns() == n {
		// Pure hot range: GetMany overlaps the ids' cache misses.
		var keys [16]uint64
		var found [16]bool
		for off := 0; off < len(ids); off += len(keys) {
			m := min(len(keys), len(ids)-off)
			for k := 0; k < m; k++ {
				keys[k] = ids[off+k] & mask
			}
			rs.hot.GetMany(keys[:m], out[off*n:off*n], found[:0])
		}
		return nil
	}
	if rs.cold != nil {
		// One reference for the whole run: the rows below read the same
		// version (a rangeState never changes its version).
		if !rs.cold.ref() {
			return errRetired
		}
		defer rs.cold.unref()
	}
	for k, id := range ids {
		if err := rs.readRowRefd(id&mask, out[k*n:k*n+n]); err != nil {
			return fmt.Errorf("tally: %s id %d: %w", cs.name, id, err)
		}
	}
	return nil
}

// Incr adds delta (which may be negative) to one column of row id and returns
// the new value. A count never goes below 0: a negative delta larger than the
// value leaves it at 0. A result above the column's maximum is refused with
// ErrValueRange and changes nothing.
func (c *Counter) Incr(id uint64, column string, delta int64) (uint64, error) {
	return c.db.commitOne(func(b *Batch) error { return b.incr(c.state(), id, column, delta) })
}

// Set sets every column of row id; len(values) must equal NumColumns
// (ErrColumnCount otherwise). All-zero values delete the row.
func (c *Counter) Set(id uint64, values ...uint64) error {
	_, err := c.db.commitOne(func(b *Batch) error { return b.set(c.state(), id, values) })
	return err
}

// SetColumn sets one column of row id to value, leaving the others as they
// are, atomically. A value above the column's maximum is refused with
// ErrValueRange and changes nothing.
func (c *Counter) SetColumn(id uint64, column string, value uint64) error {
	_, err := c.db.commitOne(func(b *Batch) error { return b.setColumn(c.state(), id, column, value) })
	return err
}

// Delete removes row id; all its columns read 0 afterwards.
func (c *Counter) Delete(id uint64) error {
	_, err := c.db.commitOne(func(b *Batch) error {
		b.ops = append(b.ops, batchOp{cs: c.state(), id: id, kind: opDelete})
		return nil
	})
	return err
}
