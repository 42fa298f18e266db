package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The processes of the sharding benchmarks (issue 23): a tally cluster of
// S shards × 3 replicas started with "tally cluster local start --shards
// S", and a Redis Cluster of the same shape (S masters with 2 replicas
// each, cluster-enabled, AOF on), built by hand with CLUSTER
// ADDSLOTSRANGE, MEET and REPLICATE because "redis-cli --cluster create"
// refuses fewer than 3 masters.

// errShardBench is the error class of the sharding benchmarks' own checks.
var errShardBench = errors.New("bench: sharding benchmark")

// metaPortOffset is cluster local start's distance between a node's
// client port and its metadata-group port.
const metaPortOffset = 20000

// shardCluster is one running cluster of either kind.
type shardCluster interface {
	// Addrs returns every node's client address.
	Addrs() []string
	// Pids returns every server process's pid (for CPU accounting).
	Pids() []int
	// Stop stops every process.
	Stop() error
}

// tallyShards is a cluster of "tally cluster local start --shards S".
type tallyShards struct {
	bin, dir string
	port     int
	nodes    int
}

// freeShardPorts returns p such that p..p+n-1 and the same ports plus
// raftPortOffset and metaPortOffset are free now.
func freeShardPorts(n int) (int, error) {
	for try := 0; try < 200; try++ {
		p := 12000 + rand.IntN(8000-n)
		ok := true
		for i := 0; i < n && ok; i++ {
			for _, q := range []int{p + i, p + i + raftPortOffset, p + i + metaPortOffset} {
				l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(q)))
				if err != nil {
					ok = false
					break
				}
				l.Close()
			}
		}
		if ok {
			return p, nil
		}
	}
	return 0, fmt.Errorf("%w: no free range of ports", errShardBench)
}

// startTallyShards starts shards × replicas processes in dir (room is
// left in the port range for spare nodes added later), creates the counter
// "posts" with clusterCols through one node and waits until every shard
// has it.
func startTallyShards(ctx context.Context, bin, dir, durability string, shards, replicas, spare int) (*tallyShards, error) {
	n := shards * replicas
	port, err := freeShardPorts(n + spare)
	if err != nil {
		return nil, err
	}
	t := &tallyShards{bin: bin, dir: dir, port: port, nodes: n}
	out, err := exec.CommandContext(ctx, bin, "-d", dir, "--durability", durability, "cluster", "local", "start",
		"--shards", strconv.Itoa(shards), "--replicas", strconv.Itoa(replicas), "--port", strconv.Itoa(port)).CombinedOutput()
	if err != nil {
		t.Stop()
		return nil, fmt.Errorf("cluster local start: %v: %s", err, lastLines(string(out), 5))
	}
	if err := createSchemaFollowing(t.Addrs()[0]); err != nil {
		t.Stop()
		return nil, err
	}
	if err := waitSchema(ctx, t.Addrs()); err != nil {
		t.Stop()
		return nil, err
	}
	return t, nil
}

// createSchemaFollowing runs createSchema at addr, or, when addr answers
// MOVED (a follower sends a keyless write to its shard's leader), at the
// address the MOVED names (a MOVED command did not run).
func createSchemaFollowing(addr string) error {
	for hop := 0; hop < 5; hop++ {
		err := createSchema(addr)
		var re redisError
		if !errors.As(err, &re) || !strings.HasPrefix(string(re), "MOVED ") {
			return err
		}
		f := strings.Fields(string(re))
		if len(f) != 3 || hop > 0 || !strings.HasPrefix(err.Error(), "[TALLY.COUNTER ADD") {
			// Only the first command can move us: a later one would
			// mean part of the schema ran elsewhere.
			return err
		}
		addr = f[2]
	}
	return fmt.Errorf("%w: too many MOVED creating the schema", errShardBench)
}

