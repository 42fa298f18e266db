package store

import "fmt"

// Check verifies the internal invariants of every hot table and that each
// table's layout agrees with its counter's schema. Tests call it after every
// step; tools may call it on a quiet store.
func (db *DB) Check() error {
	for _, cs := range db.cat.Load().byID {
		ncols := len(cs.cols.Load().cols)
		for rid, rs := range cs.ranges.Load().m {
			if rid != rs.id {
				return fmt.Errorf("tally: %s: range %d filed under %d", cs.name, rs.id, rid)
			}
			if n := rs.hot.NumColumns(); n != ncols {
				return fmt.Errorf("tally: %s range %d: table has %d columns, schema %d", cs.name, rid, n, ncols)
			}
			if err := rs.hot.Check(); err != nil {
				return fmt.Errorf("tally: %s range %d: %w", cs.name, rid, err)
			}
		}
	}
	return nil
}
