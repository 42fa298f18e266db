package store

// Recovery: how Open rebuilds memory from Pebble. Everything Open reads
// after Pebble is up lives here: the format check, the schema, the cold
// ranges, the newest complete checkpoint and the log after it, and the
// cleanup of what an interrupted checkpoint, seal or merge left behind.
// Nothing is written to Pebble until everything was read and verified.

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// recover rebuilds memory from the newest checkpoint and the log. It writes
// nothing to Pebble until everything was read and verified.
func (db *DB) recover() error {
	r := &db.recovery
	if v, err := db.getMeta(metaFormat); err != nil {
		return err
	} else if v == nil {
		if !db.opts.ReadOnly {
			if err := db.pdb.Set(appendMetaKey(nil, metaFormat), []byte{formatVersion}, pebble.Sync); err != nil {
				return fmt.Errorf("tally: write format: %w", err)
			}
		}
	} else if len(v) != 1 || v[0] != formatVersion {
		return fmt.Errorf("%w: meta format %v", ErrIncompatible, v)
	}

	// Schema.
	cat := db.cat.Load()
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
	db.cat.Store(cat)

	// Cold ranges.
	if err := db.loadColdRanges(cat); err != nil {
		return err
	}

	// Checkpoint.
	var ptr ckptPointer
	if v, err := db.getMeta(metaCheckpoint); err != nil {
		return err
	} else if v != nil {
		if ptr, err = decodeCkptPointer(v); err != nil {
			return err
		}
		r.CheckpointSeq = ptr.seq
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
			if rs := cs.lookupRange(op.id); rs != nil && rs.coldV != nil && seq <= rs.coldV.seq {
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

	// Everything verified: drop chunks of interrupted checkpoints and
	// blocks no cold range references (interrupted seals and merges). A
	// read-only store leaves them (readers never look at them).
	if db.opts.ReadOnly {
		return nil
	}
	b := db.pdb.NewBatch()
	defer b.Close()
	if err := db.deleteOrphanBlocks(cat, b); err != nil {
		return err
	}
	if err := b.DeleteRange(appendCheckpointPrefix(nil, 0), cprefix, nil); err != nil {
		return err
	}
	if err := b.DeleteRange(prefixEnd(cprefix), familyEnd(famCheckpoint), nil); err != nil {
		return err
	}
	return b.Commit(pebble.Sync)
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
		reader, readerID, err := db.openColdReader(cs, rid, v)
		if err != nil {
			return err
		}
		if reader.Desc().NumColumns() > len(cs.cols.Load().cols) {
			return fmt.Errorf("%w: %s range %d: blocks have %d columns, schema %d",
				ErrCorrupt, cs.name, rid, reader.Desc().NumColumns(), len(cs.cols.Load().cols))
		}
		cs.replaceRangeLocked(rid, &rangeState{id: rid, cold: reader, coldID: readerID, coldV: v})
		return nil
	})
}

// loadChunk applies one checkpoint chunk of checkpoint ckptSeq.
func (db *DB) loadChunk(cat *catalog, ckptSeq uint64, v []byte) error {
	var cs *counterState
	var rs *rangeState
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
			if h.ncols > ncols || h.rangeID > ^uint64(0)>>cs.rangeBits {
				return fmt.Errorf("%w: chunk of %s range %d has %d columns", ErrCorrupt, cs.name, h.rangeID, h.ncols)
			}
			var err error
			if rs, err = cs.ensureRangeLocked(h.rangeID<<cs.rangeBits, h.rangeRows); err != nil {
				return err
			}
			// A cold range's blocks already hold its hot rows and the
			// deltas of checkpoints older than its last seal or merge.
			skip = rs.cold != nil && (h.kind == chunkHot || ckptSeq < rs.coldV.seq)
		}
		if key > cs.keyMask {
			return fmt.Errorf("%w: chunk key %d out of range", ErrCorrupt, key)
		}
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

// deleteOrphanBlocks adds to b the deletion of every cold block that no
// cold range value references: blocks of seals that never committed, and
// blocks of merges that never committed (ids at or past nextBlockID).
func (db *DB) deleteOrphanBlocks(cat *catalog, b *pebble.Batch) error {
	it, err := db.pdb.NewIter(&pebble.IterOptions{LowerBound: []byte{famColdBlock}, UpperBound: familyEnd(famColdBlock)})
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
		var from []byte
		if cs := cat.byID[cid]; cs == nil {
			from = prefix
		} else if rs := cs.ranges.Load().m[rid]; rs == nil || rs.coldV == nil {
			from = prefix
		} else {
			from = appendColdBlockKey(nil, cid, rid, rs.coldV.nextBlockID)
		}
		if it.SeekGE(from) && string(it.Key()) < string(end) {
			if err := b.DeleteRange(from, end, nil); err != nil {
				return err
			}
		}
		ok = it.SeekGE(end)
	}
	return it.Error()
}
