package tally_test

import (
	"context"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tallydb/tally"
	"github.com/tallydb/tally/store"
)

// TestReadOnlyCheckAfterCrashInCheckpoint: a crash in the middle of a
// checkpoint leaves its intent on disk, which the next writable Open
// resolves. A read-only Open (what tally verify, get and stats use)
// resolves nothing, as documented, and did not register the intent in
// memory either, so store.DB.Check's intent comparison (check.go,
// checkIntents) reported "intent N on disk is unknown in memory" and
// DB.Check and DB.Verify call a sound store corrupt, while a writable
// open of the same image checked clean. Found by TestDBModel (a crash
// during a likes load, whose counts load ends with a checkpoint, then a
// read-only open); fixed in checkIntents (a read-only store's intents
// need only decode).
func TestReadOnlyCheckAfterCrashInCheckpoint(t *testing.T) {
	hit := 0
	for attempt := 0; attempt < 400 && hit < 3; attempt++ {
		mem := vfs.NewCrashableMem()
		db, err := tally.Open("db", &tally.Options{Store: &store.Options{FS: mem, DisableBackground: true}})
		if err != nil {
			t.Fatal(err)
		}
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(db.Store().CreateCounter("c", store.CounterOptions{RangeBits: 8}))
		must(db.Store().AddColumn("c", "v", store.ColumnOptions{}))
		c, err := db.Store().Counter("c")
		must(err)
		for id := uint64(1); id < 3000; id += 7 { // a dozen ranges, a chunk each
			_, err := c.Incr(id, "v", 1)
			must(err)
		}
		done := make(chan error, 1)
		go func() { done <- db.Store().Checkpoint() }()
		time.Sleep(time.Duration(attempt%40) * 50 * time.Microsecond)
		img := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		must(<-done)
		must(db.Close())

		ro, err := tally.Open("db", &tally.Options{Store: &store.Options{FS: img, ReadOnly: true}})
		must(err)
		cerr, verr := ro.Check(), ro.Verify(context.Background())
		must(ro.Close())
		rw, err := tally.Open("db", &tally.Options{Store: &store.Options{FS: img, DisableBackground: true}})
		must(err)
		intents := rw.Store().Stats().Recovery.IntentsResolved
		must(rw.Check())
		must(rw.Close())
		if intents > 0 {
			hit++ // the crash interrupted the checkpoint
		}
		if cerr != nil || verr != nil {
			t.Fatalf("attempt %d (the crash left %d intents): a read-only open of a sound store fails\nCheck: %v\nVerify: %v", attempt, intents, cerr, verr)
		}
	}
	if hit == 0 {
		t.Fatal("no crash image caught a checkpoint in progress")
	}
}
