package store

import (
	"context"
	"errors"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestClosedColdReadIsNotCorrupt is issue 12's reproduction: a reader that
// was already past the closed check when the store closed read a cold block
// from a closed Pebble and got ErrCorrupt. It must get ErrClosed: only
// damage is ErrCorrupt.
func TestClosedColdReadIsNotCorrupt(t *testing.T) {
	fs := vfs.NewMem()
	o := testOptions(fs)
	o.ColdBlockSize = 64
	o.BlockCacheSize = 1 // every read misses the block cache
	db, err := Open("c", o)
	must(t, err)
	c := newPosts(t, db, 12)
	for i := uint64(0); i < 300; i++ {
		must(t, c.Set(i, i+1, 1, 1))
	}
	must(t, db.SealRange(context.Background(), "posts", 0))
	must(t, db.Close())

	// A reader that passed Counter.Get's closed check just before Close.
	out := make([]uint64, 3)
	err = c.cs.readRow(5, out)
	if !errors.Is(err, ErrClosed) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("cold read after close: %v, want ErrClosed and not ErrCorrupt", err)
	}
	if _, err := c.Get(5, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after close: %v", err)
	}
}

// TestReadersDuringClose runs cold readers while the store closes: every
// error they see is ErrClosed, never ErrCorrupt.
func TestReadersDuringClose(t *testing.T) {
	for round := 0; round < 20; round++ {
		fs := vfs.NewMem()
		o := testOptions(fs)
		o.ColdBlockSize = 64
		o.BlockCacheSize = 1
		db, err := Open("c", o)
		must(t, err)
		c := newPosts(t, db, 12)
		for i := uint64(0); i < 300; i++ {
			must(t, c.Set(i, i+1, 1, 1))
		}
		must(t, db.SealRange(context.Background(), "posts", 0))
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for r := 0; r < 4; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ids := []uint64{1, 50, 100, 150, 200, 250}
				for i := 0; ; i++ {
					_, err := c.MultiGet(ids, nil)
					if err == nil {
						_, err = c.Get(uint64(i%300), nil)
					}
					if err != nil {
						if !errors.Is(err, ErrClosed) || errors.Is(err, ErrCorrupt) {
							errs <- err
						}
						return
					}
				}
			}()
		}
		must(t, db.Close())
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("reader during close: %v", err)
		}
	}
}

// failFS is a filesystem whose MkdirAll or Lock fails with a given error.
type failFS struct {
	vfs.FS
	mkdirErr, lockErr error
}

func (f failFS) MkdirAll(dir string, perm os.FileMode) error {
	if f.mkdirErr != nil {
		return f.mkdirErr
	}
	return f.FS.MkdirAll(dir, perm)
}

func (f failFS) Lock(name string) (io.Closer, error) {
	if f.lockErr != nil {
		return nil, f.lockErr
	}
	return f.FS.Lock(name)
}

// TestOpenDirectoryErrors is issue 12's reproduction: a read-only or
// permission-denied directory was reported as "locked by another process".
// Only a held lock is ErrLocked; a lock file or directory that cannot be
// created names its real cause.
func TestOpenDirectoryErrors(t *testing.T) {
	pathErr := func(op string, errno syscall.Errno) error {
		return &iofs.PathError{Op: op, Path: "d/TALLY.LOCK", Err: errno}
	}
	cases := []struct {
		name       string
		fs         failFS
		want       error
		wantLocked bool
	}{
		{"read-only lock file", failFS{lockErr: pathErr("open", syscall.EROFS)}, ErrPermission, false},
		{"permission denied lock file", failFS{lockErr: pathErr("open", syscall.EACCES)}, iofs.ErrPermission, false},
		{"permission denied mkdir", failFS{mkdirErr: pathErr("mkdir", syscall.EACCES)}, ErrPermission, false},
		{"read-only mkdir", failFS{mkdirErr: pathErr("mkdir", syscall.EROFS)}, syscall.EROFS, false},
		{"not a directory", failFS{mkdirErr: pathErr("mkdir", syscall.ENOTDIR)}, syscall.ENOTDIR, false},
		{"missing parent", failFS{lockErr: pathErr("open", syscall.ENOENT)}, iofs.ErrNotExist, false},
		{"held elsewhere (EAGAIN)", failFS{lockErr: syscall.EAGAIN}, ErrLocked, true},
		{"held elsewhere (EACCES from fcntl)", failFS{lockErr: syscall.EACCES}, ErrLocked, true},
		{"locks unsupported", failFS{lockErr: syscall.ENOLCK}, syscall.ENOLCK, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := tc.fs
			fs.FS = vfs.NewMem()
			_, err := Open("d", testOptions(fs))
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if errors.Is(err, ErrLocked) != tc.wantLocked {
				t.Fatalf("ErrLocked = %v for %v", !tc.wantLocked, err)
			}
			if !tc.wantLocked && !errors.As(err, new(*iofs.PathError)) && !errors.Is(err, syscall.ENOLCK) {
				t.Fatalf("%v does not carry the OS error", err)
			}
		})
	}

	// A real path through a regular file.
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "file"), nil, 0o644))
	_, err := Open(filepath.Join(dir, "file", "store"), nil)
	if err == nil || errors.Is(err, ErrLocked) || !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("store under a file: %v", err)
	}
	// A real read-only directory, where permissions apply (not as root).
	if os.Geteuid() != 0 {
		ro := filepath.Join(dir, "ro")
		must(t, os.Mkdir(ro, 0o555))
		_, err := Open(ro, nil)
		if !errors.Is(err, ErrPermission) || errors.Is(err, ErrLocked) {
			t.Fatalf("read-only directory: %v", err)
		}
	}
}
