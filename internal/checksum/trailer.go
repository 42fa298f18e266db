package checksum

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// TrailerLen is the width of the trailer AppendTrailer writes: a CRC-32C,
// big-endian.
const TrailerLen = 4

// ErrMismatch is returned, wrapped, by CutTrailer when the stored checksum
// is not the one of the bytes before it: the value is damaged.
var ErrMismatch = errors.New("checksum mismatch")

// ErrShort is returned, wrapped, by CutTrailer when the value is too short
// to hold a trailer.
var ErrShort = errors.New("too short for a checksum")

// AppendTrailer appends to dst the trailer that ends most of tally's
// records: the CRC-32C of dst[start:] (the record, from its first byte),
// big-endian. An encoder notes start := len(dst) before it writes the
// record's first field and ends with AppendTrailer(dst, start).
//
//	field     width     meaning
//	--------  --------  ------------------------------------------
//	crc       4         CRC-32C of dst[start:], big-endian
func AppendTrailer(dst []byte, start int) []byte {
	return binary.BigEndian.AppendUint32(dst, CRC32C(dst[start:]))
}

// CutTrailer verifies the trailer AppendTrailer wrote at the end of b and
// returns the bytes before it (a subslice of b). A damaged value returns an
// error wrapping ErrMismatch with both checksums; one shorter than the
// trailer, ErrShort. The error does not name the record: callers add that.
func CutTrailer(b []byte) (body []byte, err error) {
	if len(b) < TrailerLen {
		return nil, fmt.Errorf("%w: %d bytes", ErrShort, len(b))
	}
	n := len(b) - TrailerLen
	if got, stored := CRC32C(b[:n]), binary.BigEndian.Uint32(b[n:]); got != stored {
		return nil, fmt.Errorf("%w (computed %08x, stored %08x)", ErrMismatch, got, stored)
	}
	return b[:n], nil
}

// ErrVersion is returned, wrapped, by CutRecord when a record's version
// byte is not the one its decoder reads.
var ErrVersion = errors.New("unknown version")

// CutRecord checks a record framed as most of tally's are, a version byte
// first and AppendTrailer's checksum last, and returns the bytes between
// them. It checks the checksum first, so damage is reported as
// ErrMismatch, not as a version; a value too short to hold both is
// ErrShort.
//
//	field     width     meaning
//	--------  --------  ------------------------------------------
//	version   1         the record's format version
//	body      ...       the record's fields (returned)
//	crc       4         CRC-32C of version and body, big-endian
func CutRecord(b []byte, version byte) (body []byte, err error) {
	if len(b) < 1+TrailerLen {
		return nil, fmt.Errorf("%w: %d bytes", ErrShort, len(b))
	}
	p, err := CutTrailer(b)
	if err != nil {
		return nil, err
	}
	if p[0] != version {
		return nil, fmt.Errorf("%w %d (want %d)", ErrVersion, p[0], version)
	}
	return p[1:], nil
}
