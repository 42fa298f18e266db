package store

// Recovery: how Open rebuilds memory from Pebble. Everything Open reads
// after Pebble is up lives here: the format check, the schema, the cold
// ranges, the intents, the newest complete checkpoint and the log after it,
// and the cleanup of what interrupted checkpoints, seals, merges and loads
// provably left behind (their intents, see lifetime.go). Data no value or
// intent accounts for is never deleted. Nothing is written to Pebble until
// everything was read and verified.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// recover rebuilds memory from the newest checkpoint and the log. It writes
// nothing to Pebble until everything was read and verified.
//
// It builds a new catalog and publishes it when everything was read (a
// reopen's readers keep the old one until then, and after a failure).
func (db *DB) recover() (err error) {
	r := &db.recovery
	cat := &catalog{byName: map[string]*counterState{}, byID: map[uint32]*counterState{}}
	defer func() {
		if err == nil {
			db.cat.Store(cat)
		}
	}()
	formatOld := false
	if v, err := db.getMeta(metaFormat); err != nil {
		return err
	} else if v == nil {
		if !db.opts.ReadOnly {
			if err := db.pdb().Set(appendMetaKey(nil, metaFormat), []byte{formatVersion}, pebble.Sync); err != nil {
				return fmt.Errorf("tally: write format: %w", err)
			}
		}
	} else if len(v) != 1 || v[0] < minFormatVersion || v[0] > formatVersion {
		return fmt.Errorf("%w: meta format %v", ErrIncompatible, v)
	} else {
		formatOld = v[0] < formatVersion
	}

	// Schema.
	prefix := appendMetaKey(nil, metaCounter)
	if err := db.scan(prefix, prefixEnd(prefix), func(k, v []byte) error {
		ci, err := decodeSchema(v)
		if err != nil {
			return fmt.Errorf("meta key %q: %w", k, err)
		}
		if cat.byName[ci.Name] != nil || cat.byID[ci.ID] != nil {
			return fmt.Errorf("%w: duplicate counter %q (id %d) in schema", ErrCorrupt, ci.Name, ci.ID)
		}
		cat = cat.with(newCounterState(ci))
		return nil
	}); err != nil {
		return err
	}
	if err := db.loadRangeBits(cat); err != nil {
		return err
	}

	// Families, queued jobs, idempotent-write sources.
	freshFamilies, err := db.loadFamilies(db.opts.Families)
	if err != nil {
		return err
	}
	if err := db.loadQueue(); err != nil {
		return err
	}
	if err := db.loadSources(); err != nil {
		return err
	}

	// Cold ranges.
	if err := db.loadColdRanges(cat); err != nil {
		return err
	}

	// Intents of interrupted operations.
	intents, err := db.loadIntents()
	if err != nil {
		return err
	}

	// Checkpoint.
	havePointer := false
	var ptr ckptPointer
	if v, err := db.getMeta(metaCheckpoint); err != nil {
		return err
	} else if v != nil {
		havePointer = true
		if ptr, err = decodeCkptPointer(v); err != nil {
			return err
		}
		r.CheckpointSeq = ptr.seq
	}
	if err := db.accountChunks(intents, havePointer); err != nil {
		return err
	}
	cprefix := appendCheckpointPrefix(nil, r.CheckpointSeq)
	if r.CheckpointSeq > 0 {
		var gaps chunkGaps
		if err := db.scan(cprefix, prefixEnd(cprefix), func(k, v []byte) error {
			if err := gaps.check(k); err != nil {
				return err
			}
			r.ChunksLoaded++
			if err := db.loadChunk(cat, r.CheckpointSeq, v); err != nil {
				return fmt.Errorf("checkpoint chunk %x: %w", k, err)
			}
			return nil
		}); err != nil {
			return err
		}
		if ptr.hasChunks && uint64(r.ChunksLoaded) != ptr.chunks {
			return fmt.Errorf("%w: checkpoint %d wrote %d chunks, %d are left", ErrCorrupt, ptr.seq, ptr.chunks, r.ChunksLoaded)
		}
	}

	// Log replay.
	r.LastSeq = r.CheckpointSeq
	if err := db.scan(appendLogKey(nil, r.CheckpointSeq+1), familyEnd(famLog), func(k, v []byte) error {
		seq, ok := decodeLogKey(k)
		if !ok {
			return fmt.Errorf("%w: log key %x", ErrCorrupt, k)
		}
		if seq != r.LastSeq+1 {
			return logGap(r.LastSeq+1, seq)
		}
		err := decodeRecord(v, func(op rowImage) error {
			cs := cat.byID[op.counterID]
			if cs == nil {
				return fmt.Errorf("%w: record for unknown counter %d", ErrCorrupt, op.counterID)
			}
			if len(op.vals) > len(cs.cols.Load().cols) {
				return fmt.Errorf("%w: record for %s has %d values", ErrCorrupt, cs.name, len(op.vals))
			}
			if rs := cs.lookupRange(op.id); rs != nil && rs.cold != nil && seq <= rs.cold.v.seq {
				return nil // already in the range's blocks
			}
			return cs.applyLocked(op.id, op.vals)
		})
		if err != nil {
			return fmt.Errorf("log record %d: %w", seq, err)
		}
		r.RecordsReplayed++
		db.logBytes.Add(int64(len(k) + len(v)))
		r.LastSeq = seq
		return nil
	}); err != nil {
		return err
	}
	db.commit.lastSeq = r.LastSeq
	db.ckpt.seq = r.CheckpointSeq
	db.ckpt.last = time.Now()
	db.logRecords.Store(int64(r.RecordsReplayed))

	// Everything verified: resolve the intents, in one synced batch. A
	// read-only store leaves them (readers never look at what they name),
	// and does not look for unaccounted blocks either: that seeks through
	// every cold range's blocks, and a read-only Open must work on a store
	// whose damage only Verify need find.
	if db.opts.ReadOnly {
		return nil
	}
	if err := db.accountBlocks(cat, intents); err != nil {
		return err
	}
	b := db.pdb().NewBatch()
	defer b.Close()
	for _, in := range intents {
		if err := db.resolveIntent(cat, in, havePointer, b); err != nil {
			return err
		}
		r.IntentsResolved++
	}
	for _, rec := range freshFamilies {
		if err := b.Set(appendFamilyMetaKey(nil, rec.prefix), appendFamilyRecord(nil, rec), nil); err != nil {
			return err
		}
		db.families.persist[rec.prefix] = rec
	}
	if formatOld {
		if err := b.Set(appendMetaKey(nil, metaFormat), []byte{formatVersion}, nil); err != nil {
			return err
		}
	}
	if b.Empty() {
		return nil
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return err
	}
	if len(intents) > 0 {
		db.flushRangeDels() // resolving intents may range-delete blocks
	}
	return nil
}

