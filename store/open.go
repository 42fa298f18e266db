package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"strings"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tallydb/tally/cold"
	"github.com/tallydb/tally/compaction"
)

// Files tally keeps beside Pebble's in the store directory.
const (
	markerFile = "TALLY"       // "tally store format N\n": says the directory is a store
	lockFile   = "TALLY.LOCK"  // held while the store is open
	probeFile  = "TALLY.PROBE" // written and removed to see if the disk takes writes again
	pebbleDir  = "db"          // Pebble's own directory
)

func markerText(v int) string { return fmt.Sprintf("tally store format %d\n", v) }

// RecoveryStats describes what Open did to rebuild memory.
type RecoveryStats struct {
	CheckpointSeq   uint64        // sequence included by the loaded checkpoint
	ChunksLoaded    int           // checkpoint chunks read
	RowsLoaded      int           // rows loaded from the checkpoint
	RecordsReplayed int           // log records replayed after it
	LastSeq         uint64        // sequence of the last record in the log
	Duration        time.Duration // wall time of Open
	// IntentsResolved counts the intents of interrupted operations whose
	// leftovers Open deleted (see lifetime.go).
	IntentsResolved int
	// Unaccounted lists data Open found that no value or intent accounts
	// for and therefore left on disk (Verify reports it as corruption).
	// A read-only Open does not look for it (Verify reports it).
	Unaccounted []string
}

// Open opens the tally store in dir, creating it if dir does not exist or is
// empty (unless Options.ReadOnly). opts may be nil for defaults. Open loads
// the newest complete checkpoint and replays the log after it.
//
// Errors: ErrInvalidOption for bad options, ErrLocked when the directory is
// open elsewhere, ErrPermission when the directory or its lock file cannot
// be created or written (permission denied, read-only filesystem),
// ErrNotStore for a non-empty directory that is not a store,
// ErrIncompatible for another format version, ErrCorrupt for damaged data,
// ErrDiskFull when recovery needs space the filesystem does not have (a
// read-only Open still works). A failed Open changes no data: damage found
// before Pebble opens (markers, WAL, MANIFEST, OPTIONS, the TALLY file)
// leaves every file as it was; damage found by recovery after a writable
// Pebble opened leaves the data as it was, though Pebble may have flushed
// the WAL it replayed into an sstable (a read-only Open changes nothing).
func Open(dir string, opts *Options) (*DB, error) {
	start := time.Now()
	o := opts.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	fs := o.FS
	// Refuse a foreign directory before creating anything in it.
	if err := checkForeign(fs, dir); err != nil {
		return nil, err
	}
	if o.ReadOnly {
		if _, err := fs.Stat(fs.PathJoin(dir, markerFile)); err != nil {
			return nil, fmt.Errorf("%w: %s has no %s file (a read-only Open creates nothing)", ErrNotStore, dir, markerFile)
		}
	} else if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, dirError("create", dir, err)
	}
	lock, err := fs.Lock(fs.PathJoin(dir, lockFile))
	if err != nil {
		return nil, lockError(dir, err)
	}
	// A staged copy of another replica's store (snapshot.go) goes in
	// before anything reads the directory.
	if err := stagedOnOpen(fs, dir, o.ReadOnly); err != nil {
		lock.Close()
		return nil, err
	}
	db, err := open(dir, o, lock)
	if err != nil {
		lock.Close()
		return nil, err
	}
	if !o.ReadOnly {
		if err := upgradeMarker(fs, dir); err != nil {
			db.Close()
			return nil, err
		}
	}
	db.recovery.Duration = time.Since(start)
	db.startBackground()
	db.startHealer()
	return db, nil
}

