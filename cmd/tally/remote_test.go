package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// remoteCase is one command line that TestRemoteSameOutput runs on an
// embedded store and, through the running server, on an identical served
// one.
type remoteCase struct {
	args []string
	// mask names the "key value" lines of stdout whose values
	// legitimately differ between a store opened for one command and a
	// live server (wall times, sequences, log and Pebble figures, what the
	// server's own Open recovered); their values are compared as "*". An
	// entry "*.KEY" masks every key ending in ".KEY"; "-KEY" drops the
	// line (printed only once there is a figure).
	mask []string
}

// statsMask are the lines of stats that describe the process, not the
// data: log, checkpoint, cache and Pebble figures, hot-table memory (a
// table rebuilt by recovery is smaller than one grown by writes), and the
// packages' figures since their Open.
var statsMask = []string{
	"last_seq", "checkpoint_seq", "log_records", "log_bytes", "disk_bytes", "table_bytes",
	"block_cache_hits", "block_cache_misses", "block_cache_hit_rate", "block_cache_bytes",
	"jobs_finished", "queue_finished",
	"pebble_flushes", "pebble_compactions", "pebble_read_amp", "pebble_l0_files", "pebble_compaction_debt",
	"mem_bytes", "bytes_per_row", "hot_bytes_per_row", "*.mem_bytes", "*.bytes_per_row", "*.hot_bytes_per_row",
	"unread.snapshot_cache_bytes", "unread.snapshot_cache_entries", "likes.ordinal_cache_bytes",
	// Counted since the package opened: a running server shows them, a
	// CLI that opened the store for the command leaves them out.
	"-timeline.deliveries", "-timeline.rebuilds", "-timeline.rebuild_mean", "-timeline.pages", "-timeline.expired",
	"-timeline.pulls", "-timeline.inbox_entries_read", "-likes.board_moves",
	"-unread.snapshot_cache_hits", "-unread.snapshot_cache_misses",
	"-likes.transitions", "-likes.groups", "-likes.max_group", "-likes.waited", "-likes.conversions",
	"-likes.ordinal_cache_hits", "-likes.ordinal_cache_misses",
	"-likes.state_gets", "-likes.item_gets", "-likes.dayscore_gets",
}

// loadMask are the wall-time lines of the load commands.
var loadMask = []string{"seconds", "rows_per_sec", "likes_per_sec"}

// remoteSetup builds both stores before the server starts; its last
// writable open of every package (follow) makes the package data the
// server's Open would create exist in both.
var remoteSetup = [][]string{
	{"counter", "add", "posts", "--range-bits", "40"},
	{"column", "add", "posts", "likes"},
	{"column", "add", "posts", "reposts", "--hint", "8", "--max", "64"},
	{"unread", "kind", "add", "mention"},
	{"follow", "1", "2", "3"},
	{"business", "add", "video"},
	{"like", "video", "7", "100"},
}

