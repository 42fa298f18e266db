package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"time"
	"unicode/utf8"

	"github.com/tallydb/tally/internal/limits"
	"github.com/tallydb/tally/internal/quote"
)

// MaxColumns is the most columns a counter can have.
const MaxColumns = limits.MaxColumns

// AgeKind selects how a counter's ranges age from the hot tier to the cold
// tier.
type AgeKind uint8

const (
	// KeepHot never ages a range: every range stays in memory. Right for
	// user ids, which do not grow with time.
	KeepHot AgeKind = iota
	// KeepNewest keeps the newest AgePolicy.HotRanges ranges hot and ages
	// the older ones.
	KeepNewest
	// AgeByTime ages a range once the time embedded in its ids is older than
	// AgePolicy.MaxAge. Ids follow the snowflake layout: milliseconds since
	// AgePolicy.IDEpochMs, shifted left by AgePolicy.IDTimeShift bits.
	AgeByTime
)

// String returns the policy kind's name.
func (k AgeKind) String() string {
	switch k {
	case KeepHot:
		return "keep-hot"
	case KeepNewest:
		return "hot-ranges"
	case AgeByTime:
		return "age"
	}
	return fmt.Sprintf("AgeKind(%d)", uint8(k))
}

// AgePolicy says when a range of a counter leaves memory. Fields the Kind
// does not use are ignored, and not stored.
type AgePolicy struct {
	// Kind selects the policy. The default is KeepHot.
	Kind AgeKind
	// HotRanges is the number of newest ranges kept hot under KeepNewest
	// (at least 1).
	HotRanges int
	// MaxAge is the age after which a range is aged under AgeByTime: a
	// positive whole number of milliseconds (the schema stores
	// milliseconds; a fraction is refused rather than rounded).
	MaxAge time.Duration
	// IDEpochMs is the snowflake epoch in Unix milliseconds under
	// AgeByTime, between 0 and 2^50.
	IDEpochMs int64
	// IDTimeShift is the number of id bits below the timestamp under
	// AgeByTime (22 for Twitter's snowflake), at most 40.
	IDTimeShift uint8
}

// CounterOptions describe a counter at creation.
type CounterOptions struct {
	// RangeBits is the number of low id bits kept per row; a range holds the
	// ids that share the bits above. Between 8 and 48 (limits.MinRangeBits,
	// limits.MaxRangeBits). A range is the unit of aging and has a fixed
	// memory cost (about 20 KiB at 32 bits), so ids that leave few rows per
	// range (snowflake ids, random ids) make narrow ranges expensive. The
	// default is 32 with AutoRangeBits: the width adapts to the ids.
	RangeBits uint8
	// AutoRangeBits lets the store widen the counter's ranges (to 40, 48,
	// 56 or 64 bits) while every range is hot, when the ids leave too few
	// rows per range (widen.go); RangeBits is then the starting width. The
	// default is true when RangeBits is 0 (the default), false when
	// RangeBits is given: an explicit width stays fixed.
	AutoRangeBits bool
	// Age is the counter's aging policy. The default is KeepHot.
	Age AgePolicy
	// Owner is the package that owns the counter (timeline, unread,
	// likes), or "" for the host's own counters. A package's counters
	// are private to it: the tools (the tally command line, tally serve)
	// refuse them (DB.UserCounter returns ErrReserved) and list only the
	// host's. A name when set (ValidateName). The default is "".
	Owner string
}

// ColumnOptions describe a column at creation.
type ColumnOptions struct {
	// HintBits is the width a value has in a hot row: 8, 16 or 32. Larger
	// values are kept exactly in an overflow side table. The default is 16.
	HintBits uint8
	// MaxBits bounds the column's values to 2^MaxBits-1: 32 or 64. The
	// default is 32.
	MaxBits uint8
}

// Column describes one column of a counter.
type Column struct {
	Name     string
	HintBits uint8
	MaxBits  uint8
}

// Max returns the largest value the column can hold.
func (c Column) Max() uint64 {
	if c.MaxBits >= 64 {
		return ^uint64(0)
	}
	return 1<<c.MaxBits - 1
}

