package store

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestCounterOwners(t *testing.T) {
	fs := vfs.NewMem()
	db := openTest(t, fs, "d", nil)
	must(t, db.CreateCounter("mine", CounterOptions{}))
	must(t, db.CreateCounter("theirs", CounterOptions{Owner: "pkg"}))
	must(t, db.CreateCounter("legacy", CounterOptions{}))
	if err := db.CreateCounter("bad", CounterOptions{Owner: "a b"}); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("a bad owner: %v", err)
	}
	if _, err := db.UserCounter("mine"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.UserCounter("theirs"); !errors.Is(err, ErrReserved) {
		t.Fatalf("UserCounter of an owned counter: %v", err)
	}
	if _, err := db.UserCounter("nope"); !errors.Is(err, ErrCounterNotFound) {
		t.Fatalf("UserCounter of a missing counter: %v", err)
	}
	must(t, db.ClaimCounter("legacy", "pkg"))
	must(t, db.ClaimCounter("legacy", "pkg")) // again: nothing to do
	if err := db.ClaimCounter("legacy", "other"); !errors.Is(err, ErrReserved) {
		t.Fatalf("claiming another's counter: %v", err)
	}
	if err := db.ClaimCounter("nope", "pkg"); !errors.Is(err, ErrCounterNotFound) {
		t.Fatalf("claiming a missing counter: %v", err)
	}
	c, err := db.Counter("legacy")
	must(t, err)
	if _, err := c.Incr(1, "x", 1); !errors.Is(err, ErrColumnNotFound) {
		t.Fatalf("an owned counter still works through the store API: %v", err)
	}
	owners := func(db *DB) map[string]string {
		m := map[string]string{}
		for _, ci := range db.Counters() {
			m[ci.Name] = ci.Owner
		}
		return m
	}
	want := map[string]string{"mine": "", "theirs": "pkg", "legacy": "pkg"}
	for _, reopen := range []bool{false, true} {
		if reopen {
			must(t, db.Close())
			db = openTest(t, fs, "d", nil)
		}
		got := owners(db)
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("reopen=%v: owners %v, want %v", reopen, got, want)
			}
		}
	}
	must(t, db.Verify(t.Context()))
	must(t, db.Close())
	ro := openTest(t, fs, "d", &Options{FS: fs, ReadOnly: true})
	if err := ro.ClaimCounter("mine", "pkg"); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("a claim on a read-only store: %v", err)
	}
	c, err = ro.Counter("mine")
	must(t, err)
	must(t, ro.Adopt(c, "pkg")) // read-only: the claim waits
	if c.Owner() != "" {
		t.Fatal("Adopt claimed on a read-only store")
	}
}

// The schema record of an owned counter carries the owner flag and the
// owner, and round-trips; an unowned one has neither.
func TestSchemaOwnerEncoding(t *testing.T) {
	ci := &CounterInfo{ID: 3, Name: "users", RangeBits: 32, Columns: []Column{{Name: "a", HintBits: 16, MaxBits: 32}}}
	plain := appendSchema(nil, ci)
	if got, err := decodeSchema(plain); err != nil || got.Owner != "" {
		t.Fatalf("unowned schema read back %+v, %v", got, err)
	}
	ci.Owner = "timeline"
	b := appendSchema(nil, ci)
	if len(b) != len(plain)+1+len("timeline") {
		t.Fatalf("owned schema of %d bytes, unowned %d", len(b), len(plain))
	}
	got, err := decodeSchema(b)
	must(t, err)
	if got.Owner != "timeline" {
		t.Fatalf("owner read back as %q", got.Owner)
	}
	must(t, checkSchema(ci))
}
