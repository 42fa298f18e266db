package store

// Merge operators.
//
// Pebble takes one Merger per DB. tally's Merger ("tally.merge.v1", a name
// Pebble records in its OPTIONS file, so it never changes) dispatches every
// merge to the operator that wrote it: the first byte of every value and
// operand of a merge family is its operator's id. Ids 1-127 are the built-in
// operators below, known to every build, so a process that did not declare a
// family can still merge (and compact) its values. Ids 128-255 are custom
// operators a host declares with its family; a process that does not know
// one keeps its operands unmerged, in order, and a process that does
// resolves them on read (see pebbleMerger).
//
// Every operator must be associative: for operands a, b, c (oldest first),
// Merge(Merge(a, b), c) must equal Merge(a, Merge(b, c)) once finished,
// because Pebble merges whatever adjacent operands a read or a compaction
// happens to see. TestMergeAssociative checks every built-in operator with
// random splits of random operand sequences.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// mergerName is the name Pebble records for tally's Merger; it must never
// change, or Pebble refuses to open existing stores.
const mergerName = "tally.merge.v1"

// FirstCustomMergeID is the lowest id of a custom (host-declared) operator.
const FirstCustomMergeID = 128

// MergeOperator is an associative merge function. A value or operand of a
// family with an operator is the operator's id byte followed by a payload;
// the functions below see payloads only.
type MergeOperator struct {
	// ID is the first byte of every value and operand: 1-127 for the
	// built-in operators, FirstCustomMergeID-255 for custom ones.
	ID byte
	// Name identifies the operator in the family registry; a family's
	// operator can never change.
	Name string
	// Merge combines two adjacent payloads, older first, into one. It must
	// be associative (see the file comment) and must not modify or retain
	// its arguments.
	Merge func(older, newer []byte) ([]byte, error)
	// MergeMany, if set, merges several payloads (oldest first) at once and
	// must give what folding Merge over them gives (for MergeTopList: a
	// window of the same truth). Pebble hands a read or a compaction every
	// operand of a key; decoding each once and encoding once beats a
	// decode-merge-encode per operand. The default folds Merge.
	MergeMany func(payloads [][]byte) ([]byte, error)
	// Finish, if set, turns a merge that reached the oldest version of the
	// key into a plain value (drop tombstones, say). Returning nil leaves
	// the empty value (the id byte alone), which reads as absent and is the
	// identity of later merges. The default keeps the merged payload.
	Finish func(payload []byte) ([]byte, error)
	// Check decodes a payload and reports whether it is well formed.
	Check func(payload []byte) error

	// mergeManyTo, if set, is MergeMany appending its result to dst (a
	// pooled merger's buffer).
	mergeManyTo func(dst []byte, payloads [][]byte) ([]byte, error)
}

func (m *MergeOperator) validate() error {
	if m.ID == 0 || m.Merge == nil || m.Check == nil || m.Name == "" || len(m.Name) > 64 {
		return fmt.Errorf("%w: merge operator %q (id %d) needs an id, a name, Merge and Check", ErrInvalidOption, m.Name, m.ID)
	}
	if m.ID < FirstCustomMergeID && builtinMergers[m.ID] != m {
		return fmt.Errorf("%w: merge operator id %d is reserved for built-in operators", ErrInvalidOption, m.ID)
	}
	return nil
}

// Frame returns payload framed as a value or operand of m: the id byte,
// then the payload, appended to dst.
func (m *MergeOperator) Frame(dst, payload []byte) []byte {
	dst = append(dst, m.ID)
	return append(dst, payload...)
}

// check validates a framed value or operand. The id byte alone is the
// empty value (what a merge finished to nothing leaves; reads as absent).
func (m *MergeOperator) check(v []byte) error {
	if len(v) == 0 || v[0] != m.ID {
		return fmt.Errorf("not a %s value (id byte %x)", m.Name, head(v))
	}
	if len(v) == 1 {
		return nil
	}
	return m.Check(v[1:])
}

// mergerTable maps operator ids to operators: the built-ins, then custom
// operators as families declare them. Pebble's compactions read it from
// their own goroutines.
type mergerTable struct {
	custom [256 - FirstCustomMergeID]atomic.Pointer[MergeOperator]
}

func (t *mergerTable) lookup(id byte) *MergeOperator {
	if id < FirstCustomMergeID {
		return builtinMergers[id]
	}
	return t.custom[id-FirstCustomMergeID].Load()
}

// add installs a custom operator; an id taken by another operator is a
// conflict.
func (t *mergerTable) add(m *MergeOperator) error {
	slot := &t.custom[m.ID-FirstCustomMergeID]
	if !slot.CompareAndSwap(nil, m) {
		if cur := slot.Load(); cur != m && cur.Name != m.Name {
			return fmt.Errorf("%w: merge operator id %d is %q, declared again as %q", ErrFamilyConflict, m.ID, cur.Name, m.Name)
		}
	}
	return nil
}

// newMergerTable returns the table with the custom operators of specs.
func newMergerTable(specs []FamilySpec) (*mergerTable, error) {
	t := &mergerTable{}
	for _, s := range specs {
		if m := s.Merge; m != nil && m.ID >= FirstCustomMergeID {
			if err := m.validate(); err != nil {
				return nil, err
			}
			if err := t.add(m); err != nil {
				return nil, err
			}
		}
	}
	return t, nil
}

// legacyMergerName is the Merger name Pebble recorded for stores of format
// 1, which had no merges (Pebble's default merger).
const legacyMergerName = "pebble.concatenate"

// pebbleMergerName returns the Merger name to give Pebble for the instance
// in dir: the name its newest OPTIONS file records when that is tally's or
// the legacy one (Pebble refuses a changed name; format 1 never wrote a
// merge, and the TALLY marker, not this name, keeps older builds away from
// newer stores), else mergerName.
func pebbleMergerName(fs vfs.FS, dir string) string {
	desc, err := pebble.Peek(dir, fs)
	if err != nil || !desc.Exists || desc.OptionsFilename == "" {
		return mergerName
	}
	f, err := fs.Open(desc.OptionsFilename) // Peek returns the full path
	if err != nil {
		return mergerName
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return mergerName
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "merger="); ok && v == legacyMergerName {
			return legacyMergerName
		}
	}
	return mergerName
}

