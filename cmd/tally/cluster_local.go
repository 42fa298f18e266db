package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tallydb/tally/cluster"
	"github.com/tallydb/tally/replica"
)

// raftPortOffset is how far above a replica's client port cluster local
// start puts its raft port, and metaPortOffset its metadata group's raft
// port (with --shards).
const (
	raftPortOffset = 10000
	metaPortOffset = 20000
)

var cmdClusterLocalStart = &command{name: "cluster local start", local: true,
	synopsis: "start a replica group of tally serve processes on this machine",
	help: `Usage: tally cluster local start -d DIR [--shards S] [--replicas N] [--port P] [--durability MODE]

Starts S×N "tally serve --cluster" processes on 127.0.0.1: S shards
(default 1), each a replica group of N replicas (default 3). Process i
(1..S×N; shard (i-1)/N+1) keeps its store in DIR/node-i, serves clients on
port P+i-1 (default P is 7000) and its group on P+i-1+10000; its log is
DIR/node-i.log. The cluster's secret is DIR/cluster.secret (made once,
mode 0600). A second start on the same DIR starts again the processes
that are not running (on their stores) and leaves the others.

With --shards 2 or more, every process is also a member of the metadata
group that holds the slot map (its raft port P+i-1+20000, its store
DIR/node-i.meta): up to three voters, one per shard where there are
shards enough, the others learners; the first start creates the map with
the slots split evenly over the shards (tally cluster create).

Returns once every shard's replicas know the same leader and (with
shards) every node holds the map with every leader in it, printing one
"ADDR PID ROLE SHARD" line per process (SHARD is 0 with one shard: it
serves every slot). Any Redis Cluster client reaches the cluster at any
ADDR (redis-cli -c -p P). "tally cluster local stop -d DIR" stops it.

Example:
  tally cluster local start -d /tmp/tally-cluster --replicas 3 --port 7000
  tally cluster local start -d /tmp/tally-9 --shards 3 --replicas 3 --port 7100
  redis-cli -c -p 7001 HINCRBY posts:1 likes 1
`}

var cmdClusterLocalStop = &command{name: "cluster local stop", local: true,
	synopsis: "stop the processes cluster local start started",
	help: `Usage: tally cluster local stop -d DIR

Sends SIGTERM to every replica cluster local start started in DIR (each
hands leadership over if it leads, finishes its clients' commands and
checkpoints) and waits for them to exit (30 s each, then SIGKILL).
Prints "stopped N".

Example:
  tally cluster local stop -d /tmp/tally-cluster
`}

var cmdClusterLocalAddNode = &command{name: "cluster local add-node", local: true,
	synopsis: "start one more empty node for a shard of a local cluster",
	help: `Usage: tally cluster local add-node -d DIR --shard S

Starts one more "tally serve --cluster" process for a cluster that
"tally cluster local start --shards N" started in DIR: the next node id
I, its store in DIR/node-I, its ports as the others' (client P+I-1, raft
P+I-1+10000, metadata P+I-1+20000). It starts empty, waiting to be added
to shard S's group (--join), and joins the metadata group as a learner.
Prints "ADDR PID ID RAFT_ADDR"; then move a replica onto it with
"tally cluster move S FROM_ID ID RAFT_ADDR ADDR --addr ADDR".

Example:
  tally cluster local add-node -d /tmp/tally-9 --shard 2
`}

func init() {
	cmdClusterLocalAddNode.run = runClusterLocalAddNode
	cmdClusterLocalStart.run = runClusterLocalStart
	cmdClusterLocalStop.run = runClusterLocalStop
}

// clusterSecret reads DIR/cluster.secret, making it on first use.
func clusterSecret(dir string) (string, error) {
	path := filepath.Join(dir, "cluster.secret")
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	s := hex.EncodeToString(raw[:])
	if err := os.WriteFile(path, []byte(s+"\n"), 0o600); err != nil {
		return "", err
	}
	return s, nil
}

