package commands

import (
	"errors"
	"testing"

	"github.com/tallydb/tally/timeline"
)

// TestPostWaits: post's one default that differs by front end.
func TestPostWaits(t *testing.T) {
	post := Find(All(), "post")
	for _, tc := range []struct {
		cli  bool
		args []string
		want bool
	}{
		{true, []string{"1", "2"}, true},
		{true, []string{"1", "2", "--async"}, false},
		{true, []string{"1", "2", "--wait"}, true},
		{false, []string{"1", "2"}, false},
		{false, []string{"1", "2", "WAIT"}, true},
		{false, []string{"1", "2", "async"}, false},
	} {
		var in *Input
		var err error
		if tc.cli {
			in, err = post.ParseCLI(tc.args)
		} else {
			in, err = post.ParseRESP(respArgs(tc.args...))
		}
		if err == nil {
			err = post.Check(in)
		}
		if err != nil {
			t.Fatalf("%v (CLI %v): %v", tc.args, tc.cli, err)
		}
		if got := postWaits(in); got != tc.want {
			t.Errorf("%v (CLI %v): waits %v, want %v", tc.args, tc.cli, got, tc.want)
		}
	}
	in, err := post.ParseRESP(respArgs("1", "2", "WAIT", "ASYNC"))
	if err != nil {
		t.Fatal(err)
	}
	if err := post.Check(in); !errors.Is(err, ErrUsage) {
		t.Fatalf("WAIT ASYNC: %v, want a usage error", err)
	}
}

// TestTimelineConfigTokens: timeline config's CLI options are TL.CONFIG's
// RESP tokens with the dashes dropped, and a bad value is refused by
// Check with the timeline's error, before anything is opened.
func TestTimelineConfigTokens(t *testing.T) {
	c := Find(All(), "timeline config")
	var got []string
	for _, p := range c.Params {
		got = append(got, RESPOption(p.Name))
	}
	want := []string{"INBOXCAP", "ACTIVEWINDOW", "PULLTHRESHOLD", "CHUNKSIZE"}
	if len(got) != len(want) {
		t.Fatalf("tokens %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("tokens %v, want %v", got, want)
		}
	}
	for _, args := range [][]string{{"INBOXCAP", "0"}, {"INBOXCAP", "100001"}, {"INBOXCAP", "9223372036854775807"},
		{"CHUNKSIZE", "-1"}, {"PULLTHRESHOLD", "0"}, {"ACTIVEWINDOW", "0s"}, {"ACTIVEWINDOW", "-1h"}, {"ACTIVEWINDOW", "1s"}} {
		in, err := c.ParseRESP(respArgs(args...))
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if err := c.Check(in); !errors.Is(err, timeline.ErrInvalidOption) {
			t.Errorf("%v: %v, want timeline.ErrInvalidOption", args, err)
		}
	}
}
