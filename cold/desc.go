package cold

import (
	"encoding/binary"
	"iter"
	"unsafe"

	"github.com/tallydb/tally/internal/checksum"
)

// Desc is the decoded range descriptor of a sealed range: its shape, the
// block index and the presence set of its keys. It is immutable and safe for
// concurrent use. A store typically decodes it once when a range is opened
// and keeps it for the range's lifetime.
type Desc struct {
	ncols  int
	rows   uint64
	starts []uint64 // first row of each block; len(blocks)+1 entries
	firsts []uint64 // first key of each block
	lasts  []uint64 // last key of each block
	pres   presence
}

// MemBytes returns the bytes the decoded descriptor holds in memory: the
// block index and the presence set (by their slices' capacities) and the
// Desc itself. The encoded descriptor a caller keeps is not in it.
func (d *Desc) MemBytes() int {
	return int(unsafe.Sizeof(*d)) + 8*(cap(d.starts)+cap(d.firsts)+cap(d.lasts)) + d.pres.memBytes()
}

// Rows returns the number of rows (keys) in the range.
func (d *Desc) Rows() uint64 { return d.rows }

// NumBlocks returns the number of blocks.
func (d *Desc) NumBlocks() int { return len(d.firsts) }

// NumColumns returns the number of columns of every row.
func (d *Desc) NumColumns() int { return d.ncols }

// Contains reports whether key is stored in the range. It touches no block.
func (d *Desc) Contains(key uint64) bool { return d.pres.contains(key) }

// BlockFor returns the block whose key span would hold key: the last block
// whose first key is <= key. ok is false if key precedes the first block.
// It does not say whether key is present; see Contains and Locate.
func (d *Desc) BlockFor(key uint64) (blockNo uint32, ok bool) {
	f := d.firsts
	lo, n := 0, len(f)
	for n > 0 {
		half := n / 2
		if f[lo+half] <= key {
			lo += half + 1
			n -= half + 1
		} else {
			n = half
		}
	}
	if lo == 0 {
		return 0, false
	}
	return uint32(lo - 1), true
}

// Locate returns the block holding key and the key's row within it, or
// ok == false if key is absent. It touches no block.
func (d *Desc) Locate(key uint64) (blockNo uint32, row int, ok bool) {
	r, ok := d.pres.rank(key)
	if !ok {
		return 0, 0, false
	}
	b := d.blockOfRow(r)
	return b, int(r - d.starts[b]), true
}

// blockOfRow returns the block holding row r (r < d.rows).
func (d *Desc) blockOfRow(r uint64) uint32 {
	s := d.starts[1:]
	lo, n := 0, len(s)
	for n > 0 {
		half := n / 2
		if s[lo+half] <= r {
			lo += half + 1
			n -= half + 1
		} else {
			n = half
		}
	}
	return uint32(lo)
}

// BlockRows returns the number of rows in block b.
func (d *Desc) BlockRows(b uint32) int { return int(d.starts[b+1] - d.starts[b]) }

// Keys iterates over the range's keys in increasing order.
func (d *Desc) Keys() iter.Seq[uint64] {
	return func(yield func(uint64) bool) {
		if d.rows == 0 {
			return
		}
		cur := d.pres.seek(0)
		for {
			k, ok := cur.next()
			if !ok || !yield(k) {
				return
			}
		}
	}
}

// descWriter accumulates a descriptor's block index and key stream one
// block at a time. Builder and Merge share it, so a merged range's
// descriptor is byte-for-byte what Build would write for the same blocks.
type descWriter struct {
	index   []byte
	kw      bitWriter
	gaps    []uint64
	next    uint64 // last key of the previous block + 1: the Rice gap base
	nblocks uint32
	rows    uint64
}

// addBlock appends the next block, whose keys (non-empty, increasing, above
// every earlier block's) are keys.
func (w *descWriter) addBlock(keys []uint64) {
	gaps := w.gaps[:0]
	next := w.next
	for _, k := range keys {
		gaps = append(gaps, k-next)
		next = k + 1
	}
	w.next = next
	w.gaps = gaps
	k := bestRiceK(gaps)
	w.index = binary.AppendUvarint(w.index, uint64(len(keys)))
	w.index = append(w.index, byte(k))
	for _, g := range gaps {
		w.kw.writeRice(g, k)
	}
	w.nblocks++
	w.rows += uint64(len(keys))
}

// finish returns the encoded descriptor of the blocks added so far.
func (w *descWriter) finish(ncols int) []byte {
	keys := w.kw.flush()
	return encodeDesc(make([]byte, 0, len(keys)+len(w.index)+32), ncols, w.rows, w.index, w.nblocks, keys)
}

