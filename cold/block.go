package cold

import (
	"encoding/binary"

	"math/bits"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/tallydb/tally/internal/checksum"
	"github.com/tallydb/tally/internal/limits"
	"github.com/tallydb/tally/internal/zpool"
)

const (
	blockVersion = 1
	descVersion  = 1
	// MaxColumns is the largest number of columns a range may have.
	MaxColumns = limits.MaxColumns
	// maxBlockBytes bounds the decoded size of one block, so a damaged or
	// hostile header cannot make a decoder allocate without limit (the
	// shared decoder's own limit).
	maxBlockBytes = zpool.MaxDecoded
)

// Block is a decoded block: the column values of a run of consecutive rows
// of a range. Keys are not stored in blocks (see the package doc, "Keys
// live once"); the range's Desc maps a key to (block, row) and the block's
// header names its first and last key and a checksum of all its keys so a
// block cannot silently be paired with the wrong descriptor.
//
// A Block is immutable and safe for concurrent use.
type Block struct {
	ncols   int
	n       int
	rowW    int // bytes per decoded row: sum of widths
	first   uint64
	last    uint64
	keysCRC uint32
	widths  [MaxColumns]uint8
	colOff  [MaxColumns]int // offset of column c within a row
	// data holds the rows decoded row-major, rowW bytes each, each value
	// little-endian in widths[c] bytes, plus 8 bytes of padding so any value
	// is one unaligned 8-byte load. Row-major (unlike the stored byte
	// planes) puts a row in one cache line: a cached lookup is memory-bound.
	data []byte
}

// Len returns the number of rows in the block.
func (b *Block) Len() int { return b.n }

// NumColumns returns the number of columns.
func (b *Block) NumColumns() int { return b.ncols }

// FirstKey and LastKey return the keys of the block's first and last rows,
// as recorded in its header.
func (b *Block) FirstKey() uint64 { return b.first }

// LastKey returns the key of the block's last row.
func (b *Block) LastKey() uint64 { return b.last }

// Row appends the values of row i (0 <= i < Len()) to dst.
func (b *Block) Row(i int, dst []uint64) []uint64 {
	return b.appendRow(dst, i)
}

func (b *Block) appendRow(dst []uint64, i int) []uint64 {
	for c := 0; c < b.ncols; c++ {
		dst = append(dst, b.value(c, i))
	}
	return dst
}

func (b *Block) putRow(dst []uint64, i int) {
	for c := range dst[:b.ncols] {
		dst[c] = b.value(c, i)
	}
}

func (b *Block) value(c, i int) uint64 {
	p := i*b.rowW + b.colOff[c]
	return binary.LittleEndian.Uint64(b.data[p:p+8]) & widthMask[b.widths[c]]
}

var widthMask = [9]uint64{0, 0xff, 0xffff, 0xffffff, 0xffffffff, 0xffffffffff, 0xffffffffffff, 0xffffffffffffff, 0xffffffffffffffff}

// rowZero reports whether every column of row i is 0.
func (b *Block) rowZero(i int) bool {
	for c := 0; c < b.ncols; c++ {
		if b.value(c, i) != 0 {
			return false
		}
	}
	return true
}

// size is the memory the block holds, charged to the cache.
func (b *Block) size() int64 { return int64(len(b.data)) + 256 }

func byteWidth(v uint64) uint8 { return uint8((bits.Len64(v) + 7) / 8) }

// blockEncoder holds the scratch buffers of one Builder.
type blockEncoder struct {
	planes []byte
	keyBuf []byte
}

// encode appends the encoded block holding keys and column values cols
// (cols[c][i] is column c of row i) to dst. The format:
//
//	field      width            meaning
//	---------  ---------------  ------------------------------------------------
//	version    1                blockVersion (1)
//	ncols      1                number of columns, 1..16
//	nrows      uvarint          number of rows, >= 1
//	firstKey   uvarint          key of the first row
//	lastKey    uvarint          key of the last row
//	keysCRC    4 (LE)           crc32c of the block's keys, each 8 bytes LE
//	widths     ncols            bytes per value of each column, 0..8
//	payload    rest - 4         zstd frame; decodes to nrows*sum(widths) bytes:
//	                            for each column, widths[c] byte planes of nrows
//	                            bytes, plane j holding byte j of every value
//	crc        4 (LE)           crc32c (Castagnoli) of all preceding bytes
//
// Byte planes rather than rows: the high planes of small counts are nearly
// all zero and the low plane has a skewed byte distribution, which zstd's
// match finder and Huffman stage each exploit better than interleaved rows.
func (e *blockEncoder) encode(dst []byte, keys []uint64, cols [][]uint64, level int) ([]byte, error) {
	n := len(keys)
	var widths [MaxColumns]uint8
	total := 0
	for c, col := range cols {
		var m uint64
		for _, v := range col {
			m |= v
		}
		widths[c] = byteWidth(m)
		total += int(widths[c]) * n
	}
	planes := e.planes[:0]
	if cap(planes) < total {
		planes = make([]byte, 0, total)
	}
	planes = planes[:total]
	p := 0
	for c, col := range cols {
		for j := 0; j < int(widths[c]); j++ {
			sh := 8 * j
			out := planes[p : p+n]
			for i, v := range col[:n] {
				out[i] = byte(v >> sh)
			}
			p += n
		}
	}
	e.planes = planes

	kb := e.keyBuf[:0]
	for _, k := range keys {
		kb = binary.LittleEndian.AppendUint64(kb, k)
	}
	e.keyBuf = kb

	start := len(dst)
	dst = append(dst, blockVersion, byte(len(cols)))
	dst = binary.AppendUvarint(dst, uint64(n))
	dst = binary.AppendUvarint(dst, keys[0])
	dst = binary.AppendUvarint(dst, keys[n-1])
	dst = binary.LittleEndian.AppendUint32(dst, checksum.CRC32C(kb))
	dst = append(dst, widths[:len(cols)]...)
	enc, err := zpool.Encoder(level)
	if err != nil {
		return dst, err
	}
	dst = enc.EncodeAll(planes, dst)
	dst = binary.LittleEndian.AppendUint32(dst, checksum.CRC32C(dst[start:]))
	return dst, nil
}