// CounterInfo describes a counter's schema.
type CounterInfo struct {
	ID   uint32
	Name string
	// RangeBits is the width the counter was created with; under
	// AutoRangeBits the current width (CounterStats.RangeBits) may be wider.
	RangeBits     uint8
	AutoRangeBits bool
	Age           AgePolicy
	Columns       []Column
	Owner         string // the owning package, "" for the host's (CounterOptions.Owner)
}

func (o *CounterOptions) withDefaults() CounterOptions {
	c := *o
	if c.RangeBits == 0 {
		c.RangeBits = 32
		c.AutoRangeBits = true
	}
	// Fields the policy kind does not use are not stored: clear them, so
	// the schema a caller reads back is the one that was stored.
	switch a := c.Age; a.Kind {
	case KeepHot:
		c.Age = AgePolicy{Kind: KeepHot}
	case KeepNewest:
		c.Age = AgePolicy{Kind: KeepNewest, HotRanges: a.HotRanges}
	case AgeByTime:
		c.Age = AgePolicy{Kind: AgeByTime, MaxAge: a.MaxAge, IDEpochMs: a.IDEpochMs, IDTimeShift: a.IDTimeShift}
	}
	return c
}

// Validate reports every problem with the options in one error wrapping
// ErrInvalidOption. Zero fields stand for their defaults, as in
// CreateCounter. CreateCounter runs the same checks; Validate lets a tool
// check its input before it opens or creates a store.
//
// The limits: RangeBits between 8 and 48; KeepNewest needs HotRanges ≥ 1;
// AgeByTime needs a MaxAge that is a positive whole number of milliseconds
// (the schema stores milliseconds; a fraction is refused, not rounded, so
// the stored age is the age given), an IDTimeShift ≤ 40 and an IDEpochMs in
// [0, 2^50]. The bounds are those of package internal/limits.
func (o CounterOptions) Validate() error {
	return o.withDefaults().validate()
}

func (o CounterOptions) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...))
	}
	if o.RangeBits < limits.MinRangeBits || o.RangeBits > limits.MaxRangeBits {
		bad("range bits %d (want %d..%d)", o.RangeBits, limits.MinRangeBits, limits.MaxRangeBits)
	}
	if o.Owner != "" {
		if err := validName("owner", o.Owner); err != nil {
			errs = append(errs, fmt.Errorf("%w: %v", ErrInvalidOption, err))
		}
	}
	a := o.Age
	switch a.Kind {
	case KeepHot:
	case KeepNewest:
		if a.HotRanges < 1 {
			bad("hot ranges %d (want ≥ 1)", a.HotRanges)
		}
	case AgeByTime:
		switch {
		case a.MaxAge <= 0:
			bad("age %v (want > 0)", a.MaxAge)
		case a.MaxAge%time.Millisecond != 0:
			bad("age %v is not a whole number of milliseconds (ages are stored in ms)", a.MaxAge)
		}
		if a.IDTimeShift > limits.MaxIDTimeShift {
			bad("id time shift %d (want 0..%d)", a.IDTimeShift, limits.MaxIDTimeShift)
		}
		if a.IDEpochMs < 0 || a.IDEpochMs > limits.MaxIDTimeMs {
			bad("id epoch %d ms (want 0..%d)", a.IDEpochMs, int64(limits.MaxIDTimeMs))
		}
	default:
		bad("age kind %d (want KeepHot, KeepNewest or AgeByTime)", a.Kind)
	}
	return errors.Join(errs...)
}

func (o *ColumnOptions) withDefaults() ColumnOptions {
	c := *o
	if c.HintBits == 0 {
		c.HintBits = 16
	}
	if c.MaxBits == 0 {
		c.MaxBits = 32
	}
	return c
}

// Validate reports every problem with the options in one error wrapping
// ErrInvalidOption. Zero fields stand for their defaults, as in AddColumn.
func (o ColumnOptions) Validate() error {
	return o.withDefaults().validate()
}