// encodeDesc builds the range descriptor. The format:
//
//	field      width            meaning
//	---------  ---------------  ------------------------------------------------
//	version    1                descVersion (1)
//	ncols      1                number of columns, 1..16
//	rows       uvarint          number of rows in the range
//	nblocks    uvarint          number of blocks, <= rows
//	index      nblocks entries  per block: rows uvarint (>= 1), then riceK 1
//	                            byte (0..56), the Rice parameter of its keys
//	keys       rest - 4         bit stream, LSB first: for each block in order,
//	                            its rows' key gaps Rice-coded with its riceK
//	                            (see rice.go); gap = key - previous key - 1,
//	                            the first key's gap is the key itself; zero
//	                            padding to a byte
//	crc        4 (LE)           crc32c (Castagnoli) of all preceding bytes
//
// The keys section is the presence set and the key column of every block at
// once: the first and last key of each block, and every key's row number,
// follow from it. At 2M random keys in a 32-bit range it costs ~1.6 bytes a
// key, against 2 for a serialized roaring bitmap that would then duplicate
// the keys a block also had to carry.
func encodeDesc(dst []byte, ncols int, rows uint64, index []byte, nblocks uint32, keys []byte) []byte {
	start := len(dst)
	dst = append(dst, descVersion, byte(ncols))
	dst = binary.AppendUvarint(dst, rows)
	dst = binary.AppendUvarint(dst, uint64(nblocks))
	dst = append(dst, index...)
	dst = append(dst, keys...)
	return binary.LittleEndian.AppendUint32(dst, checksum.CRC32C(dst[start:]))
}

// DecodeDesc decodes and checks a range descriptor. It never retains b.
func DecodeDesc(b []byte) (*Desc, error) {
	if len(b) < 2+1+1+4 {
		return nil, corruptf(-1, 0, "descriptor too short (%d bytes)", len(b))
	}
	body := b[:len(b)-4]
	if got, want := checksum.CRC32C(body), binary.LittleEndian.Uint32(b[len(b)-4:]); got != want {
		return nil, corruptf(-1, len(b)-4, "checksum mismatch (computed %08x, stored %08x)", got, want)
	}
	if body[0] != descVersion {
		return nil, corruptf(-1, 0, "unknown descriptor version %d", body[0])
	}
	d := &Desc{ncols: int(body[1])}
	if d.ncols < 1 || d.ncols > MaxColumns {
		return nil, corruptf(-1, 1, "bad column count %d", d.ncols)
	}
	off := 2
	rows, k := binary.Uvarint(body[off:])
	if k <= 0 {
		return nil, corruptf(-1, off, "bad row count")
	}
	off += k
	nb, k := binary.Uvarint(body[off:])
	if k <= 0 || nb > rows || (rows > 0 && nb == 0) {
		return nil, corruptf(-1, off, "bad block count %d for %d rows", nb, rows)
	}
	off += k
	// Every block takes >= 2 index bytes and every key >= 1 bit, so these
	// bounds keep a hostile header from causing a large allocation.
	if nb > uint64(len(body)-off)/2 || rows > 8*uint64(len(body)-off) {
		return nil, corruptf(-1, off, "%d rows in %d blocks cannot fit in %d bytes", rows, nb, len(body)-off)
	}
	d.rows = rows
	d.starts = make([]uint64, nb+1)
	d.firsts = make([]uint64, nb)
	d.lasts = make([]uint64, nb)
	ks := make([]uint8, nb)
	var sum uint64
	for i := range nb {
		n, k := binary.Uvarint(body[off:])
		if k <= 0 || n == 0 || n > rows-sum {
			return nil, corruptf(-1, off, "bad row count for block %d", i)
		}
		off += k
		if off >= len(body) || body[off] > 56 {
			return nil, corruptf(-1, off, "bad Rice parameter for block %d", i)
		}
		ks[i] = body[off]
		off++
		sum += n
		d.starts[i+1] = sum
	}
	if sum != rows {
		return nil, corruptf(-1, off, "blocks hold %d rows, header says %d", sum, rows)
	}
	r := bitReader{b: body[off:]}
	var pb presenceBuilder
	next := uint64(0) // smallest value the next key may take
	first := true
	for i := range nb {
		n := d.starts[i+1] - d.starts[i]
		kk := uint(ks[i])
		for j := range n {
			g := r.readRice(kk)
			if r.bad {
				return nil, corruptf(-1, off+r.pos, "key stream truncated in block %d", i)
			}
			key := next + g
			if key < next || (!first && next == 0) {
				return nil, corruptf(-1, off+r.pos, "key overflows in block %d", i)
			}
			first = false
			if j == 0 {
				d.firsts[i] = key
			}
			pb.add(key)
			next = key + 1
		}
		d.lasts[i] = next - 1
	}
	if r.pos != len(r.b) || r.acc != 0 || r.n >= 8 {
		return nil, corruptf(-1, off+r.pos, "trailing bytes after key stream")
	}
	d.pres = pb.finish()
	return d, nil
}
