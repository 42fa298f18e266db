package store

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/tallydb/tally/internal/limits"
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

// AgePolicy says when a range of a counter leaves memory.
type AgePolicy struct {
	// Kind selects the policy. The default is KeepHot.
	Kind AgeKind
	// HotRanges is the number of newest ranges kept hot under KeepNewest.
	HotRanges int
	// MaxAge is the age after which a range is aged under AgeByTime.
	MaxAge time.Duration
	// IDEpochMs is the snowflake epoch in Unix milliseconds under AgeByTime.
	IDEpochMs int64
	// IDTimeShift is the number of id bits below the timestamp under
	// AgeByTime (22 for Twitter's snowflake).
	IDTimeShift uint8
}

// CounterOptions describe a counter at creation.
type CounterOptions struct {
	// RangeBits is the number of low id bits kept per row; a range holds the
	// ids that share the bits above. Between 8 and 48. The default is 32.
	RangeBits uint8
	// Age is the counter's aging policy. The default is KeepHot.
	Age AgePolicy
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
	ID        uint32
	Name      string
	RangeBits uint8
	Age       AgePolicy
	Columns   []Column
}

func (o *CounterOptions) withDefaults() CounterOptions {
	c := *o
	if c.RangeBits == 0 {
		c.RangeBits = 32
	}
	return c
}

func (o CounterOptions) validate() error {
	if o.RangeBits < limits.MinRangeBits || o.RangeBits > limits.MaxRangeBits {
		return fmt.Errorf("%w: range bits %d (want %d..%d)", ErrInvalidOption, o.RangeBits, limits.MinRangeBits, limits.MaxRangeBits)
	}
	a := o.Age
	switch a.Kind {
	case KeepHot:
	case KeepNewest:
		if a.HotRanges < 1 {
			return fmt.Errorf("%w: hot ranges %d (want ≥ 1)", ErrInvalidOption, a.HotRanges)
		}
	case AgeByTime:
		if a.MaxAge <= 0 {
			return fmt.Errorf("%w: age %v (want > 0)", ErrInvalidOption, a.MaxAge)
		}
		if a.IDTimeShift > 40 || a.IDEpochMs < 0 {
			return fmt.Errorf("%w: id time shift %d / epoch %d (want shift ≤ 40, epoch ≥ 0)", ErrInvalidOption, a.IDTimeShift, a.IDEpochMs)
		}
	default:
		return fmt.Errorf("%w: age kind %d", ErrInvalidOption, a.Kind)
	}
	return nil
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

func (o ColumnOptions) validate() error {
	switch o.HintBits {
	case 8, 16, 32:
	default:
		return fmt.Errorf("%w: column hint %d bits (want 8, 16 or 32)", ErrInvalidOption, o.HintBits)
	}
	switch o.MaxBits {
	case 32, 64:
	default:
		return fmt.Errorf("%w: column max %d bits (want 32 or 64)", ErrInvalidOption, o.MaxBits)
	}
	if o.HintBits > o.MaxBits {
		return fmt.Errorf("%w: column hint %d > max %d bits", ErrInvalidOption, o.HintBits, o.MaxBits)
	}
	return nil
}

// validName accepts 1-64 characters of [A-Za-z0-9_-], not starting with '-'.
// Names appear in CLI arguments as "ID.column", so '.' is excluded.
func validName(s string) error {
	if len(s) == 0 || len(s) > limits.MaxNameLen || s[0] == '-' {
		return fmt.Errorf("%w: %q", ErrInvalidName, s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q (use letters, digits, '_' and '-')", ErrInvalidName, s)
		}
	}
	return nil
}

// schemaVersion is the version byte of an encoded counter schema.
const schemaVersion = 1

// appendSchema encodes a counter's schema, kept under meta "counter/" + id.
//
//	field        width     meaning
//	-----------  --------  ----------------------------------------------
//	version      1         schemaVersion
//	counter id   4         big-endian
//	name         uvarint+n length, then bytes
//	range bits   1
//	age kind     1         AgeKind
//	hot ranges   uvarint   KeepNewest
//	max age      uvarint   milliseconds, AgeByTime
//	id epoch     uvarint   Unix ms, AgeByTime
//	id shift     1         AgeByTime
//	ncols        uvarint
//	per column:  uvarint+n name; 1 hint bits; 1 max bits
//	checksum     4         CRC-32C of everything before, big-endian
func appendSchema(dst []byte, ci *CounterInfo) []byte {
	start := len(dst)
	dst = append(dst, schemaVersion)
	dst = binary.BigEndian.AppendUint32(dst, ci.ID)
	dst = appendString(dst, ci.Name)
	dst = append(dst, ci.RangeBits, byte(ci.Age.Kind))
	dst = binary.AppendUvarint(dst, uint64(ci.Age.HotRanges))
	dst = binary.AppendUvarint(dst, uint64(ci.Age.MaxAge/time.Millisecond))
	dst = binary.AppendUvarint(dst, uint64(ci.Age.IDEpochMs))
	dst = append(dst, ci.Age.IDTimeShift)
	dst = binary.AppendUvarint(dst, uint64(len(ci.Columns)))
	for _, c := range ci.Columns {
		dst = appendString(dst, c.Name)
		dst = append(dst, c.HintBits, c.MaxBits)
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
	if v := d.byte(); v != schemaVersion && d.err == nil {
		return nil, fmt.Errorf("%w: schema version %d", ErrCorrupt, v)
	}
	ci := &CounterInfo{}
	ci.ID = d.u32()
	ci.Name = d.string()
	ci.RangeBits = d.byte()
	ci.Age.Kind = AgeKind(d.byte())
	ci.Age.HotRanges = int(d.uvarint())
	ci.Age.MaxAge = time.Duration(d.uvarint()) * time.Millisecond
	ci.Age.IDEpochMs = int64(d.uvarint())
	ci.Age.IDTimeShift = d.byte()
	n := d.uvarint()
	if n > MaxColumns {
		return nil, fmt.Errorf("%w: schema has %d columns", ErrCorrupt, n)
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		c := Column{Name: d.string()}
		c.HintBits = d.byte()
		c.MaxBits = d.byte()
		ci.Columns = append(ci.Columns, c)
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	if err := (CounterOptions{RangeBits: ci.RangeBits, Age: ci.Age}).validate(); err != nil {
		return nil, fmt.Errorf("%w: schema of %q: %v", ErrCorrupt, ci.Name, err)
	}
	for _, c := range ci.Columns {
		if err := (ColumnOptions{HintBits: c.HintBits, MaxBits: c.MaxBits}).validate(); err != nil {
			return nil, fmt.Errorf("%w: schema of %q: %v", ErrCorrupt, ci.Name, err)
		}
	}
	return ci, nil
}
