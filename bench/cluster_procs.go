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
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// The processes of the replication benchmarks (issue 22): a tally replica
// group started with "tally cluster local start", a single "tally serve",
// and a redis-server primary with one replica. Every process is started on
// loopback in a directory of its own and stopped by the benchmark; a group
// is stopped with "tally cluster local stop", which SIGTERMs the replicas
// (their pids are in DIR/node-N.pid).

// errNoLeader is returned when no replica of a group reports itself leader.
var errNoLeader = errors.New("bench: no leader in the group")

// clusterCols are the columns of the counter "posts" every target gets.
var clusterCols = []string{"reposts", "comments", "likes"}

// group is a running replica group of cluster local start.
type group struct {
	bin, dir, durability string
	port                 int // client port of replica 1; replica i serves port+i-1, raft on +10000
	replicas             int
}

// raftPortOffset is cluster local start's distance between a replica's
// client port and its raft port.
const raftPortOffset = 10000

// startGroup starts a group of n replicas on ports port.. (and their raft
// ports), waits for a leader and creates the counter "posts" with
// clusterCols.
func startGroup(bin, dir, durability string, port, n int) (*group, error) {
	g := &group{bin: bin, dir: dir, durability: durability, port: port, replicas: n}
	if err := g.start(); err != nil {
		g.stop()
		return nil, err
	}
	leader, err := g.leader()
	if err != nil {
		g.stop()
		return nil, err
	}
	if err := createSchema(leader); err != nil {
		g.stop()
		return nil, err
	}
	return g, nil
}

// start runs "cluster local start", which starts the replicas that are not
// running and returns once they agree on a leader.
func (g *group) start() error {
	out, err := exec.Command(g.bin, "-d", g.dir, "--durability", g.durability, "cluster", "local", "start",
		"--replicas", strconv.Itoa(g.replicas), "--port", strconv.Itoa(g.port)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cluster local start: %v: %s", err, lastLines(string(out), 5))
	}
	return nil
}

func (g *group) stop() error {
	out, err := exec.Command(g.bin, "-d", g.dir, "cluster", "local", "stop").CombinedOutput()
	if err != nil {
		return fmt.Errorf("cluster local stop: %v: %s", err, lastLines(string(out), 3))
	}
	return nil
}

// addr returns replica i's client address (i from 1).
func (g *group) addr(i int) string { return fmt.Sprintf("127.0.0.1:%d", g.port+i-1) }