// pebbleMerger is the Merger handed to Pebble, under name.
//
// NB: the Merger never fails. Pebble flushes and compacts merge operands in
// the background, and a flush that fails is retried forever (it would hang
// Open and every later write). So operands it cannot merge (an operator
// this process does not know, or a payload the operator rejects) are kept,
// in order, in a deferred list (deferredID): concatenating lists is
// associative, nothing is lost, and a read through a family that knows the
// operator resolves the list (or reports ErrCorrupt for that key alone).
func (t *mergerTable) pebbleMerger(name string) *pebble.Merger {
	return &pebble.Merger{
		Name: name,
		Merge: func(key, value []byte) (pebble.ValueMerger, error) {
			vm := valueMergerPool.Get().(*valueMerger)
			vm.t, vm.key = t, key
			vm.start(value)
			return vm, nil
		},
	}
}

// deferredID marks a deferred merge list: operands kept unmerged.
const deferredID = 0

// appendDeferred encodes a deferred merge list, oldest operand first.
//
//	field     width      meaning
//	--------  ---------  ------------------------------------------------
//	id        1          deferredID (0, never an operator's id)
//	n         uvarint    operands that follow
//	per operand:
//	  len     uvarint    bytes of the operand
//	  operand len        a framed operand or value (its operator id first)
func appendDeferred(dst []byte, ops [][]byte) []byte {
	dst = append(dst, deferredID)
	dst = binary.AppendUvarint(dst, uint64(len(ops)))
	for _, o := range ops {
		dst = binary.AppendUvarint(dst, uint64(len(o)))
		dst = append(dst, o...)
	}
	return dst
}