// DecodeBlock decodes and checks one encoded block. It never retains b.
func DecodeBlock(b []byte) (*Block, error) {
	return decodeBlock(b, 0)
}

func decodeBlock(b []byte, blockNo int64) (*Block, error) {
	if len(b) < 2+3+4+4 {
		return nil, corruptf(blockNo, 0, "block too short (%d bytes)", len(b))
	}
	body := b[:len(b)-4]
	if got, want := checksum.CRC32C(body), binary.LittleEndian.Uint32(b[len(b)-4:]); got != want {
		return nil, corruptf(blockNo, len(b)-4, "checksum mismatch (computed %08x, stored %08x)", got, want)
	}
	if body[0] != blockVersion {
		return nil, corruptf(blockNo, 0, "unknown block version %d", body[0])
	}
	blk := &Block{ncols: int(body[1])}
	if blk.ncols < 1 || blk.ncols > MaxColumns {
		return nil, corruptf(blockNo, 1, "bad column count %d", blk.ncols)
	}
	off := 2
	uv := func(what string) (uint64, bool) {
		v, k := binary.Uvarint(body[off:])
		if k <= 0 {
			return 0, false
		}
		off += k
		return v, true
	}
	n, ok := uv("nrows")
	if !ok || n == 0 || n > maxBlockBytes {
		return nil, corruptf(blockNo, off, "bad row count")
	}
	blk.n = int(n)
	if blk.first, ok = uv("firstKey"); !ok {
		return nil, corruptf(blockNo, off, "bad first key")
	}
	if blk.last, ok = uv("lastKey"); !ok {
		return nil, corruptf(blockNo, off, "bad last key")
	}
	if blk.last < blk.first || blk.last-blk.first < n-1 {
		return nil, corruptf(blockNo, off, "key span [%d,%d] cannot hold %d rows", blk.first, blk.last, n)
	}
	if len(body)-off < 4+blk.ncols {
		return nil, corruptf(blockNo, off, "truncated header")
	}
	blk.keysCRC = binary.LittleEndian.Uint32(body[off:])
	off += 4
	total := 0
	for c := 0; c < blk.ncols; c++ {
		w := body[off+c]
		if w > 8 {
			return nil, corruptf(blockNo, off+c, "column %d width %d > 8", c, w)
		}
		blk.widths[c] = w
		blk.colOff[c] = blk.rowW
		blk.rowW += int(w)
		total += int(w) * blk.n
		if total > maxBlockBytes {
			return nil, corruptf(blockNo, off+c, "decoded size exceeds %d bytes", maxBlockBytes)
		}
	}
	if total == 0 {
		return nil, corruptf(blockNo, off, "all columns have width 0 (all-zero rows)")
	}
	off += blk.ncols
	// Check the frame's declared size before allocating for it.
	var h zstd.Header
	if err := h.Decode(body[off:]); err != nil || !h.HasFCS || h.FrameContentSize != uint64(total) {
		return nil, corruptf(blockNo, off, "zstd frame header does not declare %d bytes", total)
	}
	dec, err := zpool.Decoder()
	if err != nil {
		return nil, err
	}
	pp := planePool.Get().(*[]byte)
	defer planePool.Put(pp)
	if cap(*pp) < total {
		*pp = make([]byte, 0, total)
	}
	planes, err := dec.DecodeAll(body[off:], (*pp)[:0:total])
	if err != nil {
		return nil, corruptf(blockNo, off, "zstd: %v", err)
	}
	if len(planes) != total {
		return nil, corruptf(blockNo, off, "payload decodes to %d bytes, want %d", len(planes), total)
	}
	// Transpose byte planes into rows.
	data := make([]byte, total+8)
	nr, rowW := blk.n, blk.rowW
	p := 0
	for c := 0; c < blk.ncols; c++ {
		for j := 0; j < int(blk.widths[c]); j++ {
			plane := planes[p : p+nr]
			q := blk.colOff[c] + j
			for _, x := range plane {
				data[q] = x
				q += rowW
			}
			p += nr
		}
	}
	blk.data = data
	return blk, nil
}

var planePool = sync.Pool{New: func() any { return new([]byte) }}
