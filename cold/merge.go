package cold

import (
	"encoding/binary"
	"fmt"

	"github.com/tallydb/tally/internal/checksum"
)

// Change is one delta row for Merge: Deleted removes Key; otherwise Vals
// (ncols values, not all zero) replace the key's row or add it.
type Change struct {
	Key     uint64
	Deleted bool
	Vals    []uint64
}

// Merge writes the range that results from applying changes (sorted by Key,
// strictly increasing) to the range read by r, and returns its encoded
// descriptor. It rewrites only the blocks the changes touch:
//
//   - A block none of whose rows change, and to which no new key is
//     attached, is reused: emit gets reuse = its old block number and
//     block == nil, and the caller keeps the old bytes (under any storage
//     id it likes) as block blockNo of the new range. Its keys, row count
//     and column count are unchanged, so its header still matches the new
//     descriptor exactly.
//   - Every other block is decoded, patched and re-encoded: emit gets
//     reuse = -1 and the new bytes (reused after emit returns, as with
//     Builder). A patched block that outgrew opts.TargetBlockSize is split
//     into equal parts; one that shrank below half of it is carried into
//     the next block if that one is rewritten too; one that lost every row
//     disappears.
//
// A new key inside a block's key span [first, last] belongs to that block.
// A new key before the first block belongs to the first block, after the
// last block to the last. A new key in the gap between blocks b and b+1
// joins b+1 if b+1 has changes inside its own span and b has none, and
// otherwise joins b; so a gap insert rewrites a block that is rewritten
// anyway when it can, and the earlier block when it cannot. Deleting a key
// the range does not hold is a no-op and makes no block dirty.
//
// emit is called for every block of the new range, in order, with blockNo
// 0, 1, 2, .... If ncols exceeds r's column count (a column was added),
// every block is rewritten with the new columns zero; ncols below it is
// ErrBadArgument. Unsorted changes are ErrUnsorted, a live change with the
// wrong number of values or all zeros ErrBadRow. A block that cannot be
// read, or whose keys disagree with the descriptor, fails the merge (as
// with Reader.Verify) rather than being rewritten from damaged input.
//
// Merge holds the changes, the new descriptor's key stream and a few
// blocks of rows in memory; it reads rewritten blocks through r without
// filling r's cache.
func Merge(r *Reader, ncols int, changes []Change, opts BuildOptions,
	emit func(blockNo uint32, reuse int, block []byte) error) (desc []byte, err error) {
	d := r.desc
	if ncols < d.ncols || ncols > MaxColumns {
		return nil, fmt.Errorf("%w: ncols %d not in %d..%d", ErrBadArgument, ncols, d.ncols, MaxColumns)
	}
	if emit == nil {
		return nil, fmt.Errorf("%w: nil emit", ErrBadArgument)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	cs := make([]Change, 0, len(changes))
	for i := range changes {
		c := &changes[i]
		if i > 0 && c.Key <= changes[i-1].Key {
			return nil, fmt.Errorf("%w: change key %d after %d", ErrUnsorted, c.Key, changes[i-1].Key)
		}
		if c.Deleted {
			if d.Contains(c.Key) {
				cs = append(cs, Change{Key: c.Key, Deleted: true})
			}
			continue
		}
		if len(c.Vals) != ncols {
			return nil, fmt.Errorf("%w: key %d has %d values, want %d", ErrBadRow, c.Key, len(c.Vals), ncols)
		}
		var any uint64
		for _, v := range c.Vals {
			any |= v
		}
		if any == 0 {
			return nil, fmt.Errorf("%w: key %d has all columns 0", ErrBadRow, c.Key)
		}
		cs = append(cs, *c)
	}

	m := &merger{r: r, ncols: ncols, opts: o, emit: emit}
	nb := d.NumBlocks()
	if nb == 0 {
		for i := range cs {
			m.add(cs[i].Key, cs[i].Vals)
		}
		if err := m.flush(); err != nil {
			return nil, err
		}
		return m.dw.finish(ncols), nil
	}
	owner := assignChanges(d, cs)
	rewrite := make([]bool, nb)
	for _, b := range owner {
		rewrite[b] = true
	}
	if ncols > d.ncols {
		for b := range rewrite {
			rewrite[b] = true
		}
	}

	cur := d.pres.seek(0)
	ci := 0
	for b := range uint32(nb) {
		keys := m.oldKeys[:0]
		for range d.BlockRows(b) {
			k, ok := cur.next()
			if !ok {
				return nil, corruptf(-1, 0, "presence set ends inside block %d", b)
			}
			keys = append(keys, k)
		}
		m.oldKeys = keys
		cj := ci
		for cj < len(cs) && owner[cj] == b {
			cj++
		}
		group := cs[ci:cj]
		ci = cj
		if !rewrite[b] {
			if err := m.flush(); err != nil {
				return nil, err
			}
			if err := emit(m.dw.nblocks, int(b), nil); err != nil {
				return nil, err
			}
			m.dw.addBlock(keys)
			continue
		}
		if err := m.patch(b, keys, group); err != nil {
			return nil, err
		}
		// Carry a small result into the next block if that one is
		// rewritten anyway, so deletes do not leave a trail of tiny blocks.
		if int(b)+1 < nb && rewrite[b+1] && len(m.keys)*m.width() <= m.opts.TargetBlockSize/2 {
			continue
		}
		if err := m.flush(); err != nil {
			return nil, err
		}
	}
	if err := m.flush(); err != nil {
		return nil, err
	}
	if _, ok := cur.next(); ok {
		return nil, corruptf(-1, 0, "presence set holds keys beyond the last block")
	}
	return m.dw.finish(ncols), nil
}

// assignChanges returns the old block each change belongs to (see Merge for
// the rule). d has at least one block. The result is non-decreasing.
func assignChanges(d *Desc, cs []Change) []uint32 {
	nb := d.NumBlocks()
	owner := make([]uint32, len(cs))
	inSpan := make([]bool, nb)
	const gap = 1 << 31 // owner[i] = gap | b: between blocks b and b+1, decided below
	for i := range cs {
		k := cs[i].Key
		b, ok := d.BlockFor(k)
		switch {
		case !ok:
			owner[i] = 0
		case k <= d.lasts[b]:
			owner[i] = b
			inSpan[b] = true
		case int(b) == nb-1:
			owner[i] = b
		default:
			owner[i] = gap | b
		}
	}
	for i, o := range owner {
		if o&gap == 0 {
			continue
		}
		b := o &^ gap
		if !inSpan[b] && inSpan[b+1] {
			b++
		}
		owner[i] = b
	}
	return owner
}

// merger holds the rows of rewritten blocks until they are cut into new
// blocks, and the new descriptor.
type merger struct {
	r     *Reader
	ncols int
	opts  BuildOptions
	emit  func(uint32, int, []byte) error

	keys    []uint64 // pending rows, not yet emitted
	cols    [MaxColumns][]uint64
	oldKeys []uint64
	kb      []byte

	dw  descWriter
	enc blockEncoder
	out []byte
}

func (m *merger) add(key uint64, vals []uint64) {
	m.keys = append(m.keys, key)
	for c := range m.ncols {
		m.cols[c] = append(m.cols[c], vals[c])
	}
}

// patch appends old block b's rows (keys are its keys), with group applied,
// to the pending rows.
func (m *merger) patch(b uint32, keys []uint64, group []Change) error {
	blk, err := m.r.blockNoFill(b)
	if err != nil {
		return err
	}
	kb := m.kb[:0]
	for _, k := range keys {
		kb = binary.LittleEndian.AppendUint64(kb, k)
	}
	m.kb = kb
	if got := checksum.CRC32C(kb); got != blk.keysCRC {
		return corruptf(int64(b), 0, "keys disagree with presence set (crc %08x, block says %08x)", got, blk.keysCRC)
	}
	oldCols := blk.ncols
	ci := 0
	for i, k := range keys {
		for ci < len(group) && group[ci].Key < k {
			if !group[ci].Deleted {
				m.add(group[ci].Key, group[ci].Vals)
			}
			ci++
		}
		if ci < len(group) && group[ci].Key == k {
			if !group[ci].Deleted {
				m.add(k, group[ci].Vals)
			}
			ci++
			continue
		}
		m.keys = append(m.keys, k)
		for c := range m.ncols {
			var v uint64
			if c < oldCols {
				v = blk.value(c, i)
			}
			m.cols[c] = append(m.cols[c], v)
		}
	}
	for ; ci < len(group); ci++ {
		if !group[ci].Deleted {
			m.add(group[ci].Key, group[ci].Vals)
		}
	}
	return nil
}

// width returns the decoded bytes per row of the pending rows as one block.
func (m *merger) width() int {
	w := 0
	for c := range m.ncols {
		var or uint64
		for _, v := range m.cols[c] {
			or |= v
		}
		w += int(byteWidth(or))
	}
	return w
}

// flush cuts the pending rows into the fewest blocks of at most
// TargetBlockSize decoded bytes (at least one row each), all of nearly
// equal row count, and emits them. Equal parts rather than Builder's greedy
// cut: a full block that gains one row becomes two half-full blocks with
// room to grow, not a full one and a one-row one that the next insert
// splits again.
func (m *merger) flush() error {
	n := len(m.keys)
	if n == 0 {
		return nil
	}
	per := max(1, m.opts.TargetBlockSize/max(1, m.width()))
	k := (n + per - 1) / per
	var cols [MaxColumns][]uint64
	for p := range k {
		lo, hi := p*n/k, (p+1)*n/k
		for c := range m.ncols {
			cols[c] = m.cols[c][lo:hi]
		}
		var err error
		m.out, err = m.enc.encode(m.out[:0], m.keys[lo:hi], cols[:m.ncols], m.opts.ZstdLevel)
		if err != nil {
			return err
		}
		if err := m.emit(m.dw.nblocks, -1, m.out); err != nil {
			return err
		}
		m.dw.addBlock(m.keys[lo:hi])
	}
	m.keys = m.keys[:0]
	for c := range m.ncols {
		m.cols[c] = m.cols[c][:0]
	}
	return nil
}

// BlockLen returns the row count in an encoded block's header, or 0 if the
// header cannot be read. It does not check the block; it is meant for
// progress reporting on blocks Merge or Builder just emitted.
func BlockLen(block []byte) int {
	if len(block) < 3 {
		return 0
	}
	n, k := binary.Uvarint(block[2:])
	if k <= 0 || n > maxBlockBytes {
		return 0
	}
	return int(n)
}
