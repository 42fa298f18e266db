package store

import (
	"context"
	"encoding/binary"
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
// schema record, every family key (layout and the family's decoders), job
// record and source mark, data under a prefix no family declared, every
// cold range (its value, descriptor, every block's checksum and its
// agreement with the index and presence set), the chunks of the current
// checkpoint, every log record and every intent. It also reports data that
// nothing accounts for: cold blocks no range value references and no
// intent names (including every block of a range with no value), and
// checkpoint chunks of a checkpoint that is neither the pointed one nor an
// interrupted one (lifetime.go). Problems wrap ErrCorrupt and name what is
// damaged (the file, for Pebble's files); at most 100 are reported. It
// reads a snapshot, so it may run while the store is in use.
//
// Damage in the WAL and the MANIFEST is found by Open, before Pebble replays
// them (see docs/FAULTS.md).
func (db *DB) Verify(ctx context.Context) (err error) {
	defer recoverPebble(&err)
	if db.closed.Load() {
		return ErrClosed
	}
	db.swap.RLock() // one instance and its catalog (reopen.go)
	defer db.swap.RUnlock()
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
	snap := db.pdb().NewSnapshot()
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

	// Widened range widths: each names a counter with auto range bits and
	// is the width its ranges have in memory (widenLocked writes it first).
	rp := appendMetaKey(nil, metaRangeBits)
	if err := scan(rp, prefixEnd(rp), func(k, v []byte) bool {
		bits, err := decodeRangeBits(v)
		if err != nil || len(k) != len(rp)+4 {
			return report(fmt.Errorf("range bits %x: %v", k, err))
		}
		cs := cat.byID[binary.BigEndian.Uint32(k[len(rp):])]
		switch {
		case cs == nil || !cs.autoBits:
			return report(fmt.Errorf("%w: range bits %x of no counter with auto range bits", ErrCorrupt, k))
		case bits != cs.rangeBits():
			return report(fmt.Errorf("%w: %s: range bits %d on disk, %d in memory", ErrCorrupt, cs.name, bits, cs.rangeBits()))
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

	if err := db.verifyFamilies(scan, report); err != nil {
		return err
	}

	// A damaged block met by the walks below is reported and the walk
	// ends; any other error ends Verify.
	damaged := func(err error) error {
		if e := pebbleErr(err); errors.Is(e, ErrCorrupt) {
			report(e)
			return nil
		}
		return err
	}
	if len(problems) < maxVerifyProblems {
		if err := verifyBlocksAccounted(snap, cat, values, intents, report); err != nil {
			if err := damaged(err); err != nil {
				return err
			}
		}
	}

	// The checkpoint the snapshot's pointer names, and chunks of no
	// checkpoint.
	var ckptSeq uint64
	havePointer := false
	if v, closer, err := snap.Get(appendMetaKey(nil, metaCheckpoint)); err == nil {
		var ptr ckptPointer
		ptr, err = decodeCkptPointer(v)
		ckptSeq = ptr.seq
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
		if err := damaged(err); err != nil {
			return err
		}
	}
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
	levels, err := db.pdb().SSTables()
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
	// The reader resolves the table's merger by name; checksums need no
	// merging, so tally's Merger (or Pebble's default, for a format 1
	// store) without custom operators is enough.
	mergers := sstable.Mergers{
		mergerName:       (&mergerTable{}).pebbleMerger(mergerName),
		legacyMergerName: pebble.DefaultMerger,
	}
	r, err := sstable.NewReader(context.Background(), readable, sstable.ReaderOptions{Mergers: mergers})
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
