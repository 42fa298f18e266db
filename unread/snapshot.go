package unread

// Feed snapshots: the value format of family unread_feed and its merge
// operator.
//
// A user's snapshot maps each followee f to base(u, f), the post count the
// user has "seen" of f. It is changed by three operations, all written as
// merge operands so that none of them reads the value it changes:
//
//   - follow(f, base): the follow-graph observer, inside timeline's batch:
//     f is followed from now on, with base = f's post count at that commit;
//   - unfollow(f): the observer, inside timeline's batch: f is gone;
//   - reset(g0, list): FeedReset: every followee in list gets its base; or,
//     as a fill, the first read of a user whose follows predate unread:
//     followees the snapshot misses get their base, the others keep theirs.
//
// NB: resets of one user must not overlap: of two resets in flight at once,
// the one committed first would win even if the other read later. Unread
// serializes them per user (resetLocks), so one Unread per store and
// process is a requirement.
//
// Why merges: a follow commits in timeline's batch, at a moment unread does
// not control, while a reset reads the snapshot and the post counts (under
// db.View, at one moment T1) and commits later. A reset written as a whole
// value would erase a follow or unfollow that committed between T1 and the
// reset's commit. As a merge, every operation is applied to the key in
// commit order, and the reset carries g0, the number of operations the
// value had applied at T1: it changes only entries whose last change is
// at or before g0 (setAt ≤ g0). An entry followed, unfollowed or re-followed
// after T1 keeps what that later operation set, which is exactly "base is
// f's count at the later of the reset and the follow". No lock has to span
// timeline's commit, and the result does not depend on how Pebble groups
// the operands.
//
// Associativity: a payload is either a whole snapshot ('S') or a list of
// operations ('O'). Merge(S, O) applies the operations to the snapshot;
// Merge(O, O) concatenates the lists; Finish (the merge reached the key's
// oldest version) applies a list to the empty snapshot. Applying is a left
// fold, so every grouping of a key's operands gives the same snapshot. A
// whole snapshot only ever arises from a merge that included the key's
// oldest version, so Merge(S, O) always applies to the true base.
//
// Before a user's snapshot is initialized (it may miss follows that
// predate unread; see the package doc) an unfollow leaves a dead entry
// rather than deleting, so that the initializing reset can tell "unfollowed
// after T1" from "never recorded". The initializing reset drops every dead
// entry; later unfollows delete.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/klauspost/compress/zstd"

	"github.com/tallydb/tally/internal/checksum"
	"github.com/tallydb/tally/internal/zpool"
	"github.com/tallydb/tally/store"
)

// Format constants of snapshot payloads.
const (
	snapVersion = 1

	kindSnapshot = 'S' // a whole snapshot
	kindOps      = 'O' // a list of operations

	opFollow   = 'F'
	opUnfollow = 'U'
	opReset    = 'R'

	snapFlagInit = 1 << 0 // membership is the follow graph's
	snapFlagZstd = 1 << 1 // the body is zstd-compressed

	opFlagInitIfNew = 1 << 0 // a key this operation creates starts initialized
	opFlagFill      = 1 << 1 // reset: an initializing read's, keeping the bases it finds

	// zstdMinBody is the smallest body worth trying to compress, and a
	// compressed body is kept only if it saves at least 1/zstdMinGain of
	// the raw one.
	zstdMinBody = 128
	zstdMinGain = 8
	zstdLevel   = 3

	// maxEntries bounds the followees of one snapshot (and of one reset
	// list), so a damaged count cannot make a decoder allocate without
	// limit. It is far above any follow cap a platform sets.
	maxEntries = 1 << 22
)

// snapMerge is the merge operator of family unread_feed. Its id is in the
// custom range (128-255); see the package doc for why 0xB1.
var snapMerge = &store.MergeOperator{
	ID:     0xB1,
	Name:   "unread_feed-v1",
	Merge:  mergeSnapshot,
	Finish: finishSnapshot,
	Check:  checkSnapshot,
}