// pid returns the pid cluster local start recorded for replica i.
func (g *group) pid(i int) (int, error) {
	b, err := os.ReadFile(filepath.Join(g.dir, fmt.Sprintf("node-%d.pid", i)))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// leader returns the client address of the replica that reports itself
// leader.
func (g *group) leader() (string, error) {
	for i := 1; i <= g.replicas; i++ {
		st, err := clusterStatus(g.addr(i))
		if err == nil && st.Role == "leader" {
			return g.addr(i), nil
		}
	}
	return "", errNoLeader
}

// leaderIndex returns the replica number of the leader.
func (g *group) leaderIndex() (int, error) {
	a, err := g.leader()
	if err != nil {
		return 0, err
	}
	return hostPort(a) - g.port + 1, nil
}

// followers returns the client addresses of every replica but the leader.
func (g *group) followers(leader string) []string {
	var f []string
	for i := 1; i <= g.replicas; i++ {
		if g.addr(i) != leader {
			f = append(f, g.addr(i))
		}
	}
	return f
}

// replicaStatus is the part of TALLY.CLUSTER STATUS the benchmarks use.
type replicaStatus struct {
	Role                    string
	Term, Commit, Applied   int64
	LeaderID                int64
	LeaderAddr              string
	Log                     string          // FIRST-LAST index of the log kept
	MemberMatch, MemberLags map[int64]int64 // the leader's view, by replica id
}

// clusterStatus asks the replica at addr for TALLY.CLUSTER STATUS.
func clusterStatus(addr string) (replicaStatus, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, DialTimeout: time.Second, ReadTimeout: 2 * time.Second,
		MaxRetries: -1, PoolSize: 1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	v, err := c.Do(ctx, "TALLY.CLUSTER", "STATUS").Slice()
	if err != nil {
		return replicaStatus{}, err
	}
	return parseClusterStatus(v)
}

// parseClusterStatus reads TALLY.CLUSTER STATUS's reply: key, value pairs,
// "members" followed by an array of members, each an array of key, value
// pairs.
func parseClusterStatus(v []any) (replicaStatus, error) {
	st := replicaStatus{MemberMatch: map[int64]int64{}, MemberLags: map[int64]int64{}}
	num := func(x any) int64 {
		switch x := x.(type) {
		case int64:
			return x
		case string:
			n, _ := strconv.ParseInt(x, 10, 64)
			return n
		}
		return 0
	}
	for i := 0; i+1 < len(v); i += 2 {
		k, _ := v[i].(string)
		switch k {
		case "role":
			st.Role, _ = v[i+1].(string)
		case "term":
			st.Term = num(v[i+1])
		case "commit":
			st.Commit = num(v[i+1])
		case "applied":
			st.Applied = num(v[i+1])
		case "leader":
			st.LeaderID = num(v[i+1])
		case "log":
			st.Log, _ = v[i+1].(string)
		case "leader_addr":
			st.LeaderAddr, _ = v[i+1].(string)
		case "members":
			ms, _ := v[i+1].([]any)
			for _, m := range ms {
				kv, _ := m.([]any)
				var id, match, lag int64
				for j := 0; j+1 < len(kv); j += 2 {
					switch kv[j] {
					case "id":
						id = num(kv[j+1])
					case "match":
						match = num(kv[j+1])
					case "lag":
						lag = num(kv[j+1])
					}
				}
				st.MemberMatch[id], st.MemberLags[id] = match, lag
			}
		}
	}
	if st.Role == "" {
		return st, fmt.Errorf("bench: TALLY.CLUSTER STATUS without a role: %v", v)
	}
	return st, nil
}

// createSchema creates the counter "posts" with clusterCols at addr.
func createSchema(addr string) error {
	c, err := dialRESP(addr, redisTimeout)
	if err != nil {
		return err
	}
	defer c.Close()
	cmds := [][]string{{"TALLY.COUNTER", "ADD", "posts"}}
	for _, col := range clusterCols {
		cmds = append(cmds, []string{"TALLY.COLUMN", "ADD", "posts", col})
	}
	for _, cmd := range cmds {
		if _, err := c.do(cmd...); err != nil {
			return fmt.Errorf("%v: %w", cmd, err)
		}
	}
	return nil
}

// proc is one server process the benchmark started and stops.
type proc struct {
	name   string
	addr   string
	cmd    *exec.Cmd
	exited chan error
}

// startProc starts cmd and waits until addr answers PING.
func startProc(name, addr string, cmd *exec.Cmd, logPath string) (*proc, error) {
	p := &proc{name: name, addr: addr, cmd: cmd, exited: make(chan error, 1)}
	if logPath != "" {
		f, err := os.Create(logPath)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f, f
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { p.exited <- cmd.Wait() }()
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case err := <-p.exited:
			log, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("%s exited (%v): %s", name, err, lastLines(string(log), 5))
		default:
		}
		if c, err := dialRESP(addr, time.Second); err == nil {
			pong, err := c.do("PING")
			c.Close()
			if err == nil && pong == "PONG" {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			p.cmd.Process.Kill()
			<-p.exited
			return nil, fmt.Errorf("%s did not answer PING in time", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits (a minute, then SIGKILL).
func (p *proc) stop() {
	if p == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// startNode starts one "tally serve" (not clustered) on a free port in dir
// with the counter "posts" and clusterCols.
func startNode(bin, dir, durability string) (*proc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	p, err := startProc("tally serve", addr, exec.Command(bin, "-d", filepath.Join(dir, "db"), "--durability", durability,
		"serve", "--create", "--addr", addr), filepath.Join(dir, "serve.log"))
	if err != nil {
		return nil, err
	}
	if err := createSchema(addr); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// redisPair is a redis-server primary with one replica (--replicaof), both
// with AOF on and the same appendfsync.
type redisPair struct {
	primary, replica *proc
}

// redisFsync maps tally's durability to Redis's appendfsync.
func redisFsync(durability string) string {
	if durability == "sync" {
		return "always"
	}
	return "everysec"
}

// startRedisPair starts the primary and the replica in dir/primary and
// dir/replica and waits until the replica's link is up.
func startRedisPair(dir, appendfsync string) (*redisPair, error) {
	var rp redisPair
	var err error
	for _, role := range []string{"primary", "replica"} {
		d := filepath.Join(dir, role)
		if err = os.MkdirAll(d, 0o755); err != nil {
			break
		}
		var port int
		if port, err = freePort(); err != nil {
			break
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", d, "--save", "",
			"--daemonize", "no", "--appendonly", "yes", "--appendfsync", appendfsync}
		if role == "replica" {
			_, pport, _ := net.SplitHostPort(rp.primary.addr)
			args = append(args, "--replicaof", "127.0.0.1", pport)
		}
		var p *proc
		p, err = startProc("redis-server "+role, addr, exec.Command("redis-server", args...), filepath.Join(d, "redis.log"))
		if err != nil {
			break
		}
		if role == "primary" {
			rp.primary = p
		} else {
			rp.replica = p
		}
	}
	if err == nil {
		err = rp.waitLink()
	}
	if err != nil {
		rp.stop()
		return nil, err
	}
	return &rp, nil
}

// waitLink waits until the primary counts one connected replica in sync.
func (rp *redisPair) waitLink() error {
	c, err := dialRESP(rp.replica.addr, redisTimeout)
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		info, err := c.do("INFO", "replication")
		if err != nil {
			return err
		}
		if strings.Contains(info, "master_link_status:up") {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("bench: the Redis replica did not connect to its primary in time")
}

func (rp *redisPair) stop() {
	rp.replica.stop()
	rp.primary.stop()
}

// freePortRange returns a port p such that p..p+n-1 and the raft ports
// p+raftPortOffset.. are free now (a later bind can still race another
// program).
func freePortRange(n int) (int, error) {
	for try := 0; try < 200; try++ {
		// Below the usual ephemeral range (32768..), so the raft ports
		// fit under 65536 too.
		p := 20000 + rand.IntN(12000-n)
		ok := true
		for i := 0; i < n && ok; i++ {
			for _, q := range []int{p + i, p + i + raftPortOffset} {
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
	return 0, errors.New("bench: no free range of ports for a replica group")
}

// dirBytes returns the size of every regular file under dir.
func dirBytes(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}
