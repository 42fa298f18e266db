package store

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/tallydb/tally/compaction"
	"github.com/tallydb/tally/internal/radix"
)

// LoadRows is input to Load: IDs[i]'s values are Vals[i*n : (i+1)*n] for a
// counter of n columns. IDs need not be sorted; when an id repeats, its last
// row wins, all-zero or not.
type LoadRows struct {
	IDs  []uint64
	Vals []uint64
}

// LoadStats reports what a Load did.
type LoadStats struct {
	Rows        int // distinct ids loaded (after repeats collapse): ColdRows+HotRows+LoggedRows
	ZeroRows    int // of Rows, all-zero rows: each deletes its id's row, like Set
	ColdRows    int // rows of new ranges built straight into cold blocks (all-zero rows are absent there already)
	HotRows     int // rows put into hot tables
	LoggedRows  int // rows that went through the log (ranges already cold)
	ColdRanges  int // ranges built as cold
	HotRanges   int // ranges loaded hot
	BlocksBytes int64
}

// Load bulk-loads rows into counter, replacing the loaded rows' values (like
// Set): the last row of an id wins, and an all-zero row deletes the id's row
// on every path. It is meant for offline tools and host processes importing
// data:
//
//   - ranges that do not exist yet and that the counter's age policy would
//     age are built straight into cold blocks, sorted, with no log records
//     (one synced batch per range makes each range appear atomically);
//   - other ranges not yet cold are put into hot tables directly, made
//     durable by a checkpoint before Load returns;
//   - rows of ranges already cold go through the log, like any write.
//
// Load returns once everything is durable. A Load that fails or crashes
// part-way can leave some ranges loaded and others not; running it again
// converges. progress, if not nil, is called with the rows done so far.
func (db *DB) Load(ctx context.Context, counter string, in LoadRows, progress func(done int)) (st LoadStats, err error) {
	defer recoverPebble(&err)
	cs := db.cat.Load().byName[counter]
	if cs == nil {
		return st, counterNotFound(counter)
	}
	cols := cs.cols.Load()
	n := len(cols.cols)
	if len(in.IDs) >= 1<<32 {
		return st, fmt.Errorf("%w: %d rows in one Load (split it)", ErrValueRange, len(in.IDs))
	}
	if n == 0 {
		return st, fmt.Errorf("%w: counter %s has no columns", ErrColumnCount, cs.name)
	}
	if len(in.Vals) != len(in.IDs)*n {
		return st, fmt.Errorf("%w: %d ids and %d values for %d columns", ErrColumnCount, len(in.IDs), len(in.Vals), n)
	}
	for i, v := range in.Vals {
		if c := i % n; v > cols.max[c] {
			return st, fmt.Errorf("%w: id %d column %s = %d exceeds max %d", ErrValueRange, in.IDs[i/n], cols.cols[c].Name, v, cols.max[c])
		}
	}
	if err := db.writable(); err != nil {
		return st, err
	}
	db.jobMu.Lock() // no seal or merge may change tiers under the load
	defer db.jobMu.Unlock()

	rows := sortForLoad(in, n)
	st.Rows = rows.Len()
	// Widen the ranges first if the ids would make narrow ones (widen.go):
	// loading them at the old width could take far more memory than the
	// rows themselves.
	if err := db.widenForLoad(cs, rows.Keys); err != nil {
		return st, err
	}
	// NB: only a commit to a KeepHot counter widens its ranges while the
	// load runs (the load holds jobMu), and loadHot does not depend on the
	// width it grouped by; loadCold (aging counters) does.
	set := cs.ranges.Load()
	bits := set.bits
	for i := range rows.Len() {
		if allZero(rows.Row(i)) {
			st.ZeroRows++
		}
	}
	// Rank ranges newest first across the store and the input, for the
	// KeepNewest policy.
	existing := set.m
	rankOf := map[uint64]int{}
	{
		all := map[uint64]struct{}{}
		for rid := range existing {
			all[rid] = struct{}{}
		}
		for _, id := range rows.Keys {
			all[id>>bits] = struct{}{}
		}
		rids := make([]uint64, 0, len(all))
		for rid := range all {
			rids = append(rids, rid)
		}
		sort.Slice(rids, func(a, b int) bool { return rids[a] > rids[b] })
		for i, rid := range rids {
			rankOf[rid] = i
		}
	}
	now := db.opts.Now()
	done := 0
	for start := 0; start < rows.Len(); {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		rid := rows.Keys[start] >> bits
		end := start
		for end < rows.Len() && rows.Keys[end]>>bits == rid {
			end++
		}
		part := &compaction.Rows{NCols: n, Keys: rows.Keys[start:end], Vals: rows.Vals[start*n : end*n]}
		rs := existing[rid]
		var err error
		switch {
		case rs == nil && cs.shouldAge(rid, bits, rankOf[rid], now):
			err = db.loadCold(ctx, cs, rid, part, &st)
		case rs == nil || rs.cold == nil:
			err = db.loadHot(cs, part, &st)
		default:
			err = db.loadLogged(cs, part, &st)
		}
		if err != nil {
			return st, fmt.Errorf("tally: load %s range %d: %w", cs.name, rid, err)
		}
		done += end - start
		if progress != nil {
			progress(done)
		}
		start = end
	}
	if st.HotRows > 0 {
		// Hot rows were put in memory without log records: an empty record
		// moves the sequence on so the checkpoint cannot be skipped as
		// "nothing new".
		db.commit.Lock()
		err := db.commitEmptyRecordLocked()
		db.commit.Unlock()
		if err != nil {
			return st, err
		}
		if err := db.Checkpoint(); err != nil {
			return st, err
		}
	}
	return st, nil
}