// decodeDeferred returns the operands of a deferred list (aliasing v).
func decodeDeferred(v []byte) ([][]byte, error) {
	d := decoder{b: v, what: "deferred merge list"}
	if id := d.byte(); d.err == nil && id != deferredID {
		return nil, fmt.Errorf("deferred merge list id %d", id)
	}
	n := d.uvarint()
	if d.err == nil && n > uint64(len(v)) {
		return nil, fmt.Errorf("deferred merge list claims %d operands in %d bytes", n, len(v))
	}
	ops := make([][]byte, 0, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		l := d.uvarint()
		if d.err != nil || l == 0 || l > uint64(len(v)-d.off) {
			d.fail("operand")
			break
		}
		ops = append(ops, v[d.off:d.off+int(l)])
		d.off += int(l)
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	return ops, nil
}

// operands returns v's framed operands: the list's if v is deferred, else v.
func operands(v []byte) ([][]byte, error) {
	if len(v) > 0 && v[0] == deferredID {
		return decodeDeferred(v)
	}
	if len(v) == 0 {
		return nil, errors.New("empty merge operand")
	}
	return [][]byte{v}, nil
}

// resolve merges framed operands (oldest first) with m and finishes them
// as a read does. ok is false when the result is no value (deleted).
func (m *MergeOperator) resolve(ops [][]byte) (v []byte, ok bool, err error) {
	var acc []byte
	for i, o := range ops {
		if len(o) == 0 || o[0] != m.ID {
			return nil, false, fmt.Errorf("operand %d is not a %s operand (id %x)", i, m.Name, head(o))
		}
		if len(o) == 1 {
			continue // the empty value: identity
		}
		if acc == nil {
			if err := m.Check(o[1:]); err != nil {
				return nil, false, err
			}
			acc = o[1:]
			continue
		}
		if acc, err = m.Merge(acc, o[1:]); err != nil {
			return nil, false, err
		}
	}
	if acc == nil {
		return nil, false, nil
	}
	if m.Finish != nil {
		if acc, err = m.Finish(acc); err != nil {
			return nil, false, err
		}
		if acc == nil {
			return nil, false, nil
		}
	}
	return m.Frame(nil, acc), true, nil
}

// valueMerger accumulates operands for Pebble: merged with their operator
// while it can, else as a deferred list.
//
// Mergers are pooled: a flush or compaction makes one per key it merges
// (most inbox keys of a flush hold one or two delivery operands), and
// their buffers were most of the objects the posts phase of timelinebench
// allocated (bench/RESULTS.md, "Sustained fan-out", 2026-11-28). Finish's
// value lives in the merger's buffers, so its Closer, which Pebble calls
// once it no longer reads the value, returns the merger to the pool; a
// merger whose Finish Pebble never calls is left to the collector.
type valueMerger struct {
	t   *mergerTable
	key []byte
	m   *MergeOperator // nil once deferred
	acc []byte         // merged payload so far (m != nil, no MergeMany)
	// newer and older buffer payloads for m.MergeMany, as spans of arena:
	// newer oldest first, older newest first (each MergeOlder appends an
	// older one). One arena, not a copy per operand: Pebble keeps the
	// operand it hands over, and a compaction of inboxes hands many.
	newer, older []span
	arena        []byte
	ops          [][]byte // deferred operands, oldest first (m == nil)
	ps           [][]byte // buffered's result (scratch)
	merged       []byte   // MergeMany's result, when the operator appends (scratch)
	out          []byte   // Finish's framed value, valid until its Closer runs
}

var valueMergerPool = sync.Pool{New: func() any { return new(valueMerger) }}

// mergerPoolMax bounds the buffers a pooled merger keeps: a merge of a
// huge value (a follower chunk of 2^16 ordinals, a long deferred list)
// does not pin its buffers in the pool.
const mergerPoolMax = 64 << 10

// release empties v and returns it to the pool.
func (v *valueMerger) release() {
	trim := func(b []byte) []byte {
		if cap(b) > mergerPoolMax {
			return nil
		}
		return b[:0]
	}
	clear(v.ps[:cap(v.ps)])
	*v = valueMerger{
		acc: trim(v.acc), newer: v.newer[:0], older: v.older[:0], arena: trim(v.arena),
		ps: v.ps[:0], merged: trim(v.merged), out: trim(v.out),
	}
	if cap(v.newer) > 1<<10 || cap(v.older) > 1<<10 || cap(v.ps) > 1<<10 {
		v.newer, v.older, v.ps = nil, nil, nil
	}
	valueMergerPool.Put(v)
}

// mergerCloser is the Closer of a Finish: it releases the merger once.
type mergerCloser struct{ v *valueMerger }

func (c *mergerCloser) Close() error {
	if v := c.v; v != nil {
		c.v = nil
		v.release()
	}
	return nil
}

// start takes the first operand.
func (v *valueMerger) start(value []byte) {
	if len(value) > 0 && value[0] != deferredID {
		if m := v.t.lookup(value[0]); m != nil && m.MergeMany != nil {
			v.m = m // payloads are decoded once, by MergeMany at Finish
			if len(value) > 1 {
				v.newer = append(v.newer, v.keep(value[1:]))
			}
			return
		}
		if m := v.t.lookup(value[0]); m != nil && m.check(value) == nil {
			v.m = m
			v.acc = append(v.acc, value[1:]...)
			return
		}
	}
	v.ops = v.appendOps(v.ops, value)
}

// span locates a payload in a valueMerger's arena.
type span struct{ off, n int }

// keep copies p into the arena.
func (v *valueMerger) keep(p []byte) span {
	if cap(v.arena) == 0 {
		v.arena = make([]byte, 0, 2*len(p)+64)
	}
	s := span{len(v.arena), len(p)}
	v.arena = append(v.arena, p...)
	return s
}

// buffered returns the payloads buffered for MergeMany, oldest first
// (aliasing the arena).
func (v *valueMerger) buffered() [][]byte {
	out := v.ps[:0]
	for i := len(v.older) - 1; i >= 0; i-- {
		s := v.older[i]
		out = append(out, v.arena[s.off:s.off+s.n:s.off+s.n])
	}
	for _, s := range v.newer {
		out = append(out, v.arena[s.off:s.off+s.n:s.off+s.n])
	}
	v.ps = out
	return out
}

// appendOps appends value's operands (cloned) to ops; a value that is not
// a well-formed list is kept as one opaque operand.
func (v *valueMerger) appendOps(ops [][]byte, value []byte) [][]byte {
	if os, err := operands(value); err == nil {
		for _, o := range os {
			ops = append(ops, bytes.Clone(o))
		}
		return ops
	}
	return append(ops, bytes.Clone(value))
}

// deferNow turns the merger into a deferred list holding what it merged.
func (v *valueMerger) deferNow() {
	switch {
	case v.m != nil && v.m.MergeMany != nil:
		for _, p := range v.buffered() {
			v.ops = append(v.ops, v.m.Frame(nil, p))
		}
		v.m, v.newer, v.older, v.arena = nil, nil, nil, nil
	case v.m != nil:
		v.ops = [][]byte{v.m.Frame(nil, v.acc)}
		v.m, v.acc = nil, nil
	}
}

func (v *valueMerger) MergeNewer(value []byte) error {
	if !v.absorb(value, true) {
		v.deferNow()
		v.ops = v.appendOps(v.ops, value)
	}
	return nil
}

func (v *valueMerger) MergeOlder(value []byte) error {
	if !v.absorb(value, false) {
		v.deferNow()
		v.ops = append(v.appendOps(nil, value), v.ops...)
	}
	return nil
}

// absorb merges value, newer or older than what the merger holds, when it
// is an operand of the merger's operator that merges cleanly (buffered for
// MergeMany, or folded with Merge), and reports whether it did; otherwise
// the caller turns the merger into a deferred list.
func (v *valueMerger) absorb(value []byte, newer bool) bool {
	if v.m == nil || len(value) == 0 || value[0] != v.m.ID {
		return false
	}
	payload := value[1:]
	switch {
	case len(payload) == 0: // the empty value is the identity
		return true
	case v.m.MergeMany != nil:
		if newer {
			v.newer = append(v.newer, v.keep(payload))
		} else {
			v.older = append(v.older, v.keep(payload))
		}
		return true
	case len(v.acc) == 0:
		v.acc = append(v.acc[:0], payload...)
		return true
	}
	older, newerP := v.acc, payload
	if !newer {
		older, newerP = payload, v.acc
	}
	acc, err := v.m.Merge(older, newerP)
	if err != nil {
		return false
	}
	v.acc = acc
	return true
}

// Finish returns the merged value. NB: an operator whose Finish returns nil
// (nothing left: a zero sum, an empty set) yields the empty value, the id
// byte alone, rather than asking Pebble to delete the key: Pebble v2.1.7's
// compaction iterator panics on that path (DeletableValueMerger, "skip=true
// but iterator is at iterPosNext", found by TestModel). Reads treat the
// empty value as absent and later merges as their identity.
func (v *valueMerger) Finish(includesBase bool) ([]byte, io.Closer, error) {
	closer := &mergerCloser{v}
	if v.m == nil {
		// A list that is all one known operator's may resolve now.
		if len(v.ops) > 0 && len(v.ops[0]) > 0 {
			if m := v.t.lookup(v.ops[0][0]); m != nil && includesBase {
				if out, ok, err := m.resolve(v.ops); err == nil {
					if !ok {
						out = []byte{m.ID}
					}
					return out, closer, nil
				}
			}
		}
		return appendDeferred(nil, v.ops), closer, nil
	}
	p := v.acc
	if v.m.MergeMany != nil {
		switch ps := v.buffered(); len(ps) {
		case 0:
			p = nil
		case 1:
			p = ps[0]
		default:
			var err error
			if v.m.mergeManyTo != nil {
				v.merged, err = v.m.mergeManyTo(v.merged[:0], ps)
				p = v.merged
			} else {
				p, err = v.m.MergeMany(ps)
			}
			if err != nil {
				v.deferNow() // a payload it cannot decode: keep them all
				return appendDeferred(nil, v.ops), closer, nil
			}
		}
	}
	if includesBase && v.m.Finish != nil && len(p) > 0 {
		fin, err := v.m.Finish(p)
		if err != nil {
			return appendDeferred(nil, [][]byte{v.m.Frame(nil, p)}), closer, nil
		}
		p = fin // nil: the empty value
	}
	v.out = append(append(v.out[:0], v.m.ID), p...)
	return v.out, closer, nil
}

// Built-in operators. Their ids and encodings are part of the store's
// format: never renumber them.
var (
	// MergeAdd adds signed 64-bit integers (wrapping on overflow). A
	// payload is 8 bytes, big-endian two's complement. A key whose sum
	// reaches 0 reads as absent.
	// Build operands with AddOperand, read values with DecodeAdd.
	MergeAdd = &MergeOperator{ID: 1, Name: "add-int64", Merge: mergeAdd, Finish: finishAdd, Check: checkAdd}

	// MergeTopList keeps a capped list of (key, value) entries, newest
	// operand winning per key, sorted by key descending (for a timeline:
	// post id, author), holding at most the cap of the newest operand live
	// entries above a floor (see TopList): what an inbox needs. Removals are
	// tombstone entries. Build operands with TopListOperand, read values
	// with DecodeTopList. An empty list with no floor reads as absent.
	MergeTopList = &MergeOperator{ID: 2, Name: "toplist", Merge: mergeTopList, MergeMany: mergeTopListMany,
		Finish: finishTopList, Check: checkTopList, mergeManyTo: mergeTopListManyTo}

	// MergeRoaring unions and subtracts sets of uint32 (roaring bitmaps):
	// an operand adds one set and removes another (OR / AND-NOT), newer
	// operands winning. Build operands with RoaringOperand, read values with
	// DecodeRoaring. An empty set reads as absent.
	MergeRoaring = &MergeOperator{ID: 3, Name: "roaring32", Merge: mergeRoaring, MergeMany: mergeRoaringMany,
		Finish: finishRoaring, Check: checkRoaring}
)

var builtinMergers = [FirstCustomMergeID]*MergeOperator{1: MergeAdd, 2: MergeTopList, 3: MergeRoaring}

// --- add-int64 ---

func checkAdd(p []byte) error {
	if len(p) != 8 {
		return fmt.Errorf("add-int64 payload of %d bytes (want 8)", len(p))
	}
	return nil
}

func mergeAdd(older, newer []byte) ([]byte, error) {
	if err := checkAdd(older); err != nil {
		return nil, err
	}
	if err := checkAdd(newer); err != nil {
		return nil, err
	}
	s := binary.BigEndian.Uint64(older) + binary.BigEndian.Uint64(newer)
	return binary.BigEndian.AppendUint64(nil, s), nil
}

func finishAdd(p []byte) ([]byte, error) {
	if err := checkAdd(p); err != nil {
		return nil, err
	}
	if binary.BigEndian.Uint64(p) == 0 {
		return nil, nil
	}
	return p, nil
}

// AddOperand appends a MergeAdd operand (or value) of delta to dst.
func AddOperand(dst []byte, delta int64) []byte {
	dst = append(dst, MergeAdd.ID)
	return binary.BigEndian.AppendUint64(dst, uint64(delta))
}

// DecodeAdd returns the sum held by a MergeAdd value.
func DecodeAdd(v []byte) (int64, error) {
	if err := MergeAdd.check(v); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return int64(binary.BigEndian.Uint64(v[1:])), nil
}

// --- toplist ---

// TopEntry is one entry of a MergeTopList value: Key orders and identifies
// it (newest first), Value rides along (≤ MaxTopValue). Kind (opaque to
// the store) and, when Kind is not 0, Ref and RefValue ride along too: a
// typed entry and the reference it carries (a timeline's repost and the
// original post and its author). An entry of Kind 0 carries no reference
// (Ref and RefValue are 0). Removed marks a tombstone in an operand;
// finished values hold no tombstones.
type TopEntry struct {
	Key, Value    uint64
	Kind          uint8
	Ref, RefValue uint64
	Removed       bool
}

// TopList is a decoded MergeTopList value: the live entries with key ≥
// Floor, newest first, at most Cap of them. It is an exact window of
// everything ever merged into the key: every entry added and not removed
// whose key is ≥ Floor is in Entries. What lies below Floor was trimmed away
// (a timeline pulls it from the outboxes instead).
type TopList struct {
	Cap     int
	Floor   uint64
	Entries []TopEntry
}

// Limits of a MergeTopList value.
const (
	MaxTopListCap = 1 << 20
	MaxTopValue   = 1<<63 - 1
)

// Version bytes of a toplist payload: version 1 has untyped entries only;
// version 2 adds each entry's kind and, for a kind other than 0, its
// reference. A list whose entries are all of kind 0 is written as version
// 1, so stores that never hold a typed entry keep their bytes.
const (
	topListVersion   = 1
	topListVersionV2 = 2
)

// appendTopList encodes a toplist payload. Entries are sorted by key
// descending, keys unique, every key ≥ floor.
//
//	field     width     meaning
//	--------  --------  ---------------------------------------------------
//	version   1         topListVersion
//	cap       uvarint   live entries kept (1..MaxTopListCap)
//	floor     uvarint   keys below it were trimmed away
//	n         uvarint   entries that follow
//	per entry:
//	  gap     uvarint   previous key − key; the first entry's previous key
//	                    is 2^64−1 (so keys need no separate width)
//	  value   uvarint   value << 1 | removed
//	  (version 2 only:)
//	  kind    1         the entry's kind
//	  ref     uvarint   when kind ≠ 0: the reference
//	  refval  uvarint   when kind ≠ 0: the reference's value
//
// No checksum of its own: the payload lives inside Pebble's checksummed
// blocks and WAL, and the decoder rejects every malformed shape.
//
// Why a floor. A capped list with removals cannot be both bounded and
// exact: after a trim, removing a top entry should expose the entry the trim
// dropped. Trimming to "the cap-th live key becomes the floor" keeps the
// value an exact window of the truth whatever grouping of operands Pebble
// merges: every grouping yields the truth restricted to keys ≥ its floor,
// so merges stay associative in the sense that matters (TestMergeAssociative
// checks it), and the reader knows where the window ends.
func appendTopList(dst []byte, l *TopList) []byte {
	version := byte(topListVersion)
	for _, e := range l.Entries {
		if e.Kind != 0 {
			version = topListVersionV2
			break
		}
	}
	dst = append(dst, version)
	dst = binary.AppendUvarint(dst, uint64(l.Cap))
	dst = binary.AppendUvarint(dst, l.Floor)
	dst = binary.AppendUvarint(dst, uint64(len(l.Entries)))
	prev := uint64(math.MaxUint64)
	for _, e := range l.Entries {
		dst = binary.AppendUvarint(dst, prev-e.Key)
		flag := uint64(0)
		if e.Removed {
			flag = 1
		}
		dst = binary.AppendUvarint(dst, e.Value<<1|flag)
		if version == topListVersionV2 {
			dst = append(dst, e.Kind)
			if e.Kind != 0 {
				dst = binary.AppendUvarint(dst, e.Ref)
				dst = binary.AppendUvarint(dst, e.RefValue)
			}
		}
		prev = e.Key
	}
	return dst
}

// topListIter decodes a toplist payload entry by entry, checking each
// entry as it goes: keys strictly descending and at or above the floor,
// every field in bounds, and, once the last entry is read, no trailing
// bytes. Reading to the end checks the whole payload; stopping early
// decodes (and checks) only what was read. The zero value is not ready:
// call init.
type topListIter struct {
	d        decoder
	version  byte
	capacity uint64
	floor    uint64
	n, i     uint64 // entries in the payload, entries read
	prev     uint64 // the last key read (2^64−1 before the first)
}

// init decodes p's header (version, cap, floor, entry count).
func (it *topListIter) init(p []byte) error {
	*it = topListIter{d: decoder{b: p, what: "toplist"}, prev: math.MaxUint64}
	d := &it.d
	it.version = d.byte()
	if d.err == nil && it.version != topListVersion && it.version != topListVersionV2 {
		return fmt.Errorf("toplist version %d", it.version)
	}
	it.capacity, it.floor, it.n = d.uvarint(), d.uvarint(), d.uvarint()
	if d.err != nil {
		return d.err
	}
	if it.capacity < 1 || it.capacity > MaxTopListCap || it.n > uint64(len(p)) {
		return fmt.Errorf("toplist cap %d, %d entries in %d bytes", it.capacity, it.n, len(p))
	}
	if it.n == 0 {
		return d.finish()
	}
	return nil
}

// next decodes the next entry. ok is false at the end of the payload (err
// nil) or when the payload is malformed (err set; the iterator stays
// stopped).
func (it *topListIter) next() (e TopEntry, ok bool, err error) {
	d := &it.d
	if d.err != nil {
		return TopEntry{}, false, d.err
	}
	if it.i == it.n {
		return TopEntry{}, false, nil
	}
	// The fast path decodes a well-formed entry; anything it doubts is
	// decoded again by nextSlow, which names the damage.
	b := d.b
	gap, o := uvarintAt(b, d.off)
	if o < 0 || it.i > 0 && gap == 0 || gap > it.prev || it.prev-gap < it.floor {
		return it.nextSlow()
	}
	e.Key = it.prev - gap
	var vf uint64
	if vf, o = uvarintAt(b, o); o < 0 {
		return it.nextSlow()
	}
	e.Value, e.Removed = vf>>1, vf&1 == 1
	if it.version == topListVersionV2 {
		if o >= len(b) {
			return it.nextSlow()
		}
		if e.Kind = b[o]; e.Kind != 0 {
			if e.Ref, o = uvarintAt(b, o+1); o < 0 {
				return it.nextSlow()
			}
			if e.RefValue, o = uvarintAt(b, o); o < 0 {
				return it.nextSlow()
			}
		} else {
			o++
		}
	}
	d.off, it.prev = o, e.Key
	if it.i++; it.i == it.n {
		if err := d.finish(); err != nil {
			return TopEntry{}, false, err
		}
	}
	return e, true, nil
}

// nextSlow is next through the decoder, which reports what is wrong and
// where.
func (it *topListIter) nextSlow() (e TopEntry, ok bool, err error) {
	d := &it.d
	gap, vf := d.uvarint(), d.uvarint()
	if d.err != nil {
		return TopEntry{}, false, d.err
	}
	if it.i > 0 && gap == 0 || gap > it.prev || it.prev-gap < it.floor {
		d.err = fmt.Errorf("toplist entry %d: keys not strictly descending above the floor", it.i)
		return TopEntry{}, false, d.err
	}
	e = TopEntry{Key: it.prev - gap, Value: vf >> 1, Removed: vf&1 == 1}
	if it.version == topListVersionV2 {
		if e.Kind = d.byte(); e.Kind != 0 {
			e.Ref, e.RefValue = d.uvarint(), d.uvarint()
		}
		if d.err != nil {
			return TopEntry{}, false, d.err
		}
	}
	it.prev = e.Key
	if it.i++; it.i == it.n {
		if err := d.finish(); err != nil {
			return TopEntry{}, false, err
		}
	}
	return e, true, nil
}

func decodeTopList(p []byte) (*TopList, error) {
	var it topListIter
	if err := it.init(p); err != nil {
		return nil, err
	}
	l := &TopList{Cap: int(it.capacity), Floor: it.floor, Entries: make([]TopEntry, 0, it.n)}
	for {
		e, ok, err := it.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			return l, nil
		}
		l.Entries = append(l.Entries, e)
	}
}

