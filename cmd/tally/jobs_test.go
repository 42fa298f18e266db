package main

import (
	"strings"
	"testing"

	"github.com/tallydb/tally/store"
)

func TestIncrOnceCommand(t *testing.T) {
	dir := newStore(t)
	d := "-d=" + dir
	for i, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"incr", "posts", "7", "likes", "2", "--source", "k1", "--seq", "1"}, "2\n"},
		{[]string{"incr", "posts", "7", "likes", "2", "--seq=1", "--source=k1"}, "2 duplicate\n"},
		{[]string{"incr", "posts", "7.likes", "-1", "--source", "k1", "--seq", "2"}, "1\n"},
		{[]string{"incr", "posts", "7", "likes", "5", "--source", "k1", "--seq", "1"}, "1 duplicate\n"},
		{[]string{"incr", "posts", "7", "likes", "5", "--source", "k2", "--seq", "1"}, "6\n"},
	} {
		if got := mustTally(t, append([]string{d}, tc.args...)...); got != tc.want {
			t.Errorf("case %d: %q, want %q", i, got, tc.want)
		}
	}
	before := state(t, dir)
	for _, args := range [][]string{
		{"incr", "posts", "7", "likes", "1", "--source", "k1"},
		{"incr", "posts", "7", "likes", "1", "--seq", "3"},
		{"incr", "posts", "7", "likes", "1", "--source", "k1", "--seq", "x"},
		{"incr", "posts", "7", "likes", "1", "--source", "", "--seq", "3"},
		{"incr", "posts", "7", "likes", "1", "--source"},
	} {
		if _, _, code := tally(t, append([]string{d}, args...)...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
	if _, errOut, code := tally(t, d, "incr", "posts", "7", "likes", "1", "--source", "k1", "--seq", "0"); code != exitError || !strings.Contains(errOut, "sequences start at 1") {
		t.Errorf("seq 0: exit %d, %s", code, errOut)
	}
	if after := state(t, dir); after != before {
		t.Errorf("a refused incr changed the store:\n%s\nvs\n%s", before, after)
	}
	if out := mustTally(t, d, "stats"); !strings.Contains(out, "\nsources 2\n") {
		t.Errorf("stats without sources 2:\n%s", out)
	}
}

func TestJobsCommands(t *testing.T) {
	dir := newStore(t)
	d := "-d=" + dir
	if got := mustTally(t, d, "jobs"); got != "jobs 0\n" {
		t.Fatalf("jobs on an empty queue = %q", got)
	}
	if got := mustTally(t, d, "jobs", "wait"); got != "finished 0\n" {
		t.Fatalf("jobs wait on an empty queue = %q", got)
	}
	// A job of a kind this build has no handler for: listed, and "jobs
	// wait" names it and fails without changing it.
	db, err := store.Open(dir, nil)
	must(t, err)
	b := db.NewBatch()
	must(t, b.Enqueue("mystery", []byte("k"), nil, 4))
	must(t, b.Commit())
	b.Close()
	must(t, db.Close())
	want := "1 mystery pending 0/4 mystery job key \"k\"\njobs 1\n"
	if got := mustTally(t, d, "jobs"); got != want {
		t.Fatalf("jobs = %q, want %q", got, want)
	}
	_, errOut, code := tally(t, d, "jobs", "wait")
	if code != exitError || !strings.Contains(errOut, `no handler for job kind "mystery"`) {
		t.Fatalf("jobs wait with an unknown kind: exit %d, %s", code, errOut)
	}
	if got := mustTally(t, d, "jobs"); got != want {
		t.Fatalf("jobs after a failed wait = %q", got)
	}
	if out := mustTally(t, d, "stats"); !strings.Contains(out, "\nqueue_pending 1\n") {
		t.Errorf("stats without the pending job:\n%s", out)
	}
	if _, _, code := tally(t, d, "jobs", "extra"); code != exitUsage {
		t.Errorf("jobs extra: exit %d", code)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
