package tally_test

import (
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/tallydb/tally"
	"github.com/tallydb/tally/internal/testutil"
	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/unread"
)

// TestFailedMarkOfNewChannel: unread.Mark of a channel nobody declared
// used to commit twice, the declaration (tag 0) and then the mark; when
// the first commit's WAL sync failed (a full disk) the heal found the
// channel declared with no mark, and Read and Clear of it succeeded
// instead of ErrUnknownChannel. Found by TestDBModel's heal step. Now the
// declaration goes in the mark's own batch (channelFor), as for Post.
func TestFailedMarkOfNewChannel(t *testing.T) {
	mem := vfs.NewMem()
	fault := testutil.FullWAL(false)
	db, err := tally.Open("db", &tally.Options{Store: &store.Options{
		FS: errorfs.Wrap(mem, fault), DisableBackground: true, ReopenOnFailure: true,
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fault.On()
	if _, err := db.Unread().Mark("alerts"); !errors.Is(err, store.ErrFailed) {
		t.Fatalf("mark with a failing WAL sync: %v", err)
	}
	fault.Off()
	deadline := time.Now().Add(30 * time.Second)
	for db.Store().Checkpoint() != nil { // until the store healed
		if time.Now().After(deadline) {
			t.Fatal("the store did not heal")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A failed sync leaves the write's fate open, never half of it: the
	// mark is there whole (the channel declared with tag 1) or not at all.
	switch chs := db.Unread().Channels(); {
	case len(chs) == 0:
		if err := db.Unread().Read(1, "alerts"); !errors.Is(err, unread.ErrUnknownChannel) {
			t.Errorf("read of the channel a failed mark named: %v, want ErrUnknownChannel", err)
		}
	case len(chs) == 1 && chs[0].Name == "alerts" && chs[0].Tag == 1:
	default:
		t.Errorf("after a failed mark of a new channel: channels %+v, want none or alerts with tag 1", chs)
	}
}