// uvarintAt decodes the uvarint at b[off:] (off ≤ len(b)) and returns it
// with the offset after it, or -1 if it is malformed or cut short; a
// one-byte uvarint takes the inlined fast path.
func uvarintAt(b []byte, off int) (uint64, int) {
	if off < len(b) && b[off] < 0x80 {
		return uint64(b[off]), off + 1
	}
	v, n := binary.Uvarint(b[off:])
	if n <= 0 {
		return 0, -1
	}
	return v, off + n
}

// checkRest checks the entries not read yet, to the end of the payload,
// without building them: a tight loop over the well-formed entries, and
// next for the first one it doubts (which reports the damage exactly as a
// decode does) and for the end.
func (it *topListIter) checkRest() error {
	b, off, prev := it.d.b, it.d.off, it.prev
	v2 := it.version == topListVersionV2
	for it.d.err == nil && it.i < it.n {
		gap, o := uvarintAt(b, off)
		if o < 0 {
			break
		}
		if _, o = uvarintAt(b, o); o < 0 {
			break
		}
		if it.i > 0 && gap == 0 || gap > prev || prev-gap < it.floor {
			break
		}
		if v2 {
			if o >= len(b) {
				break
			}
			if kind := b[o]; kind != 0 {
				if _, o = uvarintAt(b, o+1); o < 0 {
					break
				}
				if _, o = uvarintAt(b, o); o < 0 {
					break
				}
			} else {
				o++
			}
		}
		prev -= gap
		off = o
		it.i++
	}
	it.d.off, it.prev = off, prev
	if it.d.err == nil && it.i == it.n {
		return it.d.finish()
	}
	for {
		_, ok, err := it.next()
		if err != nil || !ok {
			return err
		}
	}
}