func (o ColumnOptions) validate() error {
	var errs []error
	switch o.HintBits {
	case 8, 16, 32:
	default:
		errs = append(errs, fmt.Errorf("%w: column hint %d bits (want 8, 16 or 32)", ErrInvalidOption, o.HintBits))
	}
	switch o.MaxBits {
	case 32, 64:
	default:
		errs = append(errs, fmt.Errorf("%w: column max %d bits (want 32 or 64)", ErrInvalidOption, o.MaxBits))
	}
	if errs == nil && o.HintBits > o.MaxBits {
		errs = append(errs, fmt.Errorf("%w: column hint %d > max %d bits", ErrInvalidOption, o.HintBits, o.MaxBits))
	}
	return errors.Join(errs...)
}

// ValidateName reports why s cannot name a counter or column, or nil. A
// name is 1 to 64 bytes of [A-Za-z0-9_-], not starting with '-' (names
// appear in CLI arguments as "ID.column", so '.' is excluded). Errors wrap
// ErrInvalidName and say which rule s breaks.
func ValidateName(s string) error { return validName("", s) }

// validName is ValidateName with what ("counter name", "column name") in
// the message. Input is echoed through quote.Input, never in full.
func validName(what, s string) error {
	// The quoted name is built on the failure paths only: every served
	// request that names a business checks it (an allocation a call).
	q := func() string {
		if what != "" {
			return what + " " + quote.Input(s)
		}
		return quote.Input(s)
	}
	switch {
	case len(s) == 0 && what == "":
		return fmt.Errorf("%w: empty name", ErrInvalidName)
	case len(s) == 0:
		return fmt.Errorf("%w: empty %s", ErrInvalidName, what)
	case len(s) > limits.MaxNameLen:
		return fmt.Errorf("%w: %s is %d bytes, limit %d", ErrInvalidName, q(), len(s), limits.MaxNameLen)
	case s[0] == '-':
		return fmt.Errorf("%w: %s starts with '-'", ErrInvalidName, q())
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			r, _ := utf8.DecodeRuneInString(s[i:])
			return fmt.Errorf("%w: %s has %q at byte %d (use letters, digits, '_' and '-')", ErrInvalidName, q(), r, i)
		}
	}
	return nil
}

// checkSchema makes sure ci is a schema Open will read back as it is: it
// encodes ci, decodes it with the decoder Open uses and compares. Every
// schema change runs it before anything becomes durable, so no accepted
// change can leave a store that Open refuses. A failure means a validation
// rule is missing (a bug); it is reported as ErrInvalidOption, never as
// ErrCorrupt, because nothing on disk is damaged.
func checkSchema(ci *CounterInfo) error {
	got, err := decodeSchema(appendSchema(nil, ci))
	if err != nil {
		return fmt.Errorf("%w: schema of counter %s would not read back: %v", ErrInvalidOption, quote.Input(ci.Name), err)
	}
	if !reflect.DeepEqual(got, ci) {
		return fmt.Errorf("%w: schema of counter %s would read back as %+v, not %+v", ErrInvalidOption, quote.Input(ci.Name), *got, *ci)
	}
	return nil
}

// schemaVersion is the version byte of an encoded counter schema. Version
// 2 (store format 3) added the flags byte: AutoRangeBits, and an owner
// after the columns; a version 1 schema reads as flags 0.
const schemaVersion = 2

// Schema flags.
const (
	schemaAutoRangeBits = 1 << 0
	schemaOwner         = 1 << 1 // the owning package follows the columns
)

// appendSchema encodes a counter's schema, kept under meta "counter/" + id.
//
//	field        width     meaning
//	-----------  --------  ----------------------------------------------
//	version      1         schemaVersion
//	counter id   4         big-endian
//	name         uvarint+n length, then bytes
//	range bits   1         the starting width under auto range bits
//	flags        1         schemaAutoRangeBits (version 2; absent in 1)
//	age kind     1         AgeKind
//	hot ranges   uvarint   KeepNewest
//	max age      uvarint   milliseconds, AgeByTime
//	id epoch     uvarint   Unix ms, AgeByTime
//	id shift     1         AgeByTime
//	ncols        uvarint
//	per column:  uvarint+n name; 1 hint bits; 1 max bits
//	owner        uvarint+n flags & schemaOwner only: the owning package
//	checksum     4         CRC-32C of everything before, big-endian
func appendSchema(dst []byte, ci *CounterInfo) []byte {
	start := len(dst)
	dst = append(dst, schemaVersion)
	dst = binary.BigEndian.AppendUint32(dst, ci.ID)
	dst = appendString(dst, ci.Name)
	var flags byte
	if ci.AutoRangeBits {
		flags |= schemaAutoRangeBits
	}
	if ci.Owner != "" {
		flags |= schemaOwner
	}
	dst = append(dst, ci.RangeBits, flags, byte(ci.Age.Kind))
	dst = binary.AppendUvarint(dst, uint64(ci.Age.HotRanges))
	dst = binary.AppendUvarint(dst, uint64(ci.Age.MaxAge/time.Millisecond))
	dst = binary.AppendUvarint(dst, uint64(ci.Age.IDEpochMs))
	dst = append(dst, ci.Age.IDTimeShift)
	dst = binary.AppendUvarint(dst, uint64(len(ci.Columns)))
	for _, c := range ci.Columns {
		dst = appendString(dst, c.Name)
		dst = append(dst, c.HintBits, c.MaxBits)
	}
	if ci.Owner != "" {
		dst = appendString(dst, ci.Owner)
	}
	return appendChecksum(dst, start)
}