// sortForLoad sorts rows by id, keeping the last of repeated ids whatever
// its values: an all-zero last row must reach the store to delete the row.
// Keys in the result are full ids.
func sortForLoad(in LoadRows, n int) *compaction.Rows {
	sorted := true // the common export order: nothing to sort or drop
	for i := 1; i < len(in.IDs) && sorted; i++ {
		sorted = in.IDs[i-1] < in.IDs[i]
	}
	if sorted {
		return &compaction.Rows{NCols: n, Keys: slices.Clone(in.IDs), Vals: slices.Clone(in.Vals[:len(in.IDs)*n])}
	}
	keys := slices.Clone(in.IDs)
	idx := make([]uint32, len(keys))
	for i := range idx {
		idx[i] = uint32(i)
	}
	radix.Sort(keys, idx) // stable: repeated ids keep input order
	out := &compaction.Rows{NCols: n}
	for j, i := range idx {
		if j+1 < len(idx) && keys[j+1] == keys[j] {
			continue // a later row for the same id wins
		}
		vals := in.Vals[int(i)*n : (int(i)+1)*n]
		out.Keys = append(out.Keys, keys[j])
		out.Vals = append(out.Vals, vals...)
	}
	return out
}

// loadCold builds a new range straight into blocks. All-zero rows are not
// written: the range is new, so their ids read as zeros already. It
// compacts rows.Vals in place (Load owns them; they are not used after).
func (db *DB) loadCold(ctx context.Context, cs *counterState, rid uint64, rows *compaction.Rows, st *LoadStats) error {
	n := rows.NCols
	set := cs.ranges.Load() // stable: an aging counter widens only in Load
	keys := make([]uint64, 0, rows.Len())
	var zeroIDs []uint64
	w := 0
	for i, id := range rows.Keys {
		row := rows.Row(i)
		if allZero(row) {
			zeroIDs = append(zeroIDs, id)
			continue
		}
		if w != i {
			copy(rows.Vals[w*n:(w+1)*n], row) // w < i: no overlap
		}
		keys = append(keys, id&set.mask)
		w++
	}
	local := &compaction.Rows{NCols: n, Keys: keys, Vals: rows.Vals[:w*n]}
	if local.Len() == 0 {
		st.ColdRows += rows.Len() // nothing to store; no range is created
		return nil
	}
	db.commit.Lock()
	seq := db.commit.lastSeq
	db.commit.Unlock()
	in, err := db.beginBlocks(intentLoad, cs, rid, 0)
	if err != nil {
		return err
	}
	db.step("load: intent written")
	// Unpaced: a load is foreground work the caller asked for.
	v, nbytes, err := db.writeBlocksWith(ctx, cs, rid, local, in.first, seq, nil, nil)
	if err != nil {
		db.abandonBlocks(in)
		return err
	}
	db.step("load: blocks written")
	cv, err := db.newColdVersion(cs, rid, v)
	if err != nil {
		db.abandonBlocks(in)
		return err
	}
	db.commit.Lock()
	defer db.commit.Unlock()
	if cs.ranges.Load().m[rid] != nil {
		// A writer created the range while its blocks were written: drop
		// them and load through the log, all-zero rows included: now there
		// may be rows to delete.
		db.abandonBlocks(in)
		all := &compaction.Rows{NCols: n, Vals: local.Vals}
		for _, k := range local.Keys {
			all.Keys = append(all.Keys, rid<<set.bits|k)
		}
		for _, id := range zeroIDs {
			all.Keys = append(all.Keys, id)
			all.Vals = append(all.Vals, make([]uint64, n)...)
		}
		return db.loadLoggedLocked(cs, all, st)
	}
	if err := db.writable(); err != nil {
		db.abandonBlocks(in)
		return err
	}
	if err := db.switchRange(cs, rid, v, in, nil); err != nil {
		db.abandonBlocks(in)
		return err
	}
	cs.replaceRangeLocked(rid, &rangeState{id: rid, cold: cv})
	db.tierChanges.Add(1)
	st.ColdRows += rows.Len()
	st.ColdRanges++
	st.BlocksBytes += nbytes
	return nil
}

