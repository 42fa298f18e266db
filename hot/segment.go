package hot

import (
	"encoding/binary"
	"math"
	"slices"
	"sync"
)

// A segment is one open-addressing table holding the rows whose mixed key
// has the segment's index in its top bits. Rows are kept in ascending
// stored-key order at or after their home slot with no empty slot between
// home and row (linear probing with Robin Hood ordering; because the home
// slot is monotone in the stored key, Robin Hood order is key order). There
// is no wrap-around: the last pad slots are homes of no key and absorb the
// tail of the last cluster.
type segment struct {
	phase float32 // position of this segment's capacity steps in one growth step; immutable
	mu    struct {
		sync.RWMutex
		slots    []byte // nslots rows of rowBytes, then 8 zero bytes for word reads
		ov       map[uint64]uint64
		nslots   uint32 // rows in slots (home slots plus pad)
		homes    uint32 // home slots: home(s) in [0, homes)
		count    uint32 // stored rows
		ncols    uint8  // physical columns of this segment's rows (<= Table.ncols)
		rowBytes uint8  // keyBytes + value bytes of ncols columns
	}
}

// Capacity policy. See doc.go for the measurements behind the numbers.
const (
	maxLoad   = 0.9   // grow when a segment's rows would exceed this share of its slots
	growth    = 1.125 // capacity step factor
	minSlots  = 8     // smallest segment
	maxPad    = 256   // tail slots beyond the last home
	tailSlack = 8     // zero bytes after the last row so 8-byte loads stay in bounds
)

var lnGrowth = math.Log(growth)

// padSlots returns how many of n slots are tail pad (no key's home).
func padSlots(n int) int { return max(1, min(maxPad, n/32)) }

// nextSlots returns the slot count of the smallest capacity step, at the
// segment's phase, that is larger than cur and holds need rows within
// maxLoad. Steps are minSlots * growth^(k+phase) for integer k.
func nextSlots(cur, need int, phase float32) int {
	want := max(float64(need)/maxLoad, float64(cur+1), minSlots)
	ph := float64(phase)
	k := math.Ceil(math.Log(want/minSlots)/lnGrowth - ph)
	n := int(math.Ceil(minSlots * math.Exp((k+ph)*lnGrowth)))
	return max(n, int(math.Ceil(want)))
}

// storedAt returns the stored key of the row at byte offset p.
func (t *Table) storedAt(slots []byte, p int) uint64 {
	return binary.LittleEndian.Uint64(slots[p:]) & t.storedMask
}

// emptyAt reports whether the vb value bytes of the row at p are all zero,
// which is what an empty slot is: stored rows are never all zero and an
// overflowed cell is all ones.
func (t *Table) emptyAt(slots []byte, p, vb int) bool {
	q := p + t.keyBytes
	for vb > 8 {
		if binary.LittleEndian.Uint64(slots[q:]) != 0 {
			return false
		}
		q += 8
		vb -= 8
	}
	return binary.LittleEndian.Uint64(slots[q:])&(1<<(8*uint(vb))-1) == 0
}

// findLocked returns the byte offset of stored key s's row, or -1.
//
// NB: it compares keys only. Empty slots are all zero, so an empty slot
// reads as key 0 and is skipped for s > 0; that is safe because every row
// after an empty slot at or past s's home has a larger key (no gaps between
// a row and its home), so the scan still stops at the first key >= s.
func (t *Table) findLocked(sg *segment, s uint64) int {
	rb := int(sg.mu.rowBytes)
	slots := sg.mu.slots
	end := int(sg.mu.nslots) * rb
	for p := t.home(s, sg.mu.homes) * rb; p < end; p += rb {
		k := binary.LittleEndian.Uint64(slots[p:]) & t.storedMask
		if k >= s {
			if k == s && (s != 0 || !t.emptyAt(slots, p, rb-t.keyBytes)) {
				return p
			}
			return -1
		}
	}
	return -1
}

