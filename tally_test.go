package tally

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tallydb/tally/internal/testutil"
	"github.com/tallydb/tally/likes"
	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/timeline"
	"github.com/tallydb/tally/unread"
)

// open opens a database in dir with background work off (tests run jobs
// themselves), closed and checked at cleanup.
func open(t *testing.T, dir string, readOnly bool) *DB {
	t.Helper()
	db, err := Open(dir, &Options{
		Store:    &store.Options{Durability: store.NoSync, DisableBackground: true, ReadOnly: readOnly},
		Timeline: &timeline.Options{ExpireInterval: -1},
		Likes:    &likes.Options{CreateBusinesses: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// ok fails the test on a call's error: ok(t)(tl.Follow(1, 2)).
func ok(t *testing.T) func(any, error) any {
	return func(v any, err error) any {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func feed(t *testing.T, db *DB, user uint64) uint64 {
	t.Helper()
	return ok(t)(db.Unread().Feed(user)).(uint64)
}

// TestOpenWiresEveryPackage: follows and posts through the one handle keep
// unread's feed exact across a reopen, and Check covers every package.
func TestOpenWiresEveryPackage(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, false)
	if got := len(db.Packages()); got != 3 {
		t.Fatalf("%d packages open, want 3", got)
	}
	tl := db.Timeline()
	ok(t)(tl.Follow(1, 20))
	ok(t)(tl.Publish(20, 2001))
	ok(t)(tl.Publish(20, 2002))
	if n := feed(t, db, 1); n != 2 {
		t.Fatalf("feed %d, want 2", n)
	}
	ok(t)(tl.Unfollow(1, 20))
	ok(t)(tl.Follow(1, 21))
	ok(t)(tl.Publish(21, 2003))
	if n := feed(t, db, 1); n != 1 {
		t.Fatalf("feed after unfollow 20, follow 21 and a post of 21: %d, want 1", n)
	}
	ok(t)(db.Likes().Like("video", 2003, 1, 21))
	if err := db.Check(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open(t, dir, false)
	if n := feed(t, db, 1); n != 1 {
		t.Fatalf("feed after reopen: %d, want 1", n)
	}
	names := map[string]bool{}
	for _, ps := range db.PackageStats() {
		names[ps.Name] = len(ps.Stats) > 0
	}
	if !names["timeline"] || !names["unread"] || !names["likes"] {
		t.Fatalf("package stats %v", names)
	}
	if err := db.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestTimelineAloneCannotDesyncUnread is the repro: a program that
// opens only timeline on a store holding unread data and changes the
// follow graph. Before, the changes went through and unread's feed kept
// counting the unfollowed account (and none of the new one) while verify
// said ok. Now the changes are refused and nothing is written.
func TestTimelineAloneCannotDesyncUnread(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, false)
	ok(t)(db.Timeline().Follow(1, 20))
	ok(t)(db.Timeline().Publish(20, 1999))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	sdb, err := store.Open(dir, &store.Options{Families: Families(), DisableBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := timeline.New(sdb, &timeline.Options{ExpireInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if got := tl.RequiredObservers(); len(got) != 1 || got[0] != "unread" {
		t.Fatalf("required observers %v", got)
	}
	if _, err := tl.Unfollow(1, 20); !errors.Is(err, timeline.ErrObserverMissing) {
		t.Fatalf("Unfollow without unread: %v, want ErrObserverMissing", err)
	}
	if _, err := tl.Follow(1, 21); !errors.Is(err, timeline.ErrObserverMissing) {
		t.Fatalf("Follow without unread: %v, want ErrObserverMissing", err)
	}
	if _, err := tl.LoadFollows(context.Background(), []timeline.Edge{{Follower: 5, Followee: 6}}, nil); !errors.Is(err, timeline.ErrObserverMissing) {
		t.Fatalf("Load without unread: %v, want ErrObserverMissing", err)
	}
	// Publishing needs no observer (unread reads post counts).
	ok(t)(tl.Publish(21, 2001))
	if ok, err := tl.IsFollowing(1, 20); err != nil || !ok {
		t.Fatalf("a refused unfollow changed the graph: %v %v", ok, err)
	}
	// Adding unread on the same Timeline lifts the refusal.
	x, err := unread.New(sdb, &unread.Options{Graph: tl})
	if err != nil {
		t.Fatal(err)
	}
	ok(t)(tl.Unfollow(1, 20))
	ok(t)(tl.Follow(1, 21))
	ok(t)(tl.Publish(21, 2002))
	if n := ok(t)(x.Feed(1)).(uint64); n != 1 {
		t.Fatalf("feed %d, want 1 (2002 only)", n)
	}
	tl.Close()
	if err := sdb.Close(); err != nil {
		t.Fatal(err)
	}
	db = open(t, dir, true)
	if err := db.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestReadOnlyOpen: a read-only Open of a counters-only store opens no
// package and writes nothing; of a full store, every package.
func TestReadOnlyOpen(t *testing.T) {
	dir := t.TempDir()
	sdb, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sdb.CreateCounter("posts", store.CounterOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := sdb.Close(); err != nil {
		t.Fatal(err)
	}
	before := listing(t, dir)
	db := open(t, dir, true)
	if db.Timeline() != nil || db.Unread() != nil || db.Likes() != nil || len(db.Packages()) != 0 {
		t.Fatalf("a read-only open of a counters-only store opened packages: %v", db.Packages())
	}
	if err := db.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if after := listing(t, dir); after != before {
		t.Fatalf("a read-only open wrote:\nbefore %s\nafter  %s", before, after)
	}

	db = open(t, dir, false)
	ok(t)(db.Timeline().Follow(1, 2))
	ok(t)(db.Likes().Like("video", 7, 1, 0))
	db.Close()
	db = open(t, dir, true)
	if db.Timeline() == nil || db.Unread() == nil || db.Likes() == nil {
		t.Fatal("a read-only open of a full store misses a package")
	}
	if ok, err := db.Timeline().IsFollowing(1, 2); err != nil || !ok {
		t.Fatalf("read-only follow graph: %v %v", ok, err)
	}
}

// listing names every file in dir with its modification time.
func listing(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, "LOCK") { // taking a lock touches its file
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		b.WriteString(strings.TrimPrefix(p, dir) + " " + fi.ModTime().String() + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestVerifyFindsPackageDamage damages each package's data the way a
// client writing package counters directly did (through plain counter
// writes), and expects Verify to name the package.
func TestVerifyFindsPackageDamage(t *testing.T) {
	for _, tc := range []struct {
		pkg     string
		counter string
		column  string
		id      uint64
	}{
		{"timeline", timeline.UsersCounter, timeline.ColFollowers, 20},
		{"unread", unread.FeedCounter, "gen", 1},
		{"likes", "likes_video", "likes", 2003},
	} {
		t.Run(tc.pkg, func(t *testing.T) {
			dir := t.TempDir()
			db := open(t, dir, false)
			ok(t)(db.Timeline().Follow(1, 20))
			ok(t)(db.Timeline().Publish(20, 2003))
			ok(t)(db.Likes().Like("video", 2003, 1, 20))
			if err := db.Verify(context.Background()); err != nil {
				t.Fatalf("before the damage: %v", err)
			}
			c := ok(t)(db.Store().Counter(tc.counter)).(*store.Counter)
			ok(t)(c.Incr(tc.id, tc.column, 1000))
			err := db.Verify(context.Background())
			if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), tc.pkg+":") {
				t.Fatalf("Verify after damaging %s.%s: %v, want ErrCorrupt naming %s", tc.counter, tc.column, err, tc.pkg)
			}
			if err := db.Check(); err == nil {
				t.Fatal("Check after the damage: nil")
			}
		})
	}
}

// TestUpgradeFormat2Store opens a store written by the build before
// counter owners (testdata/format2-store.tar.gz, made with the tally
// command of commit 4bfc694: counter posts with likes 7=3; follow 1 20 21;
// post 20 2001; unread kind mention with 1=2; like video 2001 1 --owner
// 20; checkpoint). A read-only open changes nothing; the first writable
// open claims each package's counters for it and marks the store format
// 3; the data reads back the same, and the counters are private from then
// on.
func TestUpgradeFormat2Store(t *testing.T) {
	dir := t.TempDir()
	testutil.Untar(t, "testdata/format2-store.tar.gz", dir)
	owners := func(db *DB) map[string]string {
		m := map[string]string{}
		for _, ci := range db.Store().Counters() {
			m[ci.Name] = ci.Owner
		}
		return m
	}
	marker := func() string {
		b, err := os.ReadFile(filepath.Join(dir, "TALLY"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	db := open(t, dir, true)
	if got := owners(db); got["users"] != "" || got["likes_video"] != "" {
		t.Fatalf("a read-only open claimed counters: %v", got)
	}
	if err := db.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if m := marker(); m != "tally store format 2\n" {
		t.Fatalf("a read-only open rewrote the marker: %q", m)
	}

	db = open(t, dir, false)
	want := map[string]string{"posts": "", "users": "timeline", "unread_kinds": "unread", "unread_feed": "unread",
		"likes_video": "likes", "likes_received": "likes"}
	if got := owners(db); !maps.Equal(got, want) {
		t.Fatalf("owners after the upgrade %v, want %v", got, want)
	}
	check := func(db *DB) {
		t.Helper()
		if n := feed(t, db, 1); n != 1 {
			t.Errorf("feed of 1: %d, want 1", n)
		}
		if ok, err := db.Timeline().IsFollowing(1, 21); err != nil || !ok {
			t.Errorf("1 follows 21: %v %v", ok, err)
		}
		c, err := db.Likes().Counts("video", []uint64{2001}, nil)
		if err != nil || c[0].Likes != 1 {
			t.Errorf("likes of 2001: %v %v", c, err)
		}
		if v, err := db.Unread().Get(1, nil); err != nil || v[0] != 2 {
			t.Errorf("unread of 1: %v %v", v, err)
		}
		posts := ok(t)(db.Store().UserCounter("posts")).(*store.Counter)
		if v, err := posts.Get(7, nil); err != nil || v[0] != 3 {
			t.Errorf("posts 7: %v %v", v, err)
		}
		if _, err := db.Store().UserCounter("users"); !errors.Is(err, store.ErrReserved) {
			t.Errorf("UserCounter(users) after the upgrade: %v, want ErrReserved", err)
		}
	}
	check(db)
	if err := db.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if m := marker(); m != "tally store format 3\n" {
		t.Fatalf("marker after a writable open: %q", m)
	}
	db = open(t, dir, true)
	if got := owners(db); !maps.Equal(got, want) {
		t.Fatalf("owners after reopen %v, want %v", got, want)
	}
	check(db)
}

// TestDescribeJob: queued jobs are described in the user's words ("tally
// jobs" prints these), not as kinds and binary keys.
func TestDescribeJob(t *testing.T) {
	db, err := Open(t.TempDir(), &Options{
		Store: &store.Options{Durability: store.NoSync, DisableBackground: true, JobWorkers: -1},
		// A fan-out job of its own: a one-follower post is otherwise
		// delivered in its publish (issue 18).
		Timeline: &timeline.Options{ExpireInterval: -1, InlineFanout: -1, SharedFanout: -1},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tl := db.Timeline()
	ok(t)(tl.Follow(1, 21))
	ok(t)(tl.MarkActive(1)) // an active follower: the post has an inbox to reach
	ok(t)(tl.Publish(21, 2001))
	describe := func() []string {
		var got []string
		for _, j := range db.Store().QueuedJobs() {
			got = append(got, db.DescribeJob(j))
		}
		return got
	}
	if got, want := describe(), []string{"fan-out of post 2001 by user 21"}; !slices.Equal(got, want) {
		t.Fatalf("jobs described as %q, want %q", got, want)
	}
	if _, _, err := tl.Unpublish(21, 2001); err != nil {
		t.Fatal(err)
	}
	if got, want := describe(), []string{"removal of unpublished post 2001 from homes"}; !slices.Equal(got, want) {
		t.Fatalf("jobs described as %q, want %q", got, want)
	}
	if got := db.DescribeJob(store.JobInfo{Kind: "mystery", Key: []byte("k")}); got != `mystery job key "k"` {
		t.Fatalf("an unknown job described as %q", got)
	}
}

// The tools' view of counters: names in a package's namespace are refused
// whether or not the package made the counter yet, owned counters are
// refused, and the host's own are served and listed.
func TestUserCounters(t *testing.T) {
	db := open(t, t.TempDir(), false)
	sdb := db.Store()
	if err := sdb.CreateCounter("posts", store.CounterOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"users", "unread_kinds", "unread_feed", "likes_video", "likes_received"} {
		if err := CheckCounterName(name); !errors.Is(err, store.ErrReserved) {
			t.Errorf("CheckCounterName(%s): %v", name, err)
		}
		if _, err := UserCounter(sdb, name); !errors.Is(err, store.ErrReserved) {
			t.Errorf("UserCounter(%s): %v", name, err)
		}
	}
	if err := CheckCounterName("posts"); err != nil {
		t.Fatal(err)
	}
	if _, err := UserCounter(sdb, "posts"); err != nil {
		t.Fatal(err)
	}
	if _, err := UserCounter(sdb, "nope"); !errors.Is(err, store.ErrCounterNotFound) {
		t.Fatalf("UserCounter(nope): %v", err)
	}
	var names []string
	for _, ci := range UserCounters(sdb) {
		names = append(names, ci.Name)
	}
	if !slices.Equal(names, []string{"posts"}) {
		t.Fatalf("UserCounters = %v", names)
	}
}

// TestOpenSomePackages: Options.Packages opens only the named packages;
// a bad name or unread without timeline is refused before anything opens.
func TestOpenSomePackages(t *testing.T) {
	dir := t.TempDir()
	for _, bad := range [][]string{{"feeds"}, {"unread"}} {
		if _, err := Open(filepath.Join(dir, "bad"), &Options{Packages: bad}); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("Packages %v: %v", bad, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "bad")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused Open made the directory: %v", err)
	}
	db, err := Open(filepath.Join(dir, "db"), &Options{Packages: []string{"likes"}})
	if err != nil {
		t.Fatal(err)
	}
	if db.Likes() == nil || db.Timeline() != nil || db.Unread() != nil || len(db.Packages()) != 1 {
		t.Fatalf("Packages [likes]: %v %v %v", db.Likes(), db.Timeline(), db.Unread())
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(filepath.Join(dir, "db"), &Options{Packages: []string{"timeline"}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Timeline() == nil || db.Likes() != nil {
		t.Fatal("Packages [timeline]")
	}
	if _, err := db.Timeline().Follow(1, 2); err != nil {
		t.Fatal(err) // no unread data: the timeline alone may change the graph
	}
}