// loadIntents reads every intent and sets the next intent id past them.
func (db *DB) loadIntents() ([]*intent, error) {
	var out []*intent
	p := appendMetaKey(nil, metaIntent)
	err := db.scan(p, prefixEnd(p), func(k, v []byte) error {
		id, ok := decodeIntentKey(k)
		if !ok {
			return fmt.Errorf("%w: intent key %x", ErrCorrupt, k)
		}
		in, err := decodeIntent(v)
		if err != nil {
			return fmt.Errorf("intent %d: %w", id, err)
		}
		in.id = id
		out = append(out, in)
		db.life.nextIntent.Store(max(db.life.nextIntent.Load(), id))
		return nil
	})
	return out, err
}

// accountChunks checks that every checkpoint's chunks are accounted for:
// the pointed checkpoint's, or an interrupted one's (its intent). With no
// pointer, unaccounted chunks mean the pointer was lost and reading on
// would give zeros: Open refuses. Chunks of another checkpoint are left on
// disk and listed (Verify reports them).
func (db *DB) accountChunks(intents []*intent, havePointer bool) error {
	r := &db.recovery
	interrupted := map[uint64]bool{}
	for _, in := range intents {
		if in.kind == intentCheckpoint {
			interrupted[in.seq] = true
		}
	}
	return forEachChunkSeq(db.pdb(), func(seq uint64) error {
		switch {
		case havePointer && seq == r.CheckpointSeq, interrupted[seq]:
			return nil
		case !havePointer:
			return fmt.Errorf("%w: chunks of checkpoint %d exist but the checkpoint pointer (meta %q) is missing",
				ErrCorrupt, seq, metaCheckpoint)
		}
		r.Unaccounted = append(r.Unaccounted, fmt.Sprintf("chunks of checkpoint %d (the pointer names %d)", seq, r.CheckpointSeq))
		return nil
	})
}

// forEachChunkSeq calls fn with the sequence of every checkpoint that has
// chunks in r, in order.
func forEachChunkSeq(r pebble.Reader, fn func(seq uint64) error) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte{famCheckpoint}, UpperBound: familyEnd(famCheckpoint)})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; {
		k := it.Key()
		if len(k) < 9 {
			return fmt.Errorf("%w: checkpoint chunk key %x", ErrCorrupt, k)
		}
		seq := binary.BigEndian.Uint64(k[1:9])
		if err := fn(seq); err != nil {
			return err
		}
		ok = it.SeekGE(appendCheckpointPrefix(nil, seq+1))
		if seq == ^uint64(0) {
			break
		}
	}
	return it.Error()
}

