package main

import (
	"errors"
	"testing"

	"github.com/tallydb/tally/server"
)

// TestClassifyExec: in cluster mode TALLY.EXEC is routed by the CLI
// command it carries.
func TestClassifyExec(t *testing.T) {
	for _, tc := range []struct {
		line []string
		want server.Class
		err  error
	}{
		{[]string{"like", "video", "1", "2"}, server.ClassWrite, nil},
		{[]string{"--json", "counter", "add", "views"}, server.ClassWrite, nil},
		{[]string{"likes", "video", "1"}, server.ClassRead, nil},
		{[]string{"stats"}, server.ClassLocal, nil},
		{[]string{"jobs"}, server.ClassLocal, nil},
		{[]string{"help"}, server.ClassLocal, nil},
		{[]string{"no-such-command"}, server.ClassLocal, nil},
		{[]string{"load", "posts", "file.csv"}, 0, server.ErrNotReplicable},
		{[]string{"follows", "load", "f.csv"}, 0, server.ErrNotReplicable},
	} {
		args := [][]byte{[]byte("TALLY.EXEC"), []byte("/dir"), []byte("/cwd")}
		for _, a := range tc.line {
			args = append(args, []byte(a))
		}
		got, err := classifyExec(args)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%v: error %v, want %v", tc.line, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%v: %v, %v; want %v", tc.line, got, err, tc.want)
		}
	}
}
