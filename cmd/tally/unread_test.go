package main

import (
	"fmt"
	tallydb "github.com/tallydb/tally"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/timeline"
	"github.com/tallydb/tally/unread"
)

// withGraphAPI opens dir's store with the timeline and unread through the
// API (as a host would), runs fn and closes it.
func withGraphAPI(t *testing.T, dir string, fn func(tl *timeline.Timeline, x *unread.Unread)) {
	t.Helper()
	db, err := store.Open(dir, &store.Options{Families: tallydb.Families()})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := timeline.New(db, &timeline.Options{ExpireInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	x, err := unread.New(db, &unread.Options{Graph: tl})
	if err != nil {
		t.Fatal(err)
	}
	fn(tl, x)
	if err := x.Check(); err != nil {
		t.Error(err)
	}
	if err := tl.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// newUnreadStore creates a store with kinds mention and comment, counts
// for users 1 and 2, a marked channel "activity", notices 10 and 20 in
// "system", and user 1 following 100 and 101 (who posted since).
func newUnreadStore(t *testing.T) string {
	t.Helper()
	t.Setenv("TALLY_DIR", "")
	dir := filepath.Join(t.TempDir(), "db")
	d := "-d=" + dir
	mustTally(t, d, "unread", "kind", "add", "mention")
	mustTally(t, d, "unread", "kind", "add", "comment", "--hint", "8")
	mustTally(t, d, "unread", "incr", "1", "mention", "3")
	mustTally(t, d, "unread", "incr", "2", "comment")
	mustTally(t, d, "dot", "mark", "activity")
	mustTally(t, d, "notice", "post", "system", "10")
	mustTally(t, d, "notice", "post", "system", "20")
	withGraphAPI(t, dir, func(tl *timeline.Timeline, x *unread.Unread) {
		for _, f := range []uint64{100, 101} {
			if _, err := tl.Follow(1, f); err != nil {
				t.Fatal(err)
			}
		}
		for post := uint64(1); post <= 3; post++ {
			if _, err := tl.Publish(100+post%2, 1000+post); err != nil {
				t.Fatal(err)
			}
		}
	})
	return dir
}

// unreadState is what the bad-input tests check is unchanged, read through
// the API.
func unreadState(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	withGraphAPI(t, dir, func(_ *timeline.Timeline, x *unread.Unread) {
		fmt.Fprintln(&b, x.Kinds())
		vals, err := x.GetMany([]uint64{1, 2, 3}, nil)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(&b, vals)
		fmt.Fprintf(&b, "%+v\n", x.Channels())
		for _, u := range []uint64{1, 2} {
			fs, ok, err := x.Snapshot(u)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%d %v %+v\n", u, ok, fs)
		}
	})
	return b.String()
}

func TestUnreadCommands(t *testing.T) {
	dir := newUnreadStore(t)
	d := "-d=" + dir
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"unread", "get", "1", "2", "3"}, "1 mention=3 comment=0\n2 mention=0 comment=1\n3 mention=0 comment=0\n"},
		{[]string{"unread", "incr", "1", "comment", "300"}, "300\n"}, // past the 8-bit hint
		{[]string{"unread", "incr", "1", "mention", "-5"}, "0\n"},    // stops at 0
		{[]string{"unread", "incr", "1", "mention"}, "1\n"},
		{[]string{"unread", "reset", "1", "comment"}, ""},
		{[]string{"unread", "incr", "2", "mention", "--n", "-1"}, "0\n"}, // N named as an option
		{[]string{"unread", "get", "1"}, "1 mention=1 comment=0\n"},
		{[]string{"unread", "reset", "2"}, ""},
		{[]string{"unread", "get", "2"}, "2 mention=0 comment=0\n"},
		{[]string{"unread", "kind", "add", "like", "--max", "64"}, ""},
		{[]string{"unread", "get", "1"}, "1 mention=1 comment=0 like=0\n"},
		{[]string{"unread", "kind", "list"}, "mention\ncomment\nlike\n"},
		// Dots: an undeclared channel has none; a user who never cleared
		// sees the mark newStore made.
		{[]string{"dot", "has", "5", "nochan"}, "no\n"},
		{[]string{"dot", "has", "5", "activity"}, "yes\n"},
		{[]string{"dot", "clear", "5", "activity"}, ""},
		{[]string{"dot", "has", "5", "activity"}, "no\n"},
		{[]string{"unread", "forget", "5"}, ""}, // as one who never cleared
		{[]string{"dot", "has", "5", "activity"}, "yes\n"},
		{[]string{"dot", "clear", "5", "activity"}, ""},
		{[]string{"dot", "mark", "activity"}, ""},
		{[]string{"dot", "has", "5", "activity"}, "yes\n"},
		{[]string{"dot", "has", "5", "activity"}, "yes\n"}, // reads record nothing
		{[]string{"dot", "clear", "5", "activity"}, ""},
		{[]string{"dot", "has", "5", "activity"}, "no\n"},
		// Notices.
		{[]string{"notice", "unread", "5", "system"}, "0\n"},
		{[]string{"notice", "post", "system", "30"}, ""},
		{[]string{"notice", "post", "system", "30"}, ""}, // a re-post is a no-op
		{[]string{"notice", "post", "system", "40"}, ""},
		{[]string{"notice", "unread", "5", "system"}, "0\n"}, // never read: new, 0
		{[]string{"notice", "read", "5", "system"}, ""},
		{[]string{"notice", "post", "system", "50"}, ""},
		{[]string{"notice", "post", "system", "60"}, ""},
		{[]string{"notice", "unread", "5", "system"}, "2\n"},
		{[]string{"notice", "read", "5", "system"}, ""},
		{[]string{"notice", "unread", "5", "system"}, "0\n"},
		// Feed: user 1 follows 100 and 101, who posted 3 times since.
		{[]string{"unread", "feed", "1", "2"}, "1 3\n2 0\n"},
		{[]string{"unread", "feed-reset", "1"}, ""},
		{[]string{"unread", "feed", "1"}, "1 0\n"},
	} {
		if got := mustTally(t, append([]string{d}, tc.args...)...); got != tc.want {
			t.Errorf("tally %s:\n got %q\nwant %q", strings.Join(tc.args, " "), got, tc.want)
		}
	}
	withGraphAPI(t, dir, func(tl *timeline.Timeline, _ *unread.Unread) {
		if _, err := tl.Publish(101, 2000); err != nil {
			t.Fatal(err)
		}
		if _, err := tl.Unfollow(1, 100); err != nil {
			t.Fatal(err)
		}
		if _, err := tl.Publish(100, 2001); err != nil {
			t.Fatal(err)
		}
	})
	if got := mustTally(t, d, "unread", "feed", "1"); got != "1 1\n" {
		t.Errorf("feed after a post and an unfollow: %q", got)
	}
	out := mustTally(t, d, "stats")
	for _, s := range []string{"unread.kinds 3\n", "unread.channels 2\n", "unread.notices 6\n", "unread.feed complete\n"} {
		if !strings.Contains(out, s) {
			t.Errorf("stats lack %q:\n%s", s, out)
		}
	}
}