// remoteCases returns the command lines of TestRemoteSameOutput, in the
// order they run (each sees the state the previous ones left); files are
// the load inputs, in dir.
func remoteCases(t *testing.T, dir string) []remoteCase {
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rows := file("rows.csv", "100,5,1\n101,7,2\n# note\n102,0,0\n")
	badRows := file("bad.csv", "200,1,1\n201,x,1\n202,1\n")
	follows := file("follows.csv", "5,2\n6,2\n5,3\n")
	likesCSV := file("likes.csv", "video,9,100\nvideo,9,101,1700000000\nmusic,1,5\n")
	missing := filepath.Join(dir, "missing.csv")
	c := func(args ...string) remoteCase { return remoteCase{args: args} }
	return []remoteCase{
		// Counters and schema.
		c("counter", "add", "views"),
		c("counter", "list"),
		c("column", "add", "views", "n"),
		c("incr", "posts", "5", "likes", "3"),
		c("incr", "posts", "5.likes", "-1"),
		c("incr", "posts", "6", "likes", "1", "--source", "k", "--seq", "1"),
		c("incr", "posts", "6", "likes", "1", "--source", "k", "--seq", "1"),
		c("set", "posts", "7", "1", "2"),
		c("get", "posts", "5", "6", "7", "7.reposts", "99"),
		c("delete", "posts", "7"),
		c("get", "posts", "7"),
		{args: []string{"load", "posts", rows}, mask: loadMask},
		c("load", "posts", badRows),
		{args: []string{"load", "posts", badRows, "--skip-bad"}, mask: loadMask},
		c("get", "posts", "100", "101", "102", "200"),
		// Timelines.
		c("follow", "4", "2"),
		c("unfollow", "1", "3"),
		{args: []string{"follows", "load", follows}, mask: loadMask},
		c("active", "1", "4", "5"),
		c("post", "2", "1001", "1002"),
		c("post", "3", "1003"),
		c("unpost", "2", "1002"),
		c("repost", "3", "2", "1001", "2001"),
		c("home", "1", "--types", "repost"),
		c("home", "1"),
		c("home", "5", "--limit", "1"),
		c("user", "1", "2", "3"),
		c("followers", "2"),
		c("followees", "5"),
		c("is-following", "5", "2", "3"),
		c("mute", "1", "2", "4"),
		c("mute", "1", "1"),
		c("home", "1"),
		c("muted", "1"),
		c("muted", "1", "--limit", "1"),
		c("unmute", "1", "2"),
		c("hide", "2", "1", "5"),
		c("hidden", "2"),
		c("hidden", "2", "--limit", "1"),
		c("home", "5"),
		c("unhide", "2", "5"),
		c("posts", "2"),
		c("posts", "2", "--limit", "1"),
		c("timeline", "config"),
		c("timeline", "config", "--inbox-cap", "500"),
		c("timeline", "expire"),
		// The cross-shard messages refuse to run on one shard.
		c("timeline", "xfollower", "2", "7", "2", "1"),
		c("timeline", "xbackfill", "7", "1", "3001", "0", "0", "0"),
		c("timeline", "xpublish", "7", "0", "0", "0", "3002"),
		c("timeline", "xunpublish", "7", "3002"),
		c("timeline", "xhide", "7", "1", "1"),
		c("timeline", "xsubscribe", "2", "1001", "2"),
		c("timeline", "xgone", "7", "3002"),
		// Likes.
		c("business", "add", "clips", "--hot-ranges", "2"),
		c("business", "list"),
		// --json travels with the command to the server.
		c("--json", "business", "list"),
		c("--json", "user", "1", "2"),
		c("like", "clips", "1", "2"),
		c("like", "video", "7", "101"),
		c("like", "video", "7", "102", "--owner", "9"),
		c("dislike", "video", "8", "101"),
		c("unlike", "video", "7", "102"),
		c("undislike", "video", "8", "101"),
		c("dislike", "video", "8", "103"),
		c("likes", "video", "7", "8", "9"),
		c("liked", "video", "101", "7", "8"),
		c("likers", "video", "7"),
		c("likers", "video", "8", "--dislikes"),
		c("user-likes", "video", "101"),
		c("top", "video", "5"),
		c("rank", "video", "7", "8"),
		c("received", "9", "10"),
		c("set-owner", "video", "7", "10"),
		c("received", "9", "10"),
		// One shard's parts of the gathered reads.
		c("likes-part", "top", "video", "5"),
		c("likes-part", "above", "video", "0", "1"),
		c("likes-part", "scores", "video", "7", "8"),
		c("likes-part", "user-likes", "video", "555", "--limit", "5"), // a user with no likes: the times would differ between runs
		c("likes-part", "received", "9", "10"),
		{args: []string{"likes", "load", likesCSV}, mask: loadMask},
		c("top", "music"),
		// Unread.
		c("unread", "kind", "add", "reply"),
		c("unread", "kind", "list"),
		c("unread", "incr", "1", "mention", "2"),
		c("unread", "incr", "1", "reply"),
		c("unread", "get", "1", "2"),
		c("unread", "reset", "1", "mention"),
		c("unread", "get", "1"),
		c("unread", "forget", "1", "2"),
		c("unread", "feed", "1", "4", "5"),
		c("unread", "feed-reset", "1"),
		c("unread", "feed", "1"),
		c("dot", "mark", "activity"),
		c("dot", "has", "1", "activity"),
		c("dot", "clear", "1", "activity"),
		c("dot", "has", "1", "activity"),
		c("notice", "post", "system", "5"),
		c("notice", "read", "1", "system"),
		c("notice", "post", "system", "6"),
		c("notice", "unread", "1", "system"),
		// Maintenance.
		c("jobs"),
		c("jobs", "wait"),
		{args: []string{"checkpoint"}, mask: []string{"checkpoint_seq"}},
		{args: []string{"compact"}, mask: []string{"seconds", "jobs_finished"}},
		{args: []string{"compact", "--disk"}, mask: []string{"seconds", "jobs_finished", "table_bytes_before", "table_bytes"}},
		c("verify"),
		{args: []string{"stats"}, mask: statsMask},
		// replay reports what an Open recovered: the server's own, at
		// its start.
		{args: []string{"replay"}, mask: []string{"checkpoint_seq", "chunks_loaded", "rows_loaded", "records_replayed", "last_seq", "duration"}},
		// Bad input: the same errors and exit codes 1 and 2.
		c("incr", "posts"),
		c("incr", "nosuch", "1", "likes"),
		c("incr", "posts", "1", "nosuch"),
		c("get", "posts", "x"),
		c("set", "posts", "1", "2"),
		c("counter", "add", "posts"),
		c("counter", "add", "users"),
		c("column", "add", "posts", "likes"),
		c("delete", "posts"),
		c("load", "posts", missing),
		c("load", "posts"),
		c("follow", "1", "1"),
		c("follow", "x", "1"),
		c("home", "1", "--limit", "-1"),
		c("like", "no such!", "1", "2"),
		c("like", "videos", "1", "2"),
		c("business", "add", "video"),
		c("business", "add", "bad name"),
		c("likes", "nosuchbiz", "1"),
		c("unread", "incr", "1", "nosuch"),
		c("unread", "kind", "add", "mention"),
		c("dot", "mark"),
		c("dot", "has", "1", "a.b"),
		c("unread", "get", "1", "x"),
		c("unread", "kind", "add", "x", "--hint", "12"),
		c("notice", "post", "system", "0"),
		c("verify", "extra"),
		c("stats", "--bogus"),
		c("jobs", "wait", "x"),
		c("checkpoint", "x"),
		c("compact", "--bytes-per-sec", "-1"),
		c("compact", "--disk", "x"),
		c("replay", "x"),
		c("incr", "-h"),
		c("counter", "nosuch"),
		c("frobnicate"),
	}
}

