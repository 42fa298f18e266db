package hot

import (
	"math"
	"sync"
	"sync/atomic"
)

// A segment is one open-addressing table holding the rows whose mixed key
// has the segment's index in its top bits. Rows are kept in ascending
// stored-key order at or after their home slot with no empty slot between
// home and row (linear probing with Robin Hood ordering; because the home
// slot is monotone in the stored key, Robin Hood order is key order). There
// is no wrap-around: the last pad slots are homes of no key and absorb the
// tail of the last cluster.
//
// Readers are optimistic (a seqlock): load seq, read the published array
// with atomic loads, and accept the result only if seq is even and
// unchanged. Writers hold mu and make seq odd while they change anything a
// reader sees. The overflow map is read only under mu's read lock.
type segment struct {
	seq   atomic.Uint64             // odd while a writer changes the rows
	arr   atomic.Pointer[slotArray] // never nil
	phase float32                   // position of this segment's capacity steps in one growth step; immutable
	mu    struct {
		sync.RWMutex
		ov    map[uint64]uint64
		count uint32 // stored rows
	}
}

// Capacity policy. See doc.go for the measurements behind the numbers.
const (
	maxLoad  = 0.9  // grow when a segment's rows would exceed this share of its slots
	growth   = 1.25 // capacity step factor
	minSlots = 8    // smallest segment
	maxPad   = 256  // tail slots beyond the last home
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
func (t *Table) storedAt(a *slotArray, p int) uint64 {
	return a.load8(p) & t.storedMask
}

// emptyAt reports whether the value bytes of the row at p are all zero,
// which is what an empty slot is: stored rows are never all zero and an
// overflowed cell is all ones.
func (t *Table) emptyAt(a *slotArray, p int) bool {
	q := p + t.keyBytes
	vb := int(a.rowBytes) - t.keyBytes
	for vb > 8 {
		if a.load8(q) != 0 {
			return false
		}
		q += 8
		vb -= 8
	}
	return a.loadN(q, vb) == 0
}

// find returns the byte offset of stored key s's row in a, or -1. Under the
// seqlock the answer is only meaningful if seq did not change.
//
// NB: it compares keys only. Empty slots are all zero, so an empty slot
// reads as key 0 and is skipped for s > 0; that is safe because every row
// after an empty slot at or past s's home has a larger key (no gaps between
// a row and its home), so the scan still stops at the first key >= s.
func (t *Table) find(a *slotArray, s uint64) int {
	rb := int(a.rowBytes)
	end := int(a.nslots) * rb
	for p := t.home(s, a.homes) * rb; p < end; p += rb {
		k := a.load8(p) & t.storedMask
		if k >= s {
			if k == s && (s != 0 || !t.emptyAt(a, p)) {
				return p
			}
			return -1
		}
	}
	return -1
}

// seek returns the slot index holding s (found) or where s belongs: an
// empty slot, the slot of the first larger key, or nslots. Writers only.
func (t *Table) seek(a *slotArray, s uint64) (int, bool) {
	rb := int(a.rowBytes)
	n := int(a.nslots)
	for i := t.home(s, a.homes); i < n; i++ {
		p := i * rb
		if t.emptyAt(a, p) {
			return i, false
		}
		if k := t.storedAt(a, p); k >= s {
			return i, k == s
		}
	}
	return n, false
}

// beginWriteLocked and endWriteLocked bracket every change readers can see.
func (sg *segment) beginWriteLocked() { sg.seq.Add(1) }
func (sg *segment) endWriteLocked()   { sg.seq.Add(1) }

// putLocked writes the row of s; n is the table's column count when the
// caller validated vals.
func (t *Table) putLocked(sg *segment, s uint64, vals []uint64, n int) {
	if int(sg.arr.Load().ncols) < n {
		t.migrateLocked(sg, n)
	}
	a := sg.arr.Load()
	i, found := t.seek(a, s)
	if !found {
		for !t.openSlotLocked(sg, a, i) {
			t.growLocked(sg)
			a = sg.arr.Load()
			i, _ = t.seek(a, s)
		}
		a.storeN(i*int(a.rowBytes), t.keyBytes, s)
		sg.mu.count++
		t.rows.Add(1)
	}
	t.writeValuesLocked(sg, a, i, s, vals, found)
}

// openSlotLocked makes slot i (s's place from seek) empty by shifting the
// rows from i up to the next empty slot one slot right. It reports false,
// changing nothing, if the segment is at its maximum load or no empty slot
// follows i.
func (t *Table) openSlotLocked(sg *segment, a *slotArray, i int) bool {
	n := int(a.nslots)
	if float64(sg.mu.count+1) > maxLoad*float64(n) {
		return false
	}
	rb := int(a.rowBytes)
	e := i
	for e < n && !t.emptyAt(a, e*rb) {
		e++
	}
	if e == n {
		return false
	}
	if e > i {
		a.move((i+1)*rb, i*rb, (e-i)*rb)
		a.zero(i*rb, rb)
	}
	return true
}

// writeValuesLocked writes vals (zero-extended to the segment's columns) to
// slot i and keeps the overflow map in step. found says the slot held s's
// previous row.
func (t *Table) writeValuesLocked(sg *segment, a *slotArray, i int, s uint64, vals []uint64, found bool) {
	base := i*int(a.rowBytes) + t.keyBytes
	for c := range int(a.ncols) {
		var v uint64
		if c < len(vals) {
			v = vals[c]
		}
		off, w, ones := base+int(t.offs[c]), int(t.widths[c]), t.ones[c]
		wasOver := found && a.loadN(off, w) == ones
		if v >= ones {
			a.storeN(off, w, ones)
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
		a.storeN(off, w, v)
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
	a := sg.arr.Load()
	i, found := t.seek(a, s)
	if !found {
		return
	}
	rb := int(a.rowBytes)
	base := i*rb + t.keyBytes
	for c := range int(a.ncols) {
		if a.loadN(base+int(t.offs[c]), int(t.widths[c])) == t.ones[c] {
			t.dropOverflowLocked(sg, s, c)
		}
	}
	n := int(a.nslots)
	j := i + 1
	for j < n && !t.emptyAt(a, j*rb) && t.home(t.storedAt(a, j*rb), a.homes) < j {
		j++
	}
	a.move(i*rb, (i+1)*rb, (j-1-i)*rb)
	a.zero((j-1)*rb, rb)
	sg.mu.count--
	t.rows.Add(-1)
	if sg.mu.count == 0 {
		t.publishLocked(sg, t.emptyArray(int(a.ncols)))
	}
}

// emptyArray returns an unallocated array for rows of ncols columns.
func (t *Table) emptyArray(ncols int) *slotArray {
	return &slotArray{ncols: uint8(ncols), rowBytes: uint8(t.keyBytes + int(t.offs[ncols]))}
}

// publishLocked replaces the segment's array, keeping the byte counter.
func (t *Table) publishLocked(sg *segment, a *slotArray) {
	t.slotBytes.Add(int64(a.memBytes() - sg.arr.Load().memBytes()))
	sg.arr.Store(a)
}

// migrateLocked rewrites the segment's rows with n columns (AddColumn's lazy
// migration) at the same capacity.
func (t *Table) migrateLocked(sg *segment, n int) {
	a := sg.arr.Load()
	if a.nslots == 0 {
		t.publishLocked(sg, t.emptyArray(n))
		return
	}
	size := int(a.nslots)
	for !t.rebuildLocked(sg, size, n) {
		size = nextSlots(size, int(sg.mu.count), sg.phase)
	}
}

// growLocked rebuilds the segment at its next capacity step, migrating it
// to the table's current columns on the way.
func (t *Table) growLocked(sg *segment) {
	a := sg.arr.Load()
	n := max(int(a.ncols), int(t.ncols.Load()))
	size := nextSlots(int(a.nslots), int(sg.mu.count)+1, sg.phase)
	for !t.rebuildLocked(sg, size, n) {
		size = nextSlots(size, int(sg.mu.count)+1, sg.phase)
	}
}

// rebuildLocked copies the segment's rows into a new array of size slots
// with ncols columns and publishes it. Rows are visited in key order, so
// each lands at max(home, previous+1) without shifting. It reports false,
// changing nothing, if the last row would not fit before the end.
func (t *Table) rebuildLocked(sg *segment, size, ncols int) bool {
	old := sg.arr.Load()
	rb := t.keyBytes + int(t.offs[ncols])
	homes := size - padSlots(size)
	na := newSlotArray(size, homes, ncols, rb)
	orb := int(old.rowBytes)
	prev := -1
	for p := 0; p < int(old.nslots)*orb; p += orb {
		if t.emptyAt(old, p) {
			continue
		}
		pos := max(t.home(t.storedAt(old, p), uint32(homes)), prev+1)
		if pos >= size {
			return false
		}
		for k := 0; k < orb; k += 8 {
			c := min(8, orb-k)
			na.storeN(pos*rb+k, c, old.loadN(p+k, c))
		}
		prev = pos
	}
	t.publishLocked(sg, na)
	return true
}