// checkTopList walks the whole payload without building the list: a read
// of a toplist key checks its value this way before the caller decodes it.
func checkTopList(p []byte) error {
	var it topListIter
	if err := it.init(p); err != nil {
		return err
	}
	return it.checkRest()
}

// mergeTopLists merges two decoded lists, the newer winning per key, keeps
// the keys ≥ both floors, and trims: once cap live entries are kept, the
// cap-th live key becomes the floor and everything below it goes.
func mergeTopLists(older, newer *TopList) *TopList {
	out := &TopList{Cap: newer.Cap, Floor: max(older.Floor, newer.Floor)}
	out.Entries = make([]TopEntry, 0, min(len(older.Entries)+len(newer.Entries), 2*out.Cap+8))
	live := 0
	oe, ne := older.Entries, newer.Entries
	for i, j := 0, 0; (i < len(oe) || j < len(ne)) && live < out.Cap; {
		var e TopEntry
		switch {
		case j == len(ne) || i < len(oe) && oe[i].Key > ne[j].Key:
			e = oe[i]
			i++
		case i == len(oe) || ne[j].Key > oe[i].Key:
			e = ne[j]
			j++
		default: // same key: the newer operand decides
			e = ne[j]
			i++
			j++
		}
		if e.Key < out.Floor {
			break // sorted: everything from here on is below the floor
		}
		out.Entries = append(out.Entries, e)
		if !e.Removed {
			if live++; live == out.Cap {
				out.Floor = e.Key
			}
		}
	}
	return out
}

