package hot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tallydb/tally/internal/limits"
)

// Errors returned by Table methods, for errors.Is.
var (
	// ErrBadLayout reports a keyBits outside [MinKeyBits, MaxKeyBits], a
	// column width other than 1, 2 or 4, or a column count outside
	// [1, MaxColumns].
	ErrBadLayout = errors.New("hot: bad layout")
	// ErrKeyRange reports a key >= 1<<keyBits.
	ErrKeyRange = errors.New("hot: key out of range")
	// ErrColumn reports a column index or value count beyond NumColumns.
	ErrColumn = errors.New("hot: column out of range")
)

// Limits of a table's layout.
const (
	MinKeyBits = limits.MinRangeBits
	// MaxKeyBits is a whole 64-bit id: the store widens a counter's ranges
	// up to one range for every id (store/widen.go), beyond the 48 bits a
	// caller may ask for (limits.MaxRangeBits).
	MaxKeyBits = 64
	// MaxColumns is a counter's limit plus the deletion marker of a cold
	// delta (see package limits).
	MaxColumns = limits.MaxTableColumns
)

// Table is the in-memory table of one id range. See the package doc.
//
// Lock order: Table.layout (AddColumn only) before any segment.mu; at most
// one segment.mu is held at a time.
type Table struct {
	keyBits    uint
	storedBits uint   // bits of the mixed key kept in a slot
	storedMask uint64 // 1<<storedBits - 1
	keyBytes   int    // storedBits/8
	mix        mixer
	segs       []segment

	// ncols is the target number of columns. widths/ones/offs entries below
	// ncols are immutable once ncols covers them, so readers that load ncols
	// may read them without a lock.
	ncols  atomic.Int32
	widths [MaxColumns]uint8
	ones   [MaxColumns]uint64    // all-ones value of each column's width
	offs   [MaxColumns + 1]uint8 // byte offset of column c within a row's values; offs[n] = value bytes of n columns
	layout struct{ sync.Mutex }  // serializes AddColumn

	rows      atomic.Int64 // stored rows
	slotBytes atomic.Int64 // sum of cap(segment slots)
	ovEntries atomic.Int64 // overflow map entries
	ovMaps    atomic.Int64 // non-nil overflow maps
}

// New returns an empty table for keys < 1<<keyBits whose rows have columns
// of the given physical widths in bytes (1, 2 or 4). sizeHint is the expected
// number of rows (0 = small); it only sets initial segment capacities, for
// 3/4 of it (see New's body for why).
func New(keyBits uint, widths []int, sizeHint int) (*Table, error) {
	if keyBits < MinKeyBits || keyBits > MaxKeyBits {
		return nil, fmt.Errorf("%w: keyBits %d not in [%d, %d]", ErrBadLayout, keyBits, MinKeyBits, MaxKeyBits)
	}
	if len(widths) == 0 || len(widths) > MaxColumns {
		return nil, fmt.Errorf("%w: %d columns not in [1, %d]", ErrBadLayout, len(widths), MaxColumns)
	}
	t := &Table{keyBits: keyBits}
	for c, w := range widths {
		if !validWidth(w) {
			return nil, fmt.Errorf("%w: column %d width %d not 1, 2 or 4", ErrBadLayout, c, w)
		}
		t.setColumn(c, w)
	}
	t.ncols.Store(int32(len(widths)))

	segBits := segmentBits(keyBits)
	t.storedBits = keyBits - segBits
	t.storedMask = 1<<t.storedBits - 1
	t.keyBytes = int(t.storedBits / 8)
	t.mix = newMixer(keyBits)
	// Grown rather than made, so cap(t.segs) (MemBytes) reflects the size
	// class the allocator rounds the headers up to.
	t.segs = slices.Grow([]segment(nil), 1<<segBits)[:1<<segBits]
	if sizeHint >= 4*len(t.segs) {
		// A hint only presizes; growth handles the rest, so cap it at what a
		// segment can hold and at 1<<24 rows per segment. Segments are
		// sized for 3/4 of their share and grow through their capacity
		// steps from there, so a hinted table ends where a grown one does:
		// sized for the whole share (a step above the mean), half the
		// segments grew once more right away and a hinted load cost 5-16%
		// more per row than a grown one (TestHintCostsNoMore). Hints below
		// 4 rows per segment presize nothing: most segments would stay
		// empty.
		per := min(sizeHint/len(t.segs)*3/4, 1<<t.storedBits, 1<<24)
		for i := range t.segs {
			sg := &t.segs[i]
			sg.phase = t.phase(i)
			sg.mu.ncols = uint8(len(widths))
			if !t.rebuildLocked(sg, nextSlots(0, per, sg.phase), len(widths)) {
				panic("hot: rebuild of an empty segment failed")
			}
		}
	} else {
		for i := range t.segs {
			t.segs[i].phase = t.phase(i)
			t.segs[i].mu.ncols = uint8(len(widths))
			t.segs[i].mu.rowBytes = uint8(t.keyBytes + int(t.offs[len(widths)]))
		}
	}
	return t, nil
}

