package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// The demo's replication part (issue 22): a group of --cluster-replicas
// "tally serve --cluster" processes started the way a user starts one
// (cluster local start, in DIR/cluster), written to through go-redis's
// ClusterClient by the demo's clients, its leader killed with SIGKILL
// under the writes; it reports writes/s, the failover time (from the kill
// to the first write acknowledged by the new leader), and checks that
// every replica, the killed one restarted, holds every acknowledged write.

// demoClusterKeys is how many rows the part's writes spread over.
const demoClusterKeys = 64

func demoCluster(d *demo) error {
	if d.clusterReplicas == 0 {
		return nil
	}
	dir := filepath.Join(d.dir, "cluster")
	port, err := freeLocalPorts(d.clusterReplicas)
	if err != nil {
		return err
	}
	start := time.Now()
	procs, err := startLocalGroup(dir, d.clusterReplicas, port, "sync")
	defer stopLocalGroup(dir)
	if err != nil {
		return err
	}
	d.printf("cluster    %d replicas on 127.0.0.1:%d-%d (durability sync), a leader in %v\n",
		len(procs), port, port+len(procs)-1, time.Since(start).Round(time.Millisecond))
	var addrs []string
	leader := localProc{}
	for _, p := range procs {
		addrs = append(addrs, p.addr)
		if p.role == "leader" {
			leader = p
		}
	}
	if leader.pid == 0 {
		return errors.New("cluster: no leader among the replicas")
	}
	ctx := d.ctx
	// Few redirects: go-redis retries a dead node until they run out
	// (with backoff), and only then can the caller reload the slot map.
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 3,
		DialTimeout: time.Second, ReadTimeout: 10 * time.Second, MaxRetries: -1})
	defer c.Close()
	// retry runs a write until it is acknowledged or ends in a command
	// error: while no leader is known the replicas answer CLUSTERDOWN or
	// TRYAGAIN, and a dead leader's connections fail.
	retry := func(args ...any) (any, error) {
		var err error
		for range 500 {
			var v any
			if v, err = c.Do(ctx, args...).Result(); err == nil || errors.Is(err, redis.Nil) || strings.HasPrefix(err.Error(), "ERR ") {
				return v, err
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			c.ReloadState(ctx)
			time.Sleep(10 * time.Millisecond)
		}
		return nil, err
	}
	for _, cmd := range [][]any{{"TALLY.COUNTER", "ADD", "posts"}, {"TALLY.COLUMN", "ADD", "posts", "likes"}} {
		if _, err := retry(cmd...); err != nil {
			return fmt.Errorf("cluster: %v: %w", cmd, err)
		}
	}
	// acked[k] is the highest value a write to posts:k was acknowledged
	// with: the group must hold at least that much.
	var mu sync.Mutex
	acked := make([]int64, demoClusterKeys)
	var lat []time.Duration
	write := func(client, n int) error {
		for i := range n {
			k := (client*7919 + i) % demoClusterKeys
			t0 := time.Now()
			v, err := c.HIncrBy(ctx, fmt.Sprint("posts:", k), "likes", 1).Result()
			if err != nil {
				// An unknown outcome: not acknowledged. go-redis reloads
				// its slot map only on MOVED or every 10s: after a
				// connection error ask for it now, to follow a failover.
				c.ReloadState(ctx)
				continue
			}
			mu.Lock()
			acked[k] = max(acked[k], v)
			lat = append(lat, time.Since(t0))
			mu.Unlock()
		}
		return nil
	}
	parallel := func(n int) (time.Duration, error) {
		t0 := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, d.clients)
		for cl := range d.clients {
			wg.Add(1)
			go func() { defer wg.Done(); errs[cl] = write(cl, n) }()
		}
		wg.Wait()
		return time.Since(t0), errors.Join(errs...)
	}
	const perClient = 500
	took, err := parallel(perClient)
	if err != nil {
		return err
	}
	slices.Sort(lat)
	n := len(lat)
	if n == 0 {
		return errors.New("cluster: no write was acknowledged")
	}
	d.printf("cluster    %d clients: %d HINCRBY acknowledged by a quorum, %.0f writes/s, p50 %v p99 %v\n",
		d.clients, n, float64(n)/took.Seconds(), lat[n/2].Round(time.Microsecond), lat[n*99/100].Round(time.Microsecond))

	// Kill the leader under the writes; time the first acknowledged write.
	done := make(chan error, 1)
	go func() { _, err := parallel(perClient); done <- err }()
	time.Sleep(50 * time.Millisecond)
	if err := syscall.Kill(leader.pid, syscall.SIGKILL); err != nil {
		return err
	}
	killed := time.Now()
	var failover time.Duration
	for {
		v, err := c.HIncrBy(ctx, "posts:0", "likes", 1).Result()
		if err == nil {
			failover = time.Since(killed)
			mu.Lock()
			acked[0] = max(acked[0], v)
			mu.Unlock()
			break
		}
		if time.Since(killed) > 30*time.Second || ctx.Err() != nil {
			return fmt.Errorf("cluster: no write acknowledged within 30s of killing the leader: %w", err)
		}
		c.ReloadState(ctx)
		time.Sleep(5 * time.Millisecond)
	}
	if err := <-done; err != nil {
		return err
	}
	d.printf("cluster    leader %s killed (SIGKILL) under writes: the next write acknowledged after %v\n",
		leader.addr, failover.Round(time.Millisecond))
	// Start it again (only the dead replica starts) and check every
	// replica holds every acknowledged write once it caught up.
	if _, err := startLocalGroup(dir, d.clusterReplicas, port, "sync"); err != nil {
		return err
	}
	truth := make([]int64, demoClusterKeys)
	for k := range demoClusterKeys {
		v, err := retry("HGET", fmt.Sprint("posts:", k), "likes")
		if err != nil {
			return err
		}
		var got int64
		if v != nil {
			fmt.Sscan(fmt.Sprint(v), &got)
		}
		if got < acked[k] {
			return fmt.Errorf("cluster: posts:%d likes = %d, below the acknowledged %d", k, got, acked[k])
		}
		truth[k] = got
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, addr := range addrs {
		rc := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, MaxRetries: -1})
		if err := rc.Do(ctx, "READONLY").Err(); err != nil {
			rc.Close()
			return err
		}
		for k := range demoClusterKeys {
			for {
				got, _ := rc.HGet(ctx, fmt.Sprint("posts:", k), "likes").Int64()
				if got == truth[k] {
					break
				}
				if time.Now().After(deadline) {
					rc.Close()
					return fmt.Errorf("cluster: replica %s has posts:%d likes = %d, the leader %d", addr, k, got, truth[k])
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		rc.Close()
	}
	d.printf("cluster ok every replica (the killed one restarted) holds every acknowledged write\n")
	d.reportLines = append(d.reportLines,
		fmt.Sprintf("  cluster    %d replicas, %.0f writes/s from %d clients, failover %v",
			len(procs), float64(n)/took.Seconds(), d.clients, failover.Round(time.Millisecond)))
	return nil
}
