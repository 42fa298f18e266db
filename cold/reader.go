package cold

import (
	"encoding/binary"
	"errors"
	"fmt"

	"slices"

	"github.com/tallydb/tally/internal/checksum"
)

// BlockSource fetches the encoded bytes of block n of a range. The store
// implements it over Pebble. Not-found must be reported as an error wrapping
// ErrMissingBlock. The returned bytes are only read during the call that
// asked for them, never retained, so they may alias a buffer the source
// reuses afterwards.
type BlockSource interface {
	ReadBlock(blockNo uint32) ([]byte, error)
}

// Reader reads one sealed range. It is safe for concurrent use.
type Reader struct {
	id    uint64
	desc  *Desc
	src   BlockSource
	cache *Cache
}

// NewReader returns a reader of the range described by desc whose blocks
// come from src through cache (which may be nil). id names the range in the
// cache; it must be unique among ranges sharing the cache.
func NewReader(id uint64, desc *Desc, src BlockSource, cache *Cache) *Reader {
	return &Reader{id: id, desc: desc, src: src, cache: cache}
}

// Desc returns the reader's range descriptor.
func (r *Reader) Desc() *Desc { return r.desc }

// load reads, decodes and checks block b against the descriptor.
func (r *Reader) load(b uint32) (*Block, error) {
	raw, err := r.src.ReadBlock(b)
	if err != nil {
		if errors.Is(err, ErrMissingBlock) {
			return nil, fmt.Errorf("range %d block %d: %w", r.id, b, err)
		}
		return nil, fmt.Errorf("cold: range %d reading block %d: %w", r.id, b, err)
	}
	if raw == nil {
		return nil, fmt.Errorf("range %d block %d: %w", r.id, b, ErrMissingBlock)
	}
	blk, err := decodeBlock(raw, int64(b))
	if err != nil {
		return nil, err
	}
	d := r.desc
	if blk.ncols != d.ncols || blk.n != d.BlockRows(b) || blk.first != d.firsts[b] || blk.last != d.lasts[b] {
		return nil, corruptf(int64(b), 0,
			"block (%d cols, %d rows, keys %d..%d) disagrees with range index (%d cols, %d rows, keys %d..%d)",
			blk.ncols, blk.n, blk.first, blk.last, d.ncols, d.BlockRows(b), d.firsts[b], d.lasts[b])
	}
	return blk, nil
}

func (r *Reader) block(b uint32) (*Block, error) {
	if blk := r.cache.get(r.id, b); blk != nil {
		return blk, nil
	}
	blk, err := r.load(b)
	if err != nil {
		return nil, err
	}
	r.cache.put(r.id, b, blk)
	return blk, nil
}

// Get appends the ncols values of key to dst[:0]. found is false, with no
// block read, if key is not in the range.
func (r *Reader) Get(key uint64, dst []uint64) ([]uint64, bool, error) {
	dst = dst[:0]
	b, row, ok := r.desc.Locate(key)
	if !ok {
		return dst, false, nil
	}
	blk, err := r.block(b)
	if err != nil {
		return dst, false, err
	}
	return blk.appendRow(dst, row), true, nil
}

type keyLoc struct {
	block uint32
	row   uint32
	i     int
}