// entry is one followee of a snapshot.
type entry struct {
	id    uint64 // the followee
	base  uint64 // its post count when last reset or followed (0 if dead)
	setAt uint64 // the operation (1-based index into the key's history) that last set it
	dead  bool   // unfollowed before the snapshot was initialized
}

// snapshot is a decoded whole snapshot.
type snapshot struct {
	init    bool
	n       uint64  // operations applied since the key's first
	entries []entry // ascending id
}

// feedOp is one decoded operation.
type feedOp struct {
	typ       byte
	initIfNew bool
	fill      bool     // reset: keep live entries' bases, add what is missing
	f, base   uint64   // follow, unfollow
	g0        uint64   // reset: operations the value had applied when read
	ids       []uint64 // reset: followees, ascending
	bases     []uint64 // reset: their bases
}

var errSnapshot = errors.New("bad feed snapshot")

func snapErrf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errSnapshot, fmt.Sprintf(format, args...))
}

// live returns the number of live entries.
func (s *snapshot) live() int {
	n := 0
	for i := range s.entries {
		if !s.entries[i].dead {
			n++
		}
	}
	return n
}

// find returns the index of id in s.entries, or where it would go.
func (s *snapshot) find(id uint64) (int, bool) {
	return slices.BinarySearchFunc(s.entries, id, func(e entry, id uint64) int {
		switch {
		case e.id < id:
			return -1
		case e.id > id:
			return 1
		}
		return 0
	})
}

// apply applies one operation. s is the value before it; a new key starts
// as &snapshot{init: op.initIfNew}.
func (s *snapshot) apply(op *feedOp) {
	s.n++
	n := s.n
	switch op.typ {
	case opFollow:
		i, ok := s.find(op.f)
		e := entry{id: op.f, base: op.base, setAt: n}
		if ok {
			s.entries[i] = e
		} else {
			s.entries = slices.Insert(s.entries, i, e)
		}
	case opUnfollow:
		i, ok := s.find(op.f)
		switch {
		case s.init && ok:
			s.entries = slices.Delete(s.entries, i, i+1)
		case !s.init && ok:
			s.entries[i] = entry{id: op.f, setAt: n, dead: true}
		case !s.init:
			s.entries = slices.Insert(s.entries, i, entry{id: op.f, setAt: n, dead: true})
		}
	case opReset:
		s.applyReset(op, n)
	}
}

// applyReset applies reset op as operation n. See the file comment.
func (s *snapshot) applyReset(op *feedOp, n uint64) {
	if s.init && op.fill {
		return // initialized since the fill read it: nothing is missing
	}
	s.applyResetEntries(op, n)
	// Resets of a user are serialized (Unread.resetLocks): the next one
	// reads after this one commits, so its g0 is at least n and every entry
	// here is at or before it. Their exact setAt no longer matters; making
	// them all n lets the tags run-length encode to one run.
	for i := range s.entries {
		s.entries[i].setAt = n
	}
}

func (s *snapshot) applyResetEntries(op *feedOp, n uint64) {
	if s.init {
		// Membership is kept by follow and unfollow: only bases change,
		// and only of entries nobody changed after the reset read them.
		j := 0
		for i := range s.entries {
			e := &s.entries[i]
			for j < len(op.ids) && op.ids[j] < e.id {
				j++
			}
			if j < len(op.ids) && op.ids[j] == e.id && e.setAt <= op.g0 {
				e.base, e.setAt = op.bases[j], n
			}
		}
		return
	}
	// Initializing: op's list is the follow graph at T1. Entries changed
	// after T1 keep that change (dead ones are dropped: unfollowed), the
	// rest take the graph's word: followed or not, and the base op read
	// (a fill keeps the base of a live entry).
	out := make([]entry, 0, max(len(s.entries), len(op.ids)))
	i, j := 0, 0
	for i < len(s.entries) || j < len(op.ids) {
		switch {
		case j == len(op.ids) || i < len(s.entries) && s.entries[i].id < op.ids[j]:
			if e := s.entries[i]; e.setAt > op.g0 && !e.dead {
				out = append(out, e)
			}
			i++
		case i == len(s.entries) || op.ids[j] < s.entries[i].id:
			out = append(out, entry{id: op.ids[j], base: op.bases[j], setAt: n})
			j++
		default: // same id
			e := s.entries[i]
			switch {
			case e.setAt <= op.g0 && op.fill && !e.dead:
				out = append(out, e)
			case e.setAt <= op.g0:
				out = append(out, entry{id: e.id, base: op.bases[j], setAt: n})
			case !e.dead:
				out = append(out, e)
			}
			i++
			j++
		}
	}
	s.entries, s.init = out, true
}

