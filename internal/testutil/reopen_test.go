package testutil

import (
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestStoreLifecycle checks the harness's order of calls: open at start;
// check then close then open on Reopen; close without check on Close;
// after a crash, open on the crash image, which lacks what was not
// synced; and check then close at cleanup, only if still open.
func TestStoreLifecycle(t *testing.T) {
	var calls []string
	var opened vfs.FS
	h := Hooks{
		Open:  func(fs vfs.FS) { calls = append(calls, "open"); opened = fs },
		Check: func() error { calls = append(calls, "check"); return nil },
		Close: func() error { calls = append(calls, "close"); return nil },
	}
	mem := vfs.NewCrashableMem()
	t.Run("run", func(t *testing.T) {
		s := OpenStore(t, mem, h)
		s.Reopen()
		s.Close()
		s.Open()
		write := func(name string, sync bool) {
			f, err := opened.Create(name, vfs.WriteCategoryUnspecified)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			if sync {
				if err := f.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			f.Close()
		}
		write("synced", true)
		d, err := opened.OpenDir("")
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Sync(); err != nil {
			t.Fatal(err)
		}
		d.Close()
		write("unsynced", false)
		s.Crash(0, rand.New(rand.NewPCG(1, 2)))
		if s.FS() == vfs.FS(mem) || opened != s.FS() {
			t.Fatal("crash did not reopen on the crash image")
		}
		if _, err := opened.Stat("synced"); err != nil {
			t.Fatalf("synced file lost in the crash: %v", err)
		}
		if _, err := opened.Stat("unsynced"); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("unsynced file after the crash: %v", err)
		}
	})
	want := []string{"open", "check", "close", "open", "close", "open", "close", "open", "check", "close"}
	if !slices.Equal(calls, want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}

	calls = nil
	t.Run("closed", func(t *testing.T) { OpenStore(t, mem, h).Close() })
	if want := []string{"open", "close"}; !slices.Equal(calls, want) {
		t.Fatalf("closed before cleanup: calls %v, want %v", calls, want)
	}
}
