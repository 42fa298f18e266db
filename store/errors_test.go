package store

import (
	"context"
	"errors"
	"sync"
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
