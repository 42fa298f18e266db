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
)
