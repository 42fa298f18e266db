package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseAddNode(t *testing.T) {
	addr, id, raft, err := parseAddNode("starting\n127.0.0.1:24106 25159 7 127.0.0.1:34106\n")
	if err != nil || addr != "127.0.0.1:24106" || id != 7 || raft != "127.0.0.1:34106" {
		t.Fatalf("got %q %d %q %v", addr, id, raft, err)
	}
	for _, bad := range []string{"", "127.0.0.1:1 2 x 127.0.0.1:3", "127.0.0.1:1 2 0 127.0.0.1:3", "a b c d"} {
		if _, _, _, err := parseAddNode(bad); !errors.Is(err, errShardBench) {
			t.Errorf("parseAddNode(%q): %v, want errShardBench", bad, err)
		}
	}
}

func TestParseMoveSteps(t *testing.T) {
	steps, err := parseMoveSteps("learner_added 0.003s\npromoted 0.208s\nleadership_transferred 0.212s\nremoved 0.417s\n")
	if err != nil || len(steps) != 4 || steps[1] != (MoveStep{"promoted", 208 * time.Millisecond}) || steps[3].Name != "removed" {
		t.Fatalf("got %v %v", steps, err)
	}
	if _, err := parseMoveSteps("learner_added 0.003s\npromoted 0.208s\n"); !errors.Is(err, errShardBench) {
		t.Errorf("a move without removed: %v, want errShardBench", err)
	}
}

func TestParseStatCPU(t *testing.T) {
	// Field 2 may hold spaces and parentheses; utime 250 and stime 50
	// ticks are fields 14 and 15.
	stat := "1234 (tally (x) y) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 100 1000 10"
	got, err := parseStatCPU(stat)
	if err != nil || got != 3*time.Second {
		t.Fatalf("got %v %v, want 3s", got, err)
	}
	for _, bad := range []string{"", "1234 (tally) S 1 2", "1234 (tally) S 1 1234 1234 0 -1 4194560 100 0 0 0 x 50 0"} {
		if _, err := parseStatCPU(bad); !errors.Is(err, errShardBench) {
			t.Errorf("parseStatCPU(%q): %v, want errShardBench", bad, err)
		}
	}
}

func TestShardConfigValidate(t *testing.T) {
	good := ShardConfig{TallyBin: "tally"}
	good.fill()
	if err := good.validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, mod := range []func(*ShardConfig){
		func(c *ShardConfig) { c.TallyBin = "" },
		func(c *ShardConfig) { c.Phases = []string{"writes"} },
		func(c *ShardConfig) { c.Systems = []string{"memcached"} },
		func(c *ShardConfig) { c.Durabilities = []string{"never"} },
		func(c *ShardConfig) { c.Shards = []int{0} },
		func(c *ShardConfig) { c.Goroutines = -1 },
		func(c *ShardConfig) { c.FanoutModes = []string{"broadcast"} },
		func(c *ShardConfig) { c.FanoutActive = 1.5 },
		func(c *ShardConfig) { c.FanoutDurability = "never" },
		func(c *ShardConfig) { c.FanoutShards = 17 },
	} {
		c := good
		mod(&c)
		if err := c.validate(); !errors.Is(err, errShardBench) {
			t.Errorf("%+v: %v, want errShardBench", c, err)
		}
	}
}

// TestIsActiveShare checks that the fan-out phase's active followers are
// the share asked for, spread over the id range rather than bunched.
func TestIsActiveShare(t *testing.T) {
	for _, share := range []float64{0.01, 0.1, 0.5} {
		const n = 200_000
		var all, low int
		for u := 2; u < n+2; u++ {
			if isActive(u, share) {
				all++
				if u < n/2 {
					low++
				}
			}
		}
		if got := float64(all) / n; got < share*0.95 || got > share*1.05 {
			t.Errorf("share %v: %v of the ids active", share, got)
		}
		if half := float64(low) / float64(all); half < 0.47 || half > 0.53 {
			t.Errorf("share %v: %v of the active ids in the lower half", share, half)
		}
	}
}

