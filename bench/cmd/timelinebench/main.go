// Command timelinebench runs tally's timelines and Redis used as Mastodon
// uses it (one sorted set per home, ZADD per follower pipelined,
// ZREMRANGEBYRANK trim, ZREVRANGEBYSCORE pages) side by side on one
// generated graph and prints one comparison table (see bench.RunTimeline
// for what each figure means).
//
// Usage:
//
//	go run ./bench/cmd/timelinebench [--quick] [--users N] [--big-followers N]
//	    [--followees N] [--posts N] [--clients C] [--duration D] [--no-redis] [--out FILE]
//	    [--profile-posts PREFIX] [--profile-pages PREFIX] [--profile-rebuild PREFIX]
//	    [--rebuild-rounds N] [--job-per-post] [--reposts F] [--muted F]
//
// --reposts (default 0.1) adds reposts of random posts by random users
// after the posts phase, that fraction of its posts, fanned out in both
// targets; --muted (default 0.01) mutes that fraction of the follow
// edges (tally filters on read and measures pages before and after the
// mutes; Redis as Mastodon skips muted pairs at delivery).
//
// --quick: 20,000 users, seconds per target. The default (the issue's
// run): 1,000,000 users with 20 mean followees (power law), user 1
// followed by every user (10^6), 20% active, 3 posts per user, 8 clients,
// 20s of pages per target. The 10^7-follower author is an opt-in run:
//
//	go run ./bench/cmd/timelinebench --users 10000000 --big-followers 9999999 --followees 2 --posts 0
//
// (10^7 users, each following user 1 and two others; no posts phase, so
// the run measures the big author's fan-out, pages and bytes). Redis runs
// when redis-server is on PATH (apt-get install -y redis-server). --out
// appends a markdown section (table, configuration, machine) to FILE.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/tallydb/tally/bench"
)

func main() {
	quick := flag.Bool("quick", false, "20,000 users, seconds per target")
	users := flag.Int("users", 0, "users (default 1,000,000; 20,000 with --quick)")
	big := flag.Int("big-followers", -1, "followers of user 1 (default every other user)")
	followees := flag.Int("followees", 20, "mean followees per user")
	posts := flag.Int("posts", 3, "posts per user in the posts phase")
	clients := flag.Int("clients", 8, "page-reading clients (and Redis fan-out connections)")
	duration := flag.Duration("duration", 0, "page-reading time per target (default 20s; 2s with --quick)")
	noRedis := flag.Bool("no-redis", false, "run tally only")
	out := flag.String("out", "", "append a markdown section with the results to this file")
	dir := flag.String("dir", "", "parent directory for the targets' data (default the system temp dir)")
	jobPerPost := flag.Bool("job-per-post", false, "also run tally with every fan-out a durable job (as before issue 18), first")
	profile := flag.String("profile-posts", "", "profile tally's posts phase into PREFIX.cpu, .allocs (-diff_base .allocs-base), .block, .mutex")
	profilePages := flag.String("profile-pages", "", "profile tally's pages phase (with reposts and mutes) into PREFIX.cpu, ...")
	profileRebuild := flag.String("profile-rebuild", "", "profile tally's returning users (rebuilds and expiries) into PREFIX.cpu, ...")
	rebuildRounds := flag.Int("rebuild-rounds", 0, "rounds of returning users (default 5; 3 with --quick)")
	reposts := flag.Float64("reposts", 0.1, "reposts after the posts phase, as a fraction of its posts")
	muted := flag.Float64("muted", 0.01, "fraction of the follow edges muted before the pages")
	flag.Parse()

	cfg := bench.FullTimeline()
	if *quick {
		cfg = bench.QuickTimeline()
	}
	if *users > 0 {
		cfg.Users = *users
	}
	cfg.BigFollowers = cfg.Users - 1
	if *big >= 0 {
		cfg.BigFollowers = min(*big, cfg.Users-1)
	}
	cfg.MeanFollowees, cfg.PostsPerUser, cfg.Clients = *followees, *posts, *clients
	if *duration > 0 {
		cfg.Duration = *duration
	}
	cfg.Redis = !*noRedis
	cfg.Dir = *dir
	cfg.PostsProfile = *profile
	cfg.PagesProfile = *profilePages
	cfg.RebuildProfile = *profileRebuild
	if *rebuildRounds > 0 {
		cfg.RebuildRounds = *rebuildRounds
	}
	cfg.RepostFraction, cfg.MutedFraction = *reposts, *muted
	cfg.JobPerPost = *jobPerPost
	start := time.Now()
	cfg.Log = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%7.1fs  %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	if cfg.Users < 2 || cfg.Clients < 1 || cfg.MeanFollowees < 0 || cfg.PostsPerUser < 0 {
		fmt.Fprintln(os.Stderr, "timelinebench: want --users ≥ 2, --clients ≥ 1, --followees and --posts ≥ 0")
		os.Exit(2)
	}
	rs := bench.RunTimeline(cfg)
	table := bench.TimelineTable(cfg, rs)
	fmt.Print(table)
	fmt.Printf("\ntotal run %v\n", time.Since(start).Round(time.Second))
	if *out != "" {
		if err := bench.AppendSection(*out, "Timelines, run", *quick, table); err != nil {
			fmt.Fprintln(os.Stderr, "timelinebench:", err)
			os.Exit(2)
		}
	}

	for _, r := range rs {
		if r.Err != "" && r.Target == "tally" {
			os.Exit(1)
		}
	}
}
