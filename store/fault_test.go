package store

import (
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// TestWALFailure fails the WAL's writes and syncs under a running store:
// the write that hits the failure is not acknowledged, later writes are
// refused with ErrFailed, and a reopen (on what reached the disk) holds
// every acknowledged write and nothing else.
func TestWALFailure(t *testing.T) {
	mem := vfs.NewCrashableMem()
	walFault := &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".log") && (op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileSync) {
			return errorfs.ErrInjected
		}
		return nil
	})}
	opts := testOptions(errorfs.Wrap(mem, walFault))
	db, err := Open("w", opts)
	must(t, err)
	c := newPosts(t, db, 12)
	for i := 0; i < 10; i++ {
		_, err := c.Incr(1, "likes", 1)
		must(t, err)
	}
	walFault.On()
	_, err = c.Incr(1, "likes", 1)
	if !errors.Is(err, ErrFailed) {
		t.Fatalf("incr with a failing WAL: %v", err)
	}
	if _, err := c.Incr(2, "likes", 1); !errors.Is(err, ErrFailed) {
		t.Fatalf("incr after the failure: %v", err)
	}
	if err := db.CreateCounter("x", CounterOptions{}); !errors.Is(err, ErrFailed) {
		t.Fatalf("create after the failure: %v", err)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{})
	db.Close()

	db2 := openTest(t, crashed, "w", nil)
	c2, err := db2.Counter("posts")
	must(t, err)
	if v, _ := c2.GetColumn(1, "likes"); v != 10 {
		t.Fatalf("after reopen likes = %d, want the 10 acknowledged", v)
	}
	if v, _ := c2.GetColumn(2, "likes"); v != 0 {
		t.Fatalf("refused write is present: %d", v)
	}
}