// appendSnapshot encodes a whole snapshot payload (the merge operator's id
// byte is not part of it).
//
//	field     width     meaning
//	--------  --------  ------------------------------------------------------
//	version   1         snapVersion (1)
//	kind      1         'S' (a whole snapshot)
//	flags     1         bit 0: initialized; bit 1: body is zstd-compressed
//	n         uvarint   operations applied to the key since its first
//	count     uvarint   entries (live and dead)
//	live      uvarint   live entries (they have a base)
//	rawlen    uvarint   only with bit 1: the body's decoded length
//	body      ...       the columns below (compressed or not), up to crc
//	crc       4         CRC-32C, big-endian, of every byte before it
//
// Body columns, entries in ascending followee id:
//
//	ids       count × uvarint   the first id, then each id minus the one
//	                            before (≥ 1)
//	tags      runs of (uvarint length ≥ 1, uvarint tag) covering count
//	                            entries; tag = (n − setAt) << 1 | dead
//	bases     live × uvarint    the bases of the live entries
//
// Columns rather than records: ids and bases are near-random varints that
// neither layout nor zstd compresses much (a user following 200 of 1M
// accounts takes about 3 bytes a followee), while tags are nearly constant
// (every entry a reset set shares one) and run-length encode to a few
// bytes. zstd is tried on bodies of 128 bytes and more and kept only when
// it saves an eighth; on such graphs it rarely does (TestSnapshotSize).
func appendSnapshot(dst []byte, s *snapshot) []byte {
	start := len(dst)
	live := s.live()
	body, _, _ := appendColumns(make([]byte, 0, 4*len(s.entries)+8), s)
	flags := byte(0)
	if s.init {
		flags |= snapFlagInit
	}
	var z []byte
	if len(body) >= zstdMinBody {
		if enc, err := zpool.Encoder(zstdLevel); err == nil {
			z = enc.EncodeAll(body, make([]byte, 0, len(body)))
			if len(z) > len(body)-len(body)/zstdMinGain {
				z = nil
			}
		}
	}
	if z != nil {
		flags |= snapFlagZstd
	}
	dst = append(dst, snapVersion, kindSnapshot, flags)
	dst = binary.AppendUvarint(dst, s.n)
	dst = binary.AppendUvarint(dst, uint64(len(s.entries)))
	dst = binary.AppendUvarint(dst, uint64(live))
	if z != nil {
		dst = binary.AppendUvarint(dst, uint64(len(body)))
		dst = append(dst, z...)
	} else {
		dst = append(dst, body...)
	}
	return checksum.AppendTrailer(dst, start)
}

// appendColumns appends a snapshot's body columns (see appendSnapshot) to
// dst and returns where, counted from the body's start, its tags and
// bases columns begin.
func appendColumns(dst []byte, s *snapshot) (out []byte, tagsOff, basesOff int) {
	start := len(dst)
	prev := uint64(0)
	for i := range s.entries {
		dst = binary.AppendUvarint(dst, s.entries[i].id-prev)
		prev = s.entries[i].id
	}
	tagsOff = len(dst) - start
	for i := 0; i < len(s.entries); {
		tag := entryTag(s.n, &s.entries[i])
		k := i + 1
		for k < len(s.entries) && entryTag(s.n, &s.entries[k]) == tag {
			k++
		}
		dst = binary.AppendUvarint(dst, uint64(k-i))
		dst = binary.AppendUvarint(dst, tag)
		i = k
	}
	basesOff = len(dst) - start
	for i := range s.entries {
		if !s.entries[i].dead {
			dst = binary.AppendUvarint(dst, s.entries[i].base)
		}
	}
	return dst, tagsOff, basesOff
}

