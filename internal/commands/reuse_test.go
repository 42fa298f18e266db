package commands

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// inputString renders every parameter of in: whether it is set and its
// values, so two Inputs compare as strings.
func inputString(in *Input) string {
	var b strings.Builder
	for i, p := range in.cmd.Params {
		v := &in.vals[i]
		fmt.Fprintf(&b, "%s set=%v u=%v i=%v s=%q; ", p.Name, v.set, v.u, v.i, v.s)
	}
	return b.String()
}

// TestParseRESPReuse parses a run of requests of several commands into one
// reused Input and checks each against a fresh ParseRESP: the same values,
// the same errors, nothing left over from an earlier request (an option
// given once and absent next time, a longer command before a shorter one).
func TestParseRESPReuse(t *testing.T) {
	table := All()
	reqs := []struct {
		cmd  string
		args []string
	}{
		{"LIKE.TOP", []string{"video", "5", "DAY", "2026-11-28"}},
		{"LIKE.TOP", []string{"video"}},
		{"LIKE.LIKE", []string{"video", "1", "2", "7"}},
		{"LIKE.LIKE", []string{"video", "3", "4"}},
		{"LIKE.LIKE", []string{"posts", "3", "4"}},
		{"LIKE.LIKE", []string{"video", "x", "4"}},    // bad item
		{"LIKE.TOP", []string{"video", "5", "DAY"}},   // DAY without a value
		{"LIKE.LIKE", []string{"video", "3"}},         // missing user
		{"LIKE.UNLIKE", []string{"video", "3", "4"}},  // after two errors
		{"LIKE.TOP", []string{"video", "2", "extra"}}, // extra argument
		{"LIKE.TOP", []string{"comments", "10"}},      // a new name after errors
		{"LIKE.UNDISLIKE", []string{"comments", "9", "8"}},
	}
	var scratch *Input
	for k, r := range reqs {
		c := findRESP(t, table, r.cmd)
		if !c.Reusable() {
			t.Fatalf("%s is not Reusable", r.cmd)
		}
		args := make([][]byte, len(r.args))
		for i, a := range r.args {
			args[i] = []byte(a)
		}
		want, werr := c.ParseRESP(args)
		got, gerr := c.ParseRESPReuse(scratch, args)
		if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
			t.Fatalf("request %d %s %q: error %v, fresh parse %v", k, r.cmd, r.args, gerr, werr)
		}
		if werr != nil {
			if !errors.Is(gerr, ErrUsage) {
				t.Errorf("request %d: error %v is not ErrUsage", k, gerr)
			}
			continue
		}
		if scratch != nil && got != scratch {
			t.Fatalf("request %d: ParseRESPReuse returned a new Input", k)
		}
		if g, w := inputString(got), inputString(want); g != w {
			t.Errorf("request %d %s %q:\n reused %s\n fresh  %s", k, r.cmd, r.args, g, w)
		}
		scratch = got
	}
}

// TestParseRESPReuseAllocs: a LIKE.LIKE parsed into a reused Input with the
// business name of the previous request allocates nothing.
func TestParseRESPReuseAllocs(t *testing.T) {
	c := findRESP(t, All(), "LIKE.LIKE")
	args := [][]byte{[]byte("video"), []byte("12"), []byte("34")}
	in, err := c.ParseRESPReuse(nil, args)
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := c.ParseRESPReuse(in, args); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations a parse, want 0", n)
	}
	if in.String("biz") != "video" || in.Uint("item") != 12 || in.Uint("user") != 34 || in.Has("owner") {
		t.Errorf("parsed %s", inputString(in))
	}
}

// TestReusable: a command with a Multiple parameter is not reusable.
func TestReusable(t *testing.T) {
	if findRESP(t, All(), "LIKE.STATES").Reusable() {
		t.Error("LIKE.STATES (items...) is Reusable")
	}
}

func findRESP(t *testing.T, table []*Command, name string) *Command {
	t.Helper()
	for _, c := range table {
		if c.RESP == name {
			return c
		}
	}
	t.Fatalf("no command %s", name)
	return nil
}
