// Command likebench runs the likes workload against tally's likes package
// and against Redis as the published like service uses it (sets per item,
// a counts hash, a capped per-user sorted set, board sorted sets, one Lua
// script per transition), each durability side by side, and prints one
// comparison table: bulk load, transitions per second, pages of 20 states
// per second, top-100 and likers-page latency, memory and disk per like.
//
// Usage:
//
//	go run ./bench/cmd/likebench [--quick] [--history N] [--items N] [--users N]
//	    [--duration D] [--clients C] [--targets LIST] [--tally BIN] [--out FILE]
//	    [--serve-flags "FLAGS"] [--serve-log FILE]
//
// Targets: tally (package likes in process), tally-serve (a "tally serve"
// process reached over RESP on loopback as Redis is: LIKE.LIKE, UNLIKE,
// DISLIKE, UNDISLIKE, one request per transition; LIKE.STATES of a page;
// LIKE.TOP; LIKE.LIKERS; the history loaded with "tally likes load" run
// inside the server) and redis. tally-serve runs the binary --tally names,
// or one built with "go build" into a temporary directory under --dir when
// the flag is absent (run inside the module). When tally-serve ran, a
// second table compares Redis with it, like for like.
//
// --quick loads 100,000 likes over 50,000 items and 50,000 users and runs
// each phase for 2s (about a minute with Redis installed); the full mode
// loads 10,000,000 likes over 1,000,000 items and 2,000,000 users, 20s per
// phase. Redis runs only when redis-server is on PATH. --out appends the
// table, the workload and the machine as a markdown section to FILE (for
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
	quick := flag.Bool("quick", false, "small data set and short phases (about a minute)")
	history := flag.Int("history", 0, "historical likes loaded first (default 10,000,000; 100,000 with --quick)")
	items := flag.Uint64("items", 0, "items (default 1,000,000; 50,000 with --quick)")
	users := flag.Uint64("users", 0, "users (default 2,000,000; 50,000 with --quick)")
	duration := flag.Duration("duration", 0, "time of the transition and the page phase each (default 20s; 2s with --quick)")
	clients := flag.Int("clients", 16, "client goroutines, the same for every target")
	seed := flag.Uint64("seed", 1, "workload seed")
	targets := flag.String("targets", "", "comma-separated target names to run (default all): tally, tally-serve, redis")
	tallyBin := flag.String("tally", "", "the tally binary of the tally-serve targets (default: go build the tally command into a temporary directory)")
	out := flag.String("out", "", "append a markdown section with the results to this file")
	dir := flag.String("dir", "", "parent directory for the targets' data (default the system temp dir)")
	profile := flag.String("profile-transitions", "", "profile tally's transition phases: CPU, allocations, block, mutex and an execution trace in PREFIX-tally-MODE.*")
	serveFlags := flag.String("serve-flags", "", "flags added to each tally-serve target's \"tally serve\" command line, space-separated (e.g. \"--metrics-addr 127.0.0.1:9121 --pprof\")")
	serveLog := flag.String("serve-log", "", "append the tally-serve servers' stderr to this file")
	flag.Parse()

	def := func(v *uint64, full, q uint64) {
		if *v == 0 {
			*v = full
			if *quick {
				*v = q
			}
		}
	}
	def(items, 1_000_000, 50_000)
	def(users, 2_000_000, 50_000)
	if *history == 0 {
		*history = 10_000_000
		if *quick {
			*history = 100_000
		}
	}
	if *duration == 0 {
		*duration = 20 * time.Second
		if *quick {
			*duration = 2 * time.Second
		}
	}
	if *clients < 1 {
		fatal(fmt.Errorf("--clients %d: want at least 1", *clients))
	}
	w, err := workload.NewLikes(workload.LikesConfig{Seed: *seed, Items: *items, Users: *users, End: time.Now()})
	if err != nil {
		fatal(err)
	}
	serve, closeLog, err := bench.NewServeOptions(*serveFlags, *serveLog)
	if err != nil {
		fatal(err)
	}
	defer closeLog()
	want := bench.ParseTargets(*targets)
	bin, cleanupBin, err := bench.ServedBinary(want, *tallyBin, *dir, os.Stderr)
	if err != nil {
		fatal(err)
	}
	defer cleanupBin()
	var specs []bench.LikesSpec
	// tally in process, tally-serve, then Redis.
	var all []bench.LikesSpec
	for _, s := range bench.LikesSpecs() {
		if s.Tally {
			all = append(all, s)
		}
	}
	serve.Bin = bin
	all = append(all, bench.LikesServedSpecs(serve)...)
	for _, s := range bench.LikesSpecs() {
		if !s.Tally {
			all = append(all, s)
		}
	}
	for _, s := range all {
		if want.Has(s.Name) {
			specs = append(specs, s)
		}
	}
	if len(specs) == 0 {
		fatal(fmt.Errorf("no target matches --targets %q", *targets))
	}
	cfg := bench.LikesRunConfig{Workload: w, History: *history, Clients: *clients, Duration: *duration, Dir: *dir, Log: os.Stderr,
		TransitionsProfile: *profile}
	start := time.Now()
	var results []bench.LikesResult
	for _, s := range specs {
		if s.Skip != "" {
			fmt.Fprintf(os.Stderr, "%s: %s\n", s.Label(), s.Skip)
		}
		r := bench.RunLikes(cfg, s)
		if r.Err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", s.Label(), r.Err)
		}
		results = append(results, r)
	}
	c := w.Config()
	desc := fmt.Sprintf("%d historical likes loaded over %d items (Zipf %.1f popularity) and %d users; "+
		"then transitions (%.0f%% like, %.0f%% unlike, %.0f%% dislike, %.0f%% undislike) and pages of 20 states, "+
		"%v each from %d clients, top-100 and likers pages for %v each from one; seed %d; total run %v.",
		*history, c.Items, c.Zipf, c.Users, c.Mix[0]*100, c.Mix[1]*100, c.Mix[2]*100, c.Mix[3]*100,
		*duration, *clients, *duration/4, c.Seed, time.Since(start).Round(time.Second))
	table := bench.LikesTable(results)
	fmt.Println(desc)
	fmt.Println()
	fmt.Print(table)
	if *out != "" {
		if err := bench.AppendSection(*out, "Likes run", *quick, desc+"\n\n"+table); err != nil {
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
	fmt.Fprintln(os.Stderr, "likebench:", err)
	os.Exit(2)
}
