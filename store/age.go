package store

// Aging and delta merges: the hand-offs between tiers.
//
// Seal (hot -> cold), crash-safe because nothing is switched until one
// synced batch says so:
//
//  1. Under DB.commit the range is frozen: a new rangeState shares the hot
//     table read-only and adds an empty delta that takes every later write.
//     F is the last committed sequence; the frozen table holds exactly the
//     state at F.
//  2. Without locks, a synced intent names the blocks the seal will write
//     (ids from one above every block of the range on disk); the frozen
//     rows are sorted and encoded into blocks, written with unsynced
//     batches under those ids.
//  3. One synced batch writes the cold range value (block map, descriptor,
//     seq F) and deletes the intent. From here the range is cold on disk.
//  4. Under DB.commit the cold version replaces the frozen table; the hot
//     memory is freed once no reader holds it.
//
// A crash before 3 leaves no range value: Open rebuilds the range hot from
// the checkpoint and the log (delta chunks and records replay into it as
// after-images), and deletes the blocks the intent names. After 3, Open
// reads blocks for the state at F, skips hot chunks of the range and log
// records ≤ F for it, and loads delta chunks of checkpoints ≥ F and records
// > F into the delta. Nothing is lost and, since records are after-images,
// nothing is counted twice.
//
// Merge (delta -> new blocks) follows the same steps: under DB.commit the
// delta is frozen beside a new one, the range's rows plus the frozen delta
// are written as blocks under new ids (under an intent), and one synced
// batch writes the new range value (seq F), deletes the merge's intent and
// writes an "obsolete" intent naming the blocks it replaced. Until that
// batch the old blocks and the frozen delta (checkpointed and logged) are
// authoritative. The replaced blocks are deleted only once no reader holds
// the old version, or by the next Open (lifetime.go).
//
// A failed job (a write error, disk full) puts the frozen rows back where
// writes go, deletes what it wrote with its intent, and leaves the range as
// it was; the scheduler retries later.

import (
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tallydb/tally/cold"
	"github.com/tallydb/tally/compaction"
)

// jobBatchBytes is the size at which a job's block batch is committed.
const jobBatchBytes = 4 << 20

type jobKind uint8

const (
	jobSeal jobKind = iota + 1
	jobMerge
)

type pendingJob struct {
	kind jobKind
	cs   *counterState
	rid  uint64
}

// Jobs returns the background jobs running now: seals and merges, and
// queued jobs being run (see QueuedJobs for pending ones too).
func (db *DB) Jobs() []compaction.Progress {
	return append(db.jobs.Running(), db.queue.tracker.Running()...)
}

// Compact runs every pending aging job and merges every non-empty cold
// delta now, and waits for them. It is for offline maintenance, scripts and
// tests; the background scheduler does the same work paced and only for
// deltas past Options.DeltaMergeRows.
func (db *DB) Compact(ctx context.Context) error {
	return db.runJobs(ctx, db.pendingJobs(db.opts.Now(), 1))
}

// SealRange ages one range of counter into the cold tier now, whatever its
// age policy says. A range that is already cold (or being sealed) is left
// as it is.
func (db *DB) SealRange(ctx context.Context, counter string, rangeID uint64) error {
	cs := db.cat.Load().byName[counter]
	if cs == nil {
		return counterNotFound(counter)
	}
	return db.runJobs(ctx, []pendingJob{{jobSeal, cs, rangeID}})
}

func (db *DB) runJobs(ctx context.Context, jobs []pendingJob) (err error) {
	defer recoverPebble(&err)
	db.jobMu.Lock()
	defer db.jobMu.Unlock()
	// Replaced blocks whose last reader let go since the last sweep.
	defer db.sweep(false)
	// Close cancels db.jobCtx; a job must stop then as well.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(db.jobCtx, cancel)
	defer stop()
	var errs []error
	for _, j := range jobs {
		if err := db.writable(); err != nil {
			return err
		}
		var err error
		switch j.kind {
		case jobSeal:
			err = db.sealRange(ctx, j.cs, j.rid)
		case jobMerge:
			err = db.mergeRange(ctx, j.cs, j.rid)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("tally: %s range %d: %w", j.cs.name, j.rid, err))
			if ctx.Err() != nil {
				break
			}
		}
	}
	return errors.Join(errs...)
}

