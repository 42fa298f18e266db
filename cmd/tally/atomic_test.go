package main

// Issue 16 item 4 through the command line: "tally follow" and "tally
// follows load" at the followee limit are refused whole.

import (
	"context"
	"fmt"
	tallydb "github.com/tallydb/tally"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/timeline"
)

// TestFollowAtLimit: with MaxFollowees-1 followees, "follow 1 200001
// 200002" and a "follows load" adding two followees of 1 (with or
// without --skip-bad) are refused, and neither followee is followed.
//
// The MaxFollowees-1 follows are loaded in-process through the timeline
// alone, on a store that unread has not opened yet (so no observer is
// required; the first tally command opens unread on the existing graph,
// lazily): through "tally follows load" the unread observer's 100K feed
// operands on one key make the next open's flush take ~10 s, which would
// dwarf what this test checks.
func TestFollowAtLimit(t *testing.T) {
	t.Setenv("TALLY_DIR", "")
	dir := filepath.Join(t.TempDir(), "db")
	d := "-d=" + dir
	db, err := store.Open(dir, &store.Options{Families: tallydb.Families()})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := timeline.New(db, &timeline.Options{ExpireInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	edges := make([]timeline.Edge, timeline.MaxFollowees-1)
	for i := range edges {
		edges[i] = timeline.Edge{Follower: 1, Followee: 1_000_000 + uint64(i)}
	}
	if _, err := tl.LoadFollows(context.Background(), edges, nil); err != nil {
		t.Fatal(err)
	}
	if err := tl.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// refused runs a command that must be refused with user 1 following
	// n accounts, and checks that it changed nothing.
	refused := func(n int, args ...string) {
		t.Helper()
		out, errOut, code := tally(t, append([]string{d}, args...)...)
		if code != 1 || out != "" || !strings.Contains(errOut, "too many followees") {
			t.Fatalf("tally %s: exit %d, stdout %q, stderr %q; want a refusal", strings.Join(args, " "), code, out, errOut)
		}
		wantOut(t, mustTally(t, d, "user", "1", "200002", "5"),
			fmt.Sprintf("1 followers=0 followees=%d posts=0\n200002 followers=0 followees=0 posts=0\n"+
				"5 followers=0 followees=0 posts=0\n", n))
		wantOut(t, mustTally(t, d, "followees", "2"), "end\n")
	}
	refused(timeline.MaxFollowees-1, "follow", "1", "200001", "200002")
	wantOut(t, mustTally(t, d, "user", "200001"), "200001 followers=0 followees=0 posts=0\n")
	two := filepath.Join(t.TempDir(), "two.csv")
	if err := os.WriteFile(two, []byte("2,5\n1,200001\n1,200002\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	refused(timeline.MaxFollowees-1, "follows", "load", two)
	refused(timeline.MaxFollowees-1, "follows", "load", two, "--skip-bad")
	// One more fits; an account followed already counts nothing.
	wantOut(t, mustTally(t, d, "follow", "1", "200001", "1000000"), "followed 1\n")
	refused(timeline.MaxFollowees, "follow", "1", "200002")
	wantOut(t, mustTally(t, d, "unfollow", "1", "200001", "200001", "7"), "unfollowed 1\n")
}
