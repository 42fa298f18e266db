package likes

import (
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tallydb/tally/store"
)

// TestUndeclaredBusiness: by default a like, dislike or owner change in a
// business nobody declared (a typo: "videos" for "video") is refused with
// ErrUnknownBusiness and creates nothing; reads of it return nothing;
// AddBusiness (or a Load) declares one.
func TestUndeclaredBusiness(t *testing.T) {
	db, err := store.Open("d", &store.Options{FS: vfs.NewMem(), Families: Families(), DisableBackground: true, JobWorkers: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l, err := New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.AddBusiness("video", BusinessOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Like("video", 1, 2, 0); err != nil {
		t.Fatal(err)
	}
	for _, op := range []func() (Result, error){
		func() (Result, error) { return l.Like("videos", 1, 2, 0) },
		func() (Result, error) { return l.Dislike("videos", 1, 2) },
		func() (Result, error) { return l.SetOwner("videos", 1, 7) },
	} {
		_, err := op()
		if !errors.Is(err, ErrUnknownBusiness) || !strings.Contains(err.Error(), `"videos" (businesses: video)`) {
			t.Fatalf("a write to an undeclared business: %v", err)
		}
	}
	if got := l.Businesses(); len(got) != 1 || got[0] != "video" {
		t.Fatalf("businesses %v: a refused write created one", got)
	}
	if _, err := db.Counter(CounterName("videos")); !errors.Is(err, store.ErrCounterNotFound) {
		t.Fatalf("a refused write created a counter: %v", err)
	}
	// Reads and undos of an undeclared business: nothing there.
	if c, err := l.Counts("videos", []uint64{1}, nil); err != nil || c[0] != (Counts{}) {
		t.Fatalf("Counts of an undeclared business: %v %v", c, err)
	}
	if res, err := l.Unlike("videos", 1, 2); err != nil || res.Changed {
		t.Fatalf("Unlike in an undeclared business: %v %v", res, err)
	}
	// A bad name is still a bad name.
	if _, err := l.Like("a b", 1, 2, 0); !errors.Is(err, ErrInvalidBusiness) {
		t.Fatalf("a bad business name: %v", err)
	}
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
}
