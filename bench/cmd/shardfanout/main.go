// Command shardfanout measures cross-shard fan-out on a running sharded
// cluster (tally cluster local start --shards N): one author on one shard
// gets F followers spread over every shard by their ids' slots, each
// marked active (a home read), then posts P times; it reports the time
// until a sample of followers on every shard sees each post, and the
// deliveries per second that makes (F × P over the time to the last post
// seen everywhere).
//
//	go run ./bench/cmd/shardfanout --addr 127.0.0.1:7100 --followers 20000 --posts 10
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7100", "any node of the cluster")
	followers := flag.Int("followers", 20000, "followers of the author, spread over every shard")
	posts := flag.Int("posts", 10, "posts of the author")
	sample := flag.Int("sample", 200, "followers whose homes are polled")
	flag.Parse()
	ctx := context.Background()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{*addr}, ReadTimeout: 30 * time.Second})
	defer c.Close()
	const author = 1
	start := time.Now()
	for lo := 2; lo < *followers+2; lo += 1000 {
		p := c.Pipeline()
		for u := lo; u < min(lo+1000, *followers+2); u++ {
			p.Do(ctx, "TL.FOLLOW", u, author)
			p.Do(ctx, "TL.HOME", u, "LIMIT", 1) // active: the post is pushed to its inbox
		}
		if _, err := p.Exec(ctx); err != nil {
			log.Fatalf("follow: %v", err)
		}
	}
	log.Printf("%d followers followed and active in %v", *followers, time.Since(start).Round(time.Millisecond))
	// Wait for the follows to reach the author's shard (its follower count).
	for {
		v, err := c.Do(ctx, "TL.USER", author).Slice()
		if err == nil {
			n := int64(0)
			for i := 0; i+1 < len(v); i += 2 {
				if v[i] == "followers" {
					n, _ = v[i+1].(int64)
				}
			}
			if n == int64(*followers) {
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var probe []int
	for range *sample {
		probe = append(probe, 2+rng.IntN(*followers))
	}
	t0 := time.Now()
	var lastPost int
	for i := 0; i < *posts; i++ {
		lastPost = 1_000_000 + i
		if err := c.Do(ctx, "TL.POST", author, lastPost).Err(); err != nil {
			log.Fatalf("post: %v", err)
		}
	}
	posted := time.Since(t0)
	var seen []time.Duration
	for _, u := range probe {
		for {
			v, err := c.Do(ctx, "TL.HOME", u, "LIMIT", 1).Slice()
			if err == nil && len(v) == 2 && fmt.Sprint(v[1]) != "[]" {
				items, _ := v[1].([]any)
				if len(items) > 0 {
					first := items[0]
					if rec, ok := first.([]any); ok && len(rec) > 0 { // a record per post
						first = rec[0]
					}
					if fmt.Sprint(first) == fmt.Sprint(lastPost) {
						break
					}
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
		seen = append(seen, time.Since(t0))
	}
	slices.Sort(seen)
	all := seen[len(seen)-1]
	fmt.Printf("followers %d posts %d: posted in %v; last post in every sampled home after p50 %v max %v; %.0f deliveries/s\n",
		*followers, *posts, posted.Round(time.Millisecond), seen[len(seen)/2].Round(time.Millisecond), all.Round(time.Millisecond),
		float64(*followers**posts)/all.Seconds())
}