// accountBlocks lists, without deleting anything, the cold blocks no value
// or intent accounts for that Open can see cheaply (one seek per range):
// blocks of a range with no value, and blocks at or above a value's
// nextBlockID. Verify finds the rest (ids below nextBlockID not in the
// block map) with a full walk.
func (db *DB) accountBlocks(cat *catalog, intents []*intent) error {
	r := &db.recovery
	cover := map[rangeKey]uint32{} // lowest first of a block intent
	for _, in := range intents {
		if in.blocks() {
			k := rangeKey{in.counterID, in.rangeID}
			if f, ok := cover[k]; !ok || in.first < f {
				cover[k] = in.first
			}
		}
	}
	it, err := db.pdb().NewIter(&pebble.IterOptions{LowerBound: []byte{famColdBlock}, UpperBound: familyEnd(famColdBlock)})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; {
		k := it.Key()
		if len(k) != 17 {
			return fmt.Errorf("%w: cold block key %x", ErrCorrupt, k)
		}
		cid, rid := binary.BigEndian.Uint32(k[1:]), binary.BigEndian.Uint64(k[5:])
		prefix := appendColdBlockPrefix(nil, cid, rid)
		end := prefixEnd(prefix)
		hi := end
		if f, ok := cover[rangeKey{cid, rid}]; ok {
			hi = appendColdBlockKey(nil, cid, rid, f)
		}
		var next uint32 // first id no value accounts for
		what := "blocks of a range with no cold range value"
		if cs := cat.byID[cid]; cs != nil {
			if rs := cs.ranges.Load().m[rid]; rs != nil && rs.cold != nil {
				next = rs.cold.v.nextBlockID
				what = fmt.Sprintf("blocks at or above the range's next block id %d", next)
			}
		}
		if it.SeekGE(appendColdBlockKey(nil, cid, rid, next)) && bytes.Compare(it.Key(), hi) < 0 {
			r.Unaccounted = append(r.Unaccounted, fmt.Sprintf("counter %d range %d: %s (from id %d)",
				cid, rid, what, binary.BigEndian.Uint32(it.Key()[13:])))
		}
		ok = it.SeekGE(end)
	}
	return it.Error()
}

// resolveIntent adds to b the cleanup of what intent in's operation left,
// and the deletion of the intent (see lifetime.go for the rules). It runs
// when no reader exists. Blocks the current value references are never
// deleted.
func (db *DB) resolveIntent(cat *catalog, in *intent, havePointer bool, b *pebble.Batch) error {
	ref := func(cid uint32, rid uint64) map[uint32]bool {
		m := map[uint32]bool{}
		if cs := cat.byID[cid]; cs != nil {
			if rs := cs.ranges.Load().m[rid]; rs != nil && rs.cold != nil {
				for _, id := range rs.cold.v.blockIDs {
					m[id] = true
				}
			}
		}
		return m
	}
	switch {
	case in.blocks():
		refd := ref(in.counterID, in.rangeID)
		var keep []uint64
		for id := range refd {
			if id >= in.first {
				keep = append(keep, uint64(id))
			}
		}
		slices.Sort(keep)
		// Delete [first, end of range) minus the referenced ids.
		key := func(id uint64) []byte {
			if id > math.MaxUint32 {
				return prefixEnd(appendColdBlockPrefix(nil, in.counterID, in.rangeID))
			}
			return appendColdBlockKey(nil, in.counterID, in.rangeID, uint32(id))
		}
		from := uint64(in.first)
		for _, id := range append(keep, math.MaxUint32+1) {
			if id > from {
				if err := b.DeleteRange(key(from), key(id), nil); err != nil {
					return err
				}
			}
			from = id + 1
		}
	case in.kind == intentObsolete:
		refd := ref(in.counterID, in.rangeID)
		for _, id := range in.ids {
			if !refd[id] {
				if err := b.Delete(appendColdBlockKey(nil, in.counterID, in.rangeID, id), nil); err != nil {
					return err
				}
			}
		}
	case in.kind == intentCheckpoint:
		// A later attempt at the same sequence may have finished: then
		// these are the live chunks.
		if !havePointer || in.seq != db.recovery.CheckpointSeq {
			if err := b.DeleteRange(appendCheckpointPrefix(nil, in.seq), appendCheckpointPrefix(nil, in.seq+1), nil); err != nil {
				return err
			}
		}
	}
	return b.Delete(appendIntentKey(nil, in.id), nil)
}

// Sequences without gaps: the log after a checkpoint holds every sequence
// from the checkpoint's on (writers take them under DB.commit and a failed
// commit takes none), and the chunks of one range of a checkpoint are
// numbered from 0. A missing key in the middle of either (damage Pebble
// cannot see) would otherwise be skipped silently. A missing last record
// or last chunk leaves no gap; docs/FAULTS.md lists that case.

func logGap(want, got uint64) error {
	return fmt.Errorf("%w: log record %d is missing (the log goes on at %d)", ErrCorrupt, want, got)
}