// MultiGet looks up keys at once. It returns dst[:0] grown to
// len(keys)*ncols values, row-major (row i at [i*ncols, (i+1)*ncols)), with
// zeros for absent keys, and sets found[i] (found must have len(keys)
// entries). Keys hitting the same block share one cache lookup. On error
// the contents of dst and found are unspecified.
func (r *Reader) MultiGet(keys []uint64, dst []uint64, found []bool) ([]uint64, error) {
	if len(found) < len(keys) {
		return dst[:0], fmt.Errorf("%w: found has %d entries for %d keys", ErrBadArgument, len(found), len(keys))
	}
	nc := r.desc.ncols
	dst = slices.Grow(dst[:0], len(keys)*nc)[:len(keys)*nc]
	clear(dst)
	var stack [32]keyLoc
	locs := stack[:0]
	sorted := true
	for i, k := range keys {
		b, row, ok := r.desc.Locate(k)
		found[i] = ok
		if !ok {
			continue
		}
		if len(locs) > 0 && b < locs[len(locs)-1].block {
			sorted = false
		}
		locs = append(locs, keyLoc{block: b, row: uint32(row), i: i})
	}
	if !sorted {
		if len(locs) <= 32 {
			for i := 1; i < len(locs); i++ { // insertion sort: tiny, no allocation
				for j := i; j > 0 && locs[j].block < locs[j-1].block; j-- {
					locs[j], locs[j-1] = locs[j-1], locs[j]
				}
			}
		} else {
			slices.SortFunc(locs, func(a, b keyLoc) int { return int(int64(a.block) - int64(b.block)) })
		}
	}
	var blk *Block
	cur := int64(-1)
	for _, l := range locs {
		if int64(l.block) != cur {
			var err error
			if blk, err = r.block(l.block); err != nil {
				return dst, err
			}
			cur = int64(l.block)
		}
		blk.putRow(dst[l.i*nc:(l.i+1)*nc], int(l.row))
	}
	return dst, nil
}

// blockNoFill returns block b from the cache if present, else reads it
// without filling the cache, so a scan does not evict the hot set.
func (r *Reader) blockNoFill(b uint32) (*Block, error) {
	if blk := r.cache.peek(r.id, b); blk != nil {
		return blk, nil
	}
	return r.load(b)
}

// Iter calls fn for every row in key order. vals is reused between calls.
// It stops at the first error, from fn or from reading.
func (r *Reader) Iter(fn func(key uint64, vals []uint64) error) error {
	d := r.desc
	if d.rows == 0 {
		return nil
	}
	cur := d.pres.seek(0)
	vals := make([]uint64, 0, d.ncols)
	for b := range uint32(d.NumBlocks()) {
		blk, err := r.blockNoFill(b)
		if err != nil {
			return err
		}
		for i := 0; i < blk.n; i++ {
			k, ok := cur.next()
			if !ok {
				return corruptf(int64(b), 0, "presence set ends before row %d", i)
			}
			vals = blk.appendRow(vals[:0], i)
			if err := fn(k, vals); err != nil {
				return err
			}
		}
	}
	return nil
}

// Verify reads every block from the source (bypassing the cache) and checks
// checksums, that each block agrees with the range index (columns, row
// count, first and last key) and with the presence set (crc32c of its
// keys), that no row is all zero, and that the row counts add up.
func (r *Reader) Verify() error {
	d := r.desc
	if d.pres.len() != d.rows || d.starts[len(d.starts)-1] != d.rows {
		return corruptf(-1, 0, "presence set holds %d keys, index %d, header %d", d.pres.len(), d.starts[len(d.starts)-1], d.rows)
	}
	cur := d.pres.seek(0)
	var kb []byte
	for b := range uint32(d.NumBlocks()) {
		blk, err := r.load(b)
		if err != nil {
			return err
		}
		kb = kb[:0]
		for i := 0; i < blk.n; i++ {
			k, ok := cur.next()
			if !ok {
				return corruptf(int64(b), 0, "presence set ends before row %d", i)
			}
			kb = binary.LittleEndian.AppendUint64(kb, k)
			if blk.rowZero(i) {
				return corruptf(int64(b), 0, "row %d (key %d) is all zero", i, k)
			}
		}
		if got := checksum.CRC32C(kb); got != blk.keysCRC {
			return corruptf(int64(b), 0, "keys disagree with presence set (crc %08x, block says %08x)", got, blk.keysCRC)
		}
	}
	if _, ok := cur.next(); ok {
		return corruptf(-1, 0, "presence set holds keys beyond the last block")
	}
	return nil
}
