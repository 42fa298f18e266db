package store

// Package counters.
//
// A package above store (timeline, unread, likes) keeps some of its data
// in counters: timeline's per-user follower, followee and post counts,
// unread's kinds, likes' per-item counts. Those counters are the package's
// private data: written by any other route they break the package's
// invariants (a follower count that no longer matches the follower set).
// So a counter records its owner (CounterOptions.Owner, in its schema
// record), and the tools that serve users (the tally command line, tally
// serve) reach counters through UserCounter, which refuses owned ones
// with ErrReserved, and list only the host's (CounterInfo.Owner == "").
// The store's own API does not refuse them: the packages write through it.
//
// Stores written before owners existed (formats 1, 2) hold their package
// counters without an owner; each package claims its counters when it
// opens on a writable store (ClaimCounter), which rewrites their schema
// records with the owner.

import (
	"errors"
	"fmt"

	"github.com/tallydb/tally/internal/quote"
)

// ErrReserved is returned by UserCounter for a counter a package owns:
// its data is reached through that package, never as a plain counter.
var ErrReserved = errors.New("tally: reserved")

// Owner returns the package that owns the counter, or "" for the host's.
func (c *Counter) Owner() string { return *c.cs.owner.Load() }

// UserCounter returns a handle on the named counter like Counter, but
// refuses a counter that a package owns with an error wrapping
// ErrReserved (naming the package): the entry point of tools that serve
// users' counter commands.
func (db *DB) UserCounter(name string) (*Counter, error) {
	c, err := db.Counter(name)
	if err != nil {
		return nil, err
	}
	if owner := c.Owner(); owner != "" {
		return nil, reservedError(name, owner)
	}
	return c, nil
}

// reservedError is ErrReserved naming the counter and its owner.
func reservedError(name, owner string) error {
	return fmt.Errorf("%w: counter %s belongs to %s; use its commands", ErrReserved, quote.Input(name), owner)
}

// ReservedError returns the error UserCounter gives for a counter that
// owner owns, for tools that check a CounterInfo instead of opening it.
func ReservedError(name, owner string) error { return reservedError(name, owner) }

// ClaimCounter records owner as the owner of the named counter, which
// must have none or already have this one (then it does nothing): the
// upgrade of counters that a package created before owners existed. The
// schema record is rewritten (version 2) before memory changes. Errors:
// ErrCounterNotFound, ErrReserved (another owner), ErrInvalidOption (a bad
// owner name), ErrReadOnly, ErrClosed, ErrFailed.
func (db *DB) ClaimCounter(name, owner string) error {
	if err := validName("owner", owner); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidOption, err)
	}
	db.commit.Lock()
	defer db.commit.Unlock()
	cs := db.cat.Load().byName[name]
	if cs == nil {
		return counterNotFound(name)
	}
	switch cur := *cs.owner.Load(); cur {
	case owner:
		return nil
	case "":
	default:
		return reservedError(name, cur)
	}
	if err := db.writable(); err != nil {
		return err
	}
	ci := cs.info()
	ci.Owner = owner
	if err := checkSchema(&ci); err != nil {
		return err
	}
	if err := db.writeSchemaLocked(&ci); err != nil {
		return err
	}
	cs.owner.Store(&owner)
	return nil
}

// Adopt makes sure counter c, which a package opening on db found, is
// owner's: a counter with no owner (made before owners existed) is
// claimed (ClaimCounter) unless the store is read-only, where the claim
// waits for the next writable open; a counter of another owner is an
// error wrapping ErrReserved.
func (db *DB) Adopt(c *Counter, owner string) error {
	switch cur := c.Owner(); {
	case cur == owner:
		return nil
	case cur != "":
		return reservedError(c.Name(), cur)
	case db.ReadOnly():
		return nil
	}
	return db.ClaimCounter(c.Name(), owner)
}