func TestUnreadBadInput(t *testing.T) {
	dir := newUnreadStore(t)
	d := "-d=" + dir
	before := unreadState(t, dir)
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"unread", "kind", "add", "mention"}, exitError, "already exists"},
		{[]string{"unread", "kind", "add", "a.b"}, exitError, "invalid name"},
		{[]string{"unread", "kind", "add", "x", "--hint", "12"}, exitError, "invalid option"},
		{[]string{"unread", "kind", "add", "x", "--max", "16"}, exitError, "invalid option"},
		{[]string{"unread", "kind", "add"}, exitUsage, "missing KIND"},
		{[]string{"unread", "kind", "add", "x", "--hint", "0"}, exitError, "invalid option: hint 0"},
		{[]string{"unread", "kind", "add", "x", "--max", "320"}, exitError, "invalid option: max 320"},
		{[]string{"unread", "kind", "add", "x", "--wide", "3"}, exitUsage, "unknown flag -wide"},
		{[]string{"unread", "kind", "list", "x"}, exitUsage, "takes no arguments"},
		{[]string{"unread", "kind"}, exitUsage, "unknown subcommand"},
		{[]string{"unread", "incr", "1", "like"}, exitError, "unread: unknown kind"},
		{[]string{"unread", "incr", "x", "mention"}, exitUsage, `bad uid "x"`},
		{[]string{"unread", "incr", "-1", "mention"}, exitUsage, `bad uid "-1"`},
		{[]string{"unread", "incr", "1", "mention", "many"}, exitUsage, `bad n "many"`},
		{[]string{"unread", "incr", "1", "mention", "1", "2"}, exitUsage, `extra "2" (want UID KIND [N])`},
		{[]string{"unread", "incr", "1", "mention", "4294967296"}, exitError, "value out of range"},
		{[]string{"unread", "reset", "1", "mention", "nope"}, exitError, "unread: unknown kind"},
		{[]string{"unread", "reset"}, exitUsage, "missing UID"},
		{[]string{"unread", "get"}, exitUsage, "missing UID"},
		{[]string{"unread", "get", "1", "x"}, exitUsage, `bad uid "x"`},
		{[]string{"unread", "feed"}, exitUsage, "missing UID"},
		{[]string{"unread", "feed", "1", "-2"}, exitUsage, `bad uid "-2"`},
		{[]string{"unread", "feed-reset", "1", "2"}, exitUsage, `extra "2" (want UID)`},
		{[]string{"unread", "feed-reset", "1.5"}, exitUsage, `bad uid "1.5"`},
		{[]string{"unread", "forget"}, exitUsage, "missing UID"},
		{[]string{"unread", "forget", "1", "x"}, exitUsage, `bad uid "x"`},
		{[]string{"unread", "nope"}, exitUsage, "unknown subcommand"},
		{[]string{"dot", "mark", "a b"}, exitError, "invalid channel name"},
		{[]string{"dot", "mark", "-x"}, exitUsage, "unknown flag -x"},
		{[]string{"dot", "mark"}, exitUsage, "missing CHANNEL"},
		{[]string{"dot", "clear", "1", "nochan"}, exitError, "unread: unknown channel"},
		{[]string{"dot", "clear", "x", "activity"}, exitUsage, `bad uid "x"`},
		{[]string{"dot", "has", "1"}, exitUsage, "missing CHANNEL (want UID CHANNEL)"},
		{[]string{"notice", "post", "system", "0"}, exitError, "invalid notice id"},
		{[]string{"notice", "post", "system", "-3"}, exitUsage, `bad id "-3"`},
		{[]string{"notice", "post", "new", "0"}, exitError, "invalid notice id"}, // "new" not declared either
		{[]string{"notice", "post", "a.b", "3"}, exitError, "invalid channel name"},
		{[]string{"notice", "read", "1", "nochan"}, exitError, "unread: unknown channel"},
		{[]string{"dot", "has", "1", "a.b"}, exitError, "invalid channel name"},
		{[]string{"notice", "unread", "1", "a.b"}, exitError, "invalid channel name"},
		{[]string{"notice", "unread", "1", "system", "extra"}, exitUsage, `extra "extra" (want UID CHANNEL)`},
	} {
		_, errOut, code := tally(t, append([]string{d}, tc.args...)...)
		if code != tc.code || !strings.Contains(errOut, tc.stderr) {
			t.Errorf("tally %s: exit %d, stderr %q; want exit %d with %q", strings.Join(tc.args, " "), code, errOut, tc.code, tc.stderr)
		}
	}
	if after := unreadState(t, dir); after != before {
		t.Errorf("bad input changed the store:\nbefore %s\nafter  %s", before, after)
	}
	// A command other than "unread kind add" does not create a store, and
	// a refused kind leaves none.
	for _, args := range [][]string{
		{"unread", "get", "1"}, {"dot", "mark", "x"}, {"notice", "post", "x", "1"},
		{"unread", "kind", "add", "a.b"}, {"unread", "kind", "add", "x", "--hint", "3"},
	} {
		nd := filepath.Join(t.TempDir(), "new")
		if _, _, code := tally(t, append([]string{"-d", nd}, args...)...); code == exitOK {
			t.Errorf("tally %s on a new directory succeeded", strings.Join(args, " "))
		}
		if _, err := os.Stat(nd); !os.IsNotExist(err) {
			t.Errorf("tally %s created %s", strings.Join(args, " "), nd)
		}
	}
}