func (db *DB) buildOptions() cold.BuildOptions {
	return cold.BuildOptions{TargetBlockSize: db.opts.ColdBlockSize, ZstdLevel: db.opts.ColdZstdLevel}
}

// blockWriter writes a job's blocks in unsynced batches.
type blockWriter struct {
	db    *DB
	batch *pebble.Batch
	key   []byte
	bytes int64
}

func (w *blockWriter) set(key, value []byte) error {
	if w.batch == nil {
		w.batch = w.db.pdb().NewBatch()
	}
	w.bytes += int64(len(value))
	if err := w.batch.Set(key, value, nil); err != nil {
		return err
	}
	if w.batch.Len() >= w.db.batchLimit(jobBatchBytes) {
		return w.flush()
	}
	return nil
}

// addBlock writes block as the next block of the range under a fresh block
// id, appending it to v's block map.
func (w *blockWriter) addBlock(v *coldRangeValue, counterID uint32, rid uint64, block []byte) error {
	if hook := w.db.opts.testHookBlockWrite; hook != nil {
		if err := hook(); err != nil {
			return err
		}
	}
	id := v.nextBlockID
	v.nextBlockID++
	v.blockIDs = append(v.blockIDs, id)
	w.key = appendColdBlockKey(w.key[:0], counterID, rid, id)
	return w.set(w.key, block)
}

func (w *blockWriter) flush() error {
	if w.batch == nil {
		return nil
	}
	err := w.db.writable()
	if err == nil {
		err = w.db.pdb().Apply(w.batch, pebble.NoSync)
	}
	w.batch.Close()
	w.batch = nil
	return err
}

func (w *blockWriter) close() {
	if w.batch != nil {
		w.batch.Close()
		w.batch = nil
	}
}

// writeBlocks encodes rows as blocks with ids from firstID on, and returns
// the new range value (not yet written).
func (db *DB) writeBlocks(ctx context.Context, cs *counterState, rid uint64, rows *compaction.Rows,
	firstID uint32, seq uint64, job *compaction.Job) (*coldRangeValue, int64, error) {
	return db.writeBlocksWith(ctx, cs, rid, rows, firstID, seq, job, db.limiter)
}

// writeBlocksWith is writeBlocks paced by lim (nil: unpaced).
func (db *DB) writeBlocksWith(ctx context.Context, cs *counterState, rid uint64, rows *compaction.Rows,
	firstID uint32, seq uint64, job *compaction.Job, lim *compaction.Limiter) (*coldRangeValue, int64, error) {
	w := &blockWriter{db: db}
	defer w.close()
	v := &coldRangeValue{seq: seq, nextBlockID: firstID}
	desc, err := compaction.Encode(ctx, rows, db.buildOptions(), lim, job, func(_ uint32, block []byte) error {
		return w.addBlock(v, cs.id, rid, block)
	})
	if err != nil {
		return nil, 0, err
	}
	if err := w.flush(); err != nil {
		return nil, 0, err
	}
	v.desc = desc
	v.blockBytes = uint64(w.bytes)
	return v, w.bytes, nil
}

