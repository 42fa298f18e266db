package store

// Key families for the packages above store.
//
// A family is a slice of Pebble's key space that starts with one prefix byte
// (0x10 and up; 0x01-0x0F belong to store). The package that owns a family
// declares it with a FamilySpec, through Options.Families or
// DB.RegisterFamily, and gets a *Family handle: point reads, bounded
// iteration, writes and merges inside a store Batch. Keys passed to a handle
// are whole Pebble keys, prefix byte included, so the owner's key encoders
// (documented in the owner's package doc and in store's family table) build
// them with plain appends.
//
// Declarations are persisted (meta "family/" + prefix) so a later Open can
// tell a stale or conflicting declaration from a new one: declaring a prefix
// that the store already holds under another name, or with another merge
// operator, is refused with ErrFamilyConflict. A store whose data holds a
// family the caller did not declare opens normally and leaves that data
// alone: Verify checks what the persisted record allows (a built-in merge
// operator's decoder), and merges of a custom operator this process does
// not know are kept unmerged, in order, until a process that knows it reads
// them (see merge.go).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tallydb/tally/internal/limits"
	"github.com/tallydb/tally/internal/quote"
)

// Limits of family keys and values.
const (
	// FirstFamilyPrefix is the lowest prefix a family may use; lower ones
	// belong to store.
	FirstFamilyPrefix = 0x10
	// MaxFamilyKeyLen is the longest family key, prefix included.
	MaxFamilyKeyLen = 1024
	// MaxFamilyValueLen is the largest family value or merge operand. A
	// family may set a smaller limit. Larger values belong in several keys
	// (a roaring set chunked per 2^16 ids, a list cut into pages).
	MaxFamilyValueLen = 16 << 20
	// DefaultFamilyValueLen is FamilySpec.MaxValueLen's default.
	DefaultFamilyValueLen = 1 << 20
)

// FamilySpec declares a key family.
type FamilySpec struct {
	// Name identifies the family in errors, stats and the persisted
	// registry: 1-64 characters of [A-Za-z0-9_-] (as counter names).
	Name string
	// Prefix is the family's first key byte, FirstFamilyPrefix..0xFF.
	Prefix byte
	// MinKeyLen and MaxKeyLen bound a key's length after the prefix byte.
	// Equal values declare a fixed-width layout. Zero MaxKeyLen means any
	// length up to MaxFamilyKeyLen-1. The default MinKeyLen is 0.
	MinKeyLen, MaxKeyLen int
	// MaxValueLen bounds a value or merge operand. The default is
	// DefaultFamilyValueLen; at most MaxFamilyValueLen.
	MaxValueLen int
	// Merge is the family's merge operator, nil if the family takes no
	// merges. The default is nil.
	Merge *MergeOperator
	// CheckValue, if set, decodes a stored value and reports damage; Verify
	// calls it for every key of the family and a read that gets an error
	// from it returns ErrCorrupt. For a merge family the operator's own
	// validation runs first. The default is nil (any bytes).
	CheckValue func(key, value []byte) error
}

// Family is a handle on a declared family. It is safe for concurrent use
// and stays valid while the DB is open.
type Family struct {
	db   *DB
	spec FamilySpec
}

// Name returns the family's name.
func (f *Family) Name() string { return f.spec.Name }

// Prefix returns the family's prefix byte.
func (f *Family) Prefix() byte { return f.spec.Prefix }

// Spec returns the family's declaration.
func (f *Family) Spec() FamilySpec { return f.spec }

// registry is the set of families known to an open DB: declared ones with
// handles, and persisted ones seen on disk.
type registry struct {
	mu       sync.Mutex
	declared [256]*Family       // guarded by mu for writes; see family()
	persist  [256]*familyRecord // what the store holds on disk, guarded by mu
}

// familyRecord is a persisted family declaration.
type familyRecord struct {
	prefix    byte
	name      string
	mergeID   byte // 0: no merges
	mergeName string
}

func (s *FamilySpec) withDefaults() FamilySpec {
	c := *s
	if c.MaxValueLen == 0 {
		c.MaxValueLen = DefaultFamilyValueLen
	}
	if c.MaxKeyLen == 0 {
		c.MaxKeyLen = MaxFamilyKeyLen - 1
	}
	return c
}