// waitSchema waits until HINCRBY posts:K likes 0 succeeds through a
// cluster client for keys of every slot range (the schema, a keyless
// write, reaches the other shards through the cross-shard streams).
func waitSchema(ctx context.Context, addrs []string) error {
	cc := newClusterClient(addrs, 4)
	defer cc.Close()
	deadline := time.Now().Add(time.Minute)
	var last error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		last = nil
		pipe := cc.Pipeline()
		for k := 0; k < 256; k++ {
			pipe.HIncrBy(ctx, "posts:"+strconv.Itoa(k*3907), "likes", 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			last = err
			time.Sleep(100 * time.Millisecond)
			continue
		}
		return nil
	}
	return fmt.Errorf("%w: the schema did not reach every shard: %v", errShardBench, last)
}

// addr returns node id's client address (ids from 1, added nodes too).
func (t *tallyShards) addr(id int) string { return fmt.Sprintf("127.0.0.1:%d", t.port+id-1) }

func (t *tallyShards) Addrs() []string {
	a := make([]string, t.nodes)
	for i := range a {
		a[i] = fmt.Sprintf("127.0.0.1:%d", t.port+i)
	}
	return a
}

func (t *tallyShards) Pids() []int {
	var pids []int
	ents, _ := filepath.Glob(filepath.Join(t.dir, "node-*.pid"))
	for _, e := range ents {
		b, err := os.ReadFile(e)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

func (t *tallyShards) Stop() error {
	out, err := exec.Command(t.bin, "-d", t.dir, "cluster", "local", "stop").CombinedOutput()
	if err != nil {
		return fmt.Errorf("cluster local stop: %v: %s", err, lastLines(string(out), 3))
	}
	return nil
}

// redisShards is a Redis Cluster of S masters with 2 replicas each.
type redisShards struct {
	procs []*proc // masters at 0, per, 2×per, ...; each followed by its per-1 replicas
	per   int
}

// startRedisShards starts 3×shards redis-servers in dir with
// cluster-enabled, AOF on and the given appendfsync, assigns the slots
// evenly to the masters (as tally cluster create does), joins them and
// makes each master's two followers its replicas, then waits until every
// node says cluster_state:ok and every master has 2 online replicas.
func startRedisShards(ctx context.Context, dir, appendfsync string, shards int) (*redisShards, error) {
	return startRedisShardsN(ctx, dir, appendfsync, shards, 3)
}

// startRedisShardsN is startRedisShards with replicas processes per shard
// (the master and replicas-1 replicas).
func startRedisShardsN(ctx context.Context, dir, appendfsync string, shards, replicas int) (*redisShards, error) {
	n := replicas * shards
	port, err := freePortRange(n) // the bus port is port+10000, as raftPortOffset
	if err != nil {
		return nil, err
	}
	r := &redisShards{per: replicas}
	for i := 0; i < n; i++ {
		d := filepath.Join(dir, fmt.Sprintf("redis-%d", i+1))
		if err := os.MkdirAll(d, 0o755); err != nil {
			r.Stop()
			return nil, err
		}
		p := port + i
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		args := []string{"--port", strconv.Itoa(p), "--bind", "127.0.0.1", "--dir", d, "--save", "",
			"--daemonize", "no", "--appendonly", "yes", "--appendfsync", appendfsync,
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000"}
		pr, err := startProc(fmt.Sprintf("redis-server %d", i+1), addr, exec.Command("redis-server", args...), filepath.Join(d, "redis.log"))
		if err != nil {
			r.Stop()
			return nil, err
		}
		r.procs = append(r.procs, pr)
	}
	if err := r.form(ctx, shards); err != nil {
		r.Stop()
		return nil, err
	}
	return r, nil
}

// form assigns the slots, meets the nodes and sets the replicas.
func (r *redisShards) form(ctx context.Context, shards int) error {
	clients := make([]*redis.Client, len(r.procs))
	for i, p := range r.procs {
		clients[i] = redis.NewClient(&redis.Options{Addr: p.addr, Protocol: 2, MaxRetries: -1})
		defer clients[i].Close()
	}
	ids := make([]string, len(r.procs))
	for i, c := range clients {
		id, err := c.Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			return fmt.Errorf("CLUSTER MYID: %w", err)
		}
		ids[i] = id
	}
	for s := 0; s < shards; s++ {
		from, to := s*NumSlotsRedis/shards, (s+1)*NumSlotsRedis/shards-1
		c := clients[r.per*s]
		if err := c.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", s+1).Err(); err != nil {
			return fmt.Errorf("SET-CONFIG-EPOCH: %w", err)
		}
		if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", from, to).Err(); err != nil {
			return fmt.Errorf("ADDSLOTSRANGE: %w", err)
		}
	}
	host, port0, _ := net.SplitHostPort(r.procs[0].addr)
	for _, c := range clients[1:] {
		if err := c.Do(ctx, "CLUSTER", "MEET", host, port0).Err(); err != nil {
			return fmt.Errorf("CLUSTER MEET: %w", err)
		}
	}
	// Every node must know every other before REPLICATE names a master.
	if err := waitUntil(ctx, time.Minute, func() (bool, error) {
		for _, c := range clients {
			nodes, err := c.Do(ctx, "CLUSTER", "NODES").Text()
			if err != nil {
				return false, err
			}
			lines := strings.Split(strings.TrimSpace(nodes), "\n")
			if len(lines) != len(clients) || strings.Contains(nodes, "handshake") || strings.Contains(nodes, "noaddr") {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return fmt.Errorf("nodes meeting: %w", err)
	}
	for i, c := range clients {
		if i%r.per != 0 {
			if err := c.Do(ctx, "CLUSTER", "REPLICATE", ids[i-i%r.per]).Err(); err != nil {
				return fmt.Errorf("CLUSTER REPLICATE: %w", err)
			}
		}
	}
	return waitUntil(ctx, 2*time.Minute, func() (bool, error) {
		for i, c := range clients {
			info, err := c.Do(ctx, "CLUSTER", "INFO").Text()
			if err != nil {
				return false, err
			}
			if !strings.Contains(info, "cluster_state:ok") {
				return false, nil
			}
			if i%r.per == 0 {
				repl, err := c.Info(ctx, "replication").Result()
				if err != nil {
					return false, err
				}
				if strings.Count(repl, "state=online") != r.per-1 {
					return false, nil
				}
			}
		}
		return true, nil
	})
}

// NumSlotsRedis is the number of hash slots of a Redis (and tally) cluster.
const NumSlotsRedis = 16384

func (r *redisShards) Addrs() []string {
	a := make([]string, len(r.procs))
	for i, p := range r.procs {
		a[i] = p.addr
	}
	return a
}

func (r *redisShards) Pids() []int {
	var pids []int
	for _, p := range r.procs {
		pids = append(pids, p.cmd.Process.Pid)
	}
	return pids
}

func (r *redisShards) Stop() error {
	for _, p := range r.procs {
		p.stop()
	}
	return nil
}

// waitUntil polls cond every 50 ms until it is true, returns an error, or
// limit passes.
func waitUntil(ctx context.Context, limit time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: timed out after %v", errShardBench, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// newClusterClient returns a go-redis ClusterClient over addrs with pool
// connections per node (RESP2, as the other benchmarks).
func newClusterClient(addrs []string, pool int) *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Protocol: 2, PoolSize: pool,
		MaxRedirects: 16, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second})
}

// procCPU returns the user+system CPU time of pid from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times (100 on
// every Linux architecture Go supports).
const clockTicks = 100

// parseStatCPU reads utime and stime (fields 14 and 15) of a
// /proc/PID/stat line; the command name (field 2) may hold spaces and
// parentheses, so the fields are counted after its last ')'.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("%w: malformed /proc stat %q", errShardBench, stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state), so field k is f[k-3].
	if len(f) < 13 {
		return 0, fmt.Errorf("%w: short /proc stat %q", errShardBench, stat)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%w: malformed /proc stat times %q %q", errShardBench, f[11], f[12])
	}
	return time.Duration(u+s) * time.Second / clockTicks, nil
}

// sumCPU returns the CPU time of every pid (those gone count 0).
func sumCPU(pids []int) time.Duration {
	var t time.Duration
	for _, p := range pids {
		if c, err := procCPU(p); err == nil {
			t += c
		}
	}
	return t
}

// loadAvg returns /proc/loadavg's three figures as "a b c".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