func runClusterLocalStart(e *env, args []string) error {
	fs := e.flags(cmdClusterLocalStart)
	shards := fs.Int("shards", 1, "")
	replicas := fs.Int("replicas", 3, "")
	port := fs.Int("port", 7000, "")
	if err := parseLocal(e, fs, args); err != nil {
		return err
	}
	if *replicas < 1 || *replicas > 9 {
		return usagef("bad --replicas %d: want 1..9", *replicas)
	}
	if *shards < 1 || *shards > 16 {
		return usagef("bad --shards %d: want 1..16", *shards)
	}
	top := *port + *shards**replicas - 1 + raftPortOffset
	if *shards > 1 {
		top = *port + *shards**replicas - 1 + metaPortOffset
	}
	if *port < 1 || top > 65535 {
		return usagef("bad --port %d: the raft ports (up to %d) must stay below 65536", *port, top)
	}
	if e.durability == "" {
		e.durability = "sync"
	}
	procs, err := startLocalCluster(e.dir, *shards, *replicas, *port, e.durability)
	if err != nil {
		return err
	}
	for _, p := range procs {
		fmt.Fprintf(e.stdout, "%s %d %s %d\n", p.addr, p.pid, p.role, p.shard)
	}
	return nil
}

// livePid returns the pid in path if that process runs, else 0.
func livePid(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 || syscall.Kill(pid, 0) != nil {
		return 0
	}
	// A pid the system gave to another process since is not ours (where
	// /proc tells).
	if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && !strings.Contains(string(cmdline), "--cluster") {
		return 0
	}
	return pid
}

// localProc is one replica process of a local cluster.
type localProc struct {
	addr, dir, role string
	pid             int
	shard           int // 0 without shards
}

// startLocalGroup starts a local cluster of one shard (startLocalCluster).
func startLocalGroup(dir string, replicas, port int, durability string) ([]localProc, error) {
	return startLocalCluster(dir, 1, replicas, port, durability)
}

// metaVoters picks the metadata group's voters of a local cluster: up to
// three processes, on different shards while there are shards left.
func metaVoters(shards, replicas int) []int {
	var out []int
	for r := 0; r < replicas && len(out) < 3; r++ {
		for s := 0; s < shards && len(out) < 3; s++ {
			out = append(out, s*replicas+r+1)
		}
	}
	return out
}