func entryTag(n uint64, e *entry) uint64 {
	t := (n - e.setAt) << 1
	if e.dead {
		t |= 1
	}
	return t
}

// reader decodes uvarints from a payload, remembering the first error.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, k := binary.Uvarint(r.b[r.off:])
	if k <= 0 {
		r.err = snapErrf("%s at offset %d: bad uvarint", what, r.off)
		return 0
	}
	r.off += k
	return v
}

func (r *reader) byte(what string) byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.err = snapErrf("%s at offset %d: truncated", what, r.off)
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

// checkFrame verifies p's length, checksum and version and returns its kind
// and the bytes before the checksum.
func checkFrame(p []byte) (byte, []byte, error) {
	if len(p) < 2+4 {
		return 0, nil, snapErrf("%d bytes: too short", len(p))
	}
	body, err := checksum.CutTrailer(p)
	if err != nil {
		return 0, nil, snapErrf("%v", err)
	}
	if p[0] != snapVersion {
		return 0, nil, snapErrf("unknown version %d", p[0])
	}
	if p[1] != kindSnapshot && p[1] != kindOps {
		return 0, nil, snapErrf("unknown kind %#x", p[1])
	}
	return p[1], body, nil
}

// snapHeader is a whole snapshot's header.
type snapHeader struct {
	init              bool
	n, count, live    uint64
	body              []byte // the columns (decompressed)
	tagsOff, basesOff int    // where the tags and bases columns start in body
}

// parseSnapshot checks a whole snapshot payload (checksum, header, every
// column) without decoding its entries into memory; scan then walks them.
// It allocates only to decompress a zstd body.
func parseSnapshot(p []byte) (snapHeader, error) {
	var h snapHeader
	kind, framed, err := checkFrame(p)
	if err != nil {
		return h, err
	}
	if kind != kindSnapshot {
		return h, snapErrf("kind %q is not a whole snapshot", kind)
	}
	r := reader{b: framed, off: 2}
	flags := r.byte("flags")
	h.init = flags&snapFlagInit != 0
	h.n = r.uvarint("n")
	h.count = r.uvarint("count")
	h.live = r.uvarint("live")
	if r.err != nil {
		return h, r.err
	}
	if flags&^(snapFlagInit|snapFlagZstd) != 0 {
		return h, snapErrf("unknown flags %#x", flags)
	}
	if h.count > maxEntries || h.live > h.count {
		return h, snapErrf("%d entries, %d live", h.count, h.live)
	}
	h.body = framed[r.off:]
	if flags&snapFlagZstd != 0 {
		raw := r.uvarint("rawlen")
		if r.err != nil {
			return h, r.err
		}
		// Every entry takes at least 2 body bytes (id, base or a run);
		// at most 10 for an id, 10 for a base and 20 for its own run.
		if raw < h.count || raw > 40*h.count+20 || raw > zpool.MaxDecoded {
			return h, snapErrf("decoded body of %d bytes for %d entries", raw, h.count)
		}
		// Check the frame's declared size before allocating for it.
		var zh zstd.Header
		if err := zh.Decode(framed[r.off:]); err != nil || !zh.HasFCS || zh.FrameContentSize != raw {
			return h, snapErrf("zstd frame header does not declare %d bytes", raw)
		}
		dec, err := zpool.Decoder()
		if err != nil {
			return h, err
		}
		out, err := dec.DecodeAll(framed[r.off:], make([]byte, 0, raw))
		if err != nil || uint64(len(out)) != raw {
			return h, snapErrf("zstd body: %v (%d of %d bytes)", err, len(out), raw)
		}
		h.body = out
	}
	if h.count > uint64(len(h.body)) {
		return h, snapErrf("%d entries in a %d-byte body", h.count, len(h.body))
	}
	// The loops below run on every read of a snapshot (twice: the store
	// checks a value with Check before unread decodes it), so they decode
	// varints inline rather than through reader.
	b, off := h.body, 0
	prev := uint64(0)
	for i := uint64(0); i < h.count; i++ {
		d, k := binary.Uvarint(b[off:])
		if k <= 0 {
			return h, snapErrf("entry %d: bad id at body offset %d", i, off)
		}
		off += k
		if i > 0 && d == 0 || d > ^uint64(0)-prev {
			return h, snapErrf("entry %d: id delta %d after %d", i, d, prev)
		}
		prev += d
	}
	h.tagsOff = off
	nlive := uint64(0)
	for i := uint64(0); i < h.count; {
		run, k := binary.Uvarint(b[off:])
		if k <= 0 {
			return h, snapErrf("bad run length at body offset %d", off)
		}
		off += k
		tag, k := binary.Uvarint(b[off:])
		if k <= 0 {
			return h, snapErrf("bad tag at body offset %d", off)
		}
		off += k
		if run == 0 || run > h.count-i {
			return h, snapErrf("tag run of %d at entry %d of %d", run, i, h.count)
		}
		if tag>>1 > h.n {
			return h, snapErrf("entry %d set %d operations before operation %d", i, tag>>1, h.n)
		}
		if tag&1 == 0 {
			nlive += run
		} else if h.init {
			return h, snapErrf("dead entry %d in an initialized snapshot", i)
		}
		i += run
	}
	if nlive != h.live {
		return h, snapErrf("%d live entries, header says %d", nlive, h.live)
	}
	h.basesOff = off
	for i := uint64(0); i < h.live; i++ {
		_, k := binary.Uvarint(b[off:])
		if k <= 0 {
			return h, snapErrf("base %d: bad uvarint at body offset %d", i, off)
		}
		off += k
	}
	br := reader{b: b, off: off}
	if br.off != len(h.body) {
		return h, snapErrf("%d trailing body bytes", len(h.body)-br.off)
	}
	return h, nil
}

