package store

import (
	"fmt"

	"github.com/tallydb/tally/hot"
)

// Check verifies the internal invariants of every range: each table's
// invariants, its layout against the counter's schema, and the shape of the
// range (see rangeState). Tests call it after every step; tools may call it
// on a quiet store.
func (db *DB) Check() error {
	if err := db.checkQueue(); err != nil {
		return err
	}
	for _, cs := range db.cat.Load().byID {
		ncols := len(cs.cols.Load().cols)
		for rid, rs := range cs.ranges.Load().m {
			if rid != rs.id {
				return fmt.Errorf("tally: %s: range %d filed under %d", cs.name, rs.id, rid)
			}
			switch {
			case rs.cold != nil && (rs.hot != nil || rs.coldV == nil):
				return fmt.Errorf("tally: %s range %d: cold range in shape %s", cs.name, rid, rs.shape())
			case rs.cold == nil && (rs.hot == nil || rs.frozen != nil || rs.coldV != nil):
				return fmt.Errorf("tally: %s range %d: hot range in shape %s", cs.name, rid, rs.shape())
			}
			for _, t := range []struct {
				t     *hot.Table
				ncols int
				what  string
			}{{rs.hot, ncols, "hot"}, {rs.delta, ncols + 1, "delta"}, {rs.frozen, ncols + 1, "frozen delta"}} {
				if t.t == nil {
					continue
				}
				if n := t.t.NumColumns(); n != t.ncols {
					return fmt.Errorf("tally: %s range %d: %s table has %d columns, want %d", cs.name, rid, t.what, n, t.ncols)
				}
				if err := t.t.Check(); err != nil {
					return fmt.Errorf("tally: %s range %d %s: %w", cs.name, rid, t.what, err)
				}
			}
			if rs.cold != nil && rs.cold.Desc().NumColumns() > ncols {
				return fmt.Errorf("tally: %s range %d: blocks have %d columns, schema %d", cs.name, rid, rs.cold.Desc().NumColumns(), ncols)
			}
		}
	}
	return nil
}

func (rs *rangeState) shape() string {
	return fmt.Sprintf("{hot:%v delta:%v frozen:%v cold:%v}", rs.hot != nil, rs.delta != nil, rs.frozen != nil, rs.cold != nil)
}