// loadHot puts rows, all of one range, into the range's hot table; Load's
// final checkpoint makes them durable. The range and keys are those of the
// current width: rows grouped at an older width lie in one range of a
// wider one.
func (db *DB) loadHot(cs *counterState, rows *compaction.Rows, st *LoadStats) error {
	db.commit.Lock()
	defer db.commit.Unlock()
	set := cs.ranges.Load()
	if rs, _ := set.lookup(rows.Keys[0]); rs == nil && allZero(rows.Vals) {
		st.HotRows += rows.Len() // only deletes of absent rows: no range needed
		return nil
	}
	rs, err := cs.ensureRangeLocked(rows.Keys[0], rows.Len())
	if err != nil {
		return err
	}
	if rs.cold != nil {
		return db.loadLoggedLocked(cs, rows, st)
	}
	for i, id := range rows.Keys {
		// An all-zero row deletes (hot.Table.Put).
		if err := rs.put(id&set.mask, rows.Row(i)); err != nil {
			return err
		}
	}
	st.HotRows += rows.Len()
	st.HotRanges++
	return nil
}

func (db *DB) loadLogged(cs *counterState, rows *compaction.Rows, st *LoadStats) error {
	db.commit.Lock()
	defer db.commit.Unlock()
	return db.loadLoggedLocked(cs, rows, st)
}

// loadLoggedLocked writes rows as ordinary logged Sets, in batches.
func (db *DB) loadLoggedLocked(cs *counterState, rows *compaction.Rows, st *LoadStats) error {
	const per = 1024
	for start := 0; start < rows.Len(); start += per {
		end := min(start+per, rows.Len())
		b := &Batch{db: db, gen: db.Generation()}
		for i := start; i < end; i++ {
			vals := rows.Row(i)
			b.ops = append(b.ops, batchOp{cs: cs, id: rows.Keys[i], kind: opSet, valOff: len(b.vals), valN: len(vals)})
			b.vals = append(b.vals, vals...)
		}
		if err := db.commitLocked(b); err != nil {
			return err
		}
	}
	st.LoggedRows += rows.Len()
	return nil
}