// segmentBits picks how many top bits of the mixed key select a segment, so
// that the remaining stored bits are a whole number of bytes: 8..15 segment
// bits (256..32768 segments) for keyBits >= 16, keyBits-8 below that.
func segmentBits(keyBits uint) uint {
	if keyBits < 16 {
		return keyBits - 8
	}
	return 8 + keyBits%8
}

func validWidth(w int) bool { return w == 1 || w == 2 || w == 4 }

// setColumn records column c's width; the caller publishes it by storing
// ncols afterwards.
func (t *Table) setColumn(c, w int) {
	t.widths[c] = uint8(w)
	t.ones[c] = 1<<(8*uint(w)) - 1
	t.offs[c+1] = t.offs[c] + uint8(w)
}

// phase spreads segments' capacity steps over one growth step so that
// segments filled at the same rate do not all grow at the same moment, which
// would make bytes/row swing with the row count.
func (t *Table) phase(i int) float32 { return float32(i) / float32(len(t.segs)) }

// KeyBits returns the width of the table's keys.
func (t *Table) KeyBits() uint { return t.keyBits }

// NumColumns returns the number of columns of a row.
func (t *Table) NumColumns() int { return int(t.ncols.Load()) }

// Len returns the number of stored (not all-zero) rows.
func (t *Table) Len() int { return int(t.rows.Load()) }

// Approximate bytes an overflow map costs: per entry a 16-byte key/value
// slot plus control byte at Go's 7/8 maximum load, rounded up; per map its
// header and first group less one entry, so that a map of one entry (the
// common case: overflows are rare, one per segment) costs what the heap
// measured for it, 192 bytes (TestMemBytesMatchesHeap).
const (
	ovEntryBytes = 24
	ovMapBytes   = 192 - ovEntryBytes
)

// MemBytes returns the bytes of memory the table holds: slot arrays (by
// capacity), overflow maps (estimated from their sizes), segment headers and
// the Table itself.
func (t *Table) MemBytes() int {
	return int(unsafe.Sizeof(*t)) +
		cap(t.segs)*int(unsafe.Sizeof(segment{})) +
		int(t.slotBytes.Load()) +
		int(t.ovEntries.Load())*ovEntryBytes +
		int(t.ovMaps.Load())*ovMapBytes
}

// ExpectedBytesPerRow returns what a row costs on average, in slot bytes,
// in a large table of keyBits-bit keys and columns of the given widths:
// the row's bytes (stored key and values) over the average load between
// capacity steps, rowBytes*(growth-1)/ln(growth)/maxLoad (see Growth in
// the package doc). Fixed per-table and per-segment costs are not in it.
func ExpectedBytesPerRow(keyBits uint, widths []int) float64 {
	rb := int((keyBits - segmentBits(keyBits)) / 8)
	for _, w := range widths {
		rb += w
	}
	return float64(rb) * (growth - 1) / lnGrowth / maxLoad
}