// chunkGaps checks the chunk numbers of a checkpoint's keys, in key order.
type chunkGaps struct {
	rangeKey []byte // counter u32 | range u64 of the current range
	next     uint32
}

func (g *chunkGaps) check(k []byte) error {
	if len(k) != 25 {
		return fmt.Errorf("%w: checkpoint chunk key %x", ErrCorrupt, k)
	}
	if rk := k[9:21]; string(rk) != string(g.rangeKey) {
		g.rangeKey, g.next = append(g.rangeKey[:0], rk...), 0
	}
	if n := binary.BigEndian.Uint32(k[21:]); n != g.next {
		return fmt.Errorf("%w: checkpoint %d: chunk %d of counter %d range %d is missing",
			ErrCorrupt, binary.BigEndian.Uint64(k[1:]), g.next, binary.BigEndian.Uint32(k[9:]), binary.BigEndian.Uint64(k[13:]))
	}
	g.next++
	return nil
}

// loadColdRanges opens every cold range of the catalog's counters with an
// empty delta.
func (db *DB) loadColdRanges(cat *catalog) error {
	return db.scan([]byte{famColdRange}, familyEnd(famColdRange), func(k, val []byte) error {
		cid, rid, ok := decodeColdRangeKey(k)
		if !ok {
			return fmt.Errorf("%w: cold range key %x", ErrCorrupt, k)
		}
		cs := cat.byID[cid]
		if cs == nil {
			return fmt.Errorf("%w: cold range of unknown counter %d", ErrCorrupt, cid)
		}
		v, err := decodeColdRange(val)
		if err != nil {
			return fmt.Errorf("%s range %d: %w", cs.name, rid, err)
		}
		cv, err := db.newColdVersion(cs, rid, v)
		if err != nil {
			return err
		}
		if cv.Desc().NumColumns() > len(cs.cols.Load().cols) {
			return fmt.Errorf("%w: %s range %d: blocks have %d columns, schema %d",
				ErrCorrupt, cs.name, rid, cv.Desc().NumColumns(), len(cs.cols.Load().cols))
		}
		cs.replaceRangeLocked(rid, &rangeState{id: rid, cold: cv})
		return nil
	})
}

// loadChunk applies one checkpoint chunk of checkpoint ckptSeq.
func (db *DB) loadChunk(cat *catalog, ckptSeq uint64, v []byte) error {
	var cs *counterState
	var rs *rangeState
	var base, cmask, mask uint64
	skip := false
	_, err := decodeChunk(v, func(h *chunkHeader, key uint64, vals []uint64) error {
		if cs == nil {
			if cs = cat.byID[h.counterID]; cs == nil {
				return fmt.Errorf("%w: chunk of unknown counter %d", ErrCorrupt, h.counterID)
			}
			ncols := len(cs.cols.Load().cols)
			if h.kind == chunkDelta {
				ncols++
			}
			// A chunk cut before its counter's ranges were widened (or a
			// version 1 chunk, at the schema's width) lies in one range of
			// the current width: its ids are rebased (widen.go).
			bits, cbits := cs.rangeBits(), h.bits
			if cbits == 0 {
				cbits = cs.schemaBits
			}
			if h.ncols > ncols || cbits > bits || h.rangeID > ^uint64(0)>>cbits {
				return fmt.Errorf("%w: chunk of %s range %d (%d bits, counter %d) has %d columns",
					ErrCorrupt, cs.name, h.rangeID, cbits, bits, h.ncols)
			}
			base, cmask, mask = h.rangeID<<cbits, 1<<cbits-1, 1<<bits-1
			var err error
			if rs, err = cs.ensureRangeLocked(base, h.rangeRows); err != nil {
				return err
			}
			// A cold range's blocks already hold its hot rows and the
			// deltas of checkpoints older than its last seal or merge.
			skip = rs.cold != nil && (h.kind == chunkHot || ckptSeq < rs.cold.v.seq)
		}
		if key > cmask {
			return fmt.Errorf("%w: chunk key %d out of range", ErrCorrupt, key)
		}
		key = (base | key) & mask
		if skip {
			return nil
		}
		db.recovery.RowsLoaded++
		switch {
		case h.kind == chunkHot:
			return rs.hot.Put(key, vals)
		case h.ncols == 0:
			return fmt.Errorf("%w: delta chunk without marker column", ErrCorrupt)
		case rs.cold != nil:
			var err error
			if rs, err = cs.ensureDeltaLocked(rs); err != nil {
				return err
			}
			return rs.delta.Put(key, vals)
		case vals[0] == deltaDeleted:
			// A delta of a seal that never finished: back into hot.
			return rs.hot.Delete(key)
		default:
			return rs.hot.Put(key, vals[1:])
		}
	})
	return err
}
