package store

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tallydb/tally/cold"
)

// maxVerifyProblems bounds the problems Verify reports.
const maxVerifyProblems = 100

// Verify walks everything on disk and reports damage: every block of every
// live sstable of Pebble (checksums of data, index and meta blocks), every
// schema record, every cold range (its value, descriptor, every block's
// checksum and its agreement with the index and presence set), the chunks of
// the current checkpoint and every log record. Problems wrap ErrCorrupt and
// name what is damaged (the file, for Pebble's files); at most 100 are
// reported. It reads a snapshot, so it may run while the store is in use.
//
// Damage in the WAL and the MANIFEST is found by Open, before Pebble replays
// them (see docs/FAULTS.md).
func (db *DB) Verify(ctx context.Context) (err error) {
	defer recoverPebble(&err)
	if db.closed.Load() {
		return ErrClosed
	}
	var problems []error
	report := func(err error) bool {
		if !errors.Is(err, ErrCorrupt) {
			err = fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		problems = append(problems, err)
		return len(problems) < maxVerifyProblems
	}
	if err := db.verifyTables(ctx, report); err != nil {
		return err
	}
	snap := db.pdb.NewSnapshot()
	defer snap.Close()
	// scan reads [lo, hi); damage Pebble finds in the middle (a block
	// whose checksum fails) is a problem of its own, and the family's scan
	// stops there.
	scan := func(lo, hi []byte, fn func(k, v []byte) bool) error {
		err := func() error {
			it, err := snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
			if err != nil {
				return err
			}
			defer it.Close()
			for ok := it.First(); ok; ok = it.Next() {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				v, err := it.ValueAndErr()
				if err != nil {
					return err
				}
				if !fn(it.Key(), v) {
					break
				}
			}
			return it.Error()
		}()
		if err := pebbleErr(err); errors.Is(err, ErrCorrupt) {
			report(fmt.Errorf("reading keys %x..%x: %w", lo, hi, err))
			return nil
		}
		return err
	}

	cat := db.cat.Load()
	p := appendMetaKey(nil, metaCounter)
	if err := scan(p, prefixEnd(p), func(k, v []byte) bool {
		if _, err := decodeSchema(v); err != nil {
			return report(fmt.Errorf("schema %x: %w", k, err))
		}
		return true
	}); err != nil {
		return err
	}

	if err := scan([]byte{famColdRange}, familyEnd(famColdRange), func(k, v []byte) bool {
		cid, rid, ok := decodeColdRangeKey(k)
		cs := cat.byID[cid]
		if !ok || cs == nil {
			return report(fmt.Errorf("cold range key %x of no counter", k))
		}
		where := fmt.Sprintf("%s range %d", cs.name, rid)
		cv, err := decodeColdRange(v)
		if err != nil {
			return report(fmt.Errorf("%s: %w", where, err))
		}
		r, _, err := db.openColdReader(cs, rid, cv)
		if err != nil {
			return report(err)
		}
		// Read blocks from the snapshot, bypassing the cache.
		src := &snapshotBlocks{snap: snap, counterID: cid, rangeID: rid, ids: cv.blockIDs}
		if err := cold.NewReader(0, r.Desc(), src, nil).Verify(); err != nil {
			return report(fmt.Errorf("%s: %w", where, err))
		}
		return true
	}); err != nil {
		return err
	}

	db.ckpt.Lock()
	ckptSeq := db.ckpt.seq
	db.ckpt.Unlock()
	cp := appendCheckpointPrefix(nil, ckptSeq)
	var gaps chunkGaps
	var chunks uint64
	if err := scan(cp, prefixEnd(cp), func(k, v []byte) bool {
		chunks++
		if err := gaps.check(k); err != nil && !report(err) {
			return false
		}
		if _, err := decodeChunk(v, func(*chunkHeader, uint64, []uint64) error { return nil }); err != nil {
			return report(fmt.Errorf("checkpoint chunk %x: %w", k, err))
		}
		return true
	}); err != nil {
		return err
	}
	if v, closer, err := snap.Get(appendMetaKey(nil, metaCheckpoint)); err == nil {
		ptr, err := decodeCkptPointer(v)
		closer.Close()
		switch {
		case err != nil:
			report(fmt.Errorf("checkpoint pointer: %w", err))
		case ptr.seq == ckptSeq && ptr.hasChunks && ptr.chunks != chunks:
			report(fmt.Errorf("checkpoint %d wrote %d chunks, %d are left", ptr.seq, ptr.chunks, chunks))
		}
	} else if !errors.Is(err, pebble.ErrNotFound) {
		report(fmt.Errorf("checkpoint pointer: %w", pebbleErr(err)))
	}
	prev := ckptSeq
	if err := scan([]byte{famLog}, familyEnd(famLog), func(k, v []byte) bool {
		seq, _ := decodeLogKey(k)
		if seq > prev+1 && !report(logGap(prev+1, seq)) {
			return false
		}
		prev = max(prev, seq)
		if err := decodeRecord(v, func(rowImage) error { return nil }); err != nil {
			return report(fmt.Errorf("log record %d: %w", seq, err))
		}
		return true
	}); err != nil {
		return err
	}
	return errors.Join(problems...)
}

// verifyTables reads every block of every live sstable and reports the
// files whose checksums fail. A table a compaction removes meanwhile is
// skipped (the compaction read it).
func (db *DB) verifyTables(ctx context.Context, report func(error) bool) error {
	levels, err := db.pdb.SSTables()
	if err != nil {
		return pebbleErr(err)
	}
	fs := db.opts.FS
	seen := map[uint64]bool{}
	for _, level := range levels {
		for _, t := range level {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			num := uint64(t.BackingSSTNum)
			if seen[num] {
				continue
			}
			seen[num] = true
			path := fs.PathJoin(db.dir, pebbleDir, fmt.Sprintf("%06d.sst", num))
			err := verifyTable(fs, path)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil && !report(fmt.Errorf("%w: %s: %v", ErrCorrupt, path, firstLine(err.Error()))) {
				return nil
			}
		}
	}
	return nil
}

// verifyTable checks the checksum of every block of one sstable.
func verifyTable(fs vfs.FS, path string) error {
	f, err := fs.Open(path)
	if err != nil {
		return err
	}
	readable, err := sstable.NewSimpleReadable(f)
	if err != nil {
		f.Close()
		return err
	}
	r, err := sstable.NewReader(context.Background(), readable, sstable.ReaderOptions{})
	if err != nil {
		readable.Close()
		return err
	}
	defer r.Close()
	return r.ValidateBlockChecksums()
}

// snapshotBlocks reads cold blocks from a Pebble snapshot.
type snapshotBlocks struct {
	snap      *pebble.Snapshot
	counterID uint32
	rangeID   uint64
	ids       []uint32
}

func (s *snapshotBlocks) ReadBlock(n uint32) ([]byte, error) {
	return readBlock(s.snap, s.counterID, s.rangeID, s.ids, n)
}