// scan calls fn for every entry of a snapshot parseSnapshot accepted, in
// id order.
func (h *snapHeader) scan(fn func(e entry)) {
	ids := reader{b: h.body[:h.tagsOff]}
	tags := reader{b: h.body[h.tagsOff:h.basesOff]}
	bases := reader{b: h.body[h.basesOff:]}
	var id, run, tag uint64
	for i := uint64(0); i < h.count; i++ {
		id += ids.uvarint("id")
		if run == 0 {
			run = tags.uvarint("run length")
			tag = tags.uvarint("tag")
		}
		run--
		e := entry{id: id, setAt: h.n - tag>>1, dead: tag&1 != 0}
		if !e.dead {
			e.base = bases.uvarint("base")
		}
		fn(e)
	}
}

// decodeSnapshot decodes a whole snapshot payload. It never retains p.
func decodeSnapshot(p []byte) (*snapshot, error) {
	h, err := parseSnapshot(p)
	if err != nil {
		return nil, err
	}
	s := &snapshot{init: h.init, n: h.n, entries: make([]entry, 0, h.count)}
	h.scan(func(e entry) { s.entries = append(s.entries, e) })
	return s, nil
}

// decodeView decodes a value read from the family (framed by the merge
// operator's id byte) into what a read needs: a cache entry (the checked
// columns, copied) and whether the snapshot is initialized.
func decodeView(v []byte, user, gen uint64) (*cacheEntry, bool, error) {
	if len(v) == 0 || v[0] != snapMerge.ID {
		return nil, false, snapErrf("value does not start with operator id %#x", snapMerge.ID)
	}
	if len(v) > 2 && v[2] != kindSnapshot {
		// An operation list a read did not finish: fold it.
		s, err := decodeStored(v)
		if err != nil {
			return nil, false, err
		}
		return newCacheEntry(user, gen, s), s.init, nil
	}
	h, err := parseSnapshot(v[1:])
	if err != nil {
		return nil, false, err
	}
	e := &cacheEntry{user: user, gen: gen, n: h.n, count: h.count, live: int(h.live),
		body: slices.Clone(h.body), tagsOff: h.tagsOff, basesOff: h.basesOff}
	e.size = cacheEntryOverhead + int64(len(e.body))
	return e, h.init, nil
}

