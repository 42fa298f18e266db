package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tallydb/tally/likes"
	"github.com/tallydb/tally/store"
)

// likesState dumps what the likes bad-input tests check is unchanged:
// counts, states, likers and the board of items 1-3 of video, and the
// businesses.
func likesState(t *testing.T, dir string) string {
	t.Helper()
	db, err := store.Open(dir, &store.Options{Families: likes.Families()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if !likes.Exists(db) {
		return "no likes"
	}
	l, err := likes.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintln(&b, l.Businesses())
	items := []uint64{1, 2, 3}
	c, _ := l.Counts("video", items, nil)
	s, _ := l.States("video", 10, items, nil)
	top, _ := l.Top("video", 10)
	pg, _ := l.Likers("video", 1, "", 100)
	fmt.Fprintln(&b, c, s, top, pg.IDs)
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestLikesCommands(t *testing.T) {
	t.Setenv("TALLY_DIR", "")
	d := "-d=" + filepath.Join(t.TempDir(), "db")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"business", "add", "video"}, ""},
		{[]string{"business", "list"}, "video\n"},
		{[]string{"like", "video", "1", "10", "--owner", "7"}, "1 likes=1 dislikes=0\n"},
		{[]string{"like", "video", "1", "10"}, "1 likes=1 dislikes=0\n"},
		{[]string{"like", "video", "1", "11"}, "1 likes=2 dislikes=0\n"},
		{[]string{"like", "video", "2", "10"}, "2 likes=1 dislikes=0\n"},
		{[]string{"dislike", "video", "1", "11"}, "1 likes=1 dislikes=1\n"},
		{[]string{"undislike", "video", "1", "11"}, "1 likes=1 dislikes=0\n"},
		{[]string{"dislike", "video", "3", "10"}, "3 likes=0 dislikes=1\n"},
		{[]string{"unlike", "video", "3", "10"}, "3 likes=0 dislikes=1\n"},
		{[]string{"likes", "video", "1", "2", "3", "4"}, "1 likes=1 dislikes=0\n2 likes=1 dislikes=0\n3 likes=0 dislikes=1\n4 likes=0 dislikes=0\n"},
		{[]string{"liked", "video", "10", "1", "3", "4"}, "1 like\n3 dislike\n4 none\n"},
		{[]string{"likers", "video", "1"}, "10\nend\n"},
		{[]string{"likers", "video", "3", "--dislikes"}, "10\nend\n"},
		{[]string{"user-likes", "video", "10", "--limit", "5"}, "2\n1\nend\n"},
		{[]string{"top", "video"}, "1 1 1\n1 2 1\n"},
		{[]string{"top", "video", "1"}, "1 1 1\n"},
		{[]string{"likes", "nobiz", "1"}, "1 likes=0 dislikes=0\n"},
		{[]string{"top", "nobiz"}, ""},
		// --json prints what the RESP form replies.
		{[]string{"--json", "likes", "video", "1", "4"}, `[{"dislikes":0,"likes":1},{"dislikes":0,"likes":0}]` + "\n"},
		{[]string{"likers", "video", "1", "--json"}, "[null,[10]]\n"},
		{[]string{"--json", "rank", "video", "1", "9"}, `[{"likes":1,"rank":1},null]` + "\n"},
	} {
		if got := mustTally(t, append([]string{d}, c.args...)...); got != c.want {
			t.Errorf("tally %s:\n%s\nwant\n%s", strings.Join(c.args, " "), got, c.want)
		}
	}
	// Pages: likers of 1 from 5 users, 2 at a time.
	for u := 20; u < 24; u++ {
		mustTally(t, d, "like", "video", "1", fmt.Sprint(u))
	}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		args := []string{d, "likers", "video", "1", "--limit", "2"}
		if cursor != "" {
			args = append(args, "--cursor", cursor)
		}
		lines := strings.Split(strings.TrimSpace(mustTally(t, args...)), "\n")
		last := lines[len(lines)-1]
		got = append(got, lines[:len(lines)-1]...)
		if last == "end" {
			break
		}
		next, ok := strings.CutPrefix(last, "next ")
		if !ok || pages > 5 {
			t.Fatalf("page ends with %q", last)
		}
		cursor = next
	}
	if strings.Join(got, ",") != "10,20,21,22,23" {
		t.Fatalf("likers pages %v", got)
	}
	today := strings.Fields(mustTally(t, d, "top", "video", "--day", time.Now().UTC().Format(time.DateOnly)))
	if len(today) == 0 || today[0] != "1" {
		t.Fatalf("top today: %v", today)
	}
	if out := mustTally(t, d, "stats"); !strings.Contains(out, "likes.businesses 1\n") {
		t.Fatalf("stats: %s", out)
	}
	if out := mustTally(t, d, "verify"); !strings.Contains(out, "likes_businesses 1\n") {
		t.Fatalf("verify: %s", out)
	}
}