// NumSegments returns the number of segments, for RangeSegment.
func (t *Table) NumSegments() int { return len(t.segs) }

// locate maps a valid key to its segment and stored key.
func (t *Table) locate(key uint64) (*segment, uint64) {
	m := t.mix.mix(key)
	return &t.segs[m>>t.storedBits], m & t.storedMask
}

// Get appends the row's values (one per column, NumColumns of them) to
// dst[:0] and returns it and whether the row is stored. An absent row or a
// key out of range yields zeros. It allocates only if cap(dst) is too small.
func (t *Table) Get(key uint64, dst []uint64) ([]uint64, bool) {
	n := int(t.ncols.Load())
	if cap(dst) < n {
		dst = make([]uint64, n)
	} else {
		dst = dst[:n]
		clear(dst)
	}
	if key > t.mix.mask {
		return dst, false
	}
	sg, s := t.locate(key)
	sg.mu.RLock()
	p := t.findLocked(sg, s)
	if p < 0 {
		sg.mu.RUnlock()
		return dst, false
	}
	row := sg.mu.slots[p+t.keyBytes:]
	nc := min(n, int(sg.mu.ncols))
	for c := range nc {
		v := readCell(row[t.offs[c]:], t.widths[c])
		if v == t.ones[c] {
			v = sg.mu.ov[ovKey(s, c)]
		}
		dst[c] = v
	}
	sg.mu.RUnlock()
	return dst, true
}

// GetColumn returns one column of the row; 0 if the row is absent or key or
// col is out of range.
func (t *Table) GetColumn(key uint64, col int) uint64 {
	if key > t.mix.mask || col < 0 || col >= int(t.ncols.Load()) {
		return 0
	}
	sg, s := t.locate(key)
	sg.mu.RLock()
	var v uint64
	if p := t.findLocked(sg, s); p >= 0 && col < int(sg.mu.ncols) {
		v = readCell(sg.mu.slots[p+t.keyBytes+int(t.offs[col]):], t.widths[col])
		if v == t.ones[col] {
			v = sg.mu.ov[ovKey(s, col)]
		}
	}
	sg.mu.RUnlock()
	return v
}

// Put stores the full row: len(vals) <= NumColumns, missing trailing columns
// are 0. An all-zero row is deleted. A value >= its column's all-ones is
// stored as all-ones in the row and exactly in the segment's overflow map.
func (t *Table) Put(key uint64, vals []uint64) error {
	if key > t.mix.mask {
		return fmt.Errorf("%w: key %d >= 1<<%d", ErrKeyRange, key, t.keyBits)
	}
	n := int(t.ncols.Load())
	if len(vals) > n {
		return fmt.Errorf("%w: %d values for %d columns", ErrColumn, len(vals), n)
	}
	zero := true
	for _, v := range vals {
		if v != 0 {
			zero = false
			break
		}
	}
	if zero {
		return t.Delete(key)
	}
	sg, s := t.locate(key)
	sg.mu.Lock()
	t.putLocked(sg, s, vals, n)
	sg.mu.Unlock()
	return nil
}

// Delete removes the row (makes it all zero). Deleting an absent row is a
// no-op.
func (t *Table) Delete(key uint64) error {
	if key > t.mix.mask {
		return fmt.Errorf("%w: key %d >= 1<<%d", ErrKeyRange, key, t.keyBits)
	}
	sg, s := t.locate(key)
	sg.mu.Lock()
	t.deleteLocked(sg, s)
	sg.mu.Unlock()
	return nil
}

// AddColumn appends a column of the given width. Existing rows are not
// rewritten: a segment migrates to the new layout on its next growth or Put;
// until then the new column reads as 0 there.
func (t *Table) AddColumn(width int) error {
	t.layout.Lock()
	defer t.layout.Unlock()
	if err := t.canAddColumn(width); err != nil {
		return err
	}
	n := int(t.ncols.Load())
	t.setColumn(n, width)
	t.ncols.Store(int32(n + 1))
	return nil
}