func TestShardMarkdownFanout(t *testing.T) {
	r := &ShardReport{Config: ShardConfig{FanoutDurability: "interval", FanoutActive: 0.1, FanoutSample: 10}}
	r.Fanout = &FanoutPhase{Shards: 2, Followers: 1000, Active: 100, Rows: []fanoutRow{
		{System: "tally", Mode: "push", Follows: time.Second, Posted: time.Millisecond, Sampled: 10, SampleMax: 500 * time.Millisecond,
			Active: 100, Holding: 99, Wrong: []string{"7: the post 2 times"}, Sweeps: 1},
		{System: "redis", Follows: time.Second, Posted: 2 * time.Second, ClientPushes: 1000, Sampled: 10, SampleMax: 2 * time.Second,
			Active: 100, Holding: 100, Sweeps: 1},
	}}
	md := r.Markdown()
	for _, want := range []string{"| tally, push | 1.00s (1000/s) |", "| 200 |", "99 of 100, 1 WRONG (e.g. 7: the post 2 times)",
		"(client fan-out, 1000 LPUSHX)", "| 50 |", "100 of 100 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestShardMarkdownMoves(t *testing.T) {
	r := &ShardReport{Config: ShardConfig{MoveDurability: "interval", MoveTimeout: time.Minute}}
	r.Move = &MovePhase{Shards: 2, Rows: 100, Moves: []MoveResult{
		{Writers: 0, FromID: 6, FromLeader: true, Done: true, FromStore: 1 << 29, Wall: 10 * time.Second, Snapshots: 1},
		{Writers: 4, FromID: 5, Done: false, FromStore: 1 << 29, Wall: time.Minute, Snapshots: 9, WriteSecs: 2, Writes: 10,
			Checked: 3, Bad: []string{"posts:1 likes 3, want 4..4"}},
	}}
	md := r.Markdown()
	for _, want := range []string{"| 6, leader (512.0 MiB) |", "| 20.0 |", "**not finished** (stopped at 60s)",
		"| 5, follower (512.0 MiB) |", "1 WRONG (e.g. posts:1 likes 3, want 4..4)", "10 (5/s)"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
}

// TestRunShardQuick runs the three phases small against real processes (a
// 2-shard tally cluster and a 2-master Redis Cluster, a 2-shard move under
// 0 and 1 writers, a 3,000-follower fan-out in both of tally's modes and
// on Redis). It starts 12+ servers and takes a minute or more, so
// it runs only with TALLY_SHARDBENCH=1 (and redis-server installed).
func TestRunShardQuick(t *testing.T) {
	if os.Getenv("TALLY_SHARDBENCH") == "" {
		t.Skip("set TALLY_SHARDBENCH=1 to run the sharding benchmarks' smoke test")
	}
	if skip := ServeSkip(); skip != "" {
		t.Skip(skip)
	}
	if skip := RedisSkip(); skip != "" {
		t.Skip(skip)
	}
	bin := filepath.Join(t.TempDir(), "tally")
	if err := BuildTally(bin, nil); err != nil {
		t.Fatal(err)
	}
	rep, err := RunShard(context.Background(), ShardConfig{TallyBin: bin, Dir: t.TempDir(), Shards: []int{2},
		Duration: time.Second, ReadRows: 2000, MoveRows: 30000, MoveWriters: []int{0, 1},
		Phases: []string{"throughput", "move", "fanout"}, FanoutFollowers: 3000, FanoutSample: 50})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 || len(rep.Move.Moves) != 2 {
		t.Fatalf("report incomplete:\n%s", rep.Markdown())
	}
	for _, row := range rep.Rows {
		if row.HINCRBY.Ops == 0 || row.HMGET.Ops == 0 || row.HINCRBY.Errs != 0 || row.HMGET.Errs != 0 {
			t.Errorf("%s: %d HINCRBY (%d errors), %d HMGET (%d errors)", row.System, row.HINCRBY.Ops, row.HINCRBY.Errs, row.HMGET.Ops, row.HMGET.Errs)
		}
	}
	for _, m := range rep.Move.Moves {
		if !m.Done || len(m.Bad) != 0 {
			t.Errorf("move under %d writers: done %v, %d counters wrong", m.Writers, m.Done, len(m.Bad))
		}
	}
	if len(rep.Fanout.Rows) != 3 {
		t.Fatalf("fan-out rows: %d, want tally pull and push and redis", len(rep.Fanout.Rows))
	}
	for _, r := range rep.Fanout.Rows {
		if r.Holding != r.Active || len(r.Wrong) != 0 || r.Active == 0 || r.Sampled == 0 {
			t.Errorf("fan-out %s %s: %d of %d active homes hold the post, %d wrong, %d sampled", r.System, r.Mode, r.Holding, r.Active, len(r.Wrong), r.Sampled)
		}
	}
	if w := rep.Move.Moves[1]; w.Writes == 0 || w.Checked == 0 {
		t.Errorf("the move under a writer wrote %d and checked %d", w.Writes, w.Checked)
	}
}