// appendOps encodes a list of operations.
//
//	field     width     meaning
//	--------  --------  ------------------------------------------------------
//	version   1         snapVersion (1)
//	kind      1         'O' (a list of operations)
//	count     uvarint   operations that follow, oldest first
//	per operation:
//	  type    1         'F' follow, 'U' unfollow, 'R' reset
//	  flags   1         bit 0: a key this operation creates starts initialized;
//	                    bit 1 (reset only): a fill, keeping live entries' bases
//	  F:      uvarint followee, uvarint base
//	  U:      uvarint followee
//	  R:      uvarint g0, uvarint k, k × uvarint ids (the first, then deltas
//	          ≥ 1), k × uvarint bases
//	crc       4         CRC-32C, big-endian, of every byte before it
func appendOps(dst []byte, ops ...*feedOp) []byte {
	start := len(dst)
	dst = append(dst, snapVersion, kindOps)
	dst = binary.AppendUvarint(dst, uint64(len(ops)))
	for _, op := range ops {
		dst = appendOpBody(dst, op)
	}
	return checksum.AppendTrailer(dst, start)
}

func appendOpBody(dst []byte, op *feedOp) []byte {
	flags := byte(0)
	if op.initIfNew {
		flags |= opFlagInitIfNew
	}
	if op.fill {
		flags |= opFlagFill
	}
	dst = append(dst, op.typ, flags)
	switch op.typ {
	case opFollow:
		dst = binary.AppendUvarint(dst, op.f)
		dst = binary.AppendUvarint(dst, op.base)
	case opUnfollow:
		dst = binary.AppendUvarint(dst, op.f)
	case opReset:
		dst = binary.AppendUvarint(dst, op.g0)
		dst = binary.AppendUvarint(dst, uint64(len(op.ids)))
		prev := uint64(0)
		for _, id := range op.ids {
			dst = binary.AppendUvarint(dst, id-prev)
			prev = id
		}
		for _, b := range op.bases {
			dst = binary.AppendUvarint(dst, b)
		}
	}
	return dst
}

// opsHeader parses an operation list's header; it returns the count and
// the offset of the first operation in framed (p without its checksum).
func opsHeader(framed []byte) (uint64, int, error) {
	r := &reader{b: framed, off: 2}
	n := r.uvarint("count")
	if r.err != nil {
		return 0, 0, r.err
	}
	// Every operation takes at least 3 bytes.
	if n == 0 || n > uint64(len(framed)) {
		return 0, 0, snapErrf("%d operations in %d bytes", n, len(framed))
	}
	return n, r.off, nil
}

// decodeOps decodes an operation list. It never retains p.
func decodeOps(p []byte) ([]feedOp, error) {
	kind, framed, err := checkFrame(p)
	if err != nil {
		return nil, err
	}
	if kind != kindOps {
		return nil, snapErrf("kind %q is not an operation list", kind)
	}
	n, off, err := opsHeader(framed)
	if err != nil {
		return nil, err
	}
	r := &reader{b: framed, off: off}
	ops := make([]feedOp, n)
	for i := range ops {
		op := &ops[i]
		op.typ = r.byte("operation type")
		flags := r.byte("operation flags")
		if r.err != nil {
			return nil, r.err
		}
		if flags&^(opFlagInitIfNew|opFlagFill) != 0 || flags&opFlagFill != 0 && op.typ != opReset {
			return nil, snapErrf("operation %d: flags %#x", i, flags)
		}
		op.initIfNew = flags&opFlagInitIfNew != 0
		op.fill = flags&opFlagFill != 0
		switch op.typ {
		case opFollow:
			op.f = r.uvarint("followee")
			op.base = r.uvarint("base")
		case opUnfollow:
			op.f = r.uvarint("followee")
		case opReset:
			op.g0 = r.uvarint("g0")
			k := r.uvarint("reset count")
			if r.err != nil {
				return nil, r.err
			}
			if k > maxEntries || 2*k > uint64(len(framed)-r.off) {
				return nil, snapErrf("operation %d: reset of %d followees in %d bytes", i, k, len(framed)-r.off)
			}
			op.ids = make([]uint64, k)
			op.bases = make([]uint64, k)
			prev := uint64(0)
			for j := range op.ids {
				d := r.uvarint("reset id")
				if r.err == nil && (j > 0 && d == 0 || d > ^uint64(0)-prev) {
					return nil, snapErrf("operation %d: id delta %d after %d", i, d, prev)
				}
				prev += d
				op.ids[j] = prev
			}
			for j := range op.bases {
				op.bases[j] = r.uvarint("reset base")
			}
		default:
			return nil, snapErrf("operation %d: unknown type %#x", i, op.typ)
		}
		if r.err != nil {
			return nil, r.err
		}
	}
	if r.off != len(framed) {
		return nil, snapErrf("%d trailing bytes after %d operations", len(framed)-r.off, n)
	}
	return ops, nil
}