func open(dir string, o *Options, lock io.Closer) (*DB, error) {
	fs := o.FS
	if err := checkMarker(fs, dir); err != nil {
		return nil, err
	}
	mergers, err := newMergerTable(o.Families)
	if err != nil {
		return nil, err
	}
	// Nothing below writes before Pebble is open: a refused directory is
	// left exactly as it was.
	pdir := fs.PathJoin(dir, pebbleDir)
	exists, format, err := checkPebbleDir(fs, pdir)
	if err != nil {
		return nil, err
	}
	if o.ReadOnly && !exists {
		return nil, fmt.Errorf("%w: %s holds no data yet (a read-only Open creates nothing)", ErrNotStore, dir)
	}
	if !o.ReadOnly {
		if err := preflight(fs, pdir); err != nil {
			return nil, err
		}
	}
	db := &DB{dir: dir, opts: o, errs: newErrorLog(), lock: lock, mergers: mergers,
		blockCache: cold.NewCache(o.BlockCacheSize),
		limiter:    compaction.NewLimiter(o.CompactionBytesPerSec),
	}
	db.heal.kick = make(chan struct{}, 1)
	db.heal.stop = make(chan struct{})
	env := db.newEnv()
	cache := pebble.NewCache(pebbleCacheSize(o))
	defer cache.Unref()
	popts := env.pebbleOptions(o, cache, exists)
	popts.Merger = mergers.pebbleMerger(pebbleMergerName(fs, pdir))
	pdb, err := env.openPebble(pdir, popts)
	if err != nil {
		return nil, err
	}
	db.inst.Store(newInstance(pdb, env))
	db.cat.Store(&catalog{byName: map[string]*counterState{}, byID: map[uint32]*counterState{}})
	db.queue.init(o.JobBytesPerSec)
	db.sources = map[string]uint64{}
	db.life.intents = map[uint64]*intent{}
	db.jobCtx, db.jobCancel = context.WithCancel(context.Background())
	db.bg.stop = make(chan struct{})
	db.bg.kick = make(chan struct{}, 1)
	upgraded := !o.ReadOnly && format < int(pebbleFormat)
	if err := db.recoverGuarded(upgraded); err != nil {
		env.closePebble(pdb)
		return nil, err
	}
	return db, nil
}

// lockError names why the lock file of dir could not be taken. Only a lock
// that is held (EAGAIN or EACCES from fcntl, which Pebble's vfs returns
// bare, or a lock held by this process) is ErrLocked; a lock file that
// cannot be created is a problem of the directory (dirError).
func lockError(dir string, err error) error {
	var pe *iofs.PathError
	if errors.As(err, &pe) {
		return dirError("lock", dir, err) // creating the lock file failed
	}
	var errno syscall.Errno
	if errors.As(err, &errno) && errno != syscall.EAGAIN && errno != syscall.EWOULDBLOCK && errno != syscall.EACCES {
		return fmt.Errorf("tally: lock %s: %w", dir, err) // e.g. ENOLCK: locks unsupported
	}
	return fmt.Errorf("%w: %s: %v", ErrLocked, dir, err)
}

// dirError wraps an error of creating or writing in the store directory:
// ErrPermission for permission denied or a read-only filesystem, else the
// operating system's error (a missing parent, a file in the way) as it is.
func dirError(op, dir string, err error) error {
	if errors.Is(err, iofs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		return fmt.Errorf("%w: %s %s: %w", ErrPermission, op, dir, err)
	}
	return fmt.Errorf("tally: %s %s: %w", op, dir, err)
}

// recoverGuarded runs recover with Pebble's fatal errors turned into
// errors. When Pebble upgraded the database to pebbleFormat in this Open,
// the WAL it opened predates the upgrade (no sync offsets): a rotation
// starts one that has them.
func (db *DB) recoverGuarded(upgraded bool) (err error) {
	defer recoverPebble(&err)
	if err := db.recover(); err != nil {
		return pebbleErr(err)
	}
	if upgraded {
		if _, err := db.pdb().AsyncFlush(); err != nil {
			return fmt.Errorf("tally: rotate the WAL: %w", pebbleErr(err))
		}
	}
	return nil
}

// checkForeign returns ErrNotStore if dir exists, is not empty and has no
// marker file. A missing directory is fine (it becomes a store).
func checkForeign(fs vfs.FS, dir string) error {
	names, err := fs.List(dir)
	if err != nil {
		return nil // missing (or unreadable: the lock or marker step reports it)
	}
	for _, n := range names {
		if n == markerFile {
			return nil
		}
	}
	for _, n := range names {
		if n != lockFile {
			return fmt.Errorf("%w: %s holds %q and no %s file", ErrNotStore, dir, n, markerFile)
		}
	}
	return nil
}

