package testutil

import (
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Hooks open, check and close a test's store and the packages it attaches
// (a store alone, a store with timeline, unread on a graph, ...). Open
// fails the test itself; Check runs every Check of what Open opened.
type Hooks struct {
	Open  func(fs vfs.FS)
	Check func() error
	Close func() error
}

// Store is a test's store on one filesystem, opened, reopened and crashed
// through its Hooks, with Check and Close at cleanup, so every test ends
// by verifying the invariants of what it left (bbolt's btesting
// MustCheck). A package's test env keeps its own fields (the handles Open
// set) and calls these for the lifecycle.
type Store struct {
	t    testing.TB
	fs   vfs.FS
	h    Hooks
	open bool
}

// OpenStore opens h on fs and registers a cleanup that, if the store is
// still open, runs Check (an error fails the test) and Close.
func OpenStore(t testing.TB, fs vfs.FS, h Hooks) *Store {
	t.Helper()
	s := &Store{t: t, fs: fs, h: h}
	s.h.Open(fs)
	s.open = true
	t.Cleanup(func() {
		if !s.open {
			return
		}
		if err := s.h.Check(); err != nil {
			t.Errorf("check at cleanup: %v", err)
		}
		s.open = false
		if err := s.h.Close(); err != nil {
			t.Errorf("close at cleanup: %v", err)
		}
	})
	return s
}

// FS returns the filesystem the store is open on (after a crash, the
// crash image).
func (s *Store) FS() vfs.FS { return s.fs }

// Reopen runs Check, closes the store cleanly and opens it again; a
// failed Check or Close fails the test.
func (s *Store) Reopen() {
	s.t.Helper()
	if err := s.h.Check(); err != nil {
		s.t.Fatalf("check before reopen: %v", err)
	}
	s.Close()
	s.h.Open(s.fs)
	s.open = true
}

// Crash drops what was not synced, keeping keepPercent of the unsynced
// data (rng picks which), and opens the store on what is left, as a
// restart after a power loss would. The filesystem must be a crashable
// *vfs.MemFS (vfs.NewCrashableMem). The old handles are closed after the
// crash image is taken, which changes nothing in it; a Close error fails
// the test.
func (s *Store) Crash(keepPercent int, rng *rand.Rand) {
	s.t.Helper()
	mem, ok := s.fs.(*vfs.MemFS)
	if !ok {
		s.t.Fatalf("crash on %T: want a crashable *vfs.MemFS", s.fs)
	}
	s.RestartOn(mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: keepPercent, RNG: rng}))
}

// RestartOn closes the store, if open, and opens it on fs: for a crash
// image the test took itself, at a moment Crash cannot choose (while
// another goroutine is writing). A Close error fails the test.
func (s *Store) RestartOn(fs vfs.FS) {
	s.t.Helper()
	if s.open {
		s.Close()
	}
	s.fs = fs
	s.h.Open(s.fs)
	s.open = true
}

// Close closes the store without Check (for a test that damaged it on
// purpose, or that checks on its own); a Close error fails the test. The
// cleanup then has nothing to do.
func (s *Store) Close() {
	s.t.Helper()
	s.open = false
	if err := s.h.Close(); err != nil {
		s.t.Fatalf("close: %v", err)
	}
}

// Open opens a store closed by Close again.
func (s *Store) Open() {
	s.t.Helper()
	s.h.Open(s.fs)
	s.open = true
}