// concatOps joins two operation lists (older first) without decoding their
// operations.
func concatOps(older, newer []byte) ([]byte, error) {
	_, fo, err := checkFrame(older)
	if err != nil {
		return nil, err
	}
	_, fn, err := checkFrame(newer)
	if err != nil {
		return nil, err
	}
	na, oa, err := opsHeader(fo)
	if err != nil {
		return nil, err
	}
	nb, ob, err := opsHeader(fn)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(older)+len(newer))
	out = append(out, snapVersion, kindOps)
	out = binary.AppendUvarint(out, na+nb)
	out = append(out, fo[oa:]...)
	out = append(out, fn[ob:]...)
	return checksum.AppendTrailer(out, 0), nil
}

// foldOps applies an operation list to s (nil: the key had no value).
func foldOps(s *snapshot, ops []feedOp) *snapshot {
	for i := range ops {
		if s == nil {
			s = &snapshot{init: ops[i].initIfNew}
		}
		s.apply(&ops[i])
	}
	return s
}

func mergeSnapshot(older, newer []byte) ([]byte, error) {
	kn, _, err := checkFrame(newer)
	if err != nil {
		return nil, err
	}
	if kn == kindSnapshot {
		// Only a merge that reached the key's oldest version makes a whole
		// snapshot, so nothing older can be merged under it; it wins.
		return slices.Clone(newer), nil
	}
	ko, _, err := checkFrame(older)
	if err != nil {
		return nil, err
	}
	if ko == kindOps {
		return concatOps(older, newer)
	}
	s, err := decodeSnapshot(older)
	if err != nil {
		return nil, err
	}
	ops, err := decodeOps(newer)
	if err != nil {
		return nil, err
	}
	return appendSnapshot(nil, foldOps(s, ops)), nil
}

func finishSnapshot(p []byte) ([]byte, error) {
	k, _, err := checkFrame(p)
	if err != nil {
		return nil, err
	}
	if k == kindSnapshot {
		return p, nil
	}
	ops, err := decodeOps(p)
	if err != nil {
		return nil, err
	}
	return appendSnapshot(nil, foldOps(nil, ops)), nil
}

func checkSnapshot(p []byte) error {
	k, _, err := checkFrame(p)
	if err != nil {
		return err
	}
	if k == kindSnapshot {
		_, err = parseSnapshot(p)
	} else {
		_, err = decodeOps(p)
	}
	return err
}

// decodeStored decodes a value read from the family (framed by the merge
// operator's id byte): a whole snapshot, or an operation list a read has
// not finished (folded onto nothing).
func decodeStored(v []byte) (*snapshot, error) {
	if len(v) == 0 || v[0] != snapMerge.ID {
		return nil, snapErrf("value does not start with operator id %#x", snapMerge.ID)
	}
	p := v[1:]
	k, _, err := checkFrame(p)
	if err != nil {
		return nil, err
	}
	if k == kindSnapshot {
		return decodeSnapshot(p)
	}
	ops, err := decodeOps(p)
	if err != nil {
		return nil, err
	}
	return foldOps(nil, ops), nil
}
