package store

// Whole-store copies for replica snapshots (issue 22 item 5).
//
// # CheckpointTo
//
// DB.CheckpointTo writes a consistent copy of the store at dir in the
// store's own layout: dir/TALLY (the format marker) and dir/db (a Pebble
// checkpoint, sstables hard-linked where the filesystem allows, the WAL
// flushed and synced first). It holds every writer off (the checkpoint and
// commit locks) while Pebble takes the copy, so the copy holds exactly the
// commits made before the call; Open on it rebuilds the hot tables from
// the checkpoint chunks and the log records it holds, as after a crash.
//
// # Installing a staged copy
//
// A replica that received another replica's checkpoint stages its Pebble
// files at DIR/db.install (StagedPath), then marks the copy complete
// (CompleteStaged: every file and the directory fsynced, then the marker
// file DIR/db.install/INSTALL written and fsynced last). With the store
// closed, InstallStaged (or the next Open, which runs the same code under
// the store's lock) swaps it in:
//
//  1. DIR/db.old, if any, is removed: while DIR/db exists it is garbage
//     of an earlier install.
//  2. DIR/db is renamed DIR/db.old; DIR is fsynced.
//  3. DIR/db.install is renamed DIR/db; DIR is fsynced.
//  4. DIR/db.old is removed, then the marker DIR/db/INSTALL; DIR is
//     fsynced.
//
// A crash at any point leaves a state the next run finishes from, and
// never a store without its data: before step 2 the old DIR/db is intact
// (and an incomplete DIR/db.install, with no marker, is ignored: its
// fetcher resumes it); between steps 2 and 3 DIR/db is missing but the
// complete DIR/db.install is there, and step 3 is done next; after step 3
// DIR/db is the new data and what is left of DIR/db.old is removed. A
// DIR/db.old with no DIR/db and no complete staged copy (which this order
// cannot produce) is renamed back to DIR/db.

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Names of the staged install (see the file comment).
const (
	stagedDir     = "db.install"
	oldDir        = "db.old"
	installMarker = "INSTALL"
)

// ErrNotStaged is returned by CompleteStaged when there is no staged
// directory to complete.
var ErrNotStaged = errors.New("tally: no staged store copy")

// StagedPath returns the directory a store copy is staged in before
// InstallStaged swaps it in for the store in dir: dir/db.install.
func StagedPath(dir string) string { return vfs.Default.PathJoin(dir, stagedDir) }

// PebbleDirName is the name of the Pebble directory inside a store
// directory (and inside a copy written by CheckpointTo).
const PebbleDirName = pebbleDir

// CheckpointTo writes a consistent copy of the store to dir, which must not
// exist: dir/TALLY and dir/db, as Open expects them. Open on the copy
// recovers exactly the state at the call. Writers wait while Pebble takes
// the copy (sstables are hard-linked when the filesystem allows, so that is
// short; the WAL is copied).
//
// Errors: ErrClosed, ErrFailed and the other reasons a store cannot write
// (writable), or the filesystem's error creating the copy (a partial copy
// is removed).
func (db *DB) CheckpointTo(dir string) (err error) {
	defer recoverPebble(&err)
	fs := db.opts.FS
	if _, err := fs.Stat(dir); err == nil {
		return fmt.Errorf("%w: checkpoint target %s exists", ErrInvalidOption, dir)
	}
	db.ckpt.Lock()
	defer db.ckpt.Unlock()
	db.commit.Lock()
	defer db.commit.Unlock()
	if err := db.writable(); err != nil {
		return err
	}
	if err := db.checkpointToLocked(fs, dir); err != nil {
		_ = fs.RemoveAll(dir)
		return err
	}
	return nil
}

func (db *DB) checkpointToLocked(fs vfs.FS, dir string) error {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return dirError("create", dir, err)
	}
	if err := writeSynced(fs, fs.PathJoin(dir, markerFile), []byte(markerText(formatVersion))); err != nil {
		return err
	}
	if err := db.pdb().Checkpoint(fs.PathJoin(dir, pebbleDir), pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("tally: checkpoint to %s: %w", dir, pebbleErr(err))
	}
	if err := syncDir(fs, dir); err != nil {
		return err
	}
	return syncDir(fs, fs.PathDir(dir))
}

// writeSynced creates path with data and fsyncs it.
func writeSynced(fs vfs.FS, path string, data []byte) error {
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("tally: create %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("tally: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("tally: sync %s: %w", path, err)
	}
	return f.Close()
}

// PutStaged writes keys into the copy staged at StagedPath(dir) before
// CompleteStaged marks it complete, in one synced batch, so they are in
// the store from the moment the copy is swapped in: a replica puts its
// own Raft hard state there, which must never be the sender's, even if it
// crashes right after the swap. Keys are raw keys of a package's family
// (prefix 0x10 or above; the store's own are refused with
// ErrInvalidOption). ErrNotStaged if nothing is staged.
func PutStaged(dir string, kvs [][2][]byte) error {
	fs := vfs.Default
	sdir := fs.PathJoin(dir, stagedDir)
	if _, err := fs.Stat(sdir); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotStaged, sdir, err)
	}
	for _, kv := range kvs {
		if len(kv[0]) == 0 || kv[0][0] < 0x10 {
			return fmt.Errorf("%w: staged key %x is not a package family's", ErrInvalidOption, head(kv[0]))
		}
	}
	e := newPebbleEnv(fs, newErrorLog(), "", 4<<20)
	o := e.pebbleOptions(&Options{MemTableSize: 4 << 20}, nil, true)
	o.Merger = (&mergerTable{}).pebbleMerger(mergerName)
	pdb, err := pebble.Open(sdir, o)
	if err != nil {
		return fmt.Errorf("tally: open the staged copy %s: %w", sdir, err)
	}
	b := pdb.NewBatch()
	for _, kv := range kvs {
		if err := b.Set(kv[0], kv[1], nil); err != nil {
			b.Close()
			pdb.Close()
			return err
		}
	}
	err = b.Commit(pebble.Sync)
	b.Close()
	return errors.Join(err, pdb.Close())
}

