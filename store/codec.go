package store

import (
	"encoding/binary"
	"fmt"

	"github.com/tallydb/tally/internal/checksum"
)

// appendChecksum appends the big-endian CRC-32C of dst[start:] (the
// module's one trailer, checksum.AppendTrailer).
func appendChecksum(dst []byte, start int) []byte { return checksum.AppendTrailer(dst, start) }

// verifyChecksum checks the trailing CRC-32C of b and returns the body;
// errors wrap ErrCorrupt and name what was read.
func verifyChecksum(b []byte, what string) ([]byte, error) {
	if len(b) < 1+checksum.TrailerLen {
		return nil, fmt.Errorf("%w: %s truncated (%d bytes)", ErrCorrupt, what, len(b))
	}
	body, err := checksum.CutTrailer(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %v", ErrCorrupt, what, err)
	}
	return body, nil
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// decoder reads fields from a byte slice, remembering the first error so a
// decode function can check once at the end. Every error wraps ErrCorrupt.
type decoder struct {
	b    []byte
	off  int
	what string
	err  error
}

func (d *decoder) fail(field string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s: bad %s at offset %d", ErrCorrupt, d.what, field, d.off)
	}
}

func (d *decoder) byte() byte {
	if d.err != nil || d.off >= len(d.b) {
		d.fail("byte")
		return 0
	}
	v := d.b[d.off]
	d.off++
	return v
}

func (d *decoder) u32() uint32 {
	if d.err != nil || len(d.b)-d.off < 4 {
		d.fail("u32")
		return 0
	}
	v := binary.BigEndian.Uint32(d.b[d.off:])
	d.off += 4
	return v
}

func (d *decoder) u64() uint64 {
	if d.err != nil || len(d.b)-d.off < 8 {
		d.fail("u64")
		return 0
	}
	v := binary.BigEndian.Uint64(d.b[d.off:])
	d.off += 8
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail("uvarint")
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)-d.off) {
		d.fail("string")
		return ""
	}
	s := string(d.b[d.off : d.off+int(n)])
	d.off += int(n)
	return s
}

// finish reports the first error, or trailing bytes.
func (d *decoder) finish() error {
	if d.err == nil && d.off != len(d.b) {
		d.err = fmt.Errorf("%w: %s: %d trailing bytes", ErrCorrupt, d.what, len(d.b)-d.off)
	}
	return d.err
}