// seekLocked returns the slot index holding s (found) or where s belongs:
// an empty slot, the slot of the first larger key, or nslots.
func (t *Table) seekLocked(sg *segment, s uint64) (int, bool) {
	rb := int(sg.mu.rowBytes)
	vb := rb - t.keyBytes
	slots := sg.mu.slots
	n := int(sg.mu.nslots)
	for i := t.home(s, sg.mu.homes); i < n; i++ {
		p := i * rb
		if t.emptyAt(slots, p, vb) {
			return i, false
		}
		if k := t.storedAt(slots, p); k >= s {
			return i, k == s
		}
	}
	return n, false
}

// putLocked writes the row of s; n is the table's column count when the
// caller validated vals.
func (t *Table) putLocked(sg *segment, s uint64, vals []uint64, n int) {
	if int(sg.mu.ncols) < n {
		t.migrateLocked(sg, n)
	}
	i, found := t.seekLocked(sg, s)
	if !found {
		for !t.openSlotLocked(sg, i) {
			t.growLocked(sg)
			i, _ = t.seekLocked(sg, s)
		}
		t.writeKey(sg.mu.slots, i*int(sg.mu.rowBytes), s)
		sg.mu.count++
		t.rows.Add(1)
	}
	t.writeValuesLocked(sg, i, s, vals, found)
}

// openSlotLocked makes slot i (s's place from seekLocked) empty by shifting
// the rows from i up to the next empty slot one slot right. It reports false,
// changing nothing, if the segment is at its maximum load or no empty slot
// follows i.
func (t *Table) openSlotLocked(sg *segment, i int) bool {
	n := int(sg.mu.nslots)
	if float64(sg.mu.count+1) > maxLoad*float64(n) {
		return false
	}
	rb := int(sg.mu.rowBytes)
	vb := rb - t.keyBytes
	slots := sg.mu.slots
	e := i
	for e < n && !t.emptyAt(slots, e*rb, vb) {
		e++
	}
	if e == n {
		return false
	}
	if e > i {
		copy(slots[(i+1)*rb:(e+1)*rb], slots[i*rb:e*rb])
		clear(slots[i*rb : (i+1)*rb])
	}
	return true
}

func (t *Table) writeKey(slots []byte, p int, s uint64) {
	for b := range t.keyBytes {
		slots[p+b] = byte(s >> (8 * b))
	}
}

// writeValuesLocked writes vals (zero-extended to the segment's columns) to
// slot i and keeps the overflow map in step. found says the slot held s's
// previous row.
func (t *Table) writeValuesLocked(sg *segment, i int, s uint64, vals []uint64, found bool) {
	row := sg.mu.slots[i*int(sg.mu.rowBytes)+t.keyBytes:]
	for c := range int(sg.mu.ncols) {
		var v uint64
		if c < len(vals) {
			v = vals[c]
		}
		cell := row[t.offs[c]:]
		w, ones := t.widths[c], t.ones[c]
		wasOver := found && readCell(cell, w) == ones
		if v >= ones {
			writeCell(cell, w, ones)
			if sg.mu.ov == nil {
				sg.mu.ov = make(map[uint64]uint64)
				t.ovMaps.Add(1)
			}
			if !wasOver {
				t.ovEntries.Add(1)
			}
			sg.mu.ov[ovKey(s, c)] = v
			continue
		}
		writeCell(cell, w, v)
		if wasOver {
			t.dropOverflowLocked(sg, s, c)
		}
	}
}

func (t *Table) dropOverflowLocked(sg *segment, s uint64, c int) {
	delete(sg.mu.ov, ovKey(s, c))
	t.ovEntries.Add(-1)
	if len(sg.mu.ov) == 0 {
		sg.mu.ov = nil // Go maps never shrink; free it
		t.ovMaps.Add(-1)
	}
}

