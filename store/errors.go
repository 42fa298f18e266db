package store

import "errors"

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
	// does not fit the column's maximum, or when a Set has the wrong number
	// of values.
	ErrValueRange = errors.New("tally: value out of range")
	// ErrLocked is returned by Open when another process (or another DB in
	// this process) has the directory open.
	ErrLocked = errors.New("tally: directory is locked by another process")
	// ErrNotStore is returned by Open for a non-empty directory that is not
	// a tally store.
	ErrNotStore = errors.New("tally: directory is not a tally store")
	// ErrIncompatible is returned by Open for a store written by an
	// incompatible format version.
	ErrIncompatible = errors.New("tally: incompatible store format version")
	// ErrCorrupt marks damaged bytes read from disk (a log record, a
	// checkpoint chunk, a schema record): a checksum or decode failure. It
	// tells damage apart from misuse.
	ErrCorrupt = errors.New("tally: corrupt data")
	// ErrClosed is returned by operations on a closed DB.
	ErrClosed = errors.New("tally: store is closed")
	// ErrFailed is returned by writes after a WAL sync failed; the DB must be
	// reopened.
	ErrFailed = errors.New("tally: store failed; reopen it")
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