// startLocalCluster starts the processes of a local cluster that are not
// running (cluster local start) and waits until every shard's replicas
// know the same leader and, with shards, until every process holds a map
// with every shard's leader in it (creating the map on the first start).
func startLocalCluster(dir string, shards, replicas, port int, durability string) ([]localProc, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	secret, err := clusterSecret(dir)
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	sharded := shards > 1
	conf := fmt.Sprintf("shards %d\nreplicas %d\nport %d\ndurability %s\n", shards, replicas, port, durability)
	if err := os.WriteFile(filepath.Join(dir, localConf), []byte(conf), 0o644); err != nil {
		return nil, err
	}
	client := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", port+i-1) }
	peer := func(i, off int) string { return fmt.Sprintf("%d=127.0.0.1:%d/%s", i, port+i-1+off, client(i)) }
	groupPeers := func(s int) string {
		var out []string
		for r := 1; r <= replicas; r++ {
			out = append(out, peer((s-1)*replicas+r, raftPortOffset))
		}
		return strings.Join(out, ",")
	}
	voters := metaVoters(shards, replicas)
	var metaPeers []string
	for _, v := range voters {
		metaPeers = append(metaPeers, peer(v, metaPortOffset))
	}
	var procs []localProc
	for i := 1; i <= shards*replicas; i++ {
		s := (i-1)/replicas + 1
		nodeDir := filepath.Join(dir, fmt.Sprintf("node-%d", i))
		if err := os.MkdirAll(nodeDir, 0o755); err != nil {
			return nil, err
		}
		p := localProc{addr: client(i), dir: nodeDir}
		if sharded {
			p.shard = s
		}
		pidPath := filepath.Join(dir, fmt.Sprintf("node-%d.pid", i))
		if pid := livePid(pidPath); pid > 0 {
			p.pid = pid // still running
			procs = append(procs, p)
			continue
		}
		log, err := os.OpenFile(nodeDir+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		args := []string{"-d", nodeDir, "--durability", durability, "serve", "--create", "--cluster",
			"--node-id", strconv.Itoa(i), "--addr", p.addr, "--raft-addr", fmt.Sprintf("127.0.0.1:%d", port+i-1+raftPortOffset),
			"--peers", groupPeers(s)}
		if sharded {
			args = append(args, "--shard", strconv.Itoa(s), "--meta-raft-addr", fmt.Sprintf("127.0.0.1:%d", port+i-1+metaPortOffset),
				"--meta-peers", strings.Join(metaPeers, ","))
			if !slices.Contains(voters, i) {
				args = append(args, "--meta-join")
			}
		}
		cmd := exec.Command(exe, args...)
		cmd.Env = append(os.Environ(), secretEnv+"="+secret)
		cmd.Stdout, cmd.Stderr = log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		err = cmd.Start()
		log.Close()
		if err != nil {
			return nil, fmt.Errorf("start replica %d: %w", i, err)
		}
		p.pid = cmd.Process.Pid
		if err := os.WriteFile(pidPath, []byte(strconv.Itoa(p.pid)+"\n"), 0o644); err != nil {
			return nil, err
		}
		go cmd.Wait() // reaps it if it exits while we wait for a leader
		procs = append(procs, p)
	}
	deadline := time.Now().Add(60 * time.Second)
	alive := func() error {
		for i, p := range procs {
			if syscall.Kill(p.pid, 0) != nil {
				return fmt.Errorf("replica %d (pid %d) exited; see %s.log:\n%s", i+1, p.pid, p.dir, logTail(p.dir+".log"))
			}
		}
		return nil
	}
	// Every shard's replicas know the same leader.
	for {
		if err := alive(); err != nil {
			return nil, err
		}
		ok := true
		for s := 1; s <= shards; s++ {
			var leaders []string
			for i := (s-1)*replicas + 1; i <= s*replicas; i++ {
				role, leader := replicaRole(procs[i-1].addr)
				procs[i-1].role = role
				leaders = append(leaders, leader)
			}
			ok = ok && leaders[0] != "" && leaders[0] != "0" && allSame(leaders)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w in 60s (replicas' logs: %s/node-*.log)", errNoLeader, dir)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !sharded {
		return procs, nil
	}
	// The map: created once (a second start finds it), then held by every
	// process with every shard's leader hint.
	var create []any
	for s := 1; s <= shards; s++ {
		create = append(create, strconv.Itoa(s), groupPeers(s))
	}
	created := false
	for {
		if err := alive(); err != nil {
			return nil, err
		}
		if !created {
			created = createMap(procs[voters[0]-1].addr, create)
		}
		if created && mapsComplete(procs, shards) {
			return procs, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the slot map did not reach every node with every shard's leader in 60s (logs: %s/node-*.log)", dir)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createMap asks the node at addr to create the slot map of the shards in
// args (TALLY.SHARDS CREATE's pairs); true once a map exists.
func createMap(addr string, args []any) bool {
	rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 10 * time.Second})
	defer rc.Close()
	err := rc.Do(context.Background(), append([]any{"TALLY.SHARDS", "CREATE"}, args...)...).Err()
	return err == nil || strings.Contains(err.Error(), "already created")
}

// mapsComplete reports whether every process holds a map in which every
// shard has a leader hint.
func mapsComplete(procs []localProc, shards int) bool {
	for _, p := range procs {
		st, err := shardsStatus(p.addr, "")
		if err != nil || st.epoch == 0 || len(st.shards) != shards {
			return false
		}
		for _, s := range st.shards {
			if s.leader == 0 {
				return false
			}
		}
	}
	return true
}

// stopLocalGroup stops the replicas startLocalGroup started in dir and
// returns how many it stopped.
func stopLocalGroup(dir string) (int, error) {
	stopped := 0
	files, err := filepath.Glob(filepath.Join(dir, "node-*.pid"))
	if err != nil {
		return stopped, err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return stopped, err
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 1 {
			return stopped, fmt.Errorf("%s: bad pid %q", f, b)
		}
		if syscall.Kill(pid, syscall.SIGTERM) == nil {
			deadline := time.Now().Add(30 * time.Second)
			for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if syscall.Kill(pid, 0) == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			stopped++
		}
		os.Remove(f)
	}
	return stopped, nil
}

// freeLocalPorts finds n consecutive free client ports on 127.0.0.1 whose
// raft ports (+raftPortOffset, +metaPortOffset) are free too. They are
// picked below Linux's ephemeral range (32768 and up), so an outgoing
// connection made meanwhile cannot take a port a process will listen on.
func freeLocalPorts(n int) (int, error) {
	for range 50 {
		base := 10000 + mrand.IntN(max(1, 32768-metaPortOffset-10000-n))
		ok := true
		for i := 0; i < n && ok; i++ {
			for _, p := range []int{base + i, base + i + raftPortOffset, base + i + metaPortOffset} {
				ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
				if err != nil {
					ok = false
					break
				}
				ln.Close()
			}
		}
		if ok {
			return base, nil
		}
	}
	return 0, errors.New("no free ports for a local group")
}

func allSame(s []string) bool {
	for _, v := range s[1:] {
		if v != s[0] {
			return false
		}
	}
	return true
}

// replicaRole asks a replica for its role and its leader's id ("" if it
// does not answer).
func replicaRole(addr string) (role, leader string) {
	rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer rc.Close()
	v, err := rc.Do(context.Background(), "TALLY.CLUSTER", "STATUS").Slice()
	if err != nil {
		return "", ""
	}
	for i := 0; i+1 < len(v); i += 2 {
		switch v[i] {
		case "role":
			role = fmt.Sprint(v[i+1])
		case "leader":
			leader = fmt.Sprint(v[i+1])
		}
	}
	return role, leader
}

func runClusterLocalStop(e *env, args []string) error {
	fs := e.flags(cmdClusterLocalStop)
	if err := parseLocal(e, fs, args); err != nil {
		return err
	}
	stopped, err := stopLocalGroup(e.dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "stopped %d\n", stopped)
	return nil
}

// shardsView is TALLY.SHARDS STATUS's reply.
type shardsView struct {
	epoch, shard uint64
	metaRole     string
	metaLeader   string
	shards       []shardView
	nodes        []replica.Peer // registered spare nodes
}

// node returns the registered spare node id.
func (v shardsView) node(id uint64) (replica.Peer, bool) {
	for _, n := range v.nodes {
		if n.ID == id {
			return n, true
		}
	}
	return replica.Peer{}, false
}

type shardView struct {
	id, leader uint64
	leaderAddr string
	replicas   []string
	slots      []string
}

// shardsStatus asks the node at addr for the slot map it holds.
func shardsStatus(addr, password string) (shardsView, error) {
	rc := redis.NewClient(&redis.Options{Addr: addr, Password: password, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 5 * time.Second})
	defer rc.Close()
	v, err := rc.Do(context.Background(), "TALLY.SHARDS", "STATUS").Slice()
	if err != nil {
		return shardsView{}, err
	}
	var out shardsView
	num := func(x any) uint64 {
		n, _ := x.(int64)
		return uint64(n)
	}
	strs := func(x any) []string {
		var s []string
		l, _ := x.([]any)
		for _, e := range l {
			s = append(s, fmt.Sprint(e))
		}
		return s
	}
	for i := 0; i+1 < len(v); i += 2 {
		switch v[i] {
		case "epoch":
			out.epoch = num(v[i+1])
		case "shard":
			out.shard = num(v[i+1])
		case "meta_role":
			out.metaRole = fmt.Sprint(v[i+1])
		case "meta_leader":
			out.metaLeader = fmt.Sprint(v[i+1])
		case "nodes":
			for _, n := range strs(v[i+1]) {
				if ps, err := cluster.ParseReplicas(n); err == nil && len(ps) == 1 {
					out.nodes = append(out.nodes, ps[0])
				}
			}
		case "shards":
			l, _ := v[i+1].([]any)
			for _, e := range l {
				kv, _ := e.([]any)
				var sv shardView
				for j := 0; j+1 < len(kv); j += 2 {
					switch kv[j] {
					case "id":
						sv.id = num(kv[j+1])
					case "leader":
						sv.leader = num(kv[j+1])
					case "leader_addr":
						sv.leaderAddr = fmt.Sprint(kv[j+1])
					case "replicas":
						sv.replicas = strs(kv[j+1])
					case "slots":
						sv.slots = strs(kv[j+1])
					}
				}
				out.shards = append(out.shards, sv)
			}
		}
	}
	return out, nil
}

// localConf names the file in DIR where cluster local start records the
// cluster's shape, for add-node.
const localConf = "local.conf"

func runClusterLocalAddNode(e *env, args []string) error {
	fs := e.flags(cmdClusterLocalAddNode)
	sh := fs.Int("shard", 0, "")
	if err := parseLocal(e, fs, args); err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(e.dir, localConf))
	if err != nil {
		return fmt.Errorf("cluster local add-node: %s holds no cluster started by cluster local start: %w", e.dir, err)
	}
	var shards, replicas, port int
	var durability string
	if _, err := fmt.Sscanf(string(b), "shards %d\nreplicas %d\nport %d\ndurability %s\n", &shards, &replicas, &port, &durability); err != nil {
		return fmt.Errorf("cluster local add-node: %s: %w", localConf, err)
	}
	if shards < 2 {
		return usagef("the cluster in %s has one shard: add a replica with tally cluster add", e.dir)
	}
	if *sh < 1 || *sh > shards {
		return usagef("bad --shard %d: want 1..%d", *sh, shards)
	}
	id := shards*replicas + 1
	for ; ; id++ {
		if _, err := os.Stat(filepath.Join(e.dir, fmt.Sprintf("node-%d", id))); errors.Is(err, os.ErrNotExist) {
			break
		}
	}
	if port+id-1+metaPortOffset > 65535 {
		return usagef("no ports left above %d", port)
	}
	secret, err := clusterSecret(e.dir)
	if err != nil {
		return err
	}
	st, err := shardsStatus(fmt.Sprintf("127.0.0.1:%d", port), e.password)
	if err != nil {
		return fmt.Errorf("cluster local add-node: read the map from node 1: %w", err)
	}
	var group []string
	for _, s := range st.shards {
		if s.id == uint64(*sh) {
			group = s.replicas
		}
	}
	var metaPeers []string
	for _, v := range metaVoters(shards, replicas) {
		metaPeers = append(metaPeers, fmt.Sprintf("%d=127.0.0.1:%d/127.0.0.1:%d", v, port+v-1+metaPortOffset, port+v-1))
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	nodeDir := filepath.Join(e.dir, fmt.Sprintf("node-%d", id))
	if err := os.MkdirAll(nodeDir, 0o755); err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port+id-1)
	raftAddr := fmt.Sprintf("127.0.0.1:%d", port+id-1+raftPortOffset)
	log, err := os.OpenFile(nodeDir+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, "-d", nodeDir, "--durability", durability, "serve", "--create", "--cluster",
		"--node-id", strconv.Itoa(id), "--addr", addr, "--raft-addr", raftAddr, "--join", "--peers", strings.Join(group, ","),
		"--shard", strconv.Itoa(*sh), "--meta-raft-addr", fmt.Sprintf("127.0.0.1:%d", port+id-1+metaPortOffset),
		"--meta-peers", strings.Join(metaPeers, ","), "--meta-join")
	cmd.Env = append(os.Environ(), secretEnv+"="+secret)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	log.Close()
	if err != nil {
		return fmt.Errorf("start node %d: %w", id, err)
	}
	pid := cmd.Process.Pid
	if err := os.WriteFile(filepath.Join(e.dir, fmt.Sprintf("node-%d.pid", id)), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		return err
	}
	go cmd.Wait()
	// Serving once it answers TALLY.SHARDS STATUS with the map.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if syscall.Kill(pid, 0) != nil {
			return fmt.Errorf("node %d (pid %d) exited; see %s.log:\n%s", id, pid, nodeDir, logTail(nodeDir+".log"))
		}
		if st, err := shardsStatus(addr, e.password); err == nil && st.epoch > 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %d did not receive the map in 60s; see %s.log", id, nodeDir)
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintf(e.stdout, "%s %d %d %s\n", addr, pid, id, raftAddr)
	return nil
}

// logTail returns the last lines of a replica's log, for an error that
// says it exited.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-5):], "\n")
}

// parseLocal parses a cluster local command's flags: it takes no
// arguments and needs -d DIR.
func parseLocal(e *env, fs *flag.FlagSet, args []string) error {
	pos, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("takes no arguments, got %q", strings.Join(pos, " "))
	}
	if e.dir == "" {
		return usagef("no directory: give -d DIR")
	}
	return nil
}