func (db *DB) sealRange(ctx context.Context, cs *counterState, rid uint64) (err error) {
	// 1. Freeze.
	db.commit.Lock()
	if err := db.writable(); err != nil {
		db.commit.Unlock()
		return err
	}
	rs := cs.ranges.Load().m[rid]
	if rs == nil || rs.cold != nil || rs.delta != nil {
		db.commit.Unlock()
		return nil
	}
	delta, err := newDeltaTable(cs)
	if err != nil {
		db.commit.Unlock()
		return err
	}
	cs.replaceRangeLocked(rid, &rangeState{id: rid, hot: rs.hot, delta: delta})
	seq := db.commit.lastSeq
	db.commit.Unlock()

	job := db.jobs.Start("seal", cs.name, rid, int64(rs.hot.Len()))
	defer job.Finish()
	defer func() {
		if err != nil {
			db.unfreezeSeal(cs, rid)
		}
	}()

	// 2. Encode and write blocks, under an intent naming them.
	job.SetPhase("sort")
	rows := compaction.SortedRows(rs.hot)
	in, err := db.beginBlocks(intentSeal, cs, rid, 0)
	if err != nil {
		return err
	}
	db.step("seal: intent written")
	defer func() {
		if err != nil {
			db.abandonBlocks(in)
		}
	}()
	job.SetPhase("write blocks")
	v, _, err := db.writeBlocks(ctx, cs, rid, rows, in.first, seq, job)
	if err != nil {
		return err
	}
	db.step("seal: blocks written")
	cv, err := db.newColdVersion(cs, rid, v)
	if err != nil {
		return err
	}

	// 3. Switch on disk: the range value, and the intent gone.
	job.SetPhase("commit")
	if err := db.switchRange(cs, rid, v, in, nil); err != nil {
		return err
	}
	db.step("seal: switched")

	// 4. Switch in memory.
	db.commit.Lock()
	cur := cs.ranges.Load().m[rid]
	live := cur.delta
	if live.Len() == 0 {
		live = nil // most aged ranges are never written again
	}
	cs.replaceRangeLocked(rid, &rangeState{id: rid, delta: live, cold: cv})
	db.tierChanges.Add(1)
	db.commit.Unlock()
	return nil
}

// switchRange writes the synced batch that switches a range to value v:
// the value, the job's intent removed, and obsolete (the blocks v replaced,
// if any) noted for deletion after the last reader.
func (db *DB) switchRange(cs *counterState, rid uint64, v *coldRangeValue, job, obsolete *intent) error {
	b := db.pdb().NewBatch()
	defer b.Close()
	if err := b.Set(appendColdRangeKey(nil, cs.id, rid), appendColdRange(nil, v), nil); err != nil {
		return err
	}
	var add []*intent
	if obsolete != nil {
		add = append(add, obsolete)
	}
	return db.commitIntents(b, pebble.Sync, add, []*intent{job})
}

// unfreezeSeal undoes step 1 of a failed seal: the delta's rows go back into
// the hot table, which takes writes again.
func (db *DB) unfreezeSeal(cs *counterState, rid uint64) {
	db.commit.Lock()
	defer db.commit.Unlock()
	cur := cs.ranges.Load().m[rid]
	if cur == nil || cur.cold != nil || cur.delta == nil {
		return
	}
	var err error
	cur.delta.Range(func(key uint64, row []uint64) bool {
		if row[0] == deltaDeleted {
			err = cur.hot.Delete(key)
		} else {
			err = cur.hot.Put(key, row[1:])
		}
		return err == nil
	})
	if err != nil {
		db.setFailed(fmt.Errorf("unfreeze %s range %d: %w", cs.name, rid, err))
		return
	}
	cs.replaceRangeLocked(rid, &rangeState{id: rid, hot: cur.hot})
}