func mergeTopList(older, newer []byte) ([]byte, error) {
	return mergeTopListMany([][]byte{older, newer})
}

// mergeTopListMany merges payloads (oldest first) at once: every entry,
// the newest operand winning per key, keys ≥ every floor, trimmed at the
// newest operand's cap.
//
// Every payload is already a sorted list (keys strictly descending), so
// this is a k-way merge of the payloads as they are decoded, entry by
// entry, with nothing decoded into lists, no sort, and no allocation but
// the result's (and, for many operands or a long result, a pooled
// scratch): an inbox compaction merges a few new entries into a list of
// hundreds, and the earlier decode-append-sort-encode was half of the
// bytes the timeline benchmark allocated (bench/RESULTS.md, "Sustained
// fan-out"). The merge stops at the cap or the floor; the rest of every
// payload is then checked without being built, so a malformed payload
// fails the merge wherever its damage lies, as a full decode would.
func mergeTopListMany(payloads [][]byte) ([]byte, error) {
	return mergeTopListManyTo(nil, payloads)
}

// mergeTopListManyTo is mergeTopListMany appending the result to dst.
func mergeTopListManyTo(dst []byte, payloads [][]byte) ([]byte, error) {
	if len(payloads) == 2 {
		if out, ok := mergeTopListAbove(dst, payloads[0], payloads[1]); ok {
			return out, nil
		}
	}
	sc := topMergePool.Get().(*topMergeScratch)
	defer sc.release()
	if cap(sc.srcs) < len(payloads) {
		sc.srcs = make([]topMergeSrc, len(payloads))
	}
	srcs := sc.srcs[:len(payloads)]
	act := sc.act[:0] // the sources not spent, oldest first
	var floor uint64
	capacity, size := 0, 32
	for i, p := range payloads {
		s := &srcs[i]
		if err := s.it.init(p); err != nil {
			return nil, err
		}
		floor = max(floor, s.it.floor)
		capacity = int(s.it.capacity)
		size += len(p) + int(s.it.n) // room for a kind byte per entry, should the result be version 2
		if err := s.advance(); err != nil {
			return nil, err
		}
		if s.ok {
			act = append(act, i)
		}
	}
	out := sc.out[:0]
	live := 0
	for live < capacity && len(act) > 0 {
		// The source with the largest head key; for one key, the newest.
		best := act[len(act)-1]
		for j := len(act) - 2; j >= 0; j-- {
			if i := act[j]; srcs[i].e.Key > srcs[best].e.Key {
				best = i
			}
		}
		e := srcs[best].e
		if e.Key < floor {
			break // every source is sorted: all that is left is below the floor
		}
		n := 0
		for _, i := range act {
			s := &srcs[i]
			if s.e.Key == e.Key {
				if err := s.advance(); err != nil {
					return nil, err
				}
			}
			if s.ok {
				act[n] = i
				n++
			}
		}
		act = act[:n]
		out = append(out, e)
		if !e.Removed {
			if live++; live == capacity {
				floor = e.Key
			}
		}
	}
	sc.out, sc.act = out, act
	for i := range srcs {
		if s := &srcs[i]; s.ok {
			if err := s.it.checkRest(); err != nil {
				return nil, err
			}
		}
	}
	return appendTopList(slices.Grow(dst, size), &TopList{Cap: capacity, Floor: floor, Entries: out}), nil
}