// CanAddColumn reports the error AddColumn(width) would return now, without
// changing the table. A caller that must not fail half-way (a schema change
// over many tables) checks every table first.
func (t *Table) CanAddColumn(width int) error {
	t.layout.Lock()
	defer t.layout.Unlock()
	return t.canAddColumn(width)
}

func (t *Table) canAddColumn(width int) error {
	if !validWidth(width) {
		return fmt.Errorf("%w: column width %d not 1, 2 or 4", ErrBadLayout, width)
	}
	if n := int(t.ncols.Load()); n >= MaxColumns {
		return fmt.Errorf("%w: %d columns, cannot add one (limit %d)", ErrBadLayout, n, MaxColumns)
	}
	return nil
}

// Range calls fn for every stored row, in no particular order, one segment
// at a time under that segment's read lock. vals is reused between calls
// and has NumColumns entries. fn returning false stops the iteration.
//
// NB: fn must not call the table, not even to read (see the package doc);
// collect and act afterwards.
func (t *Table) Range(fn func(key uint64, vals []uint64) bool) {
	vals := make([]uint64, MaxColumns)
	for i := range t.segs {
		if !t.rangeSegment(i, vals, fn) {
			return
		}
	}
}

// RangeSegment is Range restricted to segment i (0 <= i < NumSegments), so a
// checkpoint can cut its chunks per segment. An i out of range visits nothing.
func (t *Table) RangeSegment(i int, fn func(key uint64, vals []uint64) bool) {
	if i < 0 || i >= len(t.segs) {
		return
	}
	t.rangeSegment(i, make([]uint64, MaxColumns), fn)
}

func (t *Table) rangeSegment(i int, buf []uint64, fn func(key uint64, vals []uint64) bool) bool {
	n := int(t.ncols.Load())
	sg := &t.segs[i]
	sg.mu.RLock()
	defer sg.mu.RUnlock()
	rb := int(sg.mu.rowBytes)
	nc := min(n, int(sg.mu.ncols))
	slots := sg.mu.slots
	hi := uint64(i) << t.storedBits
	for p := 0; p < int(sg.mu.nslots)*rb; p += rb {
		if t.emptyAt(slots, p, rb-t.keyBytes) {
			continue
		}
		s := t.storedAt(slots, p)
		vals := buf[:n]
		clear(vals)
		row := slots[p+t.keyBytes:]
		for c := range nc {
			v := readCell(row[t.offs[c]:], t.widths[c])
			if v == t.ones[c] {
				v = sg.mu.ov[ovKey(s, c)]
			}
			vals[c] = v
		}
		if !fn(t.mix.unmix(hi|s), vals) {
			return false
		}
	}
	return true
}

// ovColBits is the width of the column number in an overflow map key; a
// stored key has at most MaxKeyBits bits, so the key fits in 64 bits.
const ovColBits = 5

// The column number must fit ovColBits (compile-time check).
var _ [1<<ovColBits - MaxColumns]struct{}

func ovKey(s uint64, col int) uint64 { return s<<ovColBits | uint64(col) }

func readCell(b []byte, w uint8) uint64 {
	switch w {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	default:
		return uint64(binary.LittleEndian.Uint32(b))
	}
}

func writeCell(b []byte, w uint8, v uint64) {
	switch w {
	case 1:
		b[0] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	default:
		binary.LittleEndian.PutUint32(b, uint32(v))
	}
}

// home returns the home slot of stored key s in a segment with homes home
// slots: floor(s * homes / 2^storedBits), monotone in s.
func (t *Table) home(s uint64, homes uint32) int {
	hi, _ := bits.Mul64(s<<(64-t.storedBits), uint64(homes))
	return int(hi)
}
