// Command unreadbench compares tally's unread counts with Redis used as the
// published unread designs use it (a hash per user for one-to-one counts, a
// snapshot hash per user and a counter per author for feed unread, a
// global and a per-user tag for red dots), side by side in one run, and
// prints a markdown table (see package bench, unread.go). Redis is skipped
// when redis-server is not installed.
//
//	go run ./bench/cmd/unreadbench --quick
//	go run ./bench/cmd/unreadbench --feed-users 20000 --follows 200 --duration 10s
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/tallydb/tally/bench"
)

func main() {
	cfg := bench.UnreadConfig{}
	quick := flag.Bool("quick", false, "a small run (smoke test): overrides the sizes")
	flag.IntVar(&cfg.CountUsers, "count-users", 1_000_000, "user ids of the one-to-one counts (45% have counts)")
	flag.IntVar(&cfg.FeedUsers, "feed-users", 20_000, "users of the feed measurements")
	flag.IntVar(&cfg.Follows, "follows", 200, "accounts each feed user follows")
	flag.IntVar(&cfg.Authors, "authors", 100_000, "accounts that can be followed")
	flag.DurationVar(&cfg.Duration, "duration", 5*time.Second, "length of each measured phase")
	flag.IntVar(&cfg.Clients, "clients", 4, "concurrent clients of the throughput phases")
	flag.StringVar(&cfg.Dir, "dir", "", "directory for both systems' data (default: a temporary one)")
	flag.Parse()
	if *quick {
		q := bench.QuickUnreadConfig()
		q.Dir = cfg.Dir
		cfg = q
	}
	cfg.Log = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rows, err := bench.RunUnread(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "unreadbench:", err)
		os.Exit(1)
	}
	fmt.Print(bench.Machine())
	fmt.Printf("- data: %d count ids; %d feed users following %d of %d accounts; %v per phase, %d clients\n\n",
		cfg.CountUsers, cfg.FeedUsers, cfg.Follows, cfg.Authors, cfg.Duration, cfg.Clients)
	fmt.Print(bench.UnreadTable(rows))
}
