// Command servebench runs redis-benchmark against "tally serve" and
// redis-server on this machine, in one run, with the same commands and
// flags (-c 50 -P 16 -r 1000000 by default): HINCRBY, INCR, HGETALL,
// HMGET, MGET of 10 keys, and TALLY.MGET of 10 ids (tally only; compare it
// with ten HMGETs, or with MGET of 10 keys). Before the commands it loads
// the same items into both servers through RESP (HSET posts:I reposts R
// comments C likes L, the workload's skewed counts, all-zero items skipped)
// and reports each server's RSS growth per item.
//
// Usage:
//
//	go run ./bench/cmd/servebench [--quick] [--items N] [--requests N] [--durability MODE] [--tally BIN] [--out FILE]
//
// The full run loads 10,000,000 items and sends 2,000,000 requests per
// command; --quick loads 100,000 items and sends 100,000 requests (well
// under a minute). --durability pairs tally's mode with Redis's
// persistence: interval (default) with appendfsync everysec, sync with
// appendfsync always, nosync with no AOF. Without --tally the command
// builds ./cmd/tally with "go build" (run it from the module root). It
// needs redis-server and redis-benchmark (apt-get install redis-server
// redis-tools). --out appends the tables and the machine as a markdown
// section to FILE (for bench/RESULTS.md).
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/tallydb/tally/bench"
)

func main() {
	quick := flag.Bool("quick", false, "100,000 items and 100,000 requests per command")
	items := flag.Uint64("items", 0, "items loaded for the memory figure (default 10,000,000; 100,000 with --quick)")
	requests := flag.Int("requests", 0, "redis-benchmark -n per command (default 2,000,000; 100,000 with --quick)")
	keyspace := flag.Int("keyspace", 1_000_000, "redis-benchmark -r")
	clients := flag.Int("clients", 50, "redis-benchmark -c")
	pipeline := flag.Int("pipeline", 16, "redis-benchmark -P")
	durability := flag.String("durability", "interval", "sync, interval or nosync (Redis: appendfsync always, everysec, no AOF)")
	tallyBin := flag.String("tally", "", "a built tally binary (default: go build ./cmd/tally)")
	dir := flag.String("dir", "", "parent directory for the servers' data (default the system temp dir)")
	out := flag.String("out", "", "append a markdown section with the results to this file")
	flag.Parse()

	if *items == 0 {
		*items = 10_000_000
		if *quick {
			*items = 100_000
		}
	}
	if *requests == 0 {
		*requests = 2_000_000
		if *quick {
			*requests = 100_000
		}
	}
	if skip := bench.ServeSkip(); skip != "" {
		fatal(fmt.Errorf("%s", skip))
	}
	bin, cleanup, err := bench.TallyBinary(*tallyBin, "", os.Stderr)
	if err != nil {
		fatal(err)
	}
	defer cleanup()
	*tallyBin = bin
	cfg := bench.ServeConfig{
		TallyBin: *tallyBin, Dir: *dir, Items: *items, Requests: *requests, Keyspace: *keyspace,
		Clients: *clients, Pipeline: *pipeline, Durability: *durability, Log: os.Stderr,
	}
	start := time.Now()
	results, mems, err := bench.RunServe(cfg)
	table := bench.ServeTable(results, mems)
	desc := fmt.Sprintf("redis-benchmark -n %d -r %d -c %d -P %d; %d items loaded by HSET before the commands; "+
		"tally --durability %s vs Redis %s; total run %v.", *requests, *keyspace, *clients, *pipeline, *items, *durability,
		map[string]string{"sync": "appendfsync always", "interval": "appendfsync everysec", "nosync": "no AOF"}[*durability],
		time.Since(start).Round(time.Second))
	fmt.Println(desc)
	fmt.Println()
	fmt.Print(table)
	if *out != "" {
		if err := bench.AppendSection(*out, "tally serve vs redis-server,", *quick, desc+"\n\n"+table); err != nil {
			fatal(err)
		}
	}

	if err != nil {
		fatal(err)
	}
	for _, r := range results {
		if r.Err != nil {
			os.Exit(1)
		}
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "servebench:", err)
	os.Exit(2)
}
