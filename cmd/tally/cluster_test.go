package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// tallyCmd runs the test binary as tally (TestMain) with args, and
// returns its stdout; it fails the test on a non-zero exit.
func tallyCmd(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "TALLY_TEST_MAIN=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tally %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// freePorts finds n consecutive free client ports whose raft ports are
// free too.
func freePorts(t *testing.T, n int) int {
	t.Helper()
	port, err := freeLocalPorts(n)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// TestClusterProcesses runs a group of three "tally serve --cluster"
// processes with "tally cluster local start", writes through go-redis's
// ClusterClient, kills the leader with SIGKILL while writes go on, starts
// it again (it catches up), and checks every acknowledged increment is on
// every replica.
func TestClusterProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	port := freePorts(t, 3)
	ps := strconv.Itoa(port)
	t.Cleanup(func() { tallyCmd(t, "-d", dir, "cluster", "local", "stop") })
	out := tallyCmd(t, "-d", dir, "cluster", "local", "start", "--replicas", "3", "--port", ps)
	var addrs []string
	pids := map[string]int{}
	leader := ""
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || f[3] != "0" {
			t.Fatalf("cluster local start printed %q, want ADDR PID ROLE SHARD", line)
		}
		pid, _ := strconv.Atoi(f[1])
		addrs = append(addrs, f[0])
		pids[f[0]] = pid
		if f[2] == "leader" {
			leader = f[0]
		}
	}
	if len(addrs) != 3 || leader == "" {
		t.Fatalf("cluster local start printed %q: want 3 replicas, one leader", out)
	}
	ctx := context.Background()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 16,
		DialTimeout: time.Second, ReadTimeout: 20 * time.Second})
	defer c.Close()
	retry := func(args ...any) (any, error) {
		var v any
		var err error
		for range 300 {
			v, err = c.Do(ctx, args...).Result()
			if err == nil || strings.HasPrefix(err.Error(), "ERR ") {
				return v, err
			}
			time.Sleep(20 * time.Millisecond)
		}
		return v, err
	}
	for _, cmd := range [][]any{{"TALLY.COUNTER", "ADD", "posts"}, {"TALLY.COLUMN", "ADD", "posts", "likes"}} {
		if _, err := retry(cmd...); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	want := map[int]int64{}
	write := func(n int) {
		for range n {
			id := rand.IntN(16)
			v, err := retry("HINCRBY", fmt.Sprint("posts:", id), "likes", 1)
			if err != nil {
				// An unknown outcome (the leader died under it) may or may
				// not have applied: read the truth back instead.
				continue
			}
			want[id] = v.(int64)
		}
	}
	write(200)
	// SIGKILL the leader while writes go on.
	if err := syscall.Kill(pids[leader], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	write(200)
	// Start it again: cluster local start starts only what is not running.
	out = tallyCmd(t, "-d", dir, "cluster", "local", "start", "--replicas", "3", "--port", ps)
	if !strings.Contains(out, leader) {
		t.Fatalf("restart printed %q, without %s", out, leader)
	}
	write(50)
	// The leader's linearizable read holds every acknowledged increment,
	// and every replica (READONLY reads; the restarted one must catch up)
	// comes to the same value.
	truth := map[int]int64{}
	for id, w := range want {
		got, err := c.HGet(ctx, fmt.Sprint("posts:", id), "likes").Int64()
		if err != nil || got < w {
			t.Fatalf("posts:%d likes = %d (%v), want at least the acknowledged %d", id, got, err, w)
		}
		truth[id] = got
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, addr := range addrs {
		rc := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1})
		if err := rc.Do(ctx, "READONLY").Err(); err != nil {
			t.Fatal(err)
		}
		for id, w := range truth {
			for {
				got, err := rc.HGet(ctx, fmt.Sprint("posts:", id), "likes").Int64()
				if err == nil && got == w {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("replica %s: posts:%d likes = %d (%v), the leader has %d", addr, id, got, err, w)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		rc.Close()
	}
	// The group's view, from the CLI.
	status := tallyCmd(t, "cluster", "status", "--addr", addrs[0])
	if strings.Count(status, "member ") != 3 || !strings.Contains(status, "role ") {
		t.Fatalf("cluster status printed %q", status)
	}
	if _, err := os.Stat(filepath.Join(dir, "cluster.secret")); err != nil {
		t.Fatal(err)
	}
	// Leadership to a named voter: "cluster transfer ID" on the leader,
	// then every replica's status names ID as the leader.
	field := func(status, key string) string {
		for _, l := range strings.Split(status, "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == key {
				return f[1]
			}
		}
		t.Fatalf("cluster status without %q: %q", key, status)
		return ""
	}
	lid, laddr := field(status, "leader"), field(status, "leader_addr")
	var to string
	for _, l := range strings.Split(status, "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "member" && f[1] != lid {
			to = f[1]
			break
		}
	}
	tallyCmd(t, "cluster", "transfer", to, "--addr", laddr)
	deadline = time.Now().Add(30 * time.Second)
	for _, addr := range addrs {
		for field(tallyCmd(t, "cluster", "status", "--addr", addr), "leader") != to {
			if time.Now().After(deadline) {
				t.Fatalf("replica %s: leader is not %s after cluster transfer %s", addr, to, to)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
