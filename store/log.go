package store

import (
	"encoding/binary"
	"fmt"
)

// logVersion is the version byte of a mutation record.
const logVersion = 1

// Op kinds inside a mutation record.
const (
	// opRowImage sets a counter row to the values it holds after the
	// mutation (its after-image). All-zero values mean the row is gone.
	opRowImage byte = 1
)

// rowImage is one decoded opRowImage. vals aliases a buffer reused by the
// decoder; copy it to keep it.
type rowImage struct {
	counterID uint32
	id        uint64
	vals      []uint64
}

// appendRecordHeader starts a mutation record of n ops.
//
// A mutation record is the value of a log-family key (seq u64):
//
//	field       width     meaning
//	----------  --------  ------------------------------------------------
//	version     1         logVersion
//	nops        uvarint   number of ops that follow
//	per op:
//	  kind      1         opRowImage
//	  counter   uvarint   counter id
//	  id        8         the row's id, big-endian
//	  ncols     uvarint   number of values (≤ MaxColumns)
//	  values    uvarint×n the row's values after the mutation
//	checksum    4         CRC-32C of everything before, big-endian
//
// Records hold after-images rather than deltas so replaying a record is
// idempotent: recovery may apply a record to a checkpoint that already
// contains it (checkpoints are fuzzy, see checkpoint.go).
func appendRecordHeader(dst []byte, nops int) []byte {
	dst = append(dst, logVersion)
	return binary.AppendUvarint(dst, uint64(nops))
}

// appendRowImage appends one opRowImage.
func appendRowImage(dst []byte, counterID uint32, id uint64, vals []uint64) []byte {
	dst = append(dst, opRowImage)
	dst = binary.AppendUvarint(dst, uint64(counterID))
	dst = binary.BigEndian.AppendUint64(dst, id)
	dst = binary.AppendUvarint(dst, uint64(len(vals)))
	for _, v := range vals {
		dst = binary.AppendUvarint(dst, v)
	}
	return dst
}

// decodeRecord verifies a mutation record's checksum and calls fn for each
// op. The rowImage's vals slice is reused between calls. Decode errors wrap
// ErrCorrupt; errors from fn are returned as they are.
func decodeRecord(b []byte, fn func(rowImage) error) error {
	body, err := verifyChecksum(b, "log record")
	if err != nil {
		return err
	}
	d := decoder{b: body, what: "log record"}
	if v := d.byte(); d.err == nil && v != logVersion {
		return fmt.Errorf("%w: log record version %d", ErrCorrupt, v)
	}
	nops := d.uvarint()
	if d.err == nil && nops > uint64(len(body)) {
		return fmt.Errorf("%w: log record claims %d ops in %d bytes", ErrCorrupt, nops, len(body))
	}
	var buf [MaxColumns]uint64
	for i := uint64(0); i < nops && d.err == nil; i++ {
		if k := d.byte(); d.err == nil && k != opRowImage {
			return fmt.Errorf("%w: log record op kind %d", ErrCorrupt, k)
		}
		var op rowImage
		op.counterID = uint32(d.uvarint())
		op.id = d.u64()
		n := d.uvarint()
		if d.err == nil && n > MaxColumns {
			return fmt.Errorf("%w: log record op has %d values", ErrCorrupt, n)
		}
		for j := uint64(0); j < n; j++ {
			buf[j] = d.uvarint()
		}
		if d.err != nil {
			break
		}
		op.vals = buf[:n]
		if err := fn(op); err != nil {
			return err
		}
	}
	return d.finish()
}