// deleteLocked removes s's row if stored, shifting the displaced rows after
// it back by one slot (no tombstones).
func (t *Table) deleteLocked(sg *segment, s uint64) {
	i, found := t.seekLocked(sg, s)
	if !found {
		return
	}
	rb := int(sg.mu.rowBytes)
	vb := rb - t.keyBytes
	slots := sg.mu.slots
	row := slots[i*rb+t.keyBytes:]
	for c := range int(sg.mu.ncols) {
		if readCell(row[t.offs[c]:], t.widths[c]) == t.ones[c] {
			t.dropOverflowLocked(sg, s, c)
		}
	}
	n := int(sg.mu.nslots)
	j := i + 1
	for j < n && !t.emptyAt(slots, j*rb, vb) && t.home(t.storedAt(slots, j*rb), sg.mu.homes) < j {
		j++
	}
	copy(slots[i*rb:(j-1)*rb], slots[(i+1)*rb:j*rb])
	clear(slots[(j-1)*rb : j*rb])
	sg.mu.count--
	t.rows.Add(-1)
	if sg.mu.count == 0 {
		t.slotBytes.Add(-int64(cap(sg.mu.slots)))
		sg.mu.slots, sg.mu.nslots, sg.mu.homes = nil, 0, 0
	}
}

// migrateLocked rewrites the segment's rows with n columns (AddColumn's lazy
// migration) at the same capacity.
func (t *Table) migrateLocked(sg *segment, n int) {
	if sg.mu.nslots == 0 {
		sg.mu.ncols = uint8(n)
		sg.mu.rowBytes = uint8(t.keyBytes + int(t.offs[n]))
		return
	}
	size := int(sg.mu.nslots)
	for !t.rebuildLocked(sg, size, n) {
		size = nextSlots(size, int(sg.mu.count), sg.phase)
	}
}

// growLocked rebuilds the segment at its next capacity step, migrating it
// to the table's current columns on the way.
func (t *Table) growLocked(sg *segment) {
	n := max(int(sg.mu.ncols), int(t.ncols.Load()))
	size := nextSlots(int(sg.mu.nslots), int(sg.mu.count)+1, sg.phase)
	for !t.rebuildLocked(sg, size, n) {
		size = nextSlots(size, int(sg.mu.count)+1, sg.phase)
	}
}

// rebuildLocked copies the segment's rows into a new array of size slots
// with ncols columns. Rows are visited in key order, so each lands at
// max(home, previous+1) without shifting. It reports false, changing
// nothing, if the last row would not fit before the end.
func (t *Table) rebuildLocked(sg *segment, size, ncols int) bool {
	rb := t.keyBytes + int(t.offs[ncols])
	// The allocator rounds every allocation up to its size class (to 8 KiB
	// pages above 32 KiB); slices.Grow asks for that rounded size, so the
	// slots use the whole allocation and cap(ns), which MemBytes counts, is
	// what the heap holds.
	ns := slices.Grow([]byte(nil), size*rb+tailSlack)
	size = (cap(ns) - tailSlack) / rb
	ns = ns[:size*rb+tailSlack]
	homes := uint32(size - padSlots(size))
	old, orb := sg.mu.slots, int(sg.mu.rowBytes)
	ovb := orb - t.keyBytes
	prev := -1
	for p := 0; p < int(sg.mu.nslots)*orb; p += orb {
		if t.emptyAt(old, p, ovb) {
			continue
		}
		pos := max(t.home(t.storedAt(old, p), homes), prev+1)
		if pos >= size {
			return false
		}
		copy(ns[pos*rb:], old[p:p+orb])
		prev = pos
	}
	t.slotBytes.Add(int64(cap(ns) - cap(old)))
	sg.mu.slots = ns
	sg.mu.nslots = uint32(size)
	sg.mu.homes = homes
	sg.mu.ncols = uint8(ncols)
	sg.mu.rowBytes = uint8(rb)
	return true
}