// checkMarker makes sure dir is a tally store, or turns an empty directory
// into one.
func checkMarker(fs vfs.FS, dir string) error {
	path := fs.PathJoin(dir, markerFile)
	f, err := fs.Open(path)
	if err == nil {
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, 256))
		if err != nil {
			return fmt.Errorf("tally: read %s: %w", path, err)
		}
		var v int
		if _, err := fmt.Sscanf(string(b), "tally store format %d\n", &v); err != nil {
			if _, serr := fs.Stat(fs.PathJoin(dir, pebbleDir)); serr == nil {
				// A store's marker, damaged: not a foreign directory.
				return fmt.Errorf("%w: %s: damaged %s file %q", ErrCorrupt, dir, markerFile, strings.TrimSpace(string(b)))
			}
			return fmt.Errorf("%w: %s: bad marker %q", ErrNotStore, dir, strings.TrimSpace(string(b)))
		}
		if v < minFormatVersion || v > formatVersion {
			return fmt.Errorf("%w: %s has format %d, this build reads %d..%d", ErrIncompatible, dir, v, minFormatVersion, formatVersion)
		}
		return nil
	}
	names, err := fs.List(dir)
	if err != nil {
		return fmt.Errorf("tally: list %s: %w", dir, err)
	}
	for _, n := range names {
		if n != lockFile {
			return fmt.Errorf("%w: %s holds %q and no %s file", ErrNotStore, dir, n, markerFile)
		}
	}
	// A new store: the marker is written (and synced) before Pebble creates
	// anything, so a directory with Pebble files always has a marker. The
	// directory's own entry in its parent is synced too, or a power cut
	// right after creation could lose the whole store.
	mf, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("tally: create %s: %w", path, err)
	}
	if _, err := mf.Write([]byte(markerText(formatVersion))); err != nil {
		mf.Close()
		return fmt.Errorf("tally: write %s: %w", path, err)
	}
	if err := mf.Sync(); err != nil {
		mf.Close()
		return fmt.Errorf("tally: sync %s: %w", path, err)
	}
	if err := mf.Close(); err != nil {
		return err
	}
	if err := syncDir(fs, dir); err != nil {
		return err
	}
	return syncDir(fs, fs.PathDir(dir))
}

// upgradeMarker rewrites the TALLY marker of an older format as
// formatVersion (write a temporary file, sync, rename, sync the directory),
// once the store opened and recovered under this build. Until then the
// store keeps its old marker, so a failed Open changes nothing.
func upgradeMarker(fs vfs.FS, dir string) error {
	path := fs.PathJoin(dir, markerFile)
	f, err := fs.Open(path)
	if err != nil {
		return fmt.Errorf("tally: read %s: %w", path, err)
	}
	b, err := io.ReadAll(io.LimitReader(f, 256))
	f.Close()
	if err != nil {
		return fmt.Errorf("tally: read %s: %w", path, err)
	}
	if string(b) == markerText(formatVersion) {
		return nil
	}
	tmp := path + ".tmp"
	mf, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("tally: upgrade %s: %w", path, err)
	}
	if _, err := mf.Write([]byte(markerText(formatVersion))); err != nil {
		mf.Close()
		return fmt.Errorf("tally: upgrade %s: %w", path, err)
	}
	if err := mf.Sync(); err != nil {
		mf.Close()
		return fmt.Errorf("tally: upgrade %s: %w", path, err)
	}
	if err := mf.Close(); err != nil {
		return err
	}
	if err := fs.Rename(tmp, path); err != nil {
		return fmt.Errorf("tally: upgrade %s: %w", path, err)
	}
	return syncDir(fs, dir)
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("tally: open dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("tally: sync dir %s: %w", dir, err)
	}
	return nil
}

func (db *DB) getMeta(name string) ([]byte, error) {
	v, closer, err := db.pdb().Get(appendMetaKey(nil, name))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tally: read meta %q: %w", name, pebbleErr(err))
	}
	defer closer.Close()
	return bytes.Clone(v), nil
}

// scan calls fn for every key in [lo, hi).
func (db *DB) scan(lo, hi []byte, fn func(k, v []byte) error) error {
	it, err := db.pdb().NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return pebbleErr(err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return pebbleErr(err)
		}
		if err := fn(it.Key(), v); err != nil {
			it.Close()
			return err
		}
	}
	if err := it.Error(); err != nil {
		it.Close()
		return pebbleErr(err)
	}
	return pebbleErr(it.Close())
}

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i]++; end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}
