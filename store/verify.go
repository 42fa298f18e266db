package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tallydb/tally/cold"
)

// maxVerifyProblems bounds the problems Verify reports.
const maxVerifyProblems = 100

// Verify walks everything on disk and reports damage: every schema record,
// every family key (layout and the family's decoders), job record and
// source mark, data under a prefix no family declared,
// every cold range (its value, descriptor, every block's checksum and its
// agreement with the index and presence set), the chunks of the current
// checkpoint and every log record. Problems wrap ErrCorrupt and name what is
// damaged; at most 100 are reported. It reads a snapshot, so it may run while
// the store is in use.
func (db *DB) Verify(ctx context.Context) error {
	if db.closed.Load() {
		return ErrClosed
	}
	snap := db.pdb.NewSnapshot()
	defer snap.Close()
	var problems []error
	report := func(err error) bool {
		if !errors.Is(err, ErrCorrupt) {
			err = fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		problems = append(problems, err)
		return len(problems) < maxVerifyProblems
	}
	scan := func(lo, hi []byte, fn func(k, v []byte) bool) error {
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

	if err := db.verifyFamilies(ctx, snap, report); err != nil {
		return err
	}

	db.ckpt.Lock()
	ckptSeq := db.ckpt.seq
	db.ckpt.Unlock()
	cp := appendCheckpointPrefix(nil, ckptSeq)
	if err := scan(cp, prefixEnd(cp), func(k, v []byte) bool {
		if _, err := decodeChunk(v, func(*chunkHeader, uint64, []uint64) error { return nil }); err != nil {
			return report(fmt.Errorf("checkpoint chunk %x: %w", k, err))
		}
		return true
	}); err != nil {
		return err
	}
	if err := scan([]byte{famLog}, familyEnd(famLog), func(k, v []byte) bool {
		if err := decodeRecord(v, func(rowImage) error { return nil }); err != nil {
			seq, _ := decodeLogKey(k)
			return report(fmt.Errorf("log record %d: %w", seq, err))
		}
		return true
	}); err != nil {
		return err
	}
	return errors.Join(problems...)
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
