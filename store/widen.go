package store

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tallydb/tally/hot"
	"github.com/tallydb/tally/internal/limits"
)

// Widening ranges.
//
// A range is the unit of aging and of routing (id >> bits), and every range
// has a fixed cost: a hot table of 32-bit keys has 256 segment headers and a
// first slot array in each segment it uses, about 20-40 KiB before its
// second row. Ids that leave few rows per range therefore cost that much
// per row: 200,000 snowflake ids written one per 400 ms at the old fixed
// default of 32 bits made 78,125 ranges of 2.6 rows and 3 GB (15,225 B per
// row; issue 19). Random 64-bit ids are worse: every id its own range.
//
// A counter created without an explicit width (CounterOptions.AutoRangeBits)
// starts at 32 bits and is widened, to 40, 48, 56 or 64 bits, when its hot
// ranges hold fewer than widenRowsPerRange rows each on average: the new
// width is the narrowest at which the ids seen so far fall in at most
// rows/widenRowsPerRange ranges (or in one), and at which ranges of the
// ids' density would hold widenRowsPerRange rows (chooseBits). A wider range holds every row of
// the narrower ranges it covers, so widening only merges ranges, never
// splits one. Widths stay multiples of 8 so that stored keys are whole bytes
// (hot package doc). Widening never narrows: a counter that once saw random
// ids keeps 64-bit ranges.
//
// Rejected: a sparse representation per range (a sorted id array, promoted
// to the dense table when full enough) would cut the per-range cost from
// ~20 KiB to ~150 B (rangeState, map entry, table header), still ~60 B per
// row for snowflake ids at 2.6 rows per range and ~150 B for random ids.
// Only fewer ranges reach the ~12 B per row the issue asks for.
//
// When: the commit path checks a KeepHot counter each time its range count
// doubles past widenMinRanges; Load checks before loading, with the ids it
// is about to load. A counter is widened only while every range is hot:
// cold blocks, deltas and intents name ranges by id, so once a range has
// aged the width is fixed. Aging counters widen only in Load, which holds
// jobMu, so no seal or merge can have picked a range at the old width.
//
// Durability: the new width is written (synced) under meta "rangebits/"
// before the widened tables are published. Log records name full ids, so
// they replay at any width. Checkpoint chunks carry the width they were cut
// at (chunk version 2); recovery rebases a chunk of a narrower width into
// the range of the current width that covers it (loadChunk). A crash after
// the meta write and before the next checkpoint thus recovers at the new
// width from chunks of the old one.
//
// Cost: widening copies every hot row once, under DB.commit. It happens at
// most four times per counter, at row counts bounded by ranges ×
// widenRowsPerRange, and the commit path first triggers it at 64 ranges.

const (
	// maxAutoBits is the widest range: one range holds every id.
	maxAutoBits = 64
	// widenMinRanges is the range count below which the commit path does
	// not look at a counter's width: a few narrow ranges cost little.
	widenMinRanges = 64
	// widenRowsPerRange is the average number of rows per range below which
	// ranges are widened. At ~20 KiB of fixed cost per range it keeps that
	// cost under 1 B per row.
	widenRowsPerRange = 32768
)

// widenState is the commit path's bookkeeping, guarded by DB.commit.
type widenState struct {
	nextCheck int // range count at which the commit path looks again; 0 = widenMinRanges
}

// allHot reports whether every range of set is hot (no delta, frozen
// delta or blocks): only then may the width change.
func allHot(set *rangeSet) bool {
	for _, rs := range set.m {
		if rs.cold != nil || rs.delta != nil || rs.frozen != nil {
			return false
		}
	}
	return true
}

// chooseBits returns the width for rows ids spread over span ids (max-min+1;
// 0 for all 2^64), when ranges(b) counts the ranges they fall in at width
// b. It returns cur when the ids fall in at most max(1,
// rows/widenRowsPerRange) ranges at cur. Otherwise it returns a multiple of
// 8 above cur, the wider of
//
//   - the narrowest at which the ids seen fall in that many ranges, and
//   - the narrowest at which a range of the ids' density would hold
//     widenRowsPerRange rows: time-ordered ids (snowflake) keep arriving
//     at that density, so widening to what the first rows fill would only
//     lead to widening again.
func chooseBits(cur uint, rows int, span uint64, ranges func(b uint) int) uint {
	limit := max(1, rows/widenRowsPerRange)
	if rows == 0 || ranges(cur) <= limit || cur >= maxAutoBits {
		return cur
	}
	next := func(b uint) uint { return min(maxAutoBits, (b/8+1)*8) }
	b := next(cur)
	for ranges(b) > limit && b < maxAutoBits {
		b = next(b)
	}
	spanF := float64(span)
	if span == 0 {
		spanF = math.Exp2(64)
	}
	want := uint(math.Ceil(math.Log2(widenRowsPerRange * spanF / float64(rows))))
	for b < want && b < maxAutoBits {
		b = next(b)
	}
	return b
}

