// Command tallybench runs the same counter workload against tally and the
// systems users would pick instead (Pebble with a Merge operator, Redis
// strings and small hashes) and prints one comparison table.
//
// Usage:
//
//	go run ./bench/cmd/tallybench [--quick] [--items N] [--duration D] [--clients C] [--targets LIST]
//	    [--rate N] [--tally BIN] [--serve-flags FLAGS] [--out FILE]
//
// Targets: tally (in process: the clients call the store), tally-serve
// (a "tally serve" process reached over RESP on loopback with the Redis
// targets' client code: HINCRBY to write, one HMGET per id of a batch,
// pipelined, to read; loaded with "tally load" run inside the server),
// pebble-merge, redis-strings, redis-hash. tally-serve runs the binary
// --tally names, or one built with "go build" into a temporary directory
// under --dir when the flag is absent (run inside the module). When
// tally-serve ran, a second table compares the peers with it, like for
// like.
//
// --rate N runs the mix open loop: N operations a second in all (a write
// or a read batch of 10 ids; the workload's mix is 2 reads to 1 write),
// each client on a fixed schedule of N/C a second, with every latency
// counted from the operation's scheduled send time, so that a stall counts
// against the operations queued behind it (no coordinated omission). Use a
// rate every target sustains to compare tails at equal load; a target that
// cannot keep up shows fewer operations a second than asked (a warning is
// printed). The default is closed loop: each client sends its next
// operation when the last is answered.
//
// --serve-flags adds flags to the tally-serve targets' "tally serve"
// command line (space-separated), e.g. "--metrics-addr 127.0.0.1:9121
// --pprof" to profile the server during a run (the targets run one after
// the other, so a fixed port is free for each); the server inherits the
// environment, so GODEBUG=gctrace=1 before the runner makes it log its
// collections. --serve-log FILE appends the servers' stderr (their log,
// gctrace lines) to FILE.
//
// --quick runs 200,000 items for 2s per target (under a minute with Redis
// installed); the full mode runs 20,000,000 items × 3 columns (60M counter
// values) for 30s per target (estimated 10–20 minutes on 2 cores from the
// 2M-item run; not yet measured). The Redis targets
// run only when redis-server is on PATH. --out appends the table, the
// workload and the machine description as a markdown section to FILE (for
// bench/RESULTS.md).
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/tallydb/tally/bench"
	"github.com/tallydb/tally/bench/workload"
)

func main() {
	quick := flag.Bool("quick", false, "small data set and short runs (under a minute)")
	items := flag.Uint64("items", 0, "number of items, zero ones included (default 20,000,000; 200,000 with --quick)")
	columns := flag.Int("columns", 3, "count columns per item")
	duration := flag.Duration("duration", 0, "mixed-workload time per target (default 30s; 2s with --quick)")
	clients := flag.Int("clients", 8, "client goroutines, the same for every target")
	seed := flag.Uint64("seed", 1, "workload seed")
	targets := flag.String("targets", "", "comma-separated target names to run (default all): tally, tally-serve, pebble-merge, redis-strings, redis-hash")
	tallyBin := flag.String("tally", "", "the tally binary of the tally-serve targets (default: go build the tally command into a temporary directory)")
	out := flag.String("out", "", "append a markdown section with the results to this file")
	dir := flag.String("dir", "", "parent directory for the targets' data (default the system temp dir)")
	rate := flag.Float64("rate", 0, "open loop: operations per second in all (writes and read batches), latency from the scheduled send time (default 0: closed loop)")
	serveFlags := flag.String("serve-flags", "", "flags added to each tally-serve target's \"tally serve\" command line, space-separated (e.g. \"--metrics-addr 127.0.0.1:9121 --pprof\")")
	serveLog := flag.String("serve-log", "", "append the tally-serve servers' stderr to this file")
	heapProfile := flag.String("heapprofile", "", "write each target's Go heap profile after its memory figures to PREFIX-LABEL.pb.gz")
	flag.Parse()

	if *items == 0 {
		*items = 20_000_000
		if *quick {
			*items = 200_000
		}
	}
	if *duration == 0 {
		*duration = 30 * time.Second
		if *quick {
			*duration = 2 * time.Second
		}
	}
	if *rate < 0 {
		fatal(fmt.Errorf("bad --rate %v: want a positive number of operations per second, or 0 for closed loop", *rate))
	}
	serve, closeLog, err := bench.NewServeOptions(*serveFlags, *serveLog)
	if err != nil {
		fatal(err)
	}
	defer closeLog()
	w, err := workload.New(workload.Config{Seed: *seed, Items: *items, Columns: *columns})
	if err != nil {
		fatal(err)
	}
	want := bench.ParseTargets(*targets)
	bin, cleanupBin, err := bench.ServedBinary(want, *tallyBin, *dir, os.Stderr)
	if err != nil {
		fatal(err)
	}
	defer cleanupBin()
	serve.Bin = bin
	var specs []bench.Spec
	all := append(append(append(bench.TallySpecs(), bench.ServedTallySpecs(serve)...), bench.PebbleSpecs()...), bench.RedisSpecs()...)
	for _, s := range all {
		if want.Has(s.Name) {
			specs = append(specs, s)
		}
	}
	if len(specs) == 0 {
		fatal(fmt.Errorf("no target matches --targets %q", *targets))
	}

	cfg := bench.RunConfig{Workload: w, Clients: *clients, Duration: *duration, Rate: *rate, Dir: *dir, Log: os.Stderr, HeapProfile: *heapProfile}
	start := time.Now()
	var results []bench.Result
	for _, s := range specs {
		if s.Skip != "" {
			fmt.Fprintf(os.Stderr, "%s: %s\n", s.Label(), s.Skip)
		}
		r := bench.Run(cfg, s)
		if r.Err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", s.Label(), r.Err)
		}
		if got := float64(r.Reads+r.Writes) / r.Elapsed.Seconds(); *rate > 0 && r.Err == nil && s.Skip == "" && got < 0.95**rate {
			fmt.Fprintf(os.Stderr, "%s: did not sustain --rate %.0f: %.0f operations/s\n", s.Label(), *rate, got)
		}
		results = append(results, r)
	}
	c := w.Config()
	loop := "closed loop"
	if *rate > 0 {
		loop = fmt.Sprintf("open loop at %.0f operations/s in all (latency from the scheduled send time)", *rate)
	}
	desc := fmt.Sprintf("%d items × %d columns = %d counter values (%.0f%% of items all-zero), seed %d; "+
		"reads of %d ids, %.2f writes per id read, %d clients, %s, %v per target; total run %v.",
		c.Items, c.Columns, w.Counters(), c.ZeroFraction*100, c.Seed, c.BatchSize, c.WritesPerRead,
		*clients, loop, *duration, time.Since(start).Round(time.Second))
	table := bench.Table(results)
	fmt.Println(desc)
	fmt.Println()
	fmt.Print(table)
	if *out != "" {
		if err := bench.AppendSection(*out, "Run", *quick, desc+"\n\n"+table); err != nil {
			fatal(err)
		}
	}

	for _, r := range results {
		if r.Err != nil {
			cleanupBin()
			os.Exit(1)
		}
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "tallybench:", err)
	os.Exit(2)
}
