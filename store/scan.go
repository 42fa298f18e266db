package store

// Counter scans: a counter's stored rows in id order, a page at a time, for
// inspection (issue 20: the SCAN command of tally serve).
//
// # The cursor is an id
//
// A page ends at an id and the next page starts at the id after it. Nothing
// else is remembered between calls, so a cursor means the same thing
// whatever happens between them: a seal or merge changes a range's tier, a
// widening (widen.go) changes how ids are split into ranges, a reopen
// rebuilds every table, and "the rows from id x on" is still well defined.
// That is what makes the promise simple: ids only grow along a scan, so no
// row is visited twice, and every row stored for the whole scan lies at or
// after the cursor when its page is read, so none is missed.
//
// # Merging the tiers
//
// A range's rows come from up to four sources (tier.go): the hot table, a
// delta, a frozen delta and the cold blocks. A page gathers candidate keys
// from each source, at most need of them at or after the cursor (the
// smallest), and visits them in key order, reading each one through
// readRowRefd, the very path of Get; so a delta row overrides a block's, a
// deletion marker hides it, and an all-zero row is skipped, exactly as Get
// reads them. A source that returned need keys may have more beyond its
// last one, so the page only trusts candidates up to the smallest such last
// key (the horizon): below it, every source's keys are all among the
// candidates. If the page is not full at the horizon, the next round starts
// after it.
//
// # Cost, and why not better
//
// Package hot orders a table by a mix of the key (hot's "Keys and
// segments"), not by the key, and package cold has no iterator that starts
// at a key (Desc.Keys starts at the range's first key). So, with the APIs of
// those packages as they are, a round costs one pass over each hash table of
// the range (smallestKeys keeps the need smallest keys: memory O(need),
// never the table) plus a walk of the cold keys up to the cursor, then one
// readRowRefd per candidate (cold candidates share the cached blocks: one
// block decode per ~1000 rows). The work of a page is thus proportional to
// the rows of the ranges it touches, not to its limit;
// BenchmarkScan measures both tiers (bench/RESULTS.md, "Counter scan").
// What would make it O(limit) is noted there: a
// Desc.KeysFrom(key) in package cold, and for hot tables either an ordered
// index or a cursor in hot's own (mixed) order, which would no longer be an
// id and would need care when a range is sealed under a scan.

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/tallydb/tally/hot"
)

// Scan calls fn for the stored rows of the counter with id >= from, in
// increasing id order, until fn returns false or limit rows were visited
// (limit <= 0: no limit), and returns the id to resume from: the id after
// the last row visited, or 0 when the counter has no more rows. A page that
// stops at its limit returns the next id even if no row follows; the call
// from there returns 0. A row is stored when some column is non-zero:
// deleted and all-zero rows are never visited. Each row reads as Get would
// read it at that moment (a cold delta overrides the block's row, a deletion
// marker hides it).
//
// A row stored for the whole of a scan (the calls from 0, or any from, to
// the call that returns 0) is visited exactly once; a row written, deleted
// or created during it may or may not be, as with Redis SCAN. Seals, merges,
// widenings and reopens in place may run between and during calls: a cursor
// stays valid and no call fails because of them.
//
// fn runs without any lock held and may call the counter, including writes.
// values has the counter's column count and is reused between calls of fn:
// copy it to keep it. An error (ErrClosed, a cold read error, ctx's error)
// returns with the cursor of the rows visited so far.
//
// A page costs a pass over the hash tables of the ranges it touches, not
// work proportional to limit: see "Cost" in scan.go.
func (c *Counter) Scan(ctx context.Context, from uint64, limit int, fn func(id uint64, values []uint64) bool) (next uint64, err error) {
	if c.db.closed.Load() {
		return from, ErrClosed
	}
	if limit <= 0 {
		limit = math.MaxInt
	}
	sc := rowScan{fn: fn, left: limit, cur: from}
	for !sc.stop && !sc.end {
		if err := ctx.Err(); err != nil {
			return sc.cur, err
		}
		if c.db.closed.Load() {
			return sc.cur, ErrClosed
		}
		cs := c.state()
		set := cs.ranges.Load()
		rids := set.sortedIDs()
		i, _ := slices.BinarySearch(rids, sc.cur>>set.bits)
		if i == len(rids) {
			return 0, nil
		}
		if rid := rids[i]; rid != sc.cur>>set.bits {
			sc.cur = rid << set.bits // the range's first id
		}
		sc.vals = grow(sc.vals, len(cs.cols.Load().cols))
		err := sc.scanRange(ctx, cs, set, set.m[rids[i]])
		if err == errRetired {
			// A merge (or a reopen) released the range's cold version
			// before the page referenced it: nothing was visited, read the
			// current state again (lifetime.go).
			continue
		}
		if err != nil {
			return sc.cur, err
		}
	}
	if sc.end {
		return 0, nil
	}
	return sc.cur, nil
}

