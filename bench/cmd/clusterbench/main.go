// Command clusterbench runs the replication benchmarks of issue 22 on this
// machine, in one run with one tally binary: a 3-replica group ("tally
// cluster local start") against one "tally serve" and against a
// redis-server primary with one replica (with and without WAIT 1 0):
// HINCRBY throughput and latency, failover time after kill -9 of the
// leader, follower-read throughput, and the catch-up time of a new replica.
// See the comment at the top of bench/cluster.go for what each phase
// measures.
//
// Usage:
//
//	go run ./bench/cmd/clusterbench [--phases writes,failover,reads,catchup] [--durability sync,interval]
//	    [--duration 10s] [--conns 50] [--pipeline 16] [--lat-conns 8] [--failovers 12]
//	    [--read-rows N] [--catchup-rows N] [--tally BIN] [--dir DIR] [--out FILE] [--quick]
//
// --quick runs every phase small (3s tests, 3 kills, 20,000 and 200,000
// rows): a smoke test, not a figure. Without --tally the command builds
// ./cmd/tally with "go build" (run it from the module root). It needs
// redis-server and redis-benchmark. --out appends the tables and the
// machine as a markdown section to FILE (for bench/RESULTS.md).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tallydb/tally/bench"
)

func main() {
	phases := flag.String("phases", "writes,failover,reads,catchup", "comma-separated phases to run")
	durs := flag.String("durability", "sync,interval", "tally modes of the write phase (Redis: appendfsync always, everysec)")
	duration := flag.Duration("duration", 10*time.Second, "length of each write and read test")
	conns := flag.Int("conns", 50, "connections of the pipelined tests")
	pipeline := flag.Int("pipeline", 16, "commands per pipelined batch")
	latConns := flag.Int("lat-conns", 8, "connections of the one-at-a-time write test")
	keyspace := flag.Int("keyspace", 1_000_000, "ids written")
	failovers := flag.Int("failovers", 12, "leader kills")
	readRows := flag.Int("read-rows", 200_000, "rows loaded before the read tests")
	catchupRows := flag.Int("catchup-rows", 3_000_000, "rows loaded before a replica is added")
	quick := flag.Bool("quick", false, "a small smoke run of every phase")
	tallyBin := flag.String("tally", "", "a built tally binary (default: go build ./cmd/tally)")
	dir := flag.String("dir", "", "parent directory for the servers' data (default the system temp dir)")
	out := flag.String("out", "", "append a markdown section with the results to this file")
	title := flag.String("title", "Replication (issue 22), run", "the section's title with --out")
	flag.Parse()

	if *quick {
		*duration, *failovers, *readRows, *catchupRows = 3*time.Second, 3, 20_000, 200_000
	}
	bin, cleanup, err := bench.TallyBinary(*tallyBin, "", os.Stderr)
	if err != nil {
		fatal(err)
	}
	defer cleanup()
	*tallyBin = bin
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	cfg := bench.ClusterConfig{
		TallyBin: *tallyBin, Dir: *dir, Phases: bench.SplitList(*phases), Durabilities: bench.SplitList(*durs), Duration: *duration,
		Conns: *conns, Pipeline: *pipeline, LatConns: *latConns, Keyspace: *keyspace, Failovers: *failovers,
		ReadRows: *readRows, CatchupRows: *catchupRows, Log: os.Stderr,
	}
	err = bench.RunAndPrint(*out, *title, *quick, func() (string, error) {
		rep, err := bench.RunCluster(ctx, cfg)
		if rep == nil {
			return "", err
		}
		return rep.Markdown(), err
	})
	if err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "clusterbench:", err)
	os.Exit(2)
}
