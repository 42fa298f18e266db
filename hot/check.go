package hot

import (
	"bytes"
	"fmt"
)

// Check verifies every internal invariant and returns a descriptive error
// for the first violation found, or nil. It takes each segment's read lock
// in turn; tests call it between operations.
//
// Per segment: the slot array's size matches nslots, rowBytes and the tail
// slack; homes < nslots when allocated; the columns are a prefix of the
// table's; stored rows are in strictly ascending key order, each at or after
// its home slot with no empty slot in between; empty slots are entirely zero
// (so no all-zero row is stored); count matches; every all-ones cell has an
// overflow entry holding a value >= all-ones, and every overflow entry
// belongs to such a cell. Table-wide: the row, slot-byte and overflow
// counters match the segments.
func (t *Table) Check() error {
	n := int(t.ncols.Load())
	var rows, slotBytes, ovEntries, ovMaps int64
	for i := range t.segs {
		sg := &t.segs[i]
		sg.mu.RLock()
		err := t.checkSegmentLocked(i, sg, n)
		rows += int64(sg.mu.count)
		slotBytes += int64(cap(sg.mu.slots))
		ovEntries += int64(len(sg.mu.ov))
		if sg.mu.ov != nil {
			ovMaps++
		}
		sg.mu.RUnlock()
		if err != nil {
			return fmt.Errorf("hot: segment %d: %w", i, err)
		}
	}
	if got := t.rows.Load(); got != rows {
		return fmt.Errorf("hot: row counter %d, segments hold %d", got, rows)
	}
	if got := t.slotBytes.Load(); got != slotBytes {
		return fmt.Errorf("hot: slot byte counter %d, segments hold %d", got, slotBytes)
	}
	if got := t.ovEntries.Load(); got != ovEntries {
		return fmt.Errorf("hot: overflow entry counter %d, segments hold %d", got, ovEntries)
	}
	if got := t.ovMaps.Load(); got != ovMaps {
		return fmt.Errorf("hot: overflow map counter %d, segments hold %d", got, ovMaps)
	}
	return nil
}

func (t *Table) checkSegmentLocked(idx int, sg *segment, n int) error {
	nc := int(sg.mu.ncols)
	if nc < 1 || nc > n {
		return fmt.Errorf("ncols %d not in [1, %d]", nc, n)
	}
	rb := int(sg.mu.rowBytes)
	if rb != t.keyBytes+int(t.offs[nc]) {
		return fmt.Errorf("rowBytes %d, layout says %d", rb, t.keyBytes+int(t.offs[nc]))
	}
	ns := int(sg.mu.nslots)
	slots := sg.mu.slots
	if ns == 0 {
		if slots != nil || sg.mu.homes != 0 || sg.mu.count != 0 || sg.mu.ov != nil {
			return fmt.Errorf("unallocated segment holds slots %d, homes %d, count %d, overflow %d",
				len(slots), sg.mu.homes, sg.mu.count, len(sg.mu.ov))
		}
		return nil
	}
	if len(slots) != ns*rb+tailSlack {
		return fmt.Errorf("len(slots) %d, want %d*%d+%d", len(slots), ns, rb, tailSlack)
	}
	if !allZero(slots[ns*rb:]) {
		return fmt.Errorf("tail slack not zero")
	}
	if sg.mu.homes == 0 || int(sg.mu.homes) >= ns {
		return fmt.Errorf("homes %d not in [1, %d)", sg.mu.homes, ns)
	}
	vb := rb - t.keyBytes
	count := 0
	ovCells := 0
	var prev uint64
	prevEmpty := true
	for i := range ns {
		p := i * rb
		if t.emptyAt(slots, p, vb) {
			if !allZero(slots[p : p+rb]) {
				return fmt.Errorf("slot %d: all-zero row with key bytes %x stored", i, slots[p:p+t.keyBytes])
			}
			prevEmpty = true
			continue
		}
		s := t.storedAt(slots, p)
		if count > 0 && s <= prev {
			return fmt.Errorf("slot %d: key %#x not above previous %#x", i, s, prev)
		}
		h := t.home(s, sg.mu.homes)
		if h > i {
			return fmt.Errorf("slot %d: key %#x before its home %d", i, s, h)
		}
		if h < i && prevEmpty {
			return fmt.Errorf("slot %d: key %#x has an empty slot between it and home %d", i, s, h)
		}
		row := slots[p+t.keyBytes:]
		for c := range nc {
			if readCell(row[t.offs[c]:], t.widths[c]) != t.ones[c] {
				continue
			}
			v, ok := sg.mu.ov[ovKey(s, c)]
			if !ok {
				return fmt.Errorf("slot %d (key %d): all-ones column %d has no overflow entry",
					i, t.mix.unmix(uint64(idx)<<t.storedBits|s), c)
			}
			if v < t.ones[c] {
				return fmt.Errorf("slot %d: overflow of column %d holds %d, fits width %d", i, c, v, t.widths[c])
			}
			ovCells++
		}
		prev = s
		prevEmpty = false
		count++
	}
	if count != int(sg.mu.count) {
		return fmt.Errorf("count %d, slots hold %d rows", sg.mu.count, count)
	}
	if ovCells != len(sg.mu.ov) {
		return fmt.Errorf("%d overflow entries for %d all-ones cells", len(sg.mu.ov), ovCells)
	}
	if sg.mu.ov != nil && len(sg.mu.ov) == 0 {
		return fmt.Errorf("empty overflow map kept")
	}
	return nil
}

func allZero(b []byte) bool { return len(bytes.TrimLeft(b, "\x00")) == 0 }