// rowScan is the state of one Scan call.
type rowScan struct {
	fn   func(id uint64, values []uint64) bool
	left int      // rows fn may still be given
	cur  uint64   // the next id to visit
	stop bool     // fn returned false or left reached 0; cur is the resume id
	end  bool     // no id follows the last one examined
	vals []uint64 // the row handed to fn
	keys []uint64 // candidates of a round
	buf  []uint64 // scratch of smallestKeys
}

// scanMinRound is the fewest candidates a round asks each source for when
// the page may take more rows; a larger page asks for up to a sixteenth of
// the largest source, so a long page costs at most ~16 passes over a range.
const scanMinRound = 1024

// scanRange visits the stored rows of rs (range rid of set) from sc.cur on.
// It returns errRetired, having visited nothing, if rs's cold version was
// released before it could reference it.
func (sc *rowScan) scanRange(ctx context.Context, cs *counterState, set *rangeSet, rs *rangeState) error {
	if rs.cold != nil {
		// One reference for the whole range: every round reads the same
		// version, whose blocks stay until we let go (lifetime.go).
		if !rs.cold.ref() {
			return errRetired
		}
		defer rs.cold.unref()
	}
	base := sc.cur &^ set.mask
	lo := sc.cur & set.mask
	var tables [3]*hot.Table
	nt, largest := 0, 0
	for _, t := range []*hot.Table{rs.delta, rs.frozen, rs.hot} {
		if t != nil {
			tables[nt] = t
			nt++
			largest = max(largest, t.Len())
		}
	}
	if rs.cold != nil {
		largest = max(largest, int(min(rs.cold.Desc().Rows(), math.MaxInt32)))
	}
	for {
		need := min(sc.left, max(scanMinRound, largest/16))
		horizon := set.mask // every source's keys up to here are candidates
		sc.keys = sc.keys[:0]
		for _, t := range tables[:nt] {
			n := len(sc.keys)
			sc.keys, sc.buf = smallestKeys(t, lo, need, sc.keys, sc.buf)
			if len(sc.keys)-n == need {
				horizon = min(horizon, sc.keys[len(sc.keys)-1])
			}
		}
		if rs.cold != nil {
			// A walk from the range's first key (Desc.Keys cannot start
			// at lo): a few ns a key, where pulling keys one by one
			// across rounds (iter.Pull) cost ~20x more per key.
			n := len(sc.keys)
			for k := range rs.cold.Desc().Keys() {
				if k < lo {
					continue
				}
				if sc.keys = append(sc.keys, k); len(sc.keys)-n == need {
					horizon = min(horizon, k)
					break
				}
			}
		}
		slices.Sort(sc.keys)
		sc.keys = slices.Compact(sc.keys)
		for _, k := range sc.keys {
			if k > horizon {
				break
			}
			if err := rs.readRowRefd(k, sc.vals); err != nil {
				return fmt.Errorf("tally: %s id %d: %w", cs.name, base|k, err)
			}
			if allZero(sc.vals) {
				continue
			}
			id := base | k
			sc.cur, sc.end = id+1, id == math.MaxUint64
			sc.left--
			if !sc.fn(id, sc.vals) || sc.left == 0 {
				sc.stop = true
				return nil
			}
		}
		if horizon == set.mask {
			// The range is done: go on at the next one's first id.
			sc.cur = base + set.mask + 1
			sc.end = sc.cur == 0 // base was the last range
			return nil
		}
		lo = horizon + 1
		sc.cur = base | lo
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// smallestKeys appends to dst the (at most) n smallest keys >= lo of t, in
// increasing order. It holds at most 2n keys (in buf, the caller's scratch,
// returned for reuse): when buf fills it keeps the n smallest, and from
// then on only a key below the n-th can enter. A binary heap did the same
// with a push per key and measured ~7x slower for a page of a whole
// 1M-row range (BenchmarkScan/hot/page=all).
func smallestKeys(t *hot.Table, lo uint64, n int, dst, buf []uint64) ([]uint64, []uint64) {
	buf = buf[:0]
	if n <= 0 {
		return dst, buf
	}
	bound := uint64(math.MaxUint64) // keys >= bound cannot be among the n smallest
	// NB: t.Range holds a segment lock around the callback, which must not
	// touch t (package hot's Concurrency).
	t.Range(func(k uint64, _ []uint64) bool {
		if k < lo || k >= bound {
			return true
		}
		if buf = append(buf, k); len(buf) == 2*n {
			slices.Sort(buf)
			buf = buf[:n]
			bound = buf[n-1]
		}
		return true
	})
	slices.Sort(buf)
	return append(dst, buf[:min(n, len(buf))]...), buf
}

// sortedIDs returns the snapshot's range ids in increasing order, computed
// on the first scan of the snapshot (a rangeSet never changes).
func (s *rangeSet) sortedIDs() []uint64 {
	if p := s.sorted.Load(); p != nil {
		return *p
	}
	ids := make([]uint64, 0, len(s.m))
	for id := range s.m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	s.sorted.Store(&ids)
	return ids
}