// decodeSchema decodes a schema written by appendSchema. Errors wrap
// ErrCorrupt.
func decodeSchema(b []byte) (*CounterInfo, error) {
	body, err := verifyChecksum(b, "schema")
	if err != nil {
		return nil, err
	}
	d := decoder{b: body, what: "schema"}
	version := d.byte()
	if version != 1 && version != schemaVersion && d.err == nil {
		return nil, fmt.Errorf("%w: schema version %d", ErrCorrupt, version)
	}
	ci := &CounterInfo{}
	ci.ID = d.u32()
	ci.Name = d.string()
	ci.RangeBits = d.byte()
	var flags byte
	if version >= 2 {
		flags = d.byte()
		if d.err == nil && flags&^(schemaAutoRangeBits|schemaOwner) != 0 {
			return nil, fmt.Errorf("%w: schema flags %#x", ErrCorrupt, flags)
		}
		ci.AutoRangeBits = flags&schemaAutoRangeBits != 0
	}
	ci.Age.Kind = AgeKind(d.byte())
	ci.Age.HotRanges = int(d.uvarint())
	ageMs := d.uvarint()
	if d.err == nil && ageMs > math.MaxInt64/uint64(time.Millisecond) {
		return nil, fmt.Errorf("%w: schema age %d ms overflows", ErrCorrupt, ageMs)
	}
	ci.Age.MaxAge = time.Duration(ageMs) * time.Millisecond
	ci.Age.IDEpochMs = int64(d.uvarint())
	ci.Age.IDTimeShift = d.byte()
	n := d.uvarint()
	if n > limits.MaxColumns {
		return nil, fmt.Errorf("%w: schema has %d columns", ErrCorrupt, n)
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		c := Column{Name: d.string()}
		c.HintBits = d.byte()
		c.MaxBits = d.byte()
		ci.Columns = append(ci.Columns, c)
	}
	if flags&schemaOwner != 0 {
		ci.Owner = d.string()
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	// Everything the encoder's callers validate is checked again: a schema
	// that fails here was damaged (its checksum matched by chance) or
	// written by a build that validated less.
	bad := func(err error) (*CounterInfo, error) {
		return nil, fmt.Errorf("%w: schema of counter %s: %v", ErrCorrupt, quote.Input(ci.Name), err)
	}
	if err := validName("counter name", ci.Name); err != nil {
		return bad(err)
	}
	if flags&schemaOwner != 0 && ci.Owner == "" {
		return bad(errors.New("an owner flag without an owner"))
	}
	if err := (CounterOptions{RangeBits: ci.RangeBits, Age: ci.Age, Owner: ci.Owner}).validate(); err != nil {
		return bad(err)
	}
	seen := make(map[string]bool, len(ci.Columns))
	for _, c := range ci.Columns {
		if err := validName("column name", c.Name); err != nil {
			return bad(err)
		}
		if seen[c.Name] {
			return bad(fmt.Errorf("column %s twice", quote.Input(c.Name)))
		}
		seen[c.Name] = true
		if err := (ColumnOptions{HintBits: c.HintBits, MaxBits: c.MaxBits}).validate(); err != nil {
			return bad(err)
		}
	}
	return ci, nil
}
