package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tallydb/tally/server"
)

// The demo's sharding part (issue 23): --cluster-shards shards of three
// replicas started with cluster local start --shards (in DIR/shards);
// the counter schema sent to one node reaches every shard (a keyless
// write is broadcast through the cross-shard streams); increments through
// go-redis's ClusterClient land on the shard their slot maps to; users
// on different shards follow each other and post, and every home holds
// its followees' posts (delivered through the streams to each follower's
// shard).

// demoShardUsers is how many users the part's follows and posts use.
const demoShardUsers = 8

func demoShards(d *demo) error {
	if d.clusterShards == 0 {
		return nil
	}
	dir := filepath.Join(d.dir, "shards")
	n := d.clusterShards * 3
	port, err := freeLocalPorts(n)
	if err != nil {
		return err
	}
	start := time.Now()
	procs, err := startLocalCluster(dir, d.clusterShards, 3, port, "sync")
	defer stopLocalGroup(dir)
	if err != nil {
		return err
	}
	d.printf("shards     %d shards × 3 replicas on 127.0.0.1:%d-%d, every shard led and the slot map on every node in %v\n",
		d.clusterShards, port, port+n-1, time.Since(start).Round(time.Millisecond))
	var addrs []string
	for _, p := range procs {
		addrs = append(addrs, p.addr)
	}
	ctx := d.ctx
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 8,
		DialTimeout: time.Second, ReadTimeout: 10 * time.Second})
	defer c.Close()
	retry := func(args ...any) (any, error) {
		var err error
		for range 500 {
			var v any
			if v, err = c.Do(ctx, args...).Result(); err == nil || errors.Is(err, redis.Nil) {
				return v, err
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			time.Sleep(20 * time.Millisecond) // a shard the schema has not reached yet: "no such counter"
		}
		return nil, err
	}
	for _, cmd := range [][]any{{"TALLY.COUNTER", "ADD", "posts"}, {"TALLY.COLUMN", "ADD", "posts", "likes"}} {
		if _, err := retry(cmd...); err != nil {
			return fmt.Errorf("shards: %v: %w", cmd, err)
		}
	}
	st, err := shardsStatus(procs[0].addr, "")
	if err != nil {
		return err
	}
	shardOf := func(key string) uint64 {
		slot := server.Slot([]byte(key))
		for _, s := range st.shards {
			for _, r := range s.slots {
				var lo, hi int
				fmt.Sscanf(r, "%d-%d", &lo, &hi)
				if slot >= lo && slot <= hi {
					return s.id
				}
			}
		}
		return 0
	}
	perShard := map[uint64]int{}
	for k := range demoClusterKeys {
		key := fmt.Sprint("posts:", k)
		if _, err := retry("HINCRBY", key, "likes", k+1); err != nil {
			return fmt.Errorf("shards: HINCRBY %s: %w", key, err)
		}
		perShard[shardOf(key)]++
	}
	for k := range demoClusterKeys {
		got, err := c.HGet(ctx, fmt.Sprint("posts:", k), "likes").Int64()
		if err != nil || got != int64(k+1) {
			return fmt.Errorf("shards: posts:%d likes = %d (%v), want %d", k, got, err, k+1)
		}
	}
	var spread []string
	for _, s := range st.shards {
		spread = append(spread, fmt.Sprintf("shard %d: %d", s.id, perShard[s.id]))
	}
	d.printf("shards     schema broadcast from one node; %d rows incremented through ClusterClient (%s), all read back\n",
		demoClusterKeys, strings.Join(spread, ", "))
	// Follows and posts across shards: user u follows the next three.
	t0 := time.Now()
	cross := 0
	for u := 1; u <= demoShardUsers; u++ {
		for j := 1; j <= 3; j++ {
			a := (u+j-1)%demoShardUsers + 1
			if _, err := retry("TL.FOLLOW", u, a); err != nil {
				return fmt.Errorf("shards: TL.FOLLOW %d %d: %w", u, a, err)
			}
			if shardOf(fmt.Sprint(u)) != shardOf(fmt.Sprint(a)) {
				cross++
			}
		}
	}
	for a := 1; a <= demoShardUsers; a++ {
		if _, err := retry("TL.POST", a, 1000+a); err != nil {
			return fmt.Errorf("shards: TL.POST %d: %w", a, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for u := 1; u <= demoShardUsers; u++ {
		var want []int64
		for j := 3; j >= 1; j-- {
			want = append(want, int64(1000+(u+j-1)%demoShardUsers+1))
		}
		slices.SortFunc(want, func(x, y int64) int { return int(y - x) })
		for {
			v, err := retry("TL.HOME", u)
			got := homePosts(v)
			if err == nil && slices.Equal(got, want) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("shards: TL.HOME %d = %v (%v), want %v", u, got, err, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	d.printf("shards     %d users followed 3 each (%d edges across shards), posted once each: every home complete after %v\n",
		demoShardUsers, cross, time.Since(t0).Round(time.Millisecond))
	return nil
}

// homePosts reads the post ids of a TL.HOME reply: [cursor, [post author
// ...]] (flat) or with one record per post.
func homePosts(v any) []int64 {
	page, ok := v.([]any)
	if !ok || len(page) != 2 {
		return nil
	}
	items, _ := page[1].([]any)
	var out []int64
	for i := 0; i < len(items); i++ {
		var id int64
		if rec, ok := items[i].([]any); ok && len(rec) > 0 {
			fmt.Sscan(fmt.Sprint(rec[0]), &id)
		} else {
			fmt.Sscan(fmt.Sprint(items[i]), &id)
			i++
		}
		out = append(out, id)
	}
	return out
}
