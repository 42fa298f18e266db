package store

import (
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// storeFS is the filesystem one Pebble instance of a DB sees: Options.FS
// wrapped so that tally learns of write failures the moment they happen
// (Pebble reports a failed WAL write only to a later sync, and retries a
// failed flush forever), so that Pebble's record logs are checked for
// damage before Pebble replays them (logcheck.go), and so that an instance
// tally has to abandon can be fenced off the directory.
//
// What it does, per operation:
//
//   - A failed write, sync or create records the error in the env:
//     ENOSPC/EDQUOT anywhere, or any failure of an sstable, refuses writes
//     (ErrDiskFull, or ErrFailed for other errors) until an sstable is
//     synced again; any failure of a WAL file fails the store (Pebble's log
//     writer keeps the error).
//   - Creating an sstable while writes are refused first waits, with a
//     backoff from 10ms to 1s. Pebble reschedules a failed flush at once and
//     has no backoff of its own (DB.flush in compaction.go notes it as
//     future work); without this a full disk costs a core and a
//     create/remove pair per retry.
//   - Opening a WAL or MANIFEST while Pebble opens runs checkRecordLog.
//   - Once fenced, nothing changes on disk: every mutation fails, a create
//     blocks for good (it is only reached by an abandoned instance's flush
//     loop), and the instance's lock on the Pebble directory is released.
type storeFS struct {
	vfs.FS
	env *pebbleEnv

	mu    sync.Mutex
	locks []*fsLock
}

var errFenced = errors.New("tally: pebble instance abandoned after a fatal error; its files are no longer touched")

func (fs *storeFS) Unwrap() vfs.FS { return fs.FS }

func (fs *storeFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	if fs.env.fenced.Load() {
		if !fs.env.retired.Load() || fs.env.abandon.Load() {
			<-fs.env.never // only an abandoned instance gets here
		}
		// A retired instance (reopen.go): its flush or compaction waits
		// for its Close, then fails, so the Close can finish.
		<-fs.env.closing
		return nil, errFenced
	}
	if isTable(name) {
		fs.env.backoff()
	}
	f, err := fs.FS.Create(name, cat)
	if err != nil {
		fs.env.writeFailed(name, err)
		return nil, err
	}
	return &storeFile{File: f, fs: fs, name: name}, nil
}

func (fs *storeFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	if fs.env.opening.Load() {
		if kind, num, ok := recordLogKind(fs.PathBase(name)); ok {
			if err := checkRecordLogFile(fs.FS, name, kind, num); err != nil {
				return nil, err
			}
		}
	}
	return fs.FS.Open(name, opts...)
}

func (fs *storeFS) OpenReadWrite(name string, cat vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	if fs.env.fenced.Load() {
		return nil, errFenced
	}
	f, err := fs.FS.OpenReadWrite(name, cat, opts...)
	if err != nil {
		return nil, err
	}
	return &storeFile{File: f, fs: fs, name: name}, nil
}

func (fs *storeFS) ReuseForWrite(oldname, newname string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	if fs.env.fenced.Load() {
		return nil, errFenced
	}
	f, err := fs.FS.ReuseForWrite(oldname, newname, cat)
	if err != nil {
		fs.env.writeFailed(newname, err)
		return nil, err
	}
	return &storeFile{File: f, fs: fs, name: newname}, nil
}

func (fs *storeFS) Link(oldname, newname string) error {
	if fs.env.fenced.Load() {
		return errFenced
	}
	return fs.FS.Link(oldname, newname)
}

func (fs *storeFS) Remove(name string) error {
	if fs.env.fenced.Load() {
		return errFenced
	}
	if h := fs.env.holdRemove; h != nil && h(name) {
		return nil
	}
	return fs.FS.Remove(name)
}

func (fs *storeFS) RemoveAll(name string) error {
	if fs.env.fenced.Load() {
		return errFenced
	}
	return fs.FS.RemoveAll(name)
}

func (fs *storeFS) Rename(oldname, newname string) error {
	if fs.env.fenced.Load() {
		return errFenced
	}
	return fs.FS.Rename(oldname, newname)
}

func (fs *storeFS) MkdirAll(dir string, perm os.FileMode) error {
	if fs.env.fenced.Load() {
		return errFenced
	}
	return fs.FS.MkdirAll(dir, perm)
}

// Lock remembers the lock so fence can release it.
func (fs *storeFS) Lock(name string) (io.Closer, error) {
	if fs.env.fenced.Load() {
		return nil, errFenced
	}
	c, err := fs.FS.Lock(name)
	if err != nil {
		return nil, err
	}
	l := &fsLock{c: c}
	fs.mu.Lock()
	fs.locks = append(fs.locks, l)
	fs.mu.Unlock()
	return l, nil
}

// releaseLocks releases every lock taken through fs (the fence).
func (fs *storeFS) releaseLocks() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, l := range fs.locks {
		l.Close()
	}
}

// fsLock is a lock that can be released once, by its owner or by a fence.
type fsLock struct {
	once sync.Once
	c    io.Closer
	err  error
}

func (l *fsLock) Close() error {
	l.once.Do(func() { l.err = l.c.Close() })
	return l.err
}

// storeFile reports write failures of one file to the env.
type storeFile struct {
	vfs.File
	fs   *storeFS
	name string
}

func (f *storeFile) check(err error) error {
	if err != nil {
		f.fs.env.writeFailed(f.name, err)
	}
	return err
}

func (f *storeFile) Write(p []byte) (int, error) {
	if f.fs.env.fenced.Load() {
		return 0, errFenced
	}
	n, err := f.File.Write(p)
	return n, f.check(err)
}

func (f *storeFile) WriteAt(p []byte, off int64) (int, error) {
	if f.fs.env.fenced.Load() {
		return 0, errFenced
	}
	n, err := f.File.WriteAt(p, off)
	return n, f.check(err)
}

func (f *storeFile) Sync() error {
	if f.fs.env.fenced.Load() {
		return errFenced
	}
	err := f.check(f.File.Sync())
	if err == nil && isTable(f.name) {
		f.fs.env.succeeded() // sstables can be written again
	}
	return err
}

func (f *storeFile) SyncData() error {
	if f.fs.env.fenced.Load() {
		return errFenced
	}
	return f.check(f.File.SyncData())
}

func (f *storeFile) SyncTo(length int64) (bool, error) {
	if f.fs.env.fenced.Load() {
		return false, errFenced
	}
	full, err := f.File.SyncTo(length)
	return full, f.check(err)
}

func isTable(name string) bool {
	return strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob")
}
func isWAL(name string) bool { return strings.HasSuffix(name, ".log") }

// backoffBounds bound the wait before creating an sstable while the disk is
// full.
const (
	minBackoff = 10 * time.Millisecond
	maxBackoff = time.Second
)