// mergeTopListAbove is the merge of the common shape of an inbox
// compaction: an older list and a newer operand whose entries are all
// added (no tombstone) above the older list's newest key, both of
// version 1, the newer one's floor not above the older one's, and fewer
// newer entries than the cap. The result is then the newer entries, then
// the older list's, re-encoded only for the first one's gap, then copied
// as they are, up to the cap-th live entry: the list mergeTopListMany
// builds entry by entry, without building it (the same bytes, unless a
// payload holds an overlong uvarint, which decoders accept and this
// copies; TestTopListMergeAbove checks it against the k-way merge). ok
// is false, with dst unchanged in
// content, when the payloads have another shape or either is malformed
// (the k-way merge then merges them, or names the damage).
func mergeTopListAbove(dst, older, newer []byte) (out []byte, ok bool) {
	var no, oi topListIter
	if no.init(newer) != nil || oi.init(older) != nil ||
		no.version != topListVersion || oi.version != topListVersion ||
		no.n == 0 || oi.n == 0 || no.n >= no.capacity || no.floor > oi.floor || no.n > 64 {
		return dst, false
	}
	capacity, entries := no.capacity, no.d.off
	// The newer entries: checked, none removed, the last above the older
	// list's first key.
	var last uint64
	for {
		e, more, err := no.next()
		if err != nil {
			return dst, false
		}
		if !more {
			break
		}
		if e.Removed {
			return dst, false
		}
		last = e.Key
	}
	b := oi.d.b
	gapEnd := 0 // where the older list's first gap ends
	if _, gapEnd = uvarintAt(b, oi.d.off); gapEnd < 0 {
		return dst, false
	}
	first, more, err := oi.next()
	if err != nil || !more || first.Key >= last {
		return dst, false
	}
	// The older entries kept: up to the (cap − newer)-th live one.
	live, kept := no.n, uint64(1)
	if !first.Removed {
		live++
	}
	floor := oi.floor
	if live == capacity {
		floor = first.Key
	}
	// A tight loop over version-1 entries (gap, value << 1 | removed),
	// checked as next checks them; anything it doubts goes to the k-way
	// merge.
	off, prev := oi.d.off, oi.prev
	for live < capacity && oi.i < oi.n {
		gap, o := uvarintAt(b, off)
		if o < 0 || gap == 0 || gap > prev || prev-gap < oi.floor {
			return dst, false
		}
		vf, o := uvarintAt(b, o)
		if o < 0 {
			return dst, false
		}
		prev -= gap
		off = o
		oi.i++
		kept++
		if vf&1 == 0 {
			if live++; live == capacity {
				floor = prev
			}
		}
	}
	cut := off
	oi.d.off, oi.prev = off, prev
	if oi.checkRest() != nil { // the rest, and no trailing bytes
		return dst, false
	}
	out = slices.Grow(dst, len(newer)+cut+16)
	out = append(out, topListVersion)
	out = binary.AppendUvarint(out, capacity)
	out = binary.AppendUvarint(out, floor)
	out = binary.AppendUvarint(out, no.n+kept)
	out = append(out, newer[entries:]...)
	out = binary.AppendUvarint(out, last-first.Key)
	return append(out, b[gapEnd:cut]...), true
}

// topMergeSrc is one payload of a merge: its iterator and its next entry
// (ok false once it is spent).
type topMergeSrc struct {
	it topListIter
	e  TopEntry
	ok bool
}

// advance reads the source's next entry.
func (s *topMergeSrc) advance() error {
	var err error
	s.e, s.ok, err = s.it.next()
	return err
}

// topMergeScratch is what a merge reuses: its sources, the indexes of
// those not spent, and the entries of its result before they are encoded.
type topMergeScratch struct {
	srcs []topMergeSrc
	act  []int
	out  []TopEntry
}

var topMergePool = sync.Pool{New: func() any { return &topMergeScratch{} }}

// release returns the scratch to the pool, holding no payload (the
// iterators alias them) and no result longer than an inbox's few pages.
func (sc *topMergeScratch) release() {
	clear(sc.srcs[:cap(sc.srcs)])
	if cap(sc.out) > 1<<14 {
		sc.out = nil
	}
	if cap(sc.srcs) > 1<<10 {
		sc.srcs, sc.act = nil, nil
	}
	topMergePool.Put(sc)
}

func finishTopList(p []byte) ([]byte, error) {
	// Most finished lists hold no tombstone: then the payload is the
	// result, checked to the end without being built.
	var it topListIter
	if err := it.init(p); err != nil {
		return nil, err
	}
	tombstones := false
	for {
		e, ok, err := it.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		if e.Removed {
			tombstones = true
			if err := it.checkRest(); err != nil {
				return nil, err
			}
			break
		}
	}
	if !tombstones {
		if it.n == 0 && it.floor == 0 {
			return nil, nil
		}
		return p, nil
	}
	l, err := decodeTopList(p)
	if err != nil {
		return nil, err
	}
	live := l.Entries[:0]
	for _, e := range l.Entries {
		if !e.Removed {
			live = append(live, e)
		}
	}
	if len(live) == 0 && l.Floor == 0 {
		return nil, nil
	}
	l.Entries = live
	return appendTopList(nil, l), nil
}

// TopListOperand appends a MergeTopList operand to dst: entries (any
// order; for a repeated key the last one counts) under capacity, no floor.
func TopListOperand(dst []byte, capacity int, entries []TopEntry) ([]byte, error) {
	if capacity < 1 || capacity > MaxTopListCap {
		return dst, fmt.Errorf("%w: toplist cap %d (want 1..%d)", ErrInvalidOption, capacity, MaxTopListCap)
	}
	es := slices.Clone(entries)
	for _, e := range es {
		if e.Value > MaxTopValue {
			return dst, fmt.Errorf("%w: toplist value %d above %d", ErrValueRange, e.Value, uint64(MaxTopValue))
		}
	}
	// Sort by key descending, keeping the last of equal keys.
	slices.SortStableFunc(es, func(a, b TopEntry) int {
		switch {
		case a.Key > b.Key:
			return -1
		case a.Key < b.Key:
			return 1
		}
		return 0
	})
	uniq := es[:0]
	for i, e := range es {
		if i+1 < len(es) && es[i+1].Key == e.Key {
			continue
		}
		uniq = append(uniq, e)
	}
	l := mergeTopLists(&TopList{Cap: capacity}, &TopList{Cap: capacity, Entries: uniq})
	dst = append(dst, MergeTopList.ID)
	return appendTopList(dst, l), nil
}

// DecodeTopList decodes a MergeTopList value (or operand).
func DecodeTopList(v []byte) (*TopList, error) {
	if len(v) == 0 || v[0] != MergeTopList.ID {
		return nil, fmt.Errorf("%w: not a toplist value", ErrCorrupt)
	}
	l, err := decodeTopList(v[1:])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return l, nil
}

// TopListReader reads a MergeTopList value entry by entry, newest first,
// decoding only as far as its caller reads: a page of 20 entries from an
// inbox of 800 decodes about 20 and allocates nothing, where DecodeTopList
// builds the whole list. Every entry it returns is checked as
// DecodeTopList checks it (keys strictly descending and at or above the
// floor, fields in range); reaching the end also checks that nothing
// follows the last entry. The value must not change while it is read.
type TopListReader struct {
	it  topListIter
	err error
}