// idSpan returns max-min+1 of the ids of set's non-empty ranges (at range
// granularity) and of ids (sorted), 0 meaning all 2^64 ids.
func idSpan(set *rangeSet, ids []uint64) uint64 {
	lo, hi := ^uint64(0), uint64(0)
	for rid, rs := range set.m {
		if rs.hot.Len() > 0 {
			lo = min(lo, rid<<set.bits)
			hi = max(hi, rid<<set.bits|set.mask)
		}
	}
	if len(ids) > 0 {
		lo, hi = min(lo, ids[0]), max(hi, ids[len(ids)-1])
	}
	if lo > hi {
		return 1
	}
	return hi - lo + 1 // 0 if the ids span all 2^64
}

// maybeWidenLocked is the commit path's check, run after a commit applied
// rows of cs. The caller holds DB.commit. A failed widening is reported as
// a background error and changes nothing.
func (db *DB) maybeWidenLocked(cs *counterState) {
	if !cs.autoBits || cs.age.Kind != KeepHot {
		return
	}
	set := cs.ranges.Load()
	next := cs.widen.nextCheck
	if next == 0 {
		next = widenMinRanges
	}
	if len(set.m) < next {
		return
	}
	cs.widen.nextCheck = 2 * len(set.m)
	if set.bits >= maxAutoBits || !allHot(set) {
		return
	}
	rows := 0
	for _, rs := range set.m {
		rows += rs.hot.Len()
	}
	bits := chooseBits(set.bits, rows, idSpan(set, nil), func(b uint) int { return countRanges(set, b, nil) })
	if bits == set.bits {
		return
	}
	if err := db.widenLocked(cs, bits); err != nil {
		db.bgError(err)
	}
}

// countRanges counts the ranges at width b (>= set.bits) holding a
// non-empty range of set or one of ids (sorted).
func countRanges(set *rangeSet, b uint, ids []uint64) int {
	shift := b - set.bits
	seen := make(map[uint64]struct{}, len(set.m))
	for rid, rs := range set.m {
		if rs.hot.Len() > 0 {
			seen[shiftRight(rid, shift)] = struct{}{}
		}
	}
	n := len(seen)
	for i, id := range ids {
		r := shiftRight(id, b)
		if i > 0 && shiftRight(ids[i-1], b) == r {
			continue
		}
		if _, ok := seen[r]; !ok {
			n++
		}
	}
	return n
}

// shiftRight is x >> s, 0 for s >= 64 (as Go defines it; named for the
// reader who would otherwise check).
func shiftRight(x uint64, s uint) uint64 { return x >> s }

// widenForLoad widens cs before Load puts ids (sorted) into it, if cs has
// auto range bits, every range is hot, and the ids with the rows already
// held would make ranges of fewer than widenRowsPerRange rows. The caller
// holds jobMu.
func (db *DB) widenForLoad(cs *counterState, ids []uint64) error {
	if !cs.autoBits || len(ids) == 0 {
		return nil
	}
	db.commit.Lock()
	defer db.commit.Unlock()
	set := cs.ranges.Load()
	if set.bits >= maxAutoBits || !allHot(set) {
		return nil
	}
	rows := len(ids)
	for _, rs := range set.m {
		rows += rs.hot.Len()
	}
	bits := chooseBits(set.bits, rows, idSpan(set, ids), func(b uint) int { return countRanges(set, b, ids) })
	if bits == set.bits {
		return nil
	}
	return db.widenLocked(cs, bits)
}

// widenLocked rebuilds every hot range of cs at width bits (> the current
// one), records the width durably, and publishes the new ranges. The
// caller holds DB.commit and has checked that every range is hot. On error
// nothing changed.
func (db *DB) widenLocked(cs *counterState, bits uint) error {
	if err := db.writable(); err != nil {
		return err
	}
	set := cs.ranges.Load()
	shift := bits - set.bits
	widths := cs.cols.Load().widths
	hints := map[uint64]int{}
	for rid, rs := range set.m {
		hints[shiftRight(rid, shift)] += rs.hot.Len()
	}
	n := newRangeSet(bits, make(map[uint64]*rangeState, len(hints)))
	for nrid, hint := range hints {
		t, err := hot.New(bits, widths, hint)
		if err != nil {
			return fmt.Errorf("tally: widen %s to %d bits: %w", cs.name, bits, err)
		}
		n.m[nrid] = &rangeState{id: nrid, hot: t}
	}
	var putErr error
	for rid, rs := range set.m {
		dst := n.m[shiftRight(rid, shift)].hot
		base := rid << set.bits
		rs.hot.Range(func(key uint64, vals []uint64) bool {
			putErr = dst.Put((base|key)&n.mask, vals)
			return putErr == nil
		})
		if putErr != nil {
			return fmt.Errorf("tally: widen %s to %d bits: %w", cs.name, bits, putErr)
		}
	}
	for rid, rs := range n.m {
		if rs.hot.Len() == 0 {
			delete(n.m, rid) // every row was in ranges of deletes only
		}
	}
	// NB: the width is durable before anything is cut at it (chunks) or
	// named by it; see the file comment.
	if err := db.pdb().Set(appendRangeBitsKey(nil, cs.id), appendRangeBits(nil, bits), pebble.Sync); err != nil {
		return fmt.Errorf("tally: widen %s to %d bits: %w", cs.name, bits, pebbleErr(err))
	}
	cs.ranges.Store(n)
	cs.widen.nextCheck = max(widenMinRanges, 2*len(n.m))
	db.tierChanges.Add(1) // the next checkpoint must cut chunks at the new width
	return nil
}

