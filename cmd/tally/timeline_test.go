package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// newTimelineStore creates a store through "timeline config" and returns
// its -d flag.
func newTimelineStore(t *testing.T) string {
	t.Helper()
	t.Setenv("TALLY_DIR", "")
	d := "-d=" + filepath.Join(t.TempDir(), "db")
	mustTally(t, d, "timeline", "config", "--inbox-cap", "3")
	return d
}

func wantOut(t *testing.T, got, want string) {
	t.Helper()
	if got != want {
		t.Fatalf("output:\n%s\nwant:\n%s", got, want)
	}
}

func TestTimelineCommands(t *testing.T) {
	d := newTimelineStore(t)
	wantOut(t, mustTally(t, d, "timeline", "config"), "inbox_cap 3\nactive_window 168h0m0s\npull_threshold 1000000\nchunk_size 1000\n")
	wantOut(t, mustTally(t, d, "follow", "1", "20", "21", "22"), "followed 3\n")
	wantOut(t, mustTally(t, d, "follow", "1", "20"), "followed 0\n")
	wantOut(t, mustTally(t, d, "follow", "2", "20"), "followed 1\n")
	// 1 is active, 2 is not.
	wantOut(t, mustTally(t, d, "active", "1"), "active 1 rebuilt 1\n")
	wantOut(t, mustTally(t, d, "active", "1"), "active 1 rebuilt 0\n")
	wantOut(t, mustTally(t, d, "post", "20", "100", "101"), "100 delivered 1\n101 delivered 1\n")
	wantOut(t, mustTally(t, d, "post", "20", "101"), "101 duplicate\n")
	wantOut(t, mustTally(t, d, "post", "21", "102", "--async"), "102 queued\n")
	wantOut(t, mustTally(t, d, "post", "23", "105", "--async"), "105 queued\n") // nobody to push to: still "queued"
	mustTally(t, d, "jobs", "wait")
	wantOut(t, mustTally(t, d, "post", "22", "103", "--wait", "104"), "103 delivered 1\n104 delivered 1\n")
	wantOut(t, mustTally(t, d, "user", "1", "20", "99"), "1 followers=0 followees=3 posts=0\n20 followers=2 followees=0 posts=2\n99 followers=0 followees=0 posts=0\n")
	if _, errOut, code := tally(t, d, "followers", "20", "--limit", "0"); code != exitError || !strings.Contains(errOut, "bad page limit: 0") {
		t.Errorf("followers --limit 0: exit %d, %s", code, errOut) // as likes: a page holds 1..1000
	}

	// Pages: the cursor line feeds the next page.
	out := mustTally(t, d, "home", "1", "--limit", "2")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || lines[0] != "104 22" || lines[1] != "103 22" || !strings.HasPrefix(lines[2], "next ") {
		t.Fatalf("page 1:\n%s", out)
	}
	cursor := strings.TrimPrefix(lines[2], "next ")
	out = mustTally(t, d, "home", "1", "--limit", "2", "--cursor", cursor)
	lines = strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || lines[0] != "102 21" || lines[1] != "101 20" {
		t.Fatalf("page 2:\n%s", out)
	}
	cursor = strings.TrimPrefix(lines[2], "next ")
	wantOut(t, mustTally(t, d, "home", "1", "--limit", "2", "--cursor", cursor), "100 20\nend\n")
	wantOut(t, mustTally(t, d, "home", "2"), "101 20\n100 20\nend\n") // by pull
	wantOut(t, mustTally(t, d, "home", "77"), "end\n")                // unknown user

	wantOut(t, mustTally(t, d, "followers", "20"), "1\n2\nend\n")
	out = mustTally(t, d, "followees", "1", "--limit", "2")
	if !strings.HasPrefix(out, "20\n21\nnext ") {
		t.Fatalf("followees page 1:\n%s", out)
	}
	c := strings.TrimSpace(strings.TrimPrefix(out, "20\n21\nnext "))
	wantOut(t, mustTally(t, d, "followees", "1", "--limit", "2", "--cursor", c), "22\nend\n")

	wantOut(t, mustTally(t, d, "unpost", "20", "100", "999"), "100 removed\n999 absent\n")
	wantOut(t, mustTally(t, d, "unfollow", "1", "22", "50"), "unfollowed 1\n")
	wantOut(t, mustTally(t, d, "home", "1", "--limit", "10"), "102 21\n101 20\nend\n")

	stats := mustTally(t, d, "stats")
	for _, want := range []string{"timeline.inbox_cap 3\n", "timeline.active_window 168h0m0s\n", "timeline.pull_threshold 1000000\n", "timeline.chunk_size 1000\n"} {
		if !strings.Contains(stats, want) {
			t.Errorf("stats lacks %q:\n%s", want, stats)
		}
	}
	wantOut(t, mustTally(t, d, "timeline", "config", "--active-window", "48h", "--pull-threshold", "5", "--chunk-size", "10"),
		"inbox_cap 3\nactive_window 48h0m0s\npull_threshold 5\nchunk_size 10\n")
}

