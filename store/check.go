package store

import (
	"bytes"
	"fmt"

	"github.com/tallydb/tally/hot"
)

// Check verifies the internal invariants of every range: each table's
// invariants, its layout against the counter's schema, and the shape of the
// range (see rangeState). Tests call it after every step; tools may call it
// on a quiet store.
func (db *DB) Check() error {
	db.swap.RLock()
	defer db.swap.RUnlock()
	if err := db.checkQueue(); err != nil {
		return err
	}
	// Retired before the walk: a retired version is never published again.
	retired := map[*coldVersion]bool{}
	db.life.mu.Lock()
	for _, cv := range db.life.retired {
		if cv.next == nil {
			db.life.mu.Unlock()
			return fmt.Errorf("tally: retired cold version %d has no successor", cv.id)
		}
		retired[cv] = true
	}
	db.life.mu.Unlock()
	for _, cs := range db.cat.Load().byID {
		ncols := len(cs.cols.Load().cols)
		set := cs.ranges.Load()
		if err := checkWidth(cs, set); err != nil {
			return err
		}
		for rid, rs := range set.m {
			if rid != rs.id {
				return fmt.Errorf("tally: %s: range %d filed under %d", cs.name, rs.id, rid)
			}
			switch {
			case rs.cold != nil && rs.hot != nil:
				return fmt.Errorf("tally: %s range %d: cold range in shape %s", cs.name, rid, rs.shape())
			case rs.cold == nil && (rs.hot == nil || rs.frozen != nil):
				return fmt.Errorf("tally: %s range %d: hot range in shape %s", cs.name, rid, rs.shape())
			}
			if cv := rs.cold; cv != nil {
				if retired[cv] {
					return fmt.Errorf("tally: %s range %d: cold version %d is both published and retired", cs.name, rid, cv.id)
				}
				// A published version is referenced. (A merge may retire
				// it while we look: only a version still published counts.)
				if n := cv.refs.Load(); n < 1 && cs.ranges.Load().m[rid].cold == cv {
					return fmt.Errorf("tally: %s range %d: published cold version has %d refs", cs.name, rid, n)
				}
				for _, id := range cv.v.blockIDs {
					if id >= cv.v.nextBlockID {
						return fmt.Errorf("tally: %s range %d: block id %d ≥ next %d", cs.name, rid, id, cv.v.nextBlockID)
					}
				}
			}
			for _, t := range []struct {
				t     *hot.Table
				ncols int
				what  string
			}{{rs.hot, ncols, "hot"}, {rs.delta, ncols + 1, "delta"}, {rs.frozen, ncols + 1, "frozen delta"}} {
				if t.t == nil {
					continue
				}
				if kb := t.t.KeyBits(); kb != set.bits {
					return fmt.Errorf("tally: %s range %d: %s table of %d-bit keys in %d-bit ranges", cs.name, rid, t.what, kb, set.bits)
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
	return db.checkIntents()
}

// checkIntents verifies that the intents in memory are exactly those on
// disk (lifetime.go).
func (db *DB) checkIntents() error {
	db.pebbleMu.RLock()
	defer db.pebbleMu.RUnlock()
	if db.pebbleClosed || db.env().failed.Load() != nil {
		return nil // after a failed sync, only a reopen knows what is on disk
	}
	db.life.diskMu.Lock()
	defer db.life.diskMu.Unlock()
	onDisk := 0
	p := appendMetaKey(nil, metaIntent)
	err := db.scan(p, prefixEnd(p), func(k, v []byte) error {
		id, ok := decodeIntentKey(k)
		if !ok {
			return fmt.Errorf("tally: intent key %x", k)
		}
		if db.opts.ReadOnly {
			// A read-only Open leaves an interrupted operation's intents
			// on disk for the next writable Open to resolve, and keeps
			// none in memory (recover.go): each must only decode.
			if _, err := decodeIntent(v); err != nil {
				return fmt.Errorf("tally: intent %d: %w", id, err)
			}
			onDisk++
			return nil
		}
		in := db.life.intents[id]
		if in == nil {
			return fmt.Errorf("tally: intent %d on disk is unknown in memory", id)
		}
		if want := appendIntent(nil, in); !bytes.Equal(v, want) {
			return fmt.Errorf("tally: %s differs on disk", in)
		}
		onDisk++
		return nil
	})
	if err != nil {
		return err
	}
	if !db.opts.ReadOnly && onDisk != len(db.life.intents) {
		return fmt.Errorf("tally: %d intents in memory, %d on disk", len(db.life.intents), onDisk)
	}
	return nil
}

func (rs *rangeState) shape() string {
	return fmt.Sprintf("{hot:%v delta:%v frozen:%v cold:%v}", rs.hot != nil, rs.delta != nil, rs.frozen != nil, rs.cold != nil)
}