// normalize replaces the store directories by DIR and the masked values
// by "*".
func normalize(out string, dirs []string, mask []string) string {
	for _, d := range dirs {
		out = strings.ReplaceAll(out, d, "DIR")
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		k, _, ok := strings.Cut(l, " ")
		switch {
		case !ok:
		case slices.Contains(mask, "-"+k):
			continue
		case slices.Contains(mask, k) || slices.ContainsFunc(mask, func(m string) bool {
			return strings.HasPrefix(m, "*.") && strings.HasSuffix(k, m[1:])
		}):
			l = k + " *"
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n")
}

// lineDiff returns the lines of a and b that the other lacks.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out strings.Builder
	for _, l := range al {
		if !slices.Contains(bl, l) {
			fmt.Fprintf(&out, "- %s\n", l)
		}
	}
	for _, l := range bl {
		if !slices.Contains(al, l) {
			fmt.Fprintf(&out, "+ %s\n", l)
		}
	}
	if out.Len() == 0 {
		return "(the same lines, in another order)"
	}
	return out.String()
}

// TestRemoteSameOutput runs every command of the command table on an
// embedded store and, while tally serve holds an identical one, through
// the server (TALLY.EXEC), and compares stdout, stderr and exit codes.
func TestRemoteSameOutput(t *testing.T) {
	t.Setenv("TALLY_DIR", "")
	t.Setenv("TALLY_PASSWORD", "")
	base := t.TempDir()
	local, remote := filepath.Join(base, "local"), filepath.Join(base, "served")
	for _, args := range remoteSetup {
		mustTally(t, append([]string{"-d", local}, args...)...)
		mustTally(t, append([]string{"-d", remote}, args...)...)
	}
	p := startServe(t, "-d", remote)
	cases := remoteCases(t, base)

	// Every command that can reach a store is covered.
	for _, c := range commands {
		if c.local {
			continue
		}
		if !slices.ContainsFunc(cases, func(rc remoteCase) bool {
			got, _, err := lookup(rc.args)
			return err == nil && got == c
		}) {
			t.Errorf("command %q has no case in remoteCases", c.name)
		}
	}

	for _, rc := range cases {
		lo, le, lc := tally(t, append([]string{"-d", local}, rc.args...)...)
		ro, re, rcode := tally(t, append([]string{"-d", remote}, rc.args...)...)
		dirs := []string{local, remote}
		lo, ro = normalize(lo, dirs, rc.mask), normalize(ro, dirs, rc.mask)
		le, re = normalize(le, dirs, nil), normalize(re, dirs, nil)
		if lo != ro || le != re || lc != rcode {
			t.Errorf("tally %s: embedded exit %d, served exit %d; lines that differ (embedded, served):\n%s",
				strings.Join(rc.args, " "), lc, rcode, lineDiff(lo+le, ro+re))
		}
		if strings.Contains(re, "locked") {
			t.Fatalf("tally %s did not reach the server: %s", strings.Join(rc.args, " "), re)
		}
	}

	// The commands ran in the server: its store holds what they wrote.
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("serve exited %d: %s", code, p.stderr)
	}
	if _, err := os.Stat(filepath.Join(remote, addrFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s after shutdown: %v", addrFile, err)
	}
	for _, args := range [][]string{{"get", "posts", "5", "6", "100"}, {"home", "1"}, {"unread", "get", "1"}, {"top", "video"}} {
		if l, r := mustTally(t, append([]string{"-d", local}, args...)...),
			mustTally(t, append([]string{"-d", remote}, args...)...); l != r {
			t.Errorf("tally %s after serve: %q, embedded store %q", strings.Join(args, " "), r, l)
		}
	}
}

// TestRemoteRefused: what cannot run inside the server fails with a named
// error, and changes nothing.
func TestRemoteRefused(t *testing.T) {
	t.Setenv("TALLY_DIR", "")
	t.Setenv("TALLY_PASSWORD", "")
	dir := newStore(t)
	p := startServe(t, "-d", dir)
	before, _, _ := tally(t, "-d", dir, "get", "posts", "1", "5", "9")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"load", "posts", "-"}, "FILE - (stdin is not sent to the server"},
		{[]string{"likes", "load", "-"}, "FILE - (stdin"},
		{[]string{"follows", "load", "-"}, "FILE - (stdin"},
		{[]string{"--durability", "nosync", "incr", "posts", "1", "likes"}, `--durability "nosync" (the server's durability applies`},
		{[]string{"incr", "--durability", "interval", "posts", "1", "likes"}, `--durability "interval"`},
		{[]string{"compact", "--bytes-per-sec", "1000"}, "--bytes-per-sec (the server's compaction pace applies)"},
		// serve runs here, never in the server: the lock refuses it.
		{[]string{"serve", "--addr", "127.0.0.1:0"}, "directory is locked"},
	} {
		_, errOut, code := tally(t, append([]string{"-d", dir}, tc.args...)...)
		if code != exitError || !strings.Contains(errOut, tc.want) {
			t.Errorf("tally %s: exit %d, stderr %q; want 1 and %q", strings.Join(tc.args, " "), code, errOut, tc.want)
		}
		if tc.args[0] != "serve" && !strings.Contains(errOut, errNotRemote.Error()) {
			t.Errorf("tally %s: stderr %q does not name %q", strings.Join(tc.args, " "), errOut, errNotRemote)
		}
	}
	// Sent by another client, serve and demo are refused by the server
	// (a serve inside the server would hold the connection until a signal).
	for _, name := range []string{"serve", "demo"} {
		res, err := p.client(t).Do(context.Background(), "TALLY.EXEC", dir, "/", name).Slice()
		if err != nil || len(res) != 3 || res[0] != int64(exitError) ||
			res[2] != fmt.Sprintf("%v: %s runs in the CLI only\n", errNotRemote, name) {
			t.Errorf("TALLY.EXEC %s: %q, %v", name, res, err)
		}
	}
	if after, _, _ := tally(t, "-d", dir, "get", "posts", "1", "5", "9"); after != before {
		t.Fatalf("store changed: %q, was %q", after, before)
	}

	// A relative FILE is the client's: read from its working directory.
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "rows.csv"), []byte("1,4,0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(work)
	if out := mustTally(t, "-d", dir, "load", "posts", "rows.csv"); !strings.Contains(out, "input_rows 1\n") {
		t.Fatalf("load of a relative path: %q", out)
	}
	_, errOut, code := tally(t, "-d", dir, "load", "posts", "nosuch.csv")
	if code != exitError || errOut != "tally: open nosuch.csv: no such file or directory\n" {
		t.Fatalf("load of a missing relative path: exit %d, %q", code, errOut)
	}
	// The command's own -d (after its name) finds the server too.
	if out := mustTally(t, "get", "-d", dir, "posts", "1.reposts"); out != "1.reposts 4\n" {
		t.Fatalf("get with the command's -d: %q", out)
	}
	// With TALLY_DIR served, a command's own -d naming another store
	// runs here, on that store.
	other := filepath.Join(t.TempDir(), "other")
	mustTally(t, "-d", other, "counter", "add", "posts")
	mustTally(t, "-d", other, "column", "add", "posts", "reposts")
	t.Setenv("TALLY_DIR", dir)
	if out := mustTally(t, "incr", "-d", other, "posts", "1", "reposts", "7"); out != "7\n" {
		t.Fatalf("incr with -d of an unserved store: %q", out)
	}
	if out := mustTally(t, "get", "posts", "1.reposts"); out != "1.reposts 4\n" {
		t.Fatalf("served store after an incr of another: %q", out)
	}
	if out := mustTally(t, "get", "-d", dir, "posts", "1.reposts"); out != "1.reposts 4\n" {
		t.Fatalf("get with -d of the served store: %q", out)
	}
	_ = p
}

