package server

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tallydb/tally/timeline"
)

// TestMaintenanceCommands: the CLI's jobs, compact, verify, checkpoint,
// stats and replay over RESP, on the server's own database.
func TestMaintenanceCommands(t *testing.T) {
	ts, db := newDBServer(t)
	rc := ts.client(t, nil)
	do := func(args ...any) any {
		t.Helper()
		v, err := rc.Do(ctx, args...).Result()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return v
	}
	match := func(args []any, want string) {
		t.Helper()
		got, _ := do(args...).(string)
		if !regexp.MustCompile(want).MatchString(got) {
			t.Fatalf("%v = %q, want %s", args, got, want)
		}
	}
	if _, err := db.Timeline().Follow(1, 20); err != nil {
		t.Fatal(err)
	}

	// Reports are the CLI's lines, one bulk string.
	match([]any{"TALLY.JOBS", "LIST"}, `^jobs 0\n$`)
	if got := do("TALLY.JOBS", "WAIT"); got != int64(0) {
		t.Fatalf("TALLY.JOBS WAIT = %#v", got)
	}
	match([]any{"TALLY.STATS"}, `^durability nosync\nreopens 0\ncounters 0\n(?s:.*)\ntimeline\.\S+ \S+\n`)
	match([]any{"TALLY.REPLAY"}, `^checkpoint_seq \d+\nchunks_loaded \d+\nrows_loaded \d+\nrecords_replayed \d+\nlast_seq \d+\nduration \S+\n$`)
	seq, ok := do("TALLY.CHECKPOINT").(int64)
	if !ok || seq == 0 {
		t.Fatalf("TALLY.CHECKPOINT = %v", seq)
	}
	match([]any{"TALLY.STATS"}, `\ncheckpoint_seq `+strconv.FormatInt(seq, 10)+`\n`)
	match([]any{"TALLY.COMPACT"}, `^ranges_hot_before \d+\nranges_cold_before \d+\ndelta_rows_before \d+\nranges_hot \d+\n`+
		`ranges_cold \d+\ndelta_rows \d+\nhot_rows \d+\ncold_rows \d+\njobs_finished \d+\nseconds \d+\.\d{3}\n$`)
	if got := do("TALLY.VERIFY"); got != "OK" {
		t.Fatalf("TALLY.VERIFY = %#v", got)
	}

	// Damage, as a client writing a package's counter directly did: the
	// error reply names the package and the user.
	users, err := db.Store().Counter(timeline.UsersCounter)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := users.Incr(20, timeline.ColFollowers, 1000); err != nil {
		t.Fatal(err)
	}
	err = rc.Do(ctx, "TALLY.VERIFY").Err()
	if err == nil || !strings.HasPrefix(err.Error(), "ERR tally: verify: ") || !strings.Contains(err.Error(), "timeline:") ||
		!strings.Contains(err.Error(), "20") || !strings.HasSuffix(err.Error(), "problems found") {
		t.Fatalf("TALLY.VERIFY after damage: %v", err)
	}
	if _, err := users.Incr(20, timeline.ColFollowers, -1000); err != nil {
		t.Fatal(err)
	}
	if got := do("TALLY.VERIFY"); got != "OK" {
		t.Fatalf("TALLY.VERIFY after the repair = %#v", got)
	}
	if err := db.Check(); err != nil {
		t.Fatal(err)
	}

	// Refused: arguments, and the CLI's pace (the server's applies).
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"TALLY.COMPACT", "BYTESPERSEC", 1000}, "ERR BYTESPERSEC is not possible over RESP (the server's compaction pace applies)"},
		{[]any{"TALLY.COMPACT", "x"}, `ERR unknown option "x"`},
		{[]any{"TALLY.VERIFY", "x"}, "ERR wrong number of arguments for 'tally.verify' command"},
		{[]any{"TALLY.STATS", "x"}, "ERR wrong number of arguments"},
		{[]any{"TALLY.REPLAY", "x"}, "ERR wrong number of arguments"},
		{[]any{"TALLY.CHECKPOINT", "x"}, "ERR wrong number of arguments"},
		{[]any{"TALLY.JOBS", "WAIT", "x"}, "ERR wrong number of arguments"},
		{[]any{"TALLY.JOBS", "LIST", "x"}, "ERR wrong number of arguments"},
		{[]any{"TALLY.JOBS", "FROB"}, "ERR unknown subcommand"},
	} {
		if err := rc.Do(ctx, tc.args...).Err(); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