func TestFollowsLoad(t *testing.T) {
	d := newTimelineStore(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.csv")
	must(t, os.WriteFile(good, []byte("# follows\n1,2\n1,3\n\n2,3\n1,2\n"), 0o644))
	out := mustTally(t, d, "follows", "load", good)
	for _, want := range []string{"edges 4\n", "added 3\n", "existing 1\n", "users 3\n", "bad_lines 0\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("load output lacks %q:\n%s", want, out)
		}
	}
	wantOut(t, mustTally(t, d, "user", "1", "3"), "1 followers=0 followees=2 posts=0\n3 followers=2 followees=0 posts=0\n")

	bad := filepath.Join(dir, "bad.csv")
	must(t, os.WriteFile(bad, []byte("4,5\n4,4\n4\n4,x\n0,5\n4,6\n"), 0o644))
	before := mustTally(t, d, "user", "4", "5", "6")
	_, errOut, code := tally(t, d, "follows", "load", bad)
	if code != 1 {
		t.Fatalf("bad load: exit %d", code)
	}
	for _, want := range []string{":2: user 4 cannot follow themselves", ":3: want 2 fields", ":4: bad id", ":5: id out of range", "4 bad lines"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	wantOut(t, mustTally(t, d, "user", "4", "5", "6"), before)
	out = mustTally(t, d, "follows", "load", bad, "--skip-bad")
	if !strings.Contains(out, "added 2\n") || !strings.Contains(out, "bad_lines 4\n") {
		t.Fatalf("--skip-bad:\n%s", out)
	}
	// Standard input.
	stdin = strings.NewReader("7,8\n")
	defer func() { stdin = os.Stdin }()
	if out := mustTally(t, d, "follows", "load", "-"); !strings.Contains(out, "added 1\n") {
		t.Fatalf("stdin load:\n%s", out)
	}
}

// Bad input: a named error, a non-zero exit, and nothing changed.
func TestTimelineBadInput(t *testing.T) {
	d := newTimelineStore(t)
	mustTally(t, d, "follow", "1", "2")
	mustTally(t, d, "post", "2", "10", "12")
	mustTally(t, d, "post", "3", "11")
	out := mustTally(t, d, "home", "1", "--limit", "1")
	cur := strings.TrimSpace(out[strings.Index(out, "next ")+5:])
	snapshot := func() string {
		return mustTally(t, d, "user", "1", "2", "3", "4") + mustTally(t, d, "home", "1") + mustTally(t, d, "timeline", "config")
	}
	before := snapshot()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"follow", "1", "1"}, 1, "cannot follow themselves"},
		{[]string{"follow", "4", "5", "4"}, 1, "cannot follow themselves"},
		{[]string{"follow", "1", "x"}, 2, `bad followee "x"`},
		{[]string{"unfollow", "1", "1"}, 1, "cannot follow themselves"},
		{[]string{"follow", "0", "2"}, 1, "timeline: bad id"},
		{[]string{"follow", "1"}, 2, "missing FOLLOWEE (want UID FOLLOWEE...)"},
		{[]string{"unfollow", "1", "-3"}, 2, `bad followee "-3"`},
		{[]string{"follow", "1", "2", "--bogus"}, 2, "unknown flag -bogus"},
		{[]string{"follow", "1", "9223372036854775808"}, 1, "timeline: bad id"},
		{[]string{"post", "2", "12", "11"}, 1, "belongs to another author"},
		{[]string{"post", "2", "0"}, 1, "timeline: bad id"},
		{[]string{"post", "2"}, 2, "missing POST (want AUTHOR POST..."},
		{[]string{"post", "2", "13", "--wait", "--async"}, 2, "wait and async exclude each other"},
		{[]string{"unpost", "2", "11"}, 1, "belongs to another author"},
		{[]string{"home", "1", "--limit", "-1"}, 1, "bad page limit"},
		{[]string{"home", "1", "--limit", "1001"}, 1, "bad page limit"},
		{[]string{"home", "1", "--cursor", "not-a-cursor"}, 1, "bad cursor"},
		{[]string{"home", "x"}, 2, `bad uid "x"`},
		{[]string{"home", "1", "2"}, 2, `extra "2" (want UID [--limit LIMIT] [--cursor CURSOR] [--types TYPES])`},
		{[]string{"posts", "0"}, 1, "timeline: bad id: author id 0"},
		{[]string{"followers", "1", "--cursor", "AAAA"}, 1, "bad cursor"},
		{[]string{"user"}, 2, "missing UID (want UID...)"},
		{[]string{"user", "1", "0"}, 1, "timeline: bad id: user id 0"},
		{[]string{"is-following", "1"}, 2, "missing FOLLOWEE"},
		{[]string{"is-following", "0", "1"}, 1, "timeline: bad id: user id 0"},
		{[]string{"active", "0"}, 1, "timeline: bad id"},
		{[]string{"timeline", "config", "--inbox-cap", "0"}, 1, "invalid option"},
		{[]string{"timeline", "config", "--inbox-cap", "2000000"}, 1, "invalid option"},
		{[]string{"timeline", "config", "--active-window", "10s"}, 1, "invalid option"},
		{[]string{"timeline", "config", "--active-window", "soon"}, 2, `bad active-window "soon"`},
		{[]string{"timeline", "config", "--active-window", "0s"}, 1, "invalid option"},
		{[]string{"timeline", "config", "extra"}, 2, `takes no arguments, got "extra"`},
		{[]string{"timeline", "config", "--pull-threshold", "0"}, 1, "invalid option"},
		{[]string{"timeline", "config", "--chunk-size", "-1"}, 1, "invalid option"},
		{[]string{"timeline"}, 2, "missing subcommand"},
		{[]string{"follows"}, 2, "missing subcommand"},
		{[]string{"home", "3", "--cursor", cur}, 1, "issued for user 1"},
	} {
		_, errOut, code := tally(t, append([]string{d}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("tally %s: exit %d, stderr %q; want exit %d and %q", strings.Join(c.args, " "), code, errOut, c.code, c.want)
		}
	}
	after := snapshot()
	wantOut(t, after, before)
}