// ReadTopList starts reading a MergeTopList value (or operand): its header
// is decoded now, its entries by Next. Errors: ErrCorrupt.
func ReadTopList(v []byte) (TopListReader, error) {
	if len(v) == 0 || v[0] != MergeTopList.ID {
		return TopListReader{}, fmt.Errorf("%w: not a toplist value", ErrCorrupt)
	}
	var r TopListReader
	if err := r.it.init(v[1:]); err != nil {
		return TopListReader{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return r, nil
}

// Cap returns the list's capacity (live entries kept).
func (r *TopListReader) Cap() int { return int(r.it.capacity) }

// Floor returns the list's floor: keys below it were trimmed away.
func (r *TopListReader) Floor() uint64 { return r.it.floor }

// Len returns the number of entries the value holds (tombstones included,
// in an operand), read or not.
func (r *TopListReader) Len() int { return int(r.it.n) }

// Next returns the next entry, newest first. It returns false at the end,
// or when the value turns out malformed: then Err reports ErrCorrupt.
func (r *TopListReader) Next() (TopEntry, bool) {
	if r.err != nil {
		return TopEntry{}, false
	}
	e, ok, err := r.it.next()
	if err != nil {
		r.err = fmt.Errorf("%w: %v", ErrCorrupt, err)
		return TopEntry{}, false
	}
	return e, ok
}

// Err returns the error that stopped Next, if any (ErrCorrupt).
func (r *TopListReader) Err() error { return r.err }

// --- roaring32 ---

// roaringVersion is the version byte of a roaring32 payload.
const roaringVersion = 1

// appendRoaring encodes a roaring32 payload: the members an operand adds
// and those it removes (disjoint).
//
//	field     width      meaning
//	--------  ---------  --------------------------------------------------
//	version   1          roaringVersion
//	addLen    uvarint    bytes of the add set
//	add       addLen     roaring portable serialization
//	remove    rest       roaring portable serialization, or empty
func appendRoaring(dst []byte, add, remove *roaring.Bitmap) ([]byte, error) {
	dst = append(dst, roaringVersion)
	a, err := add.ToBytes()
	if err != nil {
		return dst, err
	}
	dst = binary.AppendUvarint(dst, uint64(len(a)))
	dst = append(dst, a...)
	if remove != nil && !remove.IsEmpty() {
		r, err := remove.ToBytes()
		if err != nil {
			return dst, err
		}
		dst = append(dst, r...)
	}
	return dst, nil
}

func readBitmap(b []byte) (*roaring.Bitmap, error) {
	bm := roaring.New()
	if len(b) == 0 {
		return bm, nil
	}
	n, err := bm.ReadFrom(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	if n != int64(len(b)) {
		return nil, fmt.Errorf("roaring: %d trailing bytes", int64(len(b))-n)
	}
	if err := bm.Validate(); err != nil {
		return nil, err
	}
	return bm, nil
}

func decodeRoaring(p []byte) (add, remove *roaring.Bitmap, err error) {
	d := decoder{b: p, what: "roaring32"}
	if v := d.byte(); d.err == nil && v != roaringVersion {
		return nil, nil, fmt.Errorf("roaring32 version %d", v)
	}
	n := d.uvarint()
	if d.err != nil {
		return nil, nil, d.err
	}
	if n > uint64(len(p)-d.off) {
		return nil, nil, errors.New("roaring32: add set overruns the payload")
	}
	if add, err = readBitmap(p[d.off : d.off+int(n)]); err != nil {
		return nil, nil, err
	}
	if remove, err = readBitmap(p[d.off+int(n):]); err != nil {
		return nil, nil, err
	}
	if add.Intersects(remove) {
		return nil, nil, errors.New("roaring32: add and remove sets overlap")
	}
	return add, remove, nil
}

func checkRoaring(p []byte) error {
	_, _, err := decodeRoaring(p)
	return err
}

func mergeRoaring(older, newer []byte) ([]byte, error) {
	oa, or, err := decodeRoaring(older)
	if err != nil {
		return nil, err
	}
	na, nr, err := decodeRoaring(newer)
	if err != nil {
		return nil, err
	}
	// Applying older then newer to a base B gives
	// ((B − or) ∪ oa − nr) ∪ na = (B − (or ∪ nr)) ∪ ((oa − nr) ∪ na).
	oa.AndNot(nr)
	oa.Or(na)
	or.Or(nr)
	or.AndNot(oa)
	return appendRoaring(nil, oa, or)
}

// mergeRoaringMany applies payloads (oldest first) in memory, decoding each
// once and encoding once.
func mergeRoaringMany(payloads [][]byte) ([]byte, error) {
	add, rm, err := decodeRoaring(payloads[0])
	if err != nil {
		return nil, err
	}
	for _, p := range payloads[1:] {
		na, nr, err := decodeRoaring(p)
		if err != nil {
			return nil, err
		}
		add.AndNot(nr)
		add.Or(na)
		rm.Or(nr)
		rm.AndNot(add)
	}
	return appendRoaring(nil, add, rm)
}

func finishRoaring(p []byte) ([]byte, error) {
	add, _, err := decodeRoaring(p)
	if err != nil {
		return nil, err
	}
	if add.IsEmpty() {
		return nil, nil
	}
	add.RunOptimize()
	return appendRoaring(nil, add, nil)
}

// RoaringOperand appends a MergeRoaring operand to dst that adds the
// members of add and removes those of remove (either may be nil). A member
// in both is added.
func RoaringOperand(dst []byte, add, remove *roaring.Bitmap) ([]byte, error) {
	if add == nil {
		add = roaring.New()
	}
	var rm *roaring.Bitmap
	if remove != nil {
		rm = roaring.AndNot(remove, add)
	}
	dst = append(dst, MergeRoaring.ID)
	return appendRoaring(dst, add, rm)
}

// DecodeRoaring returns the set held by a finished MergeRoaring value (a
// value read from the store), or, for an unfinished operand, the members it
// adds and removes.
func DecodeRoaring(v []byte) (add, remove *roaring.Bitmap, err error) {
	if len(v) == 0 || v[0] != MergeRoaring.ID {
		return nil, nil, fmt.Errorf("%w: not a roaring32 value", ErrCorrupt)
	}
	add, remove, err = decodeRoaring(v[1:])
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return add, remove, nil
}
