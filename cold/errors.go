package cold

import (
	"errors"
	"fmt"
)

// Sentinel errors. Test with errors.Is.
var (
	// ErrCorrupt marks every failure to decode or verify stored bytes: bad
	// checksum, truncation, impossible field values, a block that disagrees
	// with its range descriptor. The wrapping error says what and where.
	ErrCorrupt = errors.New("cold: corrupt data")
	// ErrMissingBlock is returned (wrapped) when a range descriptor names a
	// block the BlockSource cannot find. A BlockSource should return an error
	// wrapping it for not-found.
	ErrMissingBlock = errors.New("cold: missing block")
	// ErrUnsorted is returned by Build/Builder.Add when keys are not strictly
	// increasing.
	ErrUnsorted = errors.New("cold: keys not strictly increasing")
	// ErrBadRow is returned by Build/Builder.Add for a row whose columns are
	// all zero or whose column count differs from the builder's.
	ErrBadRow = errors.New("cold: bad row")
	// ErrBadArgument is returned for API misuse: bad options, short output
	// slices.
	ErrBadArgument = errors.New("cold: bad argument")
)

// corruptf wraps ErrCorrupt with what went wrong and where. block < 0 means
// the range descriptor.
func corruptf(block int64, off int, format string, args ...any) error {
	where := "desc"
	if block >= 0 {
		where = fmt.Sprintf("block %d", block)
	}
	return fmt.Errorf("%w: %s at offset %d: %s", ErrCorrupt, where, off, fmt.Sprintf(format, args...))
}