func TestTimelineHelp(t *testing.T) {
	for _, c := range []string{"follow", "unfollow", "follows load", "active", "post", "unpost", "home", "user", "followers", "followees",
		"is-following", "posts", "timeline config", "timeline expire"} {
		out := mustTally(t, append([]string{"help"}, strings.Fields(c)...)...)
		if !strings.Contains(out, "Usage: tally -d DIR "+c) || !strings.Contains(out, "Example:") {
			t.Errorf("help %s lacks usage or an example:\n%s", c, out)
		}
	}
}

// A counter named like a package's (the timeline's "users") cannot be
// made by hand: it would be taken for the package's data. The refusal
// creates nothing, and stats on the store shows no timeline.
func TestReservedCounterNames(t *testing.T) {
	t.Setenv("TALLY_DIR", "")
	dir := filepath.Join(t.TempDir(), "db")
	d := "-d=" + dir
	mustTally(t, d, "counter", "add", "posts")
	for _, name := range []string{"users", "unread_kinds", "unread_feed", "likes_video", "likes_received"} {
		_, errOut, code := tally(t, d, "counter", "add", name)
		if code != exitError || !strings.Contains(errOut, "reserved") {
			t.Errorf("counter add %s: exit %d, stderr %q; want exit 1, reserved", name, code, errOut)
		}
		_, errOut, code = tally(t, d, "incr", name, "1", "x")
		if code != exitError || !strings.Contains(errOut, "reserved") {
			t.Errorf("incr %s: exit %d, stderr %q; want exit 1, reserved", name, code, errOut)
		}
	}
	out := mustTally(t, d, "stats")
	if strings.Contains(out, "timeline.") {
		t.Fatalf("stats shows a timeline:\n%s", out)
	}
	// Once the packages exist, their counters stay out of the user's
	// list and refuse the counter commands.
	mustTally(t, d, "follow", "1", "34")
	mustTally(t, d, "business", "add", "video")
	mustTally(t, d, "like", "video", "2", "1")
	if got := mustTally(t, d, "counter", "list"); !strings.HasPrefix(got, "posts ") || strings.Count(got, "\n") != 1 {
		t.Fatalf("counter list shows package counters:\n%s", got)
	}
	for _, args := range [][]string{{"incr", "users", "34", "followers", "1000"}, {"delete", "users", "34"},
		{"set", "likes_video", "2", "500", "0"}, {"get", "users", "34"}, {"column", "add", "users", "x"},
		{"load", "likes_video", "-"}} {
		_, errOut, code := tally(t, append([]string{d}, args...)...)
		if code != exitError || !strings.Contains(errOut, "reserved") {
			t.Errorf("%v: exit %d, stderr %q; want exit 1, reserved", args, code, errOut)
		}
	}
	out = mustTally(t, d, "stats")
	for _, want := range []string{"\ncounters 1\n", "\ntimeline.counter.users.rows 2\n", "\nlikes.counter.likes_video.rows 1\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("stats lacks %q:\n%s", want, out)
		}
	}
	if out := mustTally(t, d, "verify"); !strings.Contains(out, "packages timeline,unread,likes\n") {
		t.Errorf("verify:\n%s", out)
	}
}