// CompleteStaged marks the copy staged at StagedPath(dir) complete: it
// fsyncs every file in it and the directory, then writes and fsyncs the
// marker that makes InstallStaged (or the next Open) swap it in. The
// caller must have verified the files: once marked, the copy replaces the
// store. ErrNotStaged if there is no staged directory.
func CompleteStaged(dir string) error { return completeStaged(vfs.Default, dir) }

func completeStaged(fs vfs.FS, dir string) error {
	sdir := fs.PathJoin(dir, stagedDir)
	names, err := fs.List(sdir)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotStaged, sdir, err)
	}
	for _, n := range names {
		if n == installMarker {
			continue
		}
		path := fs.PathJoin(sdir, n)
		f, err := fs.Open(path)
		if err != nil {
			return fmt.Errorf("tally: open %s: %w", path, err)
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return fmt.Errorf("tally: sync %s: %w", path, err)
		}
	}
	if err := syncDir(fs, sdir); err != nil {
		return err
	}
	if err := writeSynced(fs, fs.PathJoin(sdir, installMarker), []byte("complete\n")); err != nil {
		return err
	}
	if err := syncDir(fs, sdir); err != nil {
		return err
	}
	return syncDir(fs, dir)
}

// InstallStaged swaps a complete staged copy (CompleteStaged) in for the
// Pebble data of the store in dir, which must be closed (ErrLocked
// otherwise), and finishes an install a crash interrupted. With nothing
// staged and nothing interrupted it does nothing. Open does the same
// before it opens the store.
func InstallStaged(dir string) error {
	fs := vfs.Default
	lock, err := fs.Lock(fs.PathJoin(dir, lockFile))
	if err != nil {
		return lockError(dir, err)
	}
	defer lock.Close()
	return installStaged(fs, dir, nil)
}

// installStep names the steps of installStaged, for tests that interrupt
// it (crash after the step).
type installStep int

const (
	stepRemovedOld installStep = iota + 1
	stepMovedAside
	stepMovedIn
	stepRemovedAside
)

// installStaged is InstallStaged with the lock held. after, if not nil, is
// called after each step; an error from it stops the install there (a
// simulated crash).
func installStaged(fs vfs.FS, dir string, after func(installStep) error) error {
	step := func(s installStep) error {
		if after == nil {
			return nil
		}
		return after(s)
	}
	exists := func(p string) bool { _, err := fs.Stat(p); return err == nil }
	pdir := fs.PathJoin(dir, pebbleDir)
	sdir := fs.PathJoin(dir, stagedDir)
	odir := fs.PathJoin(dir, oldDir)
	complete := exists(fs.PathJoin(sdir, installMarker))
	switch {
	case exists(pdir) && !complete:
		// Nothing staged (or staging in progress). A db.old beside db,
		// or the marker in db, is what a crash in step 4 left.
		changed := false
		if exists(odir) {
			if err := fs.RemoveAll(odir); err != nil {
				return fmt.Errorf("tally: remove %s: %w", odir, err)
			}
			changed = true
		}
		if exists(fs.PathJoin(pdir, installMarker)) {
			if err := fs.Remove(fs.PathJoin(pdir, installMarker)); err != nil {
				return fmt.Errorf("tally: remove install marker: %w", err)
			}
			changed = true
		}
		if !changed {
			return nil
		}
		return syncDir(fs, dir)
	case !exists(pdir) && !complete:
		if exists(odir) {
			// Not produced by installStaged's order; the old data is the
			// only data there is.
			if err := fs.Rename(odir, pdir); err != nil {
				return fmt.Errorf("tally: restore %s: %w", odir, err)
			}
			return syncDir(fs, dir)
		}
		return nil
	}
	// A complete copy is staged.
	if exists(pdir) {
		if exists(odir) {
			if err := fs.RemoveAll(odir); err != nil {
				return fmt.Errorf("tally: remove %s: %w", odir, err)
			}
		}
		if err := step(stepRemovedOld); err != nil {
			return err
		}
		if err := fs.Rename(pdir, odir); err != nil {
			return fmt.Errorf("tally: move %s aside: %w", pdir, err)
		}
		if err := syncDir(fs, dir); err != nil {
			return err
		}
		if err := step(stepMovedAside); err != nil {
			return err
		}
	}
	if err := fs.Rename(sdir, pdir); err != nil {
		return fmt.Errorf("tally: move %s in: %w", sdir, err)
	}
	if err := syncDir(fs, dir); err != nil {
		return err
	}
	if err := step(stepMovedIn); err != nil {
		return err
	}
	if exists(odir) {
		if err := fs.RemoveAll(odir); err != nil {
			return fmt.Errorf("tally: remove %s: %w", odir, err)
		}
	}
	if err := step(stepRemovedAside); err != nil {
		return err
	}
	if err := fs.Remove(fs.PathJoin(pdir, installMarker)); err != nil {
		return fmt.Errorf("tally: remove install marker: %w", err)
	}
	return syncDir(fs, dir)
}

// stagedOnOpen finishes or performs a staged install as Open starts (the
// lock is held). A read-only Open leaves the directory as it is.
func stagedOnOpen(fs vfs.FS, dir string, readOnly bool) error {
	if readOnly {
		return nil
	}
	return installStaged(fs, dir, nil)
}
