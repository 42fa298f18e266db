package main

import (
	"fmt"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/timeline"
)

// openMode says how openDB opens the database.
type openMode int

const (
	// openWrite opens every package, creating what is missing (commands
	// that write package data).
	openWrite openMode = iota
	// openCreate is openWrite that may also create the store.
	openCreate
	// openExisting is writable but opens only the packages whose data
	// exists (jobs wait: run what is queued, create nothing).
	openExisting
	// openReadOnly writes nothing and opens only the packages whose data
	// exists (stats, verify).
	openReadOnly
	// openCreateStore may create the store but opens only the packages
	// whose data exists (counter add: the host's counters only).
	openCreateStore
)

// openDB opens the database named by -d through tally.Open: the store
// with every package wired (families declared, unread observing the
// follow graph), so no command wires packages itself.
func (e *env) openDB(mode openMode) (*tallydb.DB, error) {
	return e.openDBWith(mode, nil)
}

// openDBWith is openDB with configure, if not nil, setting store options
// of the command's own (compact's pace). Inside tally serve, whose store
// is open with its own, configure gets nil and returns an error for an
// option it cannot apply: the command is refused (errNotRemote).
func (e *env) openDBWith(mode openMode, configure func(*store.Options) error) (*tallydb.DB, error) {
	if e.served != nil {
		// NB: the server opened every package writable at its start, so
		// openReadOnly and openExisting see them all (see remote.go).
		if err := e.servedOptions(); err != nil {
			return e.served, err
		}
		if configure != nil {
			if err := configure(nil); err != nil {
				return e.served, fmt.Errorf("%w: %v", errNotRemote, err)
			}
		}
		return e.served, nil
	}
	opts, err := e.options()
	if err != nil {
		return nil, err
	}
	if configure != nil {
		if err := configure(opts); err != nil {
			return nil, err
		}
	}
	if mode != openCreate && mode != openCreateStore {
		if err := mustBeStoreDir(e.dir); err != nil {
			return nil, err
		}
	}
	opts.ReadOnly = mode == openReadOnly
	o := &tallydb.Options{Store: opts, ExistingOnly: mode == openExisting || mode == openCreateStore}
	if !e.serving {
		// A command runs no background expiry: it is short. The server
		// keeps the timeline's default (hourly).
		o.Timeline = &timeline.Options{ExpireInterval: -1}
	}
	return tallydb.Open(e.dir, o)
}

// closeTally closes db; err (the command's error) wins over Close's.
func closeTally(db *tallydb.DB, err error) error {
	if isServed(db.Store()) {
		return err // the server's: it closes it at shutdown
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}