// timeline expire runs the inbox expiry now (the CLI form of TL.EXPIRE;
// which users it expires is the timeline package's tests' subject, with a
// clock the CLI cannot move).
func TestTimelineExpire(t *testing.T) {
	d := newTimelineStore(t)
	mustTally(t, d, "follow", "5", "6")
	mustTally(t, d, "active", "5")
	if out := mustTally(t, d, "is-following", "5", "6", "7"); out != "6 yes\n7 no\n" {
		t.Fatalf("is-following: %q", out)
	}
	if out := mustTally(t, d, "timeline", "expire"); out != "expired 0\n" {
		t.Fatalf("expire right after a read: %q", out)
	}
	if _, _, code := tally(t, d, "timeline", "expire", "x"); code != exitUsage {
		t.Fatalf("timeline expire x: exit %d", code)
	}
}

// posts: a user's own posts by cursor (the CLI form of TL.POSTS).
func TestPostsCommand(t *testing.T) {
	d := newTimelineStore(t)
	mustTally(t, d, "post", "21", "2001", "2003", "2002")
	out := mustTally(t, d, "posts", "21", "--limit", "2")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || lines[0] != "2003" || lines[1] != "2002" || !strings.HasPrefix(lines[2], "next ") {
		t.Fatalf("posts page 1:\n%s", out)
	}
	if got := mustTally(t, d, "posts", "21", "--cursor", strings.TrimPrefix(lines[2], "next ")); got != "2001\nend\n" {
		t.Fatalf("posts page 2: %q", got)
	}
	if _, errOut, code := tally(t, d, "posts", "22", "--cursor", strings.TrimPrefix(lines[2], "next ")); code != exitError ||
		!strings.Contains(errOut, "bad cursor") {
		t.Fatalf("another author's cursor: exit %d, %q", code, errOut)
	}
}

// TestStatsSinceOpen: a CLI that opens the store for stats leaves out the
// figures counted since the open (they would read 0: issue 20).
func TestStatsSinceOpen(t *testing.T) {
	d := newTimelineStore(t)
	mustTally(t, d, "follow", "1", "2")
	mustTally(t, d, "post", "2", "100")
	mustTally(t, d, "home", "1")
	out := mustTally(t, d, "stats")
	if !strings.Contains(out, "\ntimeline.users ") || strings.Contains(out, "timeline.pages") || strings.Contains(out, "timeline.deliveries") {
		t.Fatalf("stats:\n%s", out)
	}
}