func (db *DB) mergeRange(ctx context.Context, cs *counterState, rid uint64) (err error) {
	// 1. Freeze the delta.
	db.commit.Lock()
	if err := db.writable(); err != nil {
		db.commit.Unlock()
		return err
	}
	rs := cs.ranges.Load().m[rid]
	if rs == nil || rs.cold == nil || rs.frozen != nil || rs.delta == nil || rs.delta.Len() == 0 {
		db.commit.Unlock()
		return nil
	}
	// Later writes create a new delta (ensureDeltaLocked).
	cs.replaceRangeLocked(rid, &rangeState{id: rid, cold: rs.cold, frozen: rs.delta})
	seq := db.commit.lastSeq
	ncols := len(cs.cols.Load().cols)
	db.commit.Unlock()

	job := db.jobs.Start("merge", cs.name, rid, int64(rs.cold.Desc().Rows())+int64(rs.delta.Len()))
	defer job.Finish()
	defer func() {
		if err != nil {
			db.unfreezeMerge(cs, rid)
		}
	}()
	// The job reads the old version's blocks without a reference: the
	// version stays current until step 4, which only this job can do.
	old := rs.cold
	in, err := db.beginBlocks(intentMerge, cs, rid, old.v.nextBlockID)
	if err != nil {
		return err
	}
	db.step("merge: intent written")
	defer func() {
		if err != nil {
			db.abandonBlocks(in)
		}
	}()

	// 2. Merge: rewrite only the blocks the delta touches; untouched
	// blocks keep their storage ids.
	job.SetPhase("merge")
	w := &blockWriter{db: db}
	defer w.close()
	v := &coldRangeValue{seq: seq, nextBlockID: in.first}
	reused := make([]bool, len(old.v.blockIDs))
	nreused := 0
	desc, err := compaction.Merge(ctx, old.reader, compaction.SortedDelta(rs.delta), ncols, db.buildOptions(), db.limiter, job,
		func(no uint32, reuse int, block []byte) error {
			if reuse >= 0 {
				v.blockIDs = append(v.blockIDs, old.v.blockIDs[reuse])
				reused[reuse] = true
				nreused++
				return nil
			}
			return w.addBlock(v, cs.id, rid, block)
		})
	if err != nil {
		return err
	}
	if err := w.flush(); err != nil {
		return err
	}
	db.step("merge: blocks written")
	v.desc = desc
	// Reused blocks' sizes are not known one by one: estimate them from the
	// old average (blockBytes only feeds stats).
	if n := len(old.v.blockIDs); n > 0 {
		v.blockBytes = old.v.blockBytes*uint64(nreused)/uint64(n) + uint64(w.bytes)
	} else {
		v.blockBytes = uint64(w.bytes)
	}
	cv, err := db.newColdVersion(cs, rid, v)
	if err != nil {
		return err
	}

	// 3. Switch on disk, in one synced batch: the new value, the job's
	// intent gone, and the replaced blocks named by an obsolete intent.
	// They are deleted once no reader holds the old version (sweep).
	job.SetPhase("commit")
	var replaced []uint32
	for i, id := range old.v.blockIDs {
		if !reused[i] {
			replaced = append(replaced, id)
		}
	}
	var obsolete *intent
	if len(replaced) > 0 {
		obsolete = db.newIntent(&intent{kind: intentObsolete, counterID: cs.id, rangeID: rid, ids: replaced})
	}
	if err := db.switchRange(cs, rid, v, in, obsolete); err != nil {
		return err
	}
	db.step("merge: switched")

	// 4. Switch in memory, then retire the old version: its replaced
	// blocks go when its last reader lets go.
	db.commit.Lock()
	cur := cs.ranges.Load().m[rid]
	cs.replaceRangeLocked(rid, &rangeState{id: rid, cold: cv, delta: cur.delta})
	db.tierChanges.Add(1)
	db.commit.Unlock()
	db.retire(old, cv, obsolete)
	db.step("merge: retired")
	db.sweep(false)
	return nil
}

// unfreezeMerge undoes step 1 of a failed merge: frozen rows not overwritten
// since go back into the live delta.
func (db *DB) unfreezeMerge(cs *counterState, rid uint64) {
	db.commit.Lock()
	defer db.commit.Unlock()
	cur := cs.ranges.Load().m[rid]
	if cur == nil || cur.frozen == nil {
		return
	}
	if cur.delta == nil { // no write since the freeze: the frozen delta is the delta
		cs.replaceRangeLocked(rid, &rangeState{id: rid, cold: cur.cold, delta: cur.frozen})
		return
	}
	var err error
	var tmp [MaxColumns + 1]uint64
	cur.frozen.Range(func(key uint64, row []uint64) bool {
		if _, ok := cur.delta.Get(key, tmp[:0]); !ok {
			err = cur.delta.Put(key, row)
		}
		return err == nil
	})
	if err != nil {
		db.setFailed(fmt.Errorf("unfreeze merge %s range %d: %w", cs.name, rid, err))
		return
	}
	cs.replaceRangeLocked(rid, &rangeState{id: rid, cold: cur.cold, delta: cur.delta})
}
