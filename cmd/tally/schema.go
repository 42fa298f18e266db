package main

// The counter and schema commands (counter add, counter list, column add,
// incr, set, get, delete) are entries of the one command table
// (internal/commands, table.go); this file keeps what other commands
// share: the clean-up of a store a failed command created, and the column
// flags of "unread kind add".

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tallydb/tally/store"
)

// freshDir is a store directory that did not exist, or was empty, before
// this command: everything in it is the command's own.
type freshDir struct {
	dir     string
	existed bool // the directory existed (empty); only its entries go
}

// newStoreDir returns the freshDir of dir if dir is missing or empty, nil
// if it holds something (a store, or files Open will refuse).
func newStoreDir(dir string) (*freshDir, error) {
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return &freshDir{dir: dir}, nil
	case err != nil:
		return nil, nil // not a readable directory: Open reports why
	case len(ents) == 0:
		return &freshDir{dir: dir, existed: true}, nil
	}
	return nil, nil
}

// remove deletes what the command created in f.dir: the directory itself
// if it did not exist before, else its entries.
func (f *freshDir) remove() error {
	if _, err := os.Lstat(f.dir); errors.Is(err, os.ErrNotExist) {
		return nil // never created
	}
	if !f.existed {
		if err := os.RemoveAll(f.dir); err != nil {
			return fmt.Errorf("removing the new store %s failed: %w", f.dir, err)
		}
		return nil
	}
	ents, err := os.ReadDir(f.dir)
	if err != nil {
		return fmt.Errorf("cleaning the new store %s failed: %w", f.dir, err)
	}
	for _, ent := range ents {
		if err := os.RemoveAll(filepath.Join(f.dir, ent.Name())); err != nil {
			return fmt.Errorf("cleaning the new store %s failed: %w", f.dir, err)
		}
	}
	return nil
}

// columnFlags defines --hint and --max (a column's width hint and maximum
// in bits) on fs, for column add and unread kind add; the function it
// returns reads them, after parsing, as store.ColumnOptions.
func columnFlags(fs *flag.FlagSet) func() (store.ColumnOptions, error) {
	hint := fs.Uint("hint", 16, "")
	max := fs.Uint("max", 32, "")
	return func() (opts store.ColumnOptions, err error) {
		if opts.HintBits, err = uint8Flag("hint", *hint, false, "8, 16 or 32"); err != nil {
			return opts, err
		}
		opts.MaxBits, err = uint8Flag("max", *max, false, "32 or 64")
		return opts, err
	}
}
