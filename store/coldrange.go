package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tallydb/tally/cold"
)

// coldRangeVersion is the version byte of a cold range value.
const coldRangeVersion = 1

// coldRangeValue is the persisted shape of a cold range: which block ids
// hold its blocks, and the cold package's range descriptor (index and
// presence set). Block ids are never reused within a range, so a merge can
// write new blocks beside the old ones and switch to them atomically by
// rewriting this one value.
type coldRangeValue struct {
	nextBlockID uint32
	blockIDs    []uint32 // block number -> block id
	desc        []byte   // cold descriptor, encoded
	seq         uint64   // log sequence when the range was sealed or last merged
	blockBytes  uint64   // encoded bytes of all blocks
}

// appendColdRange encodes a cold range value, stored under the cold range
// family key (counter u32 | range u64).
//
//	field          width      meaning
//	-------------  ---------  ---------------------------------------------
//	version        1          coldRangeVersion
//	seq            8          log sequence at seal/merge, big-endian
//	block bytes    uvarint    encoded bytes of all blocks (for stats)
//	next block id  uvarint    first block id not yet used in this range
//	nblocks        uvarint    number of blocks
//	block ids      uvarint×n  block number -> block id (key suffix)
//	desc           uvarint+n  the cold range descriptor (package cold)
//	checksum       4          CRC-32C of everything before, big-endian
func appendColdRange(dst []byte, v *coldRangeValue) []byte {
	start := len(dst)
	dst = append(dst, coldRangeVersion)
	dst = binary.BigEndian.AppendUint64(dst, v.seq)
	dst = binary.AppendUvarint(dst, v.blockBytes)
	dst = binary.AppendUvarint(dst, uint64(v.nextBlockID))
	dst = binary.AppendUvarint(dst, uint64(len(v.blockIDs)))
	for _, id := range v.blockIDs {
		dst = binary.AppendUvarint(dst, uint64(id))
	}
	dst = binary.AppendUvarint(dst, uint64(len(v.desc)))
	dst = append(dst, v.desc...)
	return appendChecksum(dst, start)
}

func decodeColdRange(b []byte) (*coldRangeValue, error) {
	body, err := verifyChecksum(b, "cold range")
	if err != nil {
		return nil, err
	}
	d := decoder{b: body, what: "cold range"}
	if v := d.byte(); d.err == nil && v != coldRangeVersion {
		return nil, fmt.Errorf("%w: cold range version %d", ErrCorrupt, v)
	}
	v := &coldRangeValue{seq: d.u64()}
	v.blockBytes = d.uvarint()
	next, n := d.uvarint(), d.uvarint()
	if d.err == nil && (n > uint64(len(body)) || next > 1<<32-1) {
		return nil, fmt.Errorf("%w: cold range has %d blocks", ErrCorrupt, n)
	}
	v.nextBlockID = uint32(next)
	for i := uint64(0); i < n && d.err == nil; i++ {
		id := d.uvarint()
		if id >= next {
			d.fail("block id")
		}
		v.blockIDs = append(v.blockIDs, uint32(id))
	}
	dl := d.uvarint()
	if d.err == nil && dl > uint64(len(body)-d.off) {
		d.fail("desc length")
	}
	if d.err == nil {
		v.desc = bytes.Clone(body[d.off : d.off+int(dl)])
		d.off += int(dl)
	}
	return v, d.finish()
}

// pebbleBlocks reads a cold range's blocks from Pebble for cold.Reader.
type pebbleBlocks struct {
	db        *DB
	inst      *instance // the instance the range's version was built on
	counterID uint32
	rangeID   uint64
	ids       []uint32
}

func (s *pebbleBlocks) ReadBlock(n uint32) (b []byte, err error) {
	defer recoverPebble(&err)
	// Cache misses are the only reads that reach Pebble; they hold
	// pebbleMu so Close cannot close Pebble under them.
	s.db.pebbleMu.RLock()
	defer s.db.pebbleMu.RUnlock()
	if s.db.pebbleClosed {
		return nil, ErrClosed
	}
	// A version built before a reopen reads the old instance, which its
	// readers keep open (reopen.go); a version no reader can reach any
	// more may find it closed, and reads the current one.
	in := s.inst
	if !in.tryRef() {
		in = s.db.acquire()
	}
	defer in.unref()
	return readBlock(in.pdb, s.counterID, s.rangeID, s.ids, n)
}

// readBlock reads block n of a cold range whose block map is ids.
func readBlock(r pebble.Reader, counterID uint32, rangeID uint64, ids []uint32, n uint32) ([]byte, error) {
	if int(n) >= len(ids) {
		return nil, fmt.Errorf("block %d of %d: %w", n, len(ids), cold.ErrMissingBlock)
	}
	var kb [17]byte
	key := appendColdBlockKey(kb[:0], counterID, rangeID, ids[n])
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("block id %d: %w", ids[n], cold.ErrMissingBlock)
	}
	if err != nil {
		return nil, pebbleErr(err)
	}
	// NB: a miss path; the copy keeps Pebble's buffer lifetime out of cold.
	b := bytes.Clone(v)
	closer.Close()
	return b, nil
}

// openColdReader builds the reader of a cold range from its value.
func (db *DB) openColdReader(cs *counterState, rid uint64, v *coldRangeValue) (*cold.Reader, uint64, error) {
	desc, err := cold.DecodeDesc(v.desc)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %s range %d: %v", ErrCorrupt, cs.name, rid, err)
	}
	if desc.NumBlocks() != len(v.blockIDs) {
		return nil, 0, fmt.Errorf("%w: %s range %d: descriptor has %d blocks, block map %d",
			ErrCorrupt, cs.name, rid, desc.NumBlocks(), len(v.blockIDs))
	}
	src := &pebbleBlocks{db: db, inst: db.inst.Load(), counterID: cs.id, rangeID: rid, ids: v.blockIDs}
	id := db.readerIDs.Add(1)
	return cold.NewReader(id, desc, src, db.blockCache), id, nil
}

// coldPayloadBytes returns the encoded bytes of the range's blocks and
// descriptor.
func (rs *rangeState) coldPayloadBytes() int64 {
	return int64(rs.cold.v.blockBytes) + int64(len(rs.cold.v.desc))
}