// TestUnreadFeedThroughCLI drives the feed with the timeline's commands:
// every one of them opens unread on its timeline, so follows, unfollows,
// posts and unposts made on the command line reach the snapshots.
func TestUnreadFeedThroughCLI(t *testing.T) {
	t.Setenv("TALLY_DIR", "")
	d := "-d=" + filepath.Join(t.TempDir(), "db")
	mustTally(t, d, "unread", "kind", "add", "mention") // creates the store
	for _, tc := range []struct {
		args []string
		want string // "" to ignore
	}{
		{[]string{"post", "100", "1"}, ""},
		{[]string{"follow", "7", "100", "101"}, "followed 2\n"},
		{[]string{"unread", "feed", "7"}, "7 0\n"}, // a follow adds no old posts
		{[]string{"post", "100", "2", "3"}, ""},
		{[]string{"post", "101", "4"}, ""},
		{[]string{"unread", "feed", "7"}, "7 3\n"},
		{[]string{"unpost", "100", "3"}, "3 removed\n"},
		{[]string{"unread", "feed", "7"}, "7 2\n"},
		{[]string{"unfollow", "7", "101"}, "unfollowed 1\n"},
		{[]string{"unread", "feed", "7"}, "7 1\n"},
		{[]string{"unread", "feed-reset", "7"}, ""},
		{[]string{"unread", "feed", "7"}, "7 0\n"},
		{[]string{"follow", "7", "101"}, "followed 1\n"}, // re-follow: from the count now
		{[]string{"post", "101", "5"}, ""},
		{[]string{"unread", "feed", "7"}, "7 1\n"},
	} {
		got := mustTally(t, append([]string{d}, tc.args...)...)
		if tc.want != "" && got != tc.want {
			t.Errorf("tally %s: %q, want %q", strings.Join(tc.args, " "), got, tc.want)
		}
	}
}