// TestRemoteAuth: against a server with a password the CLI needs it
// (TALLY_PASSWORD or --password); without it the server's NOAUTH is the
// error.
func TestRemoteAuth(t *testing.T) {
	t.Setenv("TALLY_DIR", "")
	t.Setenv("TALLY_PASSWORD", "")
	dir := newStore(t)
	p := startServe(t, "-d", dir, "--requirepass", "s3cret")
	fi, err := os.Stat(filepath.Join(dir, addrFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s mode %v, want 0600", addrFile, fi.Mode().Perm())
	}
	_, errOut, code := tally(t, "-d", dir, "get", "posts", "5")
	if code != exitError || !strings.Contains(errOut, "NOAUTH") || !strings.Contains(errOut, "TALLY_PASSWORD") {
		t.Fatalf("without a password: exit %d, %q", code, errOut)
	}
	_, errOut, code = tally(t, "-d", dir, "--password", "wrong", "get", "posts", "5")
	if code != exitError || !strings.Contains(errOut, "WRONGPASS") {
		t.Fatalf("with a wrong password: exit %d, %q", code, errOut)
	}
	const want = "5 reposts=3 likes=300\n"
	if out := mustTally(t, "-d", dir, "--password", "s3cret", "get", "posts", "5"); out != want {
		t.Fatalf("with --password: %q", out)
	}
	t.Setenv("TALLY_PASSWORD", "s3cret")
	if out := mustTally(t, "-d", dir, "get", "posts", "5"); out != want {
		t.Fatalf("with TALLY_PASSWORD: %q", out)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("serve exited %d: %s", code, p.stderr)
	}
	// Stopped, the server left no address behind: the CLI opens the store.
	if out := mustTally(t, "-d", dir, "get", "posts", "5"); out != want {
		t.Fatalf("after serve: %q", out)
	}
}

// TestRemoteStaleAddress: an address file left by a killed server (nothing
// listens there) or one whose port another server now holds is ignored
// when the store is free, and named with the lock error when not.
func TestRemoteStaleAddress(t *testing.T) {
	t.Setenv("TALLY_DIR", "")
	t.Setenv("TALLY_PASSWORD", "")
	dir := newStore(t)
	other := newStore(t)
	p := startServe(t, "-d", other)
	// A port another program took since: it answers, but not RESP.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			c.Close()
		}
	}()
	for _, addr := range []string{"127.0.0.1:1", p.addr, ln.Addr().String()} {
		if err := os.WriteFile(filepath.Join(dir, addrFile), []byte("addr "+addr+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if out := mustTally(t, "-d", dir, "incr", "posts", "5", "likes"); out != "301\n" {
			t.Fatalf("stale address %s: %q", addr, out)
		}
		mustTally(t, "-d", dir, "incr", "posts", "5", "likes", "-1")
	}
	// Locked by a process that is not serving: the lock error, and why
	// no server took the command.
	lockedBy := startServe(t, "-d", dir)
	if err := os.WriteFile(filepath.Join(dir, addrFile), []byte("addr 127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := tally(t, "-d", dir, "get", "posts", "5")
	if code != exitError || !regexp.MustCompile(`directory is locked.*tally serve did not take the command: tally serve at 127\.0\.0\.1:1 \(from TALLY.SERVE\): dial`).MatchString(errOut) {
		t.Fatalf("locked, stale address: exit %d, %q", code, errOut)
	}
	_ = lockedBy // killed at cleanup
}

// TestRemoteConcurrent: commands of several clients run in the server at
// once, each with its own output, on the one database.
func TestRemoteConcurrent(t *testing.T) {
	t.Setenv("TALLY_DIR", "")
	t.Setenv("TALLY_PASSWORD", "")
	dir := newStore(t)
	p := startServe(t, "-d", dir)
	const clients, each = 4, 10
	errs := make(chan error, clients)
	for c := range clients {
		go func() {
			for i := range each {
				var o, e strings.Builder
				if code := run([]string{"-d", dir, "incr", "posts", fmt.Sprint(1000 + c), "likes"}, &o, &e); code != 0 ||
					o.String() != fmt.Sprintf("%d\n", i+1) || e.Len() != 0 {
					errs <- fmt.Errorf("client %d incr %d: exit %d, %q, %q", c, i, code, o.String(), e.String())
					return
				}
			}
			errs <- nil
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	want := "1000.likes 10\n1001.likes 10\n1002.likes 10\n1003.likes 10\n"
	if out := mustTally(t, "-d", dir, "get", "posts", "1000.likes", "1001.likes", "1002.likes", "1003.likes"); out != want {
		t.Fatalf("after concurrent incr: %q, want %q", out, want)
	}
	// Under -race the server is checked too: a race makes it exit 66.
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("serve exited %d: %s", code, p.stderr)
	}
}

// TestBulkMarksLoads: exactly the bulk loads set env.bulk, which makes a
// served TALLY.EXEC return the load's transient memory to the operating
// system; a command that is not a load leaves it unset.
func TestBulkMarksLoads(t *testing.T) {
	dir := newStore(t)
	in := filepath.Join(t.TempDir(), "rows.csv")
	if err := os.WriteFile(in, []byte("11,1,2\n12,3,4\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		bulk bool
	}{
		{[]string{"-d", dir, "get", "posts", "5"}, false},
		{[]string{"-d", dir, "load", "posts", in}, true},
		{[]string{"-d", dir, "incr", "posts", "9", "likes", "1"}, false},
	} {
		var o, eb bytes.Buffer
		e := &env{stdout: &o, stderr: &eb, durability: "sync"}
		if code := e.run(c.args); code != 0 {
			t.Fatalf("tally %s: exit %d: %s", strings.Join(c.args, " "), code, eb.String())
		}
		if e.bulk != c.bulk {
			t.Errorf("tally %s: bulk %v, want %v", strings.Join(c.args, " "), e.bulk, c.bulk)
		}
	}
	for _, c := range commands {
		if strings.HasSuffix(c.name, "load") != c.keyValues {
			t.Errorf("command %q: keyValues %v, but loads (and only loads) are bulk", c.name, c.keyValues)
		}
	}
}
