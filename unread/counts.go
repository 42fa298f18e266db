package unread

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tallydb/tally/internal/quote"
	"github.com/tallydb/tally/store"
)

// One-to-one counts (@mentions, comments, likes received, ...): a row of
// counter KindsCounter per user, a column per kind. A Get is one hot-table
// read that returns every kind; a user whose counts are all zero has no row.

// AddKind adds a kind of one-to-one count, live: existing rows are not
// rewritten and read 0 for it. opts are the column's width hint and
// maximum (zero fields: a 16-bit hint, a 32-bit maximum). Errors:
// store.ErrInvalidName, store.ErrInvalidOption, store.ErrExists,
// store.ErrTooManyColumns (at most store.MaxColumns kinds).
func (x *Unread) AddKind(kind string, opts store.ColumnOptions) error {
	if err := x.db.AddColumn(KindsCounter, kind, opts); err != nil {
		return fmt.Errorf("unread: kind %s: %w", quote.Input(kind), err)
	}
	return nil
}

// Kinds returns the kinds in the order Get returns them.
func (x *Unread) Kinds() []string { return x.kinds.Columns() }

// KindInfo returns the kinds with their widths.
func (x *Unread) KindInfo() []store.Column { return x.kinds.Info().Columns }

// kindErr turns the store's unknown-column error into an error in the
// user's words: the kind, and the kinds there are.
func (x *Unread) kindErr(kind string, err error) error {
	if errors.Is(err, store.ErrColumnNotFound) {
		return &unknownKindError{kind: kind, known: x.kinds.Columns()}
	}
	return err
}

// unknownKindError is ErrUnknownKind (and store.ErrColumnNotFound, which
// it stands for) with the kind asked for and the kinds there are.
type unknownKindError struct {
	kind  string
	known []string
}

func (e *unknownKindError) Error() string {
	known := "none yet"
	if len(e.known) > 0 {
		known = strings.Join(e.known, ", ")
	}
	return fmt.Sprintf("%v %s (kinds: %s)", ErrUnknownKind, quote.Input(e.kind), known)
}

func (e *unknownKindError) Is(target error) bool {
	return target == ErrUnknownKind || target == store.ErrColumnNotFound
}

// Incr adds n (which may be negative) to user's count of kind and returns
// the new count. A count never goes below 0; a result above the kind's
// maximum is refused with store.ErrValueRange and changes nothing.
func (x *Unread) Incr(user uint64, kind string, n int64) (uint64, error) {
	v, err := x.kinds.Incr(user, kind, n)
	if err != nil {
		return 0, x.kindErr(kind, err)
	}
	return v, nil
}

// Reset sets user's counts of kinds to 0, atomically; with no kinds, every
// kind (the user's row is deleted). An unknown kind fails the call before
// anything changes.
func (x *Unread) Reset(user uint64, kinds ...string) error {
	if len(kinds) > 0 {
		known := x.kinds.Columns()
		for _, k := range kinds {
			if !contains(known, k) {
				return &unknownKindError{kind: k, known: known}
			}
		}
	}
	b := x.db.NewBatch()
	defer b.Close()
	if len(kinds) == 0 {
		if err := b.Delete(KindsCounter, user); err != nil {
			return err
		}
	}
	for _, k := range kinds {
		if err := b.SetColumn(KindsCounter, user, k, 0); err != nil {
			return x.kindErr(k, err)
		}
	}
	if err := b.Commit(); err != nil {
		return x.kindErr("", err)
	}
	return nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Get returns every kind of user's counts, in Kinds order, in dst[:0]
// (grown if needed): one hot-table read. It does not allocate when dst
// has room for every kind.
func (x *Unread) Get(user uint64, dst []uint64) ([]uint64, error) {
	return x.kinds.Get(user, dst)
}

// GetMany returns every kind of each user's counts, row-major (the counts
// of users[i] at i*len(Kinds())), in dst[:0].
func (x *Unread) GetMany(users []uint64, dst []uint64) ([]uint64, error) {
	return x.kinds.MultiGet(users, dst)
}
