package main

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestDemoTiny(t *testing.T) {
	t.Setenv("TALLY_DIR", "")
	// The replication part starts "tally serve --cluster" processes: this
	// test binary, run as tally (TestMain).
	t.Setenv("TALLY_TEST_MAIN", "1")
	out := mustTally(t, "demo", "--items", "3000", "--duration", "50ms", "--clients", "2")
	for _, want := range []string{"(removed afterwards)", "durability interval", "load posts 3000 items", "load accounts 300 items",
		"mixed      2 clients", "age        clock +48h", "cold reads 2 clients", "close      in", "reopen     in",
		"verified   2000 sampled posts", "verify     ok", "\nreport\n", "  bytes/row  ", "  recovery   ", "wall time  ",
		"timeline   store ", "fan-out    user 1's post reached", "pages      2 clients", "return     clock +192h",
		"\ntimeline report\n", "Check ok",
		"unread     own store: 300 users' one-to-one counts", "unread     feed unread Get (200 followees)",
		"unread     exact: 6 checks", "  unread     one-to-one Get",
		"likes load ", "likes      2 clients", "likes ok   every count equals", "likes      after reopen", "  likes      load",
		"cluster    3 replicas on 127.0.0.1:", "HINCRBY acknowledged by a quorum", "killed (SIGKILL) under writes: the next write acknowledged after",
		"cluster ok every replica (the killed one restarted) holds every acknowledged write", "  cluster    3 replicas, "} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

func TestDemoKeepsDir(t *testing.T) {
	t.Setenv("TALLY_DIR", "")
	dir := filepath.Join(t.TempDir(), "demo")
	mustTally(t, "--durability", "nosync", "demo", "-d", dir, "--items", "1000", "--users", "10", "--duration", "0s", "--cluster-replicas", "0", "--cluster-shards", "0")
	got := mustTally(t, "-d", dir, "counter", "list")
	want := "posts range_bits=48 policy=age:72h0m0s:1288834974657:22 columns=reposts:16/32,comments:16/32,likes:16/32\n" +
		"accounts range_bits=32 policy=keep-hot columns=posts:16/32,followers:16/32\n"
	if got != want {
		t.Fatalf("counter list after demo -d:\n%s\nwant:\n%s", got, want)
	}
	// The store is not new any more: a second demo refuses it.
	_, errOut, code := tally(t, "demo", "-d", dir, "--items", "10")
	if code != exitError || !strings.Contains(errOut, "already exists") {
		t.Fatalf("second demo on %s: exit %d, stderr %q", dir, code, errOut)
	}
}

func TestDemoBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"demo", "--items", "0"},
		{"demo", "--items", "-5"},
		{"demo", "--clients", "0"},
		{"demo", "--duration", "forever"},
		{"demo", "--durability", "maybe"},
		{"demo", "extra"},
		{"demo", "--tl-users", "1"},
		{"demo", "--tl-users", "-5"},
		{"demo", "--cluster-replicas", "2"},
	} {
		_, errOut, code := tally(t, args...)
		if code != exitUsage || !strings.HasPrefix(errOut, "tally: demo: ") {
			t.Errorf("tally %s: exit %d, stderr %q", strings.Join(args, " "), code, errOut)
		}
	}
}

// TestDemoAges checks the phases move rows where the demo says: old posts
// load cold, the clock jump ages more ranges, and recovery replays the
// writes made during the close.
func TestDemoAges(t *testing.T) {
	t.Setenv("TALLY_DIR", "")
	out := mustTally(t, "demo", "--items", "20000", "--duration", "100ms", "--clients", "2", "--cluster-replicas", "0", "--cluster-shards", "0")
	m := regexp.MustCompile(`load posts 20000 items, (\d+) non-zero rows .*: (\d+) rows into (\d+) cold ranges, (\d+) into (\d+) hot ranges`).FindStringSubmatch(out)
	if m == nil || m[2] == "0" || m[3] == "0" || m[4] == "0" {
		t.Fatalf("load line lacks cold and hot rows:\n%s", out)
	}
	a := regexp.MustCompile(`ranges hot (\d+) -> (\d+), cold (\d+) -> (\d+)`).FindStringSubmatch(out)
	if a == nil || atoi(t, a[2]) >= atoi(t, a[1]) || atoi(t, a[4]) <= atoi(t, a[3]) {
		t.Fatalf("aging moved no range:\n%s", out)
	}
	if r := regexp.MustCompile(`(\d+) log records replayed`).FindStringSubmatch(out); r == nil || r[1] == "0" {
		t.Logf("no log record replayed (Close's checkpoint caught every write):\n%s", out)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