func (s *FamilySpec) validate() error {
	if err := validName("family", s.Name); err != nil {
		return err
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: family %s: "+format, append([]any{ErrInvalidOption, s.Name}, args...)...))
	}
	if s.Prefix < FirstFamilyPrefix {
		bad("prefix %#02x is reserved for store (want %#02x..0xff)", s.Prefix, FirstFamilyPrefix)
	}
	if s.MinKeyLen < 0 || s.MaxKeyLen < s.MinKeyLen || s.MaxKeyLen > MaxFamilyKeyLen-1 {
		bad("key length %d..%d (want 0 ≤ min ≤ max ≤ %d)", s.MinKeyLen, s.MaxKeyLen, MaxFamilyKeyLen-1)
	}
	if s.MaxValueLen < 1 || s.MaxValueLen > MaxFamilyValueLen {
		bad("max value length %d (want 1..%d)", s.MaxValueLen, MaxFamilyValueLen)
	}
	if m := s.Merge; m != nil {
		if err := m.validate(); err != nil {
			errs = append(errs, fmt.Errorf("family %s: %w", s.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (s *FamilySpec) record() *familyRecord {
	r := &familyRecord{prefix: s.Prefix, name: s.Name}
	if s.Merge != nil {
		r.mergeID, r.mergeName = s.Merge.ID, s.Merge.Name
	}
	return r
}

// conflicts reports why r (persisted) and n (declared) cannot both hold.
func (r *familyRecord) conflicts(n *familyRecord) error {
	switch {
	case r.name != n.name:
		return fmt.Errorf("%w: prefix %#02x holds family %q, declared as %q", ErrFamilyConflict, r.prefix, r.name, n.name)
	case r.mergeID != n.mergeID || r.mergeName != n.mergeName:
		return fmt.Errorf("%w: family %q was written with merge operator %q (%d), declared with %q (%d)",
			ErrFamilyConflict, r.name, r.mergeName, r.mergeID, n.mergeName, n.mergeID)
	}
	return nil
}

// familyRecordVersion is the version byte of a persisted family record.
const familyRecordVersion = 1

// appendFamilyRecord encodes a family declaration, kept under meta
// "family/" + prefix.
//
//	field        width      meaning
//	-----------  ---------  ----------------------------------------------
//	version      1          familyRecordVersion
//	prefix       1          the family's prefix byte
//	name         uvarint+n  the family's name
//	merge id     1          merge operator id, 0 if none
//	merge name   uvarint+n  merge operator name, empty if none
//	checksum     4          CRC-32C of everything before, big-endian
func appendFamilyRecord(dst []byte, r *familyRecord) []byte {
	start := len(dst)
	dst = append(dst, familyRecordVersion, r.prefix)
	dst = appendString(dst, r.name)
	dst = append(dst, r.mergeID)
	dst = appendString(dst, r.mergeName)
	return appendChecksum(dst, start)
}

func decodeFamilyRecord(b []byte) (*familyRecord, error) {
	body, err := verifyChecksum(b, "family record")
	if err != nil {
		return nil, err
	}
	d := decoder{b: body, what: "family record"}
	if v := d.byte(); d.err == nil && v != familyRecordVersion {
		return nil, fmt.Errorf("%w: family record version %d", ErrCorrupt, v)
	}
	r := &familyRecord{prefix: d.byte()}
	r.name = d.string()
	r.mergeID = d.byte()
	r.mergeName = d.string()
	if err := d.finish(); err != nil {
		return nil, err
	}
	if r.prefix < FirstFamilyPrefix || validName("", r.name) != nil || len(r.mergeName) > limits.MaxNameLen ||
		(r.mergeID == 0) != (r.mergeName == "") {
		return nil, fmt.Errorf("%w: family record %s at %#02x", ErrCorrupt, quote.Input(r.name), r.prefix)
	}
	return r, nil
}

func appendFamilyMetaKey(dst []byte, prefix byte) []byte {
	dst = appendMetaKey(dst, metaFamily)
	return append(dst, prefix)
}

// loadFamilies reads the persisted registry and checks the declarations of
// opts against it. It returns the records to persist (new declarations).
// Called by recover before anything is written.
//
// On a reopen (families already declared) it reloads the persisted records
// and keeps the declarations: a declared family whose record is missing
// (its write was not acknowledged, and lost) gets it written again.
func (db *DB) loadFamilies(specs []FamilySpec) ([]*familyRecord, error) {
	r := &db.families
	r.mu.Lock()
	defer r.mu.Unlock()
	reopen := slices.ContainsFunc(r.declared[:], func(f *Family) bool { return f != nil })
	r.persist = [256]*familyRecord{}
	p := appendMetaKey(nil, metaFamily)
	if err := db.scan(p, prefixEnd(p), func(k, v []byte) error {
		rec, err := decodeFamilyRecord(v)
		if err != nil {
			return fmt.Errorf("meta key %x: %w", k, err)
		}
		if len(k) != len(p)+1 || k[len(p)] != rec.prefix {
			return fmt.Errorf("%w: family record for %#02x under key %x", ErrCorrupt, rec.prefix, k)
		}
		r.persist[rec.prefix] = rec
		return nil
	}); err != nil {
		return nil, err
	}
	var fresh []*familyRecord
	if reopen {
		for _, f := range r.declared {
			if f == nil {
				continue
			}
			rec := f.spec.record()
			if p := r.persist[rec.prefix]; p == nil {
				fresh = append(fresh, rec)
			} else if err := p.conflicts(rec); err != nil {
				return nil, err
			}
		}
		return fresh, nil
	}
	for i := range specs {
		f, rec, err := db.declare(specs[i])
		if err != nil {
			return nil, err
		}
		if rec != nil {
			fresh = append(fresh, rec)
		}
		r.declared[f.spec.Prefix] = f
	}
	return fresh, nil
}

// declare validates spec against the registry. It returns the handle and,
// if the family is new to the store, the record to persist. The caller
// installs the handle.
func (db *DB) declare(spec FamilySpec) (*Family, *familyRecord, error) {
	s := spec.withDefaults()
	if err := s.validate(); err != nil {
		return nil, nil, err
	}
	r := &db.families
	if d := r.declared[s.Prefix]; d != nil {
		return nil, nil, fmt.Errorf("%w: prefix %#02x declared twice (%q and %q)", ErrFamilyConflict, s.Prefix, d.spec.Name, s.Name)
	}
	for _, d := range r.declared {
		if d != nil && d.spec.Name == s.Name {
			return nil, nil, fmt.Errorf("%w: family %q declared twice (prefixes %#02x and %#02x)", ErrFamilyConflict, s.Name, d.spec.Prefix, s.Prefix)
		}
	}
	rec := s.record()
	for _, p := range r.persist {
		if p != nil && p.prefix != s.Prefix && p.name == s.Name {
			return nil, nil, fmt.Errorf("%w: family %q is stored under prefix %#02x, declared at %#02x", ErrFamilyConflict, s.Name, p.prefix, s.Prefix)
		}
	}
	if p := r.persist[s.Prefix]; p != nil {
		if err := p.conflicts(rec); err != nil {
			return nil, nil, err
		}
		rec = nil // already persisted
	}
	if m := s.Merge; m != nil && m.ID >= FirstCustomMergeID {
		if err := db.mergers.add(m); err != nil {
			return nil, nil, fmt.Errorf("family %s: %w", s.Name, err)
		}
	}
	return &Family{db: db, spec: s}, rec, nil
}

// RegisterFamily declares a family on an open store and returns its handle.
// The declaration is persisted (synced) before RegisterFamily returns.
// Declaring a family twice, or a prefix the store holds under another name
// or merge operator, fails with ErrFamilyConflict.
func (db *DB) RegisterFamily(spec FamilySpec) (*Family, error) {
	db.commit.Lock()
	defer db.commit.Unlock()
	if db.closed.Load() {
		return nil, ErrClosed
	}
	r := &db.families
	r.mu.Lock()
	defer r.mu.Unlock()
	f, rec, err := db.declare(spec)
	if err != nil {
		return nil, err
	}
	if rec != nil {
		// Only a family new to the store writes (a read-only store can
		// declare what it already holds).
		if err := db.writable(); err != nil {
			return nil, err
		}
		if err := db.pdb().Set(appendFamilyMetaKey(nil, rec.prefix), appendFamilyRecord(nil, rec), pebble.Sync); err != nil {
			return nil, fmt.Errorf("tally: write family record: %w", err)
		}
		r.persist[rec.prefix] = rec
	}
	r.declared[f.spec.Prefix] = f
	return f, nil
}

// Family returns the handle of a declared family.
func (db *DB) Family(name string) (*Family, error) {
	r := &db.families
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.declared {
		if f != nil && f.spec.Name == name {
			return f, nil
		}
	}
	return nil, fmt.Errorf("%w: %s", ErrFamilyNotFound, quote.Input(name))
}

// Families returns the declared families, by prefix.
func (db *DB) Families() []FamilySpec {
	r := &db.families
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []FamilySpec
	for _, f := range r.declared {
		if f != nil {
			out = append(out, f.spec)
		}
	}
	return out
}

// checkKey validates a key of the family.
func (f *Family) checkKey(key []byte) error {
	if len(key) == 0 || key[0] != f.spec.Prefix {
		return fmt.Errorf("%w: family %s: key %x does not start with prefix %#02x", ErrFamilyKey, f.spec.Name, head(key), f.spec.Prefix)
	}
	if n := len(key) - 1; n < f.spec.MinKeyLen || n > f.spec.MaxKeyLen {
		return fmt.Errorf("%w: family %s: key %x has %d bytes after the prefix (want %d..%d)",
			ErrFamilyKey, f.spec.Name, head(key), n, f.spec.MinKeyLen, f.spec.MaxKeyLen)
	}
	return nil
}

// checkBound validates an iteration or range-deletion bound: within the
// family, or the family's end (prefix+1).
func (f *Family) checkBound(b []byte) error {
	if len(b) == 0 || b[0] != f.spec.Prefix && !(len(b) == 1 && b[0] == f.spec.Prefix+1 && f.spec.Prefix != 0xff) {
		return fmt.Errorf("%w: family %s: bound %x is outside the family", ErrFamilyKey, f.spec.Name, head(b))
	}
	if len(b) > MaxFamilyKeyLen {
		return fmt.Errorf("%w: family %s: bound of %d bytes", ErrFamilyKey, f.spec.Name, len(b))
	}
	return nil
}

func (f *Family) checkValue(v []byte) error {
	if len(v) > f.spec.MaxValueLen {
		return fmt.Errorf("%w: family %s: %d bytes (limit %d)", ErrValueTooLarge, f.spec.Name, len(v), f.spec.MaxValueLen)
	}
	return nil
}

// end returns the smallest key after every key of the family.
func (f *Family) end() []byte { return prefixEnd([]byte{f.spec.Prefix}) }

// head returns at most the first 32 bytes of b, for error messages.
func head(b []byte) []byte {
	if len(b) > 32 {
		return b[:32]
	}
	return b
}

// corrupt wraps a decode failure of a stored family value.
func (f *Family) corrupt(key []byte, err error) error {
	return fmt.Errorf("%w: family %s key %x: %v", ErrCorrupt, f.spec.Name, head(key), err)
}

// validateStored runs the family's decoders on a stored value.
func (f *Family) validateStored(key, v []byte) error {
	if m := f.spec.Merge; m != nil {
		if err := m.check(v); err != nil {
			return f.corrupt(key, err)
		}
	}
	if c := f.spec.CheckValue; c != nil {
		if err := c(key, v); err != nil {
			return f.corrupt(key, err)
		}
	}
	return nil
}

// Writes. Each adds to b and takes effect when b commits, atomically with
// every other operation of b. Bad input fails the call and the batch's
// Commit, and nothing of the batch is written.

// Put sets key to value.
func (f *Family) Put(b *Batch, key, value []byte) error {
	if err := f.checkKey(key); err != nil {
		return b.fail(err)
	}
	if err := f.checkValue(value); err != nil {
		return b.fail(err)
	}
	if m := f.spec.Merge; m != nil {
		// A merge family's values are its operator's values, or later
		// merges could not read them.
		if err := m.check(value); err != nil {
			return b.fail(fmt.Errorf("%w: family %s: put value: %v", ErrBadOperand, f.spec.Name, err))
		}
	}
	return b.fail(b.pebble().Set(key, value, nil))
}

// Delete deletes key.
func (f *Family) Delete(b *Batch, key []byte) error {
	if err := f.checkKey(key); err != nil {
		return b.fail(err)
	}
	return b.fail(b.pebble().Delete(key, nil))
}

// DeleteRange deletes every key in [start, end); both bounds must lie in
// the family (end may be the family's end, FamilyEnd).
func (f *Family) DeleteRange(b *Batch, start, end []byte) error {
	if err := f.checkBound(start); err != nil {
		return b.fail(err)
	}
	if err := f.checkBound(end); err != nil {
		return b.fail(err)
	}
	if bytes.Compare(start, end) >= 0 {
		return b.fail(fmt.Errorf("%w: family %s: empty range [%x, %x)", ErrFamilyKey, f.spec.Name, head(start), head(end)))
	}
	return b.fail(b.pebble().DeleteRange(start, end, nil))
}

// Merge merges operand into key with the family's merge operator. The
// operand is decoded now: one the operator cannot decode fails with
// ErrBadOperand.
func (f *Family) Merge(b *Batch, key, operand []byte) error {
	m := f.spec.Merge
	if m == nil {
		return b.fail(fmt.Errorf("%w: family %s has no merge operator", ErrBadOperand, f.spec.Name))
	}
	if err := f.checkKey(key); err != nil {
		return b.fail(err)
	}
	if err := f.checkValue(operand); err != nil {
		return b.fail(err)
	}
	if err := m.check(operand); err != nil {
		return b.fail(fmt.Errorf("%w: family %s: %v", ErrBadOperand, f.spec.Name, err))
	}
	return b.fail(b.pebble().Merge(key, operand, nil))
}

// FamilyEnd returns the key just after every key of the family, the
// exclusive upper bound of a whole-family range.
func (f *Family) FamilyEnd() []byte { return f.end() }

// Reads.

// Get returns key's value appended to dst[:0] (grown if needed) and
// whether the key exists. It does not allocate when dst has room. A value
// the family's decoders reject is ErrCorrupt naming the family and key.
func (f *Family) Get(key, dst []byte) ([]byte, bool, error) {
	in := f.db.acquire()
	defer in.unref()
	return f.get(in.pdb, key, dst)
}

func (f *Family) get(r pebble.Reader, key, dst []byte) ([]byte, bool, error) {
	if err := f.checkKey(key); err != nil {
		return dst[:0], false, err
	}
	if f.db.closed.Load() {
		return dst[:0], false, ErrClosed
	}
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return dst[:0], false, nil
	}
	if err != nil {
		return dst[:0], false, f.db.readErr(fmt.Errorf("family %s key %x: %w", f.spec.Name, head(key), err))
	}
	dst = append(dst[:0], v...)
	closer.Close()
	if f.spec.Merge != nil || f.spec.CheckValue != nil {
		var ok bool
		var err error
		if dst, ok, err = f.resolveStored(key, dst); err != nil || !ok {
			return dst[:0], false, err
		}
	}
	return dst, true, nil
}

// resolveStored returns a stored value ready for the caller: a deferred
// merge list (merge.go) is merged with the family's operator, then the
// family's decoders check it. ok is false when the list resolves to no
// value. v may be reused for the result.
func (f *Family) resolveStored(key, v []byte) ([]byte, bool, error) {
	if m := f.spec.Merge; m != nil && len(v) == 1 && v[0] == m.ID {
		return nil, false, nil // the empty value (merge.go): absent
	}
	if m := f.spec.Merge; m != nil && len(v) > 0 && v[0] == deferredID {
		ops, err := decodeDeferred(v)
		if err != nil {
			return nil, false, f.corrupt(key, err)
		}
		out, ok, err := m.resolve(ops)
		if err != nil {
			return nil, false, f.corrupt(key, err)
		}
		if !ok {
			return nil, false, nil
		}
		v = append(v[:0], out...)
	}
	if err := f.validateStored(key, v); err != nil {
		return nil, false, err
	}
	return v, true, nil
}

// readErr classifies a Pebble read error.
func (db *DB) readErr(err error) error {
	if errors.Is(err, pebble.ErrCorruption) {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if errors.Is(err, pebble.ErrClosed) || db.closed.Load() {
		return ErrClosed
	}
	return err
}

// IterOptions bound a family iteration. Bounds are whole keys (prefix byte
// included). The zero value iterates the whole family forward.
type IterOptions struct {
	// Prefix, if set, restricts the iteration to keys starting with it (it
	// must start with the family's prefix byte).
	Prefix []byte
	// Lower (inclusive) and Upper (exclusive) further bound the keys.
	Lower, Upper []byte
	// Reverse iterates from the largest key down.
	Reverse bool
}

// Iter iterates keys of one family in order (or reverse order). Key and
// Value are valid until the next call to Next or Close. Keys of a merge
// family whose merges left nothing (merge.go's empty value) are skipped.
// Not safe for concurrent use.
type Iter struct {
	f       *Family
	it      *pebble.Iterator
	inst    *instance // referenced while open (reopen.go); nil for a snapshot's
	reverse bool
	started bool
	valid   bool
	loaded  bool   // val holds the current key's checked value
	val     []byte // see loaded
	// add is the set the current value holds, for a MergeRoaring family:
	// its check decoded it, and Roaring hands it over (nil once taken).
	add *roaring.Bitmap
	err error
}

// NewIter returns an iterator over the family's keys within o's bounds
// (nil o: the whole family). Close it when done.
func (f *Family) NewIter(o *IterOptions) (*Iter, error) {
	in := f.db.acquire()
	it, err := f.newIter(in.pdb, o)
	if err != nil {
		in.unref()
		return nil, err
	}
	it.inst = in
	return it, nil
}

func (f *Family) newIter(r pebble.Reader, o *IterOptions) (*Iter, error) {
	if f.db.closed.Load() {
		return nil, ErrClosed
	}
	if o == nil {
		o = &IterOptions{}
	}
	lo, hi := []byte{f.spec.Prefix}, f.end()
	if o.Prefix != nil {
		if err := f.checkBound(o.Prefix); err != nil {
			return nil, err
		}
		lo, hi = o.Prefix, prefixEnd(o.Prefix)
	}
	if o.Lower != nil {
		if err := f.checkBound(o.Lower); err != nil {
			return nil, err
		}
		if bytes.Compare(o.Lower, lo) > 0 {
			lo = o.Lower
		}
	}
	if o.Upper != nil {
		if err := f.checkBound(o.Upper); err != nil {
			return nil, err
		}
		if hi == nil || bytes.Compare(o.Upper, hi) < 0 {
			hi = o.Upper
		}
	}
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, f.db.readErr(err)
	}
	return &Iter{f: f, it: it, reverse: o.Reverse}, nil
}

// Next advances to the next key and reports whether there is one. After it
// returns false, Err tells an error from the end.
func (it *Iter) Next() bool {
	if it.err != nil {
		return false
	}
	switch {
	case !it.started && it.reverse:
		it.valid = it.it.Last()
	case !it.started:
		it.valid = it.it.First()
	case it.reverse:
		it.valid = it.it.Prev()
	default:
		it.valid = it.it.Next()
	}
	it.started = true
	return it.settle()
}

// settle finishes a move: it reports an error, or skips keys whose value
// reads as absent, moving on in the iteration's direction.
func (it *Iter) settle() bool {
	for {
		it.loaded, it.add = false, nil
		if !it.valid {
			if err := it.it.Error(); err != nil {
				it.err = it.f.db.readErr(err)
			}
			return false
		}
		if it.f.spec.Merge == nil && it.f.spec.CheckValue == nil {
			return true // values are read lazily, as they are
		}
		if ok := it.load(); it.err != nil {
			return false
		} else if ok {
			return true
		}
		if it.reverse {
			it.valid = it.it.Prev()
		} else {
			it.valid = it.it.Next()
		}
	}
}

// load reads and checks the current value; false means it reads as absent.
func (it *Iter) load() bool {
	v, err := it.it.ValueAndErr()
	if err != nil {
		it.err = it.f.db.readErr(err)
		return false
	}
	if it.f.spec.Merge == MergeRoaring && it.f.spec.CheckValue == nil && len(v) > 1 && v[0] == MergeRoaring.ID {
		// The check is the decode: keep what it decoded for Roaring.
		add, _, err := decodeRoaring(v[1:])
		if err != nil {
			it.err = it.f.corrupt(it.it.Key(), err)
			return false
		}
		it.val, it.loaded, it.add = v, true, add
		return true
	}
	if len(v) > 0 && v[0] == deferredID {
		v = bytes.Clone(v) // rare: a list this process resolves now
	}
	out, ok, err := it.f.resolveStored(it.it.Key(), v)
	if err != nil {
		it.err = err
		return false
	}
	it.val, it.loaded = out, ok
	return ok
}

// SeekGE moves to the first key ≥ key (forward iterators) and reports
// whether there is one; Next continues from there.
func (it *Iter) SeekGE(key []byte) bool {
	it.started = true
	it.valid = it.it.SeekGE(key)
	return it.settle()
}

// SeekLT moves to the last key < key (reverse iterators) and reports
// whether there is one; Next continues from there.
func (it *Iter) SeekLT(key []byte) bool {
	it.started = true
	it.valid = it.it.SeekLT(key)
	return it.settle()
}

// Key returns the current key (prefix byte included).
func (it *Iter) Key() []byte { return it.it.Key() }

// Value returns the current value. A value the family's decoders reject
// stops the iteration with ErrCorrupt (see Err).
func (it *Iter) Value() []byte {
	if it.loaded {
		return it.val
	}
	v, err := it.it.ValueAndErr()
	if err != nil {
		it.err = it.f.db.readErr(err)
		return nil
	}
	return v
}

// Roaring returns the set the current value of a MergeRoaring family
// holds (DecodeRoaring's add set), decoded once: the iterator's check of
// the value is the decode, and the caller gets its result, to keep and
// modify. Errors: ErrCorrupt.
func (it *Iter) Roaring() (*roaring.Bitmap, error) {
	if add := it.add; add != nil {
		it.add = nil
		return add, nil
	}
	add, _, err := DecodeRoaring(it.Value())
	return add, err
}

// Err returns the error that stopped the iteration, if any.
func (it *Iter) Err() error { return it.err }

// Close releases the iterator.
func (it *Iter) Close() error {
	err := it.it.Close()
	if it.inst != nil {
		it.inst.unref()
		it.inst = nil
	}
	if it.err != nil {
		return it.err
	}
	if err != nil {
		return it.f.db.readErr(err)
	}
	return nil
}

// Snapshot is a consistent, read-only view of every family at one moment
// (Pebble's snapshot): reads through it see no write committed after it was
// taken. Counters are not part of it (they live in memory); use View for a
// read that must see counters and families at one moment. Close it when
// done: an open snapshot pins old versions of the keys it can see.
type Snapshot struct {
	db   *DB
	snap *pebble.Snapshot
	inst *instance // referenced until Close (reopen.go)
}

// NewSnapshot takes a snapshot of every family.
func (db *DB) NewSnapshot() (*Snapshot, error) {
	if db.closed.Load() {
		return nil, ErrClosed
	}
	in := db.acquire()
	return &Snapshot{db: db, snap: in.pdb.NewSnapshot(), inst: in}, nil
}

// Get reads key of family f as of the snapshot (see Family.Get).
func (s *Snapshot) Get(f *Family, key, dst []byte) ([]byte, bool, error) {
	return f.get(s.snap, key, dst)
}

// NewIter iterates family f as of the snapshot (see Family.NewIter).
func (s *Snapshot) NewIter(f *Family, o *IterOptions) (*Iter, error) {
	return f.newIter(s.snap, o)
}

// Close releases the snapshot.
func (s *Snapshot) Close() error {
	err := s.snap.Close()
	if s.inst != nil {
		s.inst.unref()
		s.inst = nil
	}
	return err
}

// AppendUint64 appends v big-endian: the building block of family keys, so
// Pebble's byte order is numeric order.
func AppendUint64(dst []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(dst, v) }

// View runs fn while no batch commits, so reads inside fn (any Counter,
// Family, or Snapshot taken inside) see counters and families at one
// moment: never the Pebble half of a batch without its counter half. Plain
// reads outside View take no locks and are each atomic on their own; use
// View when one answer combines both (a like set and its count, say).
// fn must be short and must not write: a commit inside fn would wait for
// fn forever.
func (db *DB) View(fn func() error) error {
	db.commit.RLock()
	defer db.commit.RUnlock()
	if db.closed.Load() {
		return ErrClosed
	}
	return fn()
}
