package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
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

// raftPortOffset is how far above a replica's client port cluster local
// start puts its raft port.
const raftPortOffset = 10000

var cmdClusterLocalStart = &command{name: "cluster local start", local: true,
	synopsis: "start a replica group of tally serve processes on this machine",
	help: `Usage: tally cluster local start -d DIR [--replicas N] [--port P] [--durability MODE]

Starts N (default 3) "tally serve --cluster" processes, one replica group,
on 127.0.0.1: replica i (1..N) keeps its store in DIR/node-i, serves
clients on port P+i-1 (default P is 7000) and replicas on P+i-1+10000; its
log is DIR/node-i.log. The cluster's secret is DIR/cluster.secret
(made once, mode 0600). A second start on the same DIR starts again the
replicas that are not running (on their stores) and leaves the others.

Returns once every replica knows the same leader, printing one
"ADDR PID ROLE SHARD" line per process (SHARD is 0: one group serves
every slot). Any Redis Cluster client reaches the group at any ADDR
(redis-cli -c -p P). "tally cluster local stop -d DIR" stops it.

Example:
  tally cluster local start -d /tmp/tally-cluster --replicas 3 --port 7000
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

func init() {
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
	replicas := fs.Int("replicas", 3, "")
	port := fs.Int("port", 7000, "")
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
	if *replicas < 1 || *replicas > 9 {
		return usagef("bad --replicas %d: want 1..9", *replicas)
	}
	if *port < 1 || *port+*replicas-1+raftPortOffset > 65535 {
		return usagef("bad --port %d: the raft ports (port+%d) must stay below 65536", *port, raftPortOffset)
	}
	if e.durability == "" {
		e.durability = "sync"
	}
	procs, err := startLocalGroup(e.dir, *replicas, *port, e.durability)
	if err != nil {
		return err
	}
	for _, p := range procs {
		fmt.Fprintf(e.stdout, "%s %d %s 0\n", p.addr, p.pid, p.role)
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

// localProc is one replica process of a local group.
type localProc struct {
	addr, dir, role string
	pid             int
}

// startLocalGroup starts the replicas of a local group that are not
// running (cluster local start) and waits until every replica knows the
// same leader.
func startLocalGroup(dir string, replicas, port int, durability string) ([]localProc, error) {
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
	var peers []string
	for i := 1; i <= replicas; i++ {
		c := port + i - 1
		peers = append(peers, fmt.Sprintf("%d=127.0.0.1:%d/127.0.0.1:%d", i, c+raftPortOffset, c))
	}
	var procs []localProc
	for i := 1; i <= replicas; i++ {
		nodeDir := filepath.Join(dir, fmt.Sprintf("node-%d", i))
		if err := os.MkdirAll(nodeDir, 0o755); err != nil {
			return nil, err
		}
		c := port + i - 1
		addr := fmt.Sprintf("127.0.0.1:%d", c)
		pidPath := filepath.Join(dir, fmt.Sprintf("node-%d.pid", i))
		if pid := livePid(pidPath); pid > 0 {
			procs = append(procs, localProc{addr: addr, pid: pid, dir: nodeDir}) // still running
			continue
		}
		log, err := os.OpenFile(nodeDir+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(exe, "-d", nodeDir, "--durability", durability, "serve", "--create", "--cluster",
			"--node-id", strconv.Itoa(i), "--addr", addr, "--raft-addr", fmt.Sprintf("127.0.0.1:%d", c+raftPortOffset),
			"--peers", strings.Join(peers, ","))
		cmd.Env = append(os.Environ(), secretEnv+"="+secret)
		cmd.Stdout, cmd.Stderr = log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		err = cmd.Start()
		log.Close()
		if err != nil {
			return nil, fmt.Errorf("start replica %d: %w", i, err)
		}
		pid := cmd.Process.Pid
		if err := os.WriteFile(pidPath, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
			return nil, err
		}
		go cmd.Wait() // reaps it if it exits while we wait for a leader
		procs = append(procs, localProc{addr: addr, pid: pid, dir: nodeDir})
	}
	// Wait until every replica knows the same leader.
	deadline := time.Now().Add(60 * time.Second)
	for {
		var leaders []string
		for i, p := range procs {
			if syscall.Kill(p.pid, 0) != nil {
				return nil, fmt.Errorf("replica %d (pid %d) exited; see %s.log", i+1, p.pid, p.dir)
			}
			role, leader := replicaRole(p.addr)
			procs[i].role = role
			leaders = append(leaders, leader)
		}
		if leaders[0] != "" && leaders[0] != "0" && allSame(leaders) {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w in 60s (replicas' logs: %s/node-*.log)", errNoLeader, dir)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return procs, nil
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
// raft ports (+raftPortOffset) are free too.
func freeLocalPorts(n int) (int, error) {
	for range 50 {
		base := 20000 + mrand.IntN(25000)
		ok := true
		for i := 0; i < n && ok; i++ {
			for _, p := range []int{base + i, base + i + raftPortOffset} {
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
	stopped, err := stopLocalGroup(e.dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "stopped %d\n", stopped)
	return nil
}