func TestLikesBadInput(t *testing.T) {
	t.Setenv("TALLY_DIR", "")
	dir := filepath.Join(t.TempDir(), "db")
	d := "-d=" + dir
	mustTally(t, d, "business", "add", "video")
	mustTally(t, d, "like", "video", "1", "10", "--owner", "7")
	mustTally(t, d, "like", "video", "1", "11")
	cur := strings.TrimPrefix(strings.Split(strings.TrimSpace(mustTally(t, d, "likers", "video", "1", "--limit", "1")), "\n")[1], "next ")
	before := likesState(t, dir)
	csv := writeFile(t, "video,1,12\nvideo,oops,3\n")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"like", "video", "1"}, exitUsage, "want BIZ ITEM USER"},
		{[]string{"like", "video", "1", "x"}, exitUsage, "bad user"},
		{[]string{"like", "video", "-1", "2"}, exitUsage, `bad item "-1"`},
		{[]string{"like", "video", "1.5", "2"}, exitUsage, "bad item"},
		{[]string{"like", "video", "1", "2", "--owner", "z"}, exitUsage, "bad owner"},
		{[]string{"like", "bad biz", "1", "2"}, exitError, "invalid business name"},
		{[]string{"like", strings.Repeat("v", 59), "1", "2"}, exitError, "invalid business name"},
		{[]string{"like", "video", "1", "12", "--owner", "8"}, exitError, "another owner"},
		{[]string{"like", "videos", "1", "12"}, exitError, `likes: unknown business "videos" (businesses: video)`},
		{[]string{"dislike", "videos", "1", "12"}, exitError, "unknown business"},
		{[]string{"business", "add", "a b"}, exitError, "invalid business name"},
		{[]string{"business", "add", "x", "--keep-hot"}, exitUsage, "unknown flag -keep-hot"},
		{[]string{"business", "add", "x", "--range-bits", "60"}, exitError, "range bits"},
		{[]string{"business", "add"}, exitUsage, "missing BIZ"},
		{[]string{"business", "list", "x"}, exitUsage, `takes no arguments, got "x"`},
		{[]string{"dislike", "-v", "1", "2"}, exitUsage, ""},
		{[]string{"unlike", "video", "1", "2", "3"}, exitUsage, "want BIZ ITEM USER"},
		{[]string{"likes", "video"}, exitUsage, "want BIZ ITEM"},
		{[]string{"likes", "vi deo", "1"}, exitError, "invalid business name"},
		{[]string{"liked", "video", "10"}, exitUsage, "want BIZ USER ITEM"},
		{[]string{"liked", "video", "ten", "1"}, exitUsage, "bad user"},
		{[]string{"likers", "video", "1", "--limit", "0"}, exitError, "limit out of range"},
		{[]string{"likers", "video", "1", "--limit", "1001"}, exitError, "limit out of range"},
		{[]string{"likers", "video", "1", "--cursor", "nope"}, exitError, "bad cursor"},
		{[]string{"likers", "video", "2", "--cursor", cur}, exitError, "bad cursor"},
		{[]string{"likers", "video", "1", "--cursor", cur, "--dislikes"}, exitError, "bad cursor"},
		{[]string{"user-likes", "video", "10", "--cursor", cur}, exitError, "bad cursor"},
		{[]string{"user-likes", "video"}, exitUsage, "want BIZ USER"},
		{[]string{"top"}, exitUsage, "want BIZ [N]"},
		{[]string{"top", "video", "0"}, exitError, "limit out of range"},
		{[]string{"top", "video", "1001"}, exitError, "limit out of range"},
		{[]string{"top", "video", "ten"}, exitUsage, `bad n "ten"`},
		{[]string{"top", "video", "--day", "2024-13-01"}, exitUsage, `bad day "2024-13-01"`},
		{[]string{"top", "video", "--day", "2001-01-01"}, exitError, "day board not kept"},
		{[]string{"likes", "load"}, exitUsage, "want FILE"},
		{[]string{"likes", "load", csv}, exitError, "nothing loaded"},
		{[]string{"likes", "load", filepath.Join(t.TempDir(), "missing.csv")}, exitError, "no such file"},
	} {
		_, errOut, code := tally(t, append([]string{d}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.msg) {
			t.Errorf("tally %s: exit %d, stderr %q; want exit %d with %q", strings.Join(c.args, " "), code, errOut, c.code, c.msg)
		}
		if after := likesState(t, dir); after != before {
			t.Fatalf("tally %s changed the store:\n%s\nwas\n%s", strings.Join(c.args, " "), after, before)
		}
	}
	// Reads of a store without likes create nothing.
	counters := newStore(t)
	for _, args := range [][]string{{"likes", "video", "1"}, {"liked", "video", "1", "2"}, {"likers", "video", "1"}, {"user-likes", "video", "1"}, {"top", "video"}, {"unlike", "video", "1", "2"}} {
		mustTally(t, append([]string{"-d=" + counters}, args...)...)
	}
	if s := likesState(t, counters); s != "no likes" {
		t.Fatalf("reads created likes: %s", s)
	}
}

