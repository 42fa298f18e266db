// Command shardbench runs the sharding benchmarks of issue 23 on this
// machine with one tally binary: tally clusters of 1, 2 and 4 shards × 3
// replicas against Redis Clusters of the same shape, HINCRBY and HMGET
// through go-redis's ClusterClient, and the time to move a loaded shard's
// replica onto a new node under a light write load. See the comment at
// the top of bench/shard.go for what each phase measures. --phases fanout
// (not in the default) times a post of one author with --fanout-followers
// followers (e.g. 10000000) on a tally cluster and a Redis Cluster.
//
// Usage:
//
//	go run ./bench/cmd/shardbench [--phases throughput,move] [--shards 1,2,4] [--systems tally,redis]
//	    [--durability sync] [--duration 10s] [--goroutines 64] [--pipeline 16] [--keyspace N]
//	    [--read-rows N] [--move-shards 2] [--move-rows N] [--move-durability interval] [--move-follower]
//	    [--move-writers 0,1,4] [--move-timeout 3m]
//	    [--fanout-shards 2] [--fanout-replicas 3] [--fanout-followers N] [--fanout-active 0.1] [--fanout-durability interval] [--fanout-timeout 10m] [--fanout-modes pull,push]
//	    [--tally BIN] [--dir DIR] [--out FILE] [--title T] [--quick]
//
// --quick runs everything small (3s tests, 1 and 2 shards, 20,000 read
// rows, 200,000 move rows): a smoke test, not a figure. Without --tally
// the command builds ./cmd/tally with "go build" (run it from the module
// root). It needs redis-server 7. --out appends the tables and the machine
// as a markdown section to FILE.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/tallydb/tally/bench"
)

func main() {
	phases := flag.String("phases", "throughput,move", "comma-separated phases to run")
	shards := flag.String("shards", "1,2,4", "shard counts of the throughput phase")
	systems := flag.String("systems", "tally,redis", "systems of the throughput phase")
	durs := flag.String("durability", "sync", "tally modes of the throughput phase (Redis: appendfsync always, everysec)")
	duration := flag.Duration("duration", 10*time.Second, "length of each throughput test")
	goroutines := flag.Int("goroutines", 64, "client goroutines of the throughput tests")
	pipeline := flag.Int("pipeline", 16, "commands per ClusterClient pipeline")
	keyspace := flag.Int("keyspace", 1_000_000, "ids HINCRBY writes")
	readRows := flag.Int("read-rows", 200_000, "rows loaded before HMGET")
	moveShards := flag.Int("move-shards", 2, "shards of the move phase's cluster")
	moveRows := flag.Int("move-rows", 3_000_000, "rows loaded before the move")
	moveDur := flag.String("move-durability", "interval", "durability of the move phase's cluster")
	moveWriters := flag.String("move-writers", "0,1,4", "write goroutines of successive moves (0: idle)")
	moveTimeout := flag.Duration("move-timeout", 3*time.Minute, "longest a move may take before it is stopped")
	moveFollower := flag.Bool("move-follower", false, "move a follower rather than the leader")
	fanShards := flag.Int("fanout-shards", 2, "shards of the fan-out phase's clusters")
	fanReplicas := flag.Int("fanout-replicas", 3, "replicas per shard of the fan-out phase's clusters (leader included)")
	fanFollowers := flag.Int("fanout-followers", 1_000_000, "followers of the fan-out phase's author")
	fanActive := flag.Float64("fanout-active", 0.1, "share of the followers that are active")
	fanDur := flag.String("fanout-durability", "interval", "durability of the fan-out phase (Redis: the paired appendfsync)")
	fanModes := flag.String("fanout-modes", "pull,push", "tally's fan-out modes: pull (default config), push (threshold above the followers)")
	fanTimeout := flag.Duration("fanout-timeout", 10*time.Minute, "longest wait for every active home")
	quick := flag.Bool("quick", false, "a small smoke run")
	tallyBin := flag.String("tally", "", "a built tally binary (default: go build ./cmd/tally)")
	dir := flag.String("dir", "", "parent directory for the servers' data (default the system temp dir)")
	out := flag.String("out", "", "append a markdown section with the results to this file")
	title := flag.String("title", "Sharding (issue 23), run", "the section's title with --out")
	flag.Parse()

	if *quick {
		*duration, *readRows, *moveRows, *shards, *fanFollowers = 3*time.Second, 20_000, 200_000, "1,2", 20_000
	}
	shardList, err := ints(*shards)
	if err != nil {
		fatal(fmt.Errorf("--shards: %w", err))
	}
	writerList, err := ints(*moveWriters)
	if err != nil {
		fatal(fmt.Errorf("--move-writers: %w", err))
	}
	bin, cleanup, err := bench.TallyBinary(*tallyBin, "", os.Stderr)
	if err != nil {
		fatal(err)
	}
	defer cleanup()
	*tallyBin = bin
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	cfg := bench.ShardConfig{
		TallyBin: *tallyBin, Dir: *dir, Phases: bench.SplitList(*phases), Shards: shardList, Systems: bench.SplitList(*systems),
		Durabilities: bench.SplitList(*durs), Duration: *duration, Goroutines: *goroutines, Pipeline: *pipeline,
		Keyspace: *keyspace, ReadRows: *readRows, MoveShards: *moveShards, MoveRows: *moveRows,
		MoveDurability: *moveDur, MoveFollower: *moveFollower, MoveWriters: writerList, MoveTimeout: *moveTimeout,
		FanoutShards: *fanShards, FanoutReplicas: *fanReplicas, FanoutFollowers: *fanFollowers, FanoutActive: *fanActive, FanoutDurability: *fanDur,
		FanoutTimeout: *fanTimeout, FanoutModes: bench.SplitList(*fanModes), Log: os.Stderr,
	}
	err = bench.RunAndPrint(*out, *title, *quick, func() (string, error) {
		rep, err := bench.RunShard(ctx, cfg)
		if rep == nil {
			return "", err
		}
		return rep.Markdown(), err
	})
	if err != nil {
		fatal(err)
	}
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range bench.SplitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "shardbench:", err)
	os.Exit(2)
}
