package main

import (
	"errors"
	"strings"
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

// TestServeClusterUsage: serve --cluster refuses what cannot work before
// it opens anything.
func TestServeClusterUsage(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(secretEnv, "0123456789abcdef0123")
	for _, args := range [][]string{
		{"-d", dir, "serve", "--create", "--cluster", "--node-id", "4", "--raft-addr", "127.0.0.1:0", "--join"},
		{"-d", dir, "serve", "--create", "--cluster", "--raft-addr", "127.0.0.1:0", "--peers", "1=127.0.0.1:1/127.0.0.1:2"},
		{"-d", dir, "serve", "--create", "--cluster", "--node-id", "2", "--raft-addr", "127.0.0.1:0", "--peers", "1=127.0.0.1:1/127.0.0.1:2"},
		{"-d", dir, "serve", "--create", "--cluster", "--node-id", "1", "--raft-addr", "127.0.0.1:0", "--peers", "1=nope"},
		{"-d", dir, "serve", "--create", "--node-id", "1"},
	} {
		if _, errOut, code := tally(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d (%s), want %d", args, code, errOut, exitUsage)
		}
	}
	t.Setenv(secretEnv, "short")
	if _, errOut, code := tally(t, "-d", dir, "serve", "--create", "--cluster", "--node-id", "1", "--raft-addr", "127.0.0.1:0",
		"--peers", "1=127.0.0.1:1/127.0.0.1:2"); code != exitUsage || !strings.Contains(errOut, "secret") {
		t.Errorf("short secret: exit %d (%s)", code, errOut)
	}
}
