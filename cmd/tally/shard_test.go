package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tallydb/tally/server"
)

// shardProc is one process of a local sharded cluster as cluster local
// start printed it.
type shardProc struct {
	addr, role string
	pid, shard int
}

func parseShardProcs(t *testing.T, out string) []shardProc {
	t.Helper()
	var ps []shardProc
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 {
			t.Fatalf("cluster local start printed %q, want ADDR PID ROLE SHARD", line)
		}
		pid, _ := strconv.Atoi(f[1])
		sh, _ := strconv.Atoi(f[3])
		ps = append(ps, shardProc{addr: f[0], pid: pid, role: f[2], shard: sh})
	}
	return ps
}

// TestShardedProcesses runs three shards of three "tally serve --cluster"
// processes (tally cluster local start --shards 3), writes through
// go-redis's ClusterClient from several goroutines while a shard's leader
// is killed with SIGKILL (and started again) and another shard's replica
// moves to a new node (cluster local add-node, cluster move), and checks
// that every acknowledged increment is there, that each key lives on the
// shard its slot maps to and on every replica of it, and that schema
// commands reached every shard.
func TestShardedProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	port := freePorts(t, 10)
	ps := strconv.Itoa(port)
	t.Cleanup(func() { tallyCmd(t, "-d", dir, "cluster", "local", "stop") })
	procs := parseShardProcs(t, tallyCmd(t, "-d", dir, "cluster", "local", "start", "--shards", "3", "--replicas", "3", "--port", ps))
	if len(procs) != 9 {
		t.Fatalf("started %d processes, want 9", len(procs))
	}
	leaders := map[int]shardProc{}
	var addrs []string
	for _, p := range procs {
		addrs = append(addrs, p.addr)
		if p.role == "leader" {
			leaders[p.shard] = p
		}
	}
	if len(leaders) != 3 {
		t.Fatalf("leaders %v: want one per shard", leaders)
	}
	ctx := context.Background()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 16,
		DialTimeout: time.Second, ReadTimeout: 20 * time.Second})
	defer c.Close()
	retry := func(args ...any) (any, error) {
		var v any
		var err error
		for range 500 {
			v, err = c.Do(ctx, args...).Result()
			if err == nil || strings.HasPrefix(err.Error(), "ERR ") {
				return v, err
			}
			time.Sleep(20 * time.Millisecond)
		}
		return v, err
	}
	// Schema commands have no key: sent to one shard, they reach every
	// shard through the cross-shard streams.
	for _, cmd := range [][]any{{"TALLY.COUNTER", "ADD", "posts"}, {"TALLY.COLUMN", "ADD", "posts", "likes"}} {
		if _, err := retry(cmd...); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	const keys = 60
	var mu sync.Mutex
	want := map[int]int64{}
	write := func(n int, rng *rand.Rand) {
		for range n {
			id := rng.IntN(keys)
			v, err := retry("HINCRBY", fmt.Sprint("posts:", id), "likes", 1)
			if err != nil {
				continue // unknown outcome: the truth is read back below
			}
			mu.Lock()
			want[id] = max(want[id], v.(int64))
			mu.Unlock()
		}
	}
	// Until the broadcast reached a shard, its HINCRBY says "no such
	// counter": wait for it on every shard.
	deadline := time.Now().Add(20 * time.Second)
	for id := 0; id < keys; id++ {
		for {
			_, err := c.Do(ctx, "HINCRBY", fmt.Sprint("posts:", id), "likes", 0).Result()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("HINCRBY posts:%d: %v (the schema did not reach its shard)", id, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var wg sync.WaitGroup
	load := func(n int) {
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				write(n, rand.New(rand.NewPCG(uint64(g), uint64(n))))
			}()
		}
	}
	load(100)
	wg.Wait()

	// SIGKILL shard 2's leader under load, then start it again.
	load(100)
	if err := syscall.Kill(leaders[2].pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	out := tallyCmd(t, "-d", dir, "cluster", "local", "start", "--shards", "3", "--replicas", "3", "--port", ps)
	if !strings.Contains(out, leaders[2].addr) {
		t.Fatalf("restart printed %q, without %s", out, leaders[2].addr)
	}

	// Move a follower of shard 3 to a new node under load.
	var from shardProc
	for _, p := range procs {
		if p.shard == 3 && p.role != "leader" {
			from = p
			break
		}
	}
	fromPort, _ := strconv.Atoi(from.addr[strings.LastIndex(from.addr, ":")+1:])
	fromID := strconv.Itoa(fromPort - port + 1) // cluster local start's node ids
	added := strings.Fields(tallyCmd(t, "-d", dir, "cluster", "local", "add-node", "--shard", "3"))
	if len(added) != 4 {
		t.Fatalf("add-node printed %q, want ADDR PID ID RAFT_ADDR", added)
	}
	// Registered in the map first (refused twice, and for an address in
	// use), the node is then named by its id alone.
	if out := tallyCmd(t, "cluster", "add-node", added[2], added[3], added[0], "--addr", procs[1].addr); !strings.HasPrefix(out, "map_epoch ") {
		t.Fatalf("cluster add-node printed %q", out)
	}
	for _, bad := range [][]string{
		{added[2], "127.0.0.1:1", "127.0.0.1:2"}, // the id again
		{"99", added[3], "127.0.0.1:2"},          // its raft address
		{"99", "127.0.0.1:1", procs[4].addr},     // a replica's client address
		{"99", "127.0.0.1:1", "127.0.0.1:0"},     // no port
	} {
		if _, stderr, code := tally(t, append([]string{"cluster", "add-node", "--addr", procs[0].addr}, bad...)...); code != exitError {
			t.Fatalf("add-node %v: exit %d, %s", bad, code, stderr)
		}
	}
	if st, err := shardsStatus(procs[0].addr, ""); err != nil || len(st.nodes) != 1 || fmt.Sprint(st.nodes[0].ID) != added[2] {
		t.Fatalf("spare nodes %+v, %v", st.nodes, err)
	}
	if out := tallyCmd(t, "cluster", "status", "--addr", procs[0].addr); !strings.Contains(out, "node "+added[2]+" "+added[3]+" "+added[0]+"\n") {
		t.Fatalf("cluster status does not list the spare node:\n%s", out)
	}
	if _, stderr, code := tally(t, "cluster", "move", "3", fromID, "77", "--addr", procs[0].addr); code != exitError || !strings.Contains(stderr, "not registered") {
		t.Fatalf("move to an unregistered node: exit %d, %s", code, stderr)
	}
	load(100)
	moved := tallyCmd(t, "cluster", "move", "3", fromID, added[2], "--addr", procs[0].addr)
	wg.Wait()
	if !strings.Contains(moved, "removed") {
		t.Fatalf("cluster move printed %q", moved)
	}
	// The map lists the new replica (the shard's leader publishes it).
	deadline = time.Now().Add(20 * time.Second)
	for {
		st, err := shardsStatus(procs[0].addr, "")
		if err == nil && len(st.shards) == 3 && strings.Contains(strings.Join(st.shards[2].replicas, ","), "/"+added[0]) &&
			!strings.Contains(strings.Join(st.shards[2].replicas, ","), "/"+from.addr) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the map does not show the move: %+v %v", st, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	load(50)
	wg.Wait()

	// Every process is on 127.0.0.1: by host there is one unit, nothing
	// to move, and every shard is warned of; by node each node leads at
	// most one shard. A bad --by is a usage error.
	reb := tallyCmd(t, "cluster", "rebalance", "--addr", procs[2].addr)
	if !strings.Contains(reb, "by host\nbefore 127.0.0.1=3\nafter 127.0.0.1=3\n") || strings.Count(reb, "warn shard ") != 3 || strings.Contains(reb, "move ") {
		t.Fatalf("cluster rebalance printed:\n%s", reb)
	}
	if reb := tallyCmd(t, "cluster", "rebalance", "--by", "node", "--dry-run", "--addr", procs[2].addr); strings.Contains(reb, "move ") {
		t.Fatalf("cluster rebalance --by node printed:\n%s", reb)
	}
	if _, _, code := tally(t, "cluster", "rebalance", "--by", "rack", "--addr", procs[2].addr); code != exitUsage {
		t.Fatalf("--by rack: exit %d", code)
	}

	checkShardedTimelines(t, ctx, c)
	checkCLIRouting(t, ctx, c, filepath.Join(dir, "node-2"))

	// Every acknowledged increment is there, read through the cluster.
	truth := map[int]int64{}
	for id, w := range want {
		got, err := c.HGet(ctx, fmt.Sprint("posts:", id), "likes").Int64()
		if err != nil || got < w {
			t.Fatalf("posts:%d likes = %d (%v), want at least the acknowledged %d", id, got, err, w)
		}
		truth[id] = got
	}
	// Each key is on every replica of its shard (READONLY reads, once
	// caught up) and on no other shard's replicas.
	st, err := shardsStatus(procs[0].addr, "")
	if err != nil {
		t.Fatal(err)
	}
	slotShard := func(slot int) int {
		for _, s := range st.shards {
			for _, r := range s.slots {
				a, b, _ := strings.Cut(r, "-")
				lo, _ := strconv.Atoi(a)
				hi, _ := strconv.Atoi(b)
				if slot >= lo && slot <= hi {
					return int(s.id)
				}
			}
		}
		return 0
	}
	deadline = time.Now().Add(30 * time.Second)
	for _, s := range st.shards {
		for _, r := range s.replicas {
			addr := r[strings.LastIndex(r, "/")+1:]
			rc := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1})
			if err := rc.Do(ctx, "READONLY").Err(); err != nil {
				t.Fatal(err)
			}
			for id, w := range truth {
				key := fmt.Sprint("posts:", id)
				mine := slotShard(server.Slot([]byte(key))) == int(s.id)
				for {
					got, err := rc.HGet(ctx, key, "likes").Int64()
					if !mine {
						if err == nil || !strings.HasPrefix(err.Error(), "MOVED ") {
							t.Fatalf("%s on shard %d (%s): %d, %v; want MOVED", key, s.id, addr, got, err)
						}
						break
					}
					if err == nil && got == w {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s on shard %d replica %s = %d (%v), want %d", key, s.id, addr, got, err, w)
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			rc.Close()
		}
	}
}

// checkShardedTimelines follows and posts across shards through the
// cluster client and checks that every home shows exactly its followees'
// posts, newest first, each once, and that every author's followers are
// its followers' followees (the two sides of the edges, kept on different
// shards).
func checkShardedTimelines(t *testing.T, ctx context.Context, c *redis.ClusterClient) {
	t.Helper()
	const users = 12
	rng := rand.New(rand.NewPCG(7, 7))
	follows := map[int]map[int]bool{}
	do := func(args ...any) any {
		t.Helper()
		var v any
		var err error
		for range 200 {
			if v, err = c.Do(ctx, args...).Result(); err == nil {
				return v
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("%v: %v", args, err)
		return nil
	}
	for u := 1; u <= users; u++ {
		follows[u] = map[int]bool{}
		for len(follows[u]) < 3 {
			a := 1 + rng.IntN(users)
			if a != u && !follows[u][a] {
				follows[u][a] = true
				do("TL.FOLLOW", u, a)
			}
		}
	}
	posts := map[int][]int{}
	next := 1000
	for round := 0; round < 2; round++ {
		for a := 1; a <= users; a++ {
			next++
			do("TL.POST", a, next)
			posts[a] = append(posts[a], next)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for u := 1; u <= users; u++ {
		var want []int
		for a := range follows[u] {
			want = append(want, posts[a]...)
		}
		slices.SortFunc(want, func(x, y int) int { return y - x })
		for {
			var got []int
			for _, id := range homePosts(do("TL.HOME", u, "LIMIT", 100)) {
				got = append(got, int(id))
			}
			if slices.Equal(got, want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("TL.HOME %d = %v, want %v (followees %v)", u, got, want, follows[u])
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for a := 1; a <= users; a++ {
		var want []int
		for u := 1; u <= users; u++ {
			if follows[u][a] {
				want = append(want, u)
			}
		}
		v := do("TL.FOLLOWERS", a, "LIMIT", 100)
		var got []int
		if page, ok := v.([]any); ok && len(page) == 2 {
			items, _ := page[1].([]any)
			for _, it := range items {
				id, _ := strconv.Atoi(fmt.Sprint(it))
				got = append(got, id)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("TL.FOLLOWERS %d = %v, want %v", a, got, want)
		}
	}
}

// checkCLIRouting runs the CLI against one node's directory of the
// sharded cluster (TALLY.EXEC, routed by route.go): a schema change
// reaches every shard, a keyed write and read go to the key's shard
// (checked through the cluster client), a command whose keys span shards
// and a gathered read are refused with errCrossShard's words and change
// nothing.
func checkCLIRouting(t *testing.T, ctx context.Context, c *redis.ClusterClient, node string) {
	t.Helper()
	mustTally(t, "-d", node, "counter", "add", "views")
	mustTally(t, "-d", node, "column", "add", "views", "n")
	// Again: every shard refuses it alike, so the error is printed once.
	if out, errOut, code := tally(t, "-d", node, "counter", "add", "views"); code != exitError || out != "" ||
		strings.Count(errOut, "\n") != 1 || strings.Contains(errOut, "shard ") {
		t.Fatalf("counter add views again: exit %d, %q %q", code, out, errOut)
	}
	st, err := shardsStatus(readAddrT(t, node), "")
	if err != nil {
		t.Fatal(err)
	}
	onShard := map[uint64][]int{}
	for k := range 40 {
		sid := st.shardOfSlot(server.Slot([]byte(fmt.Sprint("views:", k))))
		onShard[sid] = append(onShard[sid], k)
		if got := strings.TrimSpace(mustTally(t, "-d", node, "incr", "views", fmt.Sprintf("%d.n", k), fmt.Sprint(k+1))); got != fmt.Sprint(k+1) {
			t.Fatalf("incr views %d.n: %q", k, got)
		}
		if got := strings.TrimSpace(mustTally(t, "-d", node, "get", "views", fmt.Sprintf("%d.n", k))); got != fmt.Sprintf("%d.n %d", k, k+1) {
			t.Fatalf("get views %d.n: %q", k, got)
		}
		// The row is where a cluster client finds it: on its slot's shard.
		if got, err := c.HGet(ctx, fmt.Sprint("views:", k), "n").Int(); err != nil || got != k+1 {
			t.Fatalf("HGET views:%d n = %d, %v", k, got, err)
		}
	}
	if len(onShard) != 3 {
		t.Fatalf("40 keys on %d shards", len(onShard))
	}
	a, b := onShard[1][0], onShard[2][0]
	for _, args := range [][]string{
		{"get", "views", fmt.Sprint(a), fmt.Sprint(b)},
		{"top", "video", "10"},
	} {
		out, errOut, code := tally(t, append([]string{"-d", node}, args...)...)
		if code != exitError || out != "" || !strings.Contains(errOut, "spans shards") {
			t.Fatalf("%v: exit %d, %q %q", args, code, out, errOut)
		}
	}
	// Several keys of one shard run there.
	if got := mustTally(t, "-d", node, "get", "views", fmt.Sprintf("%d.n", onShard[3][0]), fmt.Sprintf("%d.n", onShard[3][1])); strings.Count(got, "\n") != 2 {
		t.Fatalf("get of two keys of shard 3: %q", got)
	}
}

// readAddrT is readAddr that fails the test.
func readAddrT(t *testing.T, dir string) string {
	t.Helper()
	a, err := readAddr(dir)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
