package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tallydb/tally/likes"
	"github.com/tallydb/tally/store"
)

// TestInterruptedLikesLoadReadOnly: a "likes load" that stopped part-way
// (here: cancelled after its first batch, which leaves the load intent as
// a crash does) must not make the read-only commands fail: stats and
// verify report the interrupted load by name, and a writable command
// finishes it.
func TestInterruptedLikesLoadReadOnly(t *testing.T) {
	t.Setenv("TALLY_DIR", "")
	dir := filepath.Join(t.TempDir(), "db")
	mustTally(t, "-d", dir, "business", "add", "video")
	mustTally(t, "-d", dir, "like", "video", "1", "10")

	db, err := store.Open(dir, &store.Options{Families: likes.Families()})
	if err != nil {
		t.Fatal(err)
	}
	l, err := likes.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	// More than one load batch (16,384 likes), so the load has a second
	// batch to be cancelled before.
	in := make([]likes.LoadLike, 40_000)
	for i := range in {
		in[i] = likes.LoadLike{Item: uint64(i%500) + 1, User: uint64(i) + 100}
	}
	ctx, cancel := context.WithCancel(context.Background())
	_, err = l.Load(ctx, "video", in, func(int) { cancel() })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("load: %v, want it cancelled after the first batch", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	out := mustTally(t, "-d", dir, "stats")
	if !strings.Contains(out, "\nlikes.interrupted_loads 1\n") {
		t.Fatalf("stats does not report the interrupted load:\n%s", out)
	}
	out, stderr, code := tally(t, "-d", dir, "verify")
	if code != 0 {
		t.Fatalf("verify exit %d\n%s%s", code, out, stderr)
	}
	for _, want := range []string{"ok\n", "likes_interrupted_loads 1\n", "likes_interrupted_load video\n"} {
		if !strings.Contains(out, want) {
			t.Fatalf("verify output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr, "jobs wait") {
		t.Fatalf("verify does not say which command finishes the load: %q", stderr)
	}

	// A writable open finishes the load: the counts agree with the sets
	// again and nothing is reported.
	mustTally(t, "-d", dir, "jobs", "wait")
	out, stderr, code = tally(t, "-d", dir, "verify")
	if code != 0 || !strings.Contains(out, "likes_interrupted_loads 0\n") || stderr != "" {
		t.Fatalf("verify after jobs wait: exit %d\n%s%s", code, out, stderr)
	}
	// likesState runs Check, which compares every count with its set.
	likesState(t, dir)
}
