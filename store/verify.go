package store

import (
	"context"
	"encoding/binary"
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
// checkpoint, every log record and every intent. It also reports data that
// nothing accounts for: cold blocks no range value references and no
// intent names (including every block of a range with no value), and
// checkpoint chunks of a checkpoint that is neither the pointed one nor an
// interrupted one (lifetime.go). Problems wrap ErrCorrupt and name what is
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

	// Intents: what interrupted or running operations may leave.
	var intents []*intent
	ip := appendMetaKey(nil, metaIntent)
	if err := scan(ip, prefixEnd(ip), func(k, v []byte) bool {
		id, ok := decodeIntentKey(k)
		in, err := decodeIntent(v)
		if !ok || err != nil {
			return report(fmt.Errorf("intent key %x: %v", k, err))
		}
		in.id = id
		intents = append(intents, in)
		return true
	}); err != nil {
		return err
	}

	values := map[rangeKey]*coldRangeValue{}
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
		values[rangeKey{cid, rid}] = cv
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

	if len(problems) < maxVerifyProblems {
		if err := verifyBlocksAccounted(snap, cat, values, intents, report); err != nil {
			return err
		}
	}

	// The checkpoint the snapshot's pointer names, and chunks of no
	// checkpoint.
	var ckptSeq uint64
	havePointer := false
	if v, closer, err := snap.Get(appendMetaKey(nil, metaCheckpoint)); err == nil {
		ckptSeq, err = decodeCkptPointer(v)
		closer.Close()
		if err != nil {
			report(fmt.Errorf("checkpoint pointer: %w", err))
		} else {
			havePointer = true
		}
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return err
	}
	running := map[uint64]bool{}
	for _, in := range intents {
		if in.kind == intentCheckpoint {
			running[in.seq] = true
		}
	}
	if err := forEachChunkSeq(snap, func(seq uint64) error {
		if !(havePointer && seq == ckptSeq) && !running[seq] {
			report(fmt.Errorf("chunks of checkpoint %d: no checkpoint pointer (havePointer %v, names %d) or intent accounts for them",
				seq, havePointer, ckptSeq))
		}
		return nil
	}); err != nil {
		return err
	}
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

type rangeKey struct {
	cid uint32
	rid uint64
}

// verifyBlocksAccounted walks every cold block key and reports, per range,
// the blocks that neither the range's value references nor an intent
// names.
func verifyBlocksAccounted(snap *pebble.Snapshot, cat *catalog, values map[rangeKey]*coldRangeValue,
	intents []*intent, report func(error) bool) error {
	cover := map[rangeKey]uint32{}          // lowest first of a block intent
	named := map[rangeKey]map[uint32]bool{} // obsolete intents' ids
	for _, in := range intents {
		k := rangeKey{in.counterID, in.rangeID}
		switch {
		case in.blocks():
			if f, ok := cover[k]; !ok || in.first < f {
				cover[k] = in.first
			}
		case in.kind == intentObsolete:
			if named[k] == nil {
				named[k] = map[uint32]bool{}
			}
			for _, id := range in.ids {
				named[k][id] = true
			}
		}
	}
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: []byte{famColdBlock}, UpperBound: familyEnd(famColdBlock)})
	if err != nil {
		return err
	}
	defer it.Close()
	var cur rangeKey
	var refd map[uint32]bool
	var n int
	var lo, hi uint32
	flush := func() bool {
		if n == 0 {
			return true
		}
		what := fmt.Sprintf("counter %d", cur.cid)
		if cs := cat.byID[cur.cid]; cs != nil {
			what = cs.name
		}
		why := "no cold range value references them and no intent names them"
		if values[cur] == nil {
			why = "the range has no cold range value and no intent names them"
		}
		n0 := n
		n = 0
		return report(fmt.Errorf("%s range %d: %d cold blocks (ids %d-%d): %s", what, cur.rid, n0, lo, hi, why))
	}
	first := true
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != 17 {
			if !report(fmt.Errorf("cold block key %x", k)) {
				return nil
			}
			continue
		}
		rk := rangeKey{binary.BigEndian.Uint32(k[1:]), binary.BigEndian.Uint64(k[5:])}
		id := binary.BigEndian.Uint32(k[13:])
		if first || rk != cur {
			if !flush() {
				return nil
			}
			first, cur = false, rk
			refd = map[uint32]bool{}
			if v := values[rk]; v != nil {
				for _, b := range v.blockIDs {
					refd[b] = true
				}
			}
		}
		if f, ok := cover[rk]; refd[id] || named[rk][id] || ok && id >= f {
			continue
		}
		if n == 0 {
			lo = id
		}
		hi = id
		n++
	}
	if err := it.Error(); err != nil {
		return err
	}
	flush()
	return nil
}