func TestLikesLoadCommand(t *testing.T) {
	t.Setenv("TALLY_DIR", "")
	dir := filepath.Join(t.TempDir(), "db")
	d := "-d=" + dir
	csv := writeFile(t, "# business,item,user,time\nvideo,1,10,1700000000\nvideo,1,11\n\nvideo,2,10,2024-05-01T12:00:00Z\npost,5,10\nvideo,1,10\nvideo,1,x\nvideo,1,12,1700000000000\n")
	out, errOut, code := tally(t, d, "likes", "load", csv)
	if code != exitError || !strings.Contains(errOut, ":8: user") || !strings.Contains(errOut, ":9: time") || !strings.Contains(errOut, "nothing loaded") {
		t.Fatalf("bad lines: exit %d\n%s\n%s", code, out, errOut)
	}
	if s := likesState(t, dir); s != "no likes" {
		t.Fatalf("a refused load left %s", s)
	}
	out = mustTally(t, d, "likes", "load", csv, "--skip-bad")
	sum := summary(t, out)
	for k, v := range map[string]string{"input_likes": "5", "businesses": "2", "added": "4", "unchanged": "1", "bad_lines": "2", "items": "3"} {
		if sum[k] != v {
			t.Errorf("%s = %q, want %s\n%s", k, sum[k], v, out)
		}
	}
	if got := mustTally(t, d, "likes", "video", "1", "2"); got != "1 likes=2 dislikes=0\n2 likes=1 dislikes=0\n" {
		t.Fatal(got)
	}
	if got := mustTally(t, d, "user-likes", "video", "10"); got != "2\n1\nend\n" {
		t.Fatalf("user 10's likes, newest first: %q", got)
	}
	defer func(r io.Reader) { stdin = r }(stdin)
	stdin = strings.NewReader("video,3,10\n")
	if sum := summary(t, mustTally(t, d, "likes", "load", "-")); sum["added"] != "1" {
		t.Fatal(sum)
	}
}

// TestServeLikes checks that tally serve registers the LIKE.* commands and
// that what they write is there after a clean shutdown.
func TestServeLikes(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns tally serve")
	}
	dir := filepath.Join(t.TempDir(), "db")
	p := startServe(t, "-d", dir, "--create")
	rc := p.client(t)
	ctx := context.Background()
	if err := rc.Do(ctx, "LIKE.BUSINESS", "ADD", "video").Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := rc.Do(ctx, "LIKE.LIKE", "video", 1, 10, 7).Slice(); err != nil || len(v) != 6 || v[0] != "likes" || v[1] != int64(1) {
		t.Fatalf("LIKE.LIKE = %v, %v", v, err)
	}
	if v, err := rc.Do(ctx, "LIKE.STATES", "video", 10, 1, 2).StringSlice(); err != nil || strings.Join(v, ",") != "like,none" {
		t.Fatalf("LIKE.STATES = %v, %v", v, err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("serve exit %d: %s", code, p.stderr)
	}
	if got := mustTally(t, "-d", dir, "likes", "video", "1"); got != "1 likes=1 dislikes=0\n" {
		t.Fatalf("after serve: %q", got)
	}
}

// rank and received: the CLI forms of LIKE.RANK and LIKE.RECEIVED.
func TestRankAndReceived(t *testing.T) {
	t.Setenv("TALLY_DIR", "")
	d := "-d=" + filepath.Join(t.TempDir(), "db")
	mustTally(t, d, "business", "add", "video")
	mustTally(t, d, "like", "video", "1", "10", "--owner", "7")
	mustTally(t, d, "like", "video", "1", "11")
	mustTally(t, d, "like", "video", "2", "10", "--owner", "8")
	mustTally(t, d, "like", "video", "3", "12", "--owner", "8")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"rank", "video", "1", "2", "3", "4"}, "1 1 2\n2 2 1\n3 2 1\n4 none\n"},
		{[]string{"rank", "music", "1"}, "1 none\n"}, // an undeclared business reads as empty
		{[]string{"received", "7", "8", "9"}, "7 2\n8 2\n9 0\n"},
		{[]string{"set-owner", "video", "1", "9"}, "1 likes=2 dislikes=0\n"},
		{[]string{"received", "7", "9"}, "7 0\n9 2\n"},
	} {
		if got := mustTally(t, append([]string{d}, c.args...)...); got != c.want {
			t.Errorf("tally %v = %q, want %q", c.args, got, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"rank", "video"}, exitUsage},
		{[]string{"rank", "video", "x"}, exitUsage},
		{[]string{"rank", "video", "1", "--day", "yesterday"}, exitUsage},
		{[]string{"received"}, exitUsage},
		{[]string{"received", "-3"}, exitUsage},
		{[]string{"set-owner", "video", "1"}, exitUsage},
		{[]string{"set-owner", "videos", "1", "2"}, exitError},
	} {
		if _, _, code := tally(t, append([]string{d}, c.args...)...); code != c.code {
			t.Errorf("tally %v: exit %d, want %d", c.args, code, c.code)
		}
	}
}