func appendRangeBitsKey(dst []byte, counterID uint32) []byte {
	dst = appendMetaKey(dst, metaRangeBits)
	return binary.BigEndian.AppendUint32(dst, counterID)
}

// rangeBitsVersion is the version byte of a meta "rangebits/" value.
const rangeBitsVersion = 1

// appendRangeBits encodes the current width of a widened counter, kept
// under meta "rangebits/" + counter id.
//
//	field     width  meaning
//	--------  -----  ------------------------------------------------
//	version   1      rangeBitsVersion
//	bits      1      range width, the schema's RangeBits+8k, <= 64
//	checksum  4      CRC-32C of everything before, big-endian
func appendRangeBits(dst []byte, bits uint) []byte {
	start := len(dst)
	dst = append(dst, rangeBitsVersion, byte(bits))
	return appendChecksum(dst, start)
}

// decodeRangeBits decodes a value written by appendRangeBits. Errors wrap
// ErrCorrupt.
func decodeRangeBits(b []byte) (uint, error) {
	body, err := verifyChecksum(b, "range bits")
	if err != nil {
		return 0, err
	}
	d := decoder{b: body, what: "range bits"}
	if v := d.byte(); d.err == nil && v != rangeBitsVersion {
		return 0, fmt.Errorf("%w: range bits version %d", ErrCorrupt, v)
	}
	bits := uint(d.byte())
	if err := d.finish(); err != nil {
		return 0, err
	}
	return bits, nil
}

// loadRangeBits applies the widths recorded under meta "rangebits/" to the
// counters of cat (recovery, before any range exists).
func (db *DB) loadRangeBits(cat *catalog) error {
	prefix := appendMetaKey(nil, metaRangeBits)
	return db.scan(prefix, prefixEnd(prefix), func(k, v []byte) error {
		if len(k) != len(prefix)+4 {
			return fmt.Errorf("%w: range bits key %x", ErrCorrupt, k)
		}
		cs := cat.byID[binary.BigEndian.Uint32(k[len(prefix):])]
		if cs == nil {
			return fmt.Errorf("%w: range bits of unknown counter %x", ErrCorrupt, k)
		}
		bits, err := decodeRangeBits(v)
		if err != nil {
			return fmt.Errorf("%s: %w", cs.name, err)
		}
		if !cs.autoBits || bits < cs.schemaBits || bits > maxAutoBits || bits < limits.MinRangeBits {
			return fmt.Errorf("%w: %s: range bits %d (schema %d, auto %v)", ErrCorrupt, cs.name, bits, cs.schemaBits, cs.autoBits)
		}
		cs.ranges.Store(newRangeSet(bits, map[uint64]*rangeState{}))
		return nil
	})
}

// checkWidth verifies a counter's width (for Check): the snapshot's mask
// matches its bits; a fixed-width counter is at its schema's width, an
// auto one at that or a multiple of 8 above, at most 64; every range id
// fits the width.
func checkWidth(cs *counterState, set *rangeSet) error {
	bits := set.bits
	switch {
	case set.mask != 1<<bits-1:
		return fmt.Errorf("tally: %s: mask %#x for %d-bit ranges", cs.name, set.mask, bits)
	case !cs.autoBits && bits != cs.schemaBits:
		return fmt.Errorf("tally: %s: fixed %d-bit ranges at %d bits", cs.name, cs.schemaBits, bits)
	case cs.autoBits && bits != cs.schemaBits && (bits%8 != 0 || bits < cs.schemaBits || bits > maxAutoBits):
		return fmt.Errorf("tally: %s: ranges of %d bits from %d", cs.name, bits, cs.schemaBits)
	}
	for rid := range set.m {
		if rid > shiftRight(^uint64(0), bits) {
			return fmt.Errorf("tally: %s: range %d beyond %d-bit ranges", cs.name, rid, bits)
		}
	}
	return nil
}

// widenImagesLocked runs the commit path's width check for the counters a
// commit touched.
func (b *Batch) widenImagesLocked() {
	var last *counterState
	for i := range b.images {
		if cs := b.images[i].cs; cs != last {
			b.db.maybeWidenLocked(cs)
			last = cs
		}
	}
}
