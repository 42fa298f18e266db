package store

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tallydb/tally/cold"
	"github.com/tallydb/tally/internal/quote"
)

// Errors returned by the store. Test for them with errors.Is; the returned
// error usually wraps one of these with detail.
var (
	// ErrCounterNotFound is returned for an unknown counter name.
	ErrCounterNotFound = errors.New("tally: counter not found")
	// ErrColumnNotFound is returned for an unknown column name.
	ErrColumnNotFound = errors.New("tally: column not found")
	// ErrExists is returned when creating a counter or column whose name is taken.
	ErrExists = errors.New("tally: already exists")
	// ErrInvalidName is returned for an empty or malformed counter or column name.
	ErrInvalidName = errors.New("tally: invalid name")
	// ErrInvalidOption is returned by Options.Validate, CounterOptions and
	// ColumnOptions for a value outside its allowed set.
	ErrInvalidOption = errors.New("tally: invalid option")
	// ErrValueRange is returned when a value or the result of an increment
	// does not fit the column's maximum.
	ErrValueRange = errors.New("tally: value out of range")
	// ErrColumnCount is returned when a Set or Load row has a different
	// number of values than the counter has columns (including a counter
	// without columns).
	ErrColumnCount = errors.New("tally: wrong number of values")
	// ErrLocked is returned by Open when another process (or another DB in
	// this process) has the directory open.
	ErrLocked = errors.New("tally: directory is locked by another process")
	// ErrPermission is returned by Open when the store directory or its lock
	// file cannot be created or written: permission denied or a read-only
	// filesystem. The error also wraps the operating system's error.
	ErrPermission = errors.New("tally: no permission to write the store directory")
	// ErrNotStore is returned by Open for a non-empty directory that is not
	// a tally store.
	ErrNotStore = errors.New("tally: directory is not a tally store")
	// ErrIncompatible is returned by Open for a store written by an
	// incompatible format version.
	ErrIncompatible = errors.New("tally: incompatible store format version")
	// ErrCorrupt marks damaged bytes read from disk (a log record, a
	// checkpoint chunk, a schema record, a cold block): a checksum or decode
	// failure, or a block the range's index names but Pebble does not hold.
	// It tells damage apart from misuse: a read on a closed store or bad
	// input is never ErrCorrupt, and a read that fails for another reason
	// (an I/O error) returns that error.
	ErrCorrupt = errors.New("tally: corrupt data")
	// ErrClosed is returned by operations on a closed DB.
	ErrClosed = errors.New("tally: store is closed")
	// ErrFailed is returned by writes after a failure the open DB cannot
	// recover from (a failed WAL write or sync, a fatal Pebble error); the
	// DB must be reopened. It is also returned, until a flush succeeds
	// again, while Pebble cannot write sstables for a reason other than a
	// full disk. The error also wraps the cause (ErrDiskFull, ErrCorrupt or
	// the I/O error).
	ErrFailed = errors.New("tally: store failed; reopen it")
	// ErrDiskFull is returned when the filesystem has no space left (ENOSPC
	// or EDQUOT) for a write the store must make: by writes while Pebble
	// cannot flush or compact for lack of space (they are refused at once
	// rather than queue behind a flush that cannot finish), by Open when the
	// store needs space to recover, and wrapped in ErrFailed when the WAL
	// itself could not be written. The error also wraps the OS error.
	// Reads keep working; see docs/FAULTS.md.
	ErrDiskFull = errors.New("tally: disk full")
	// ErrReadOnly is returned by writes to a DB opened with
	// Options.ReadOnly.
	ErrReadOnly = errors.New("tally: store is open read-only")
	// ErrTooManyColumns is returned when a counter would exceed MaxColumns.
	ErrTooManyColumns = errors.New("tally: too many columns")
	// ErrFamilyNotFound is returned for a family name nobody declared.
	ErrFamilyNotFound = errors.New("tally: family not found")
	// ErrFamilyConflict is returned when a family declaration clashes with
	// another declaration or with what the store holds: one prefix under two
	// names, one name under two prefixes, or a changed merge operator.
	ErrFamilyConflict = errors.New("tally: family conflict")
	// ErrFamilyKey is returned for a family key outside the family (wrong
	// prefix byte), of a length the family does not allow, or a range or
	// bound that leaves the family.
	ErrFamilyKey = errors.New("tally: bad family key")
	// ErrValueTooLarge is returned for a family value or merge operand over
	// the family's MaxValueLen (at most MaxFamilyValueLen).
	ErrValueTooLarge = errors.New("tally: value too large")
	// ErrBadOperand is returned for a merge operand (or a merge family's
	// value) its operator cannot decode, or a merge into a family without
	// an operator.
	ErrBadOperand = errors.New("tally: bad merge operand")
)

// coldReadError classifies an error of a cold block read: damage (a block
// that fails its checks, a block the index names but Pebble lacks, Pebble's
// own corruption) wraps ErrCorrupt; anything else (ErrClosed, an I/O error,
// a cancelled context) is returned as it is, so a reader is never told its
// data is damaged when it is not.
func coldReadError(err error) error {
	if errors.Is(err, cold.ErrCorrupt) || errors.Is(err, cold.ErrMissingBlock) || errors.Is(err, pebble.ErrCorruption) {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return err
}

// counterNotFound is the error of a lookup of a counter named name that
// does not exist. A name that could never be a counter says so: it wraps
// ErrInvalidName (with the rule it breaks) as well as ErrCounterNotFound.
func counterNotFound(name string) error {
	if err := validName("counter name", name); err != nil {
		return notFoundError{err, ErrCounterNotFound}
	}
	return fmt.Errorf("%w: %s", ErrCounterNotFound, quote.Input(name))
}

// columnNotFound is the error of a lookup of a column of cs that does not
// exist; like counterNotFound, an impossible name says why.
func columnNotFound(cs *counterState, column string) error {
	if err := validName("column name", column); err != nil {
		return notFoundError{err, ErrColumnNotFound}
	}
	return fmt.Errorf("%w: %s.%s", ErrColumnNotFound, cs.name, column)
}

// notFoundError is an invalid-name error that also matches a not-found
// sentinel.
type notFoundError struct{ err, notFound error }

func (e notFoundError) Error() string   { return e.err.Error() }
func (e notFoundError) Unwrap() []error { return []error{e.err, e.notFound} }
