package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tallydb/tally/store"
)

// TestMain lets the tests run "tally serve" as a child process: the test
// binary re-executes itself with TALLY_TEST_MAIN=1 and runs main's run.
func TestMain(m *testing.M) {
	if os.Getenv("TALLY_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// serveProc is a "tally serve" child process.
type serveProc struct {
	t       *testing.T
	cmd     *exec.Cmd
	addr    string
	metrics string
	stderr  *syncBuffer
	mu      sync.Mutex
	out     []string // stdout lines after "addr"
	exited  chan struct{}
	err     error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServe runs "tally serve ARGS" and waits until it listens.
func startServe(t *testing.T, args ...string) *serveProc {
	t.Helper()
	p := &serveProc{t: t, stderr: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	p.cmd.Env = append(os.Environ(), "TALLY_TEST_MAIN=1", "TALLY_DIR=", "TALLY_REQUIREPASS=")
	p.cmd.Stderr = p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			l := sc.Text()
			switch {
			case strings.HasPrefix(l, "metrics_addr "):
				p.metrics = strings.TrimPrefix(l, "metrics_addr ")
			case p.addr == "" && strings.HasPrefix(l, "addr "):
				p.addr = strings.TrimPrefix(l, "addr ")
				close(ready)
			default:
				p.mu.Lock()
				p.out = append(p.out, l)
				p.mu.Unlock()
			}
		}
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			p.cmd.Process.Kill()
			<-p.exited
		}
	})
	select {
	case <-ready:
	case <-p.exited:
		t.Fatalf("tally serve exited (%v): %s", p.err, p.stderr)
	case <-time.After(60 * time.Second):
		t.Fatalf("tally serve did not start: %s", p.stderr)
	}
	return p
}

// wait waits for the process to exit and returns its exit code.
func (p *serveProc) wait() int {
	p.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(60 * time.Second):
		p.t.Fatalf("tally serve did not exit: %s", p.stderr)
	}
	if p.err == nil {
		return 0
	}
	if ee, ok := p.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	p.t.Fatal(p.err)
	return -1
}

func (p *serveProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.out, "\n")
}

func (p *serveProc) client(t *testing.T) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: p.addr, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

func TestServeUsage(t *testing.T) {
	dir := newStore(t)
	d := "-d=" + dir
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{d, "serve", "--addr", "0.0.0.0:0"}, 2, "is not a loopback address: set --requirepass, or --allow-remote"},
		{[]string{d, "serve", "--addr", ":0"}, 2, "is not a loopback address"},
		{[]string{d, "serve", "--metrics-addr", "0.0.0.0:0"}, 2, "--metrics-addr 0.0.0.0:0 is not a loopback address: set --requirepass"},
		{[]string{d, "serve", "--addr", "nonsense"}, 2, "bad --addr"},
		{[]string{d, "serve", "--maxclients", "0"}, 2, "bad --maxclients"},
		{[]string{d, "serve", "extra"}, 2, "takes no arguments"},
		{[]string{d, "serve", "--requirepass", "a\nb"}, 2, "invalid server option"},
		{[]string{"-d=" + filepath.Join(t.TempDir(), "missing"), "serve"}, 1, "no such directory"},
		{[]string{d, "serve", "--durability", "fast"}, 2, "bad --durability"},
		{[]string{d, "serve", "--slowlog-threshold", "soon"}, 2, "slowlog-threshold"},
		{[]string{d, "serve", "--pprof"}, 2, "--pprof needs --metrics-addr"},
	} {
		_, errOut, code := tally(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("tally %s: exit %d, stderr %q; want exit %d with %q", strings.Join(tc.args, " "), code, errOut, tc.code, tc.want)
		}
	}
	if got := state(t, dir); got != initialState {
		t.Errorf("refused serve changed the store:\n%s", got)
	}
}

// TestServeLifecycle runs "tally serve" as a child process: create a store
// through it, write, read metrics, then SIGTERM while a client writes; it
// exits 0 after its checkpoint and every acknowledged write is on disk.
func TestServeLifecycle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	p := startServe(t, "-d", dir, "--create", "--metrics-addr", "127.0.0.1:0", "--durability", "interval")
	rc := p.client(t)
	for _, cmd := range [][]any{
		{"TALLY.COUNTER", "ADD", "posts", "RANGEBITS", 40},
		{"TALLY.COLUMN", "ADD", "posts", "reposts"},
		{"TALLY.COLUMN", "ADD", "posts", "likes", "HINT", 8, "MAX", 64},
	} {
		if err := rc.Do(context.Background(), cmd...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := rc.HIncrBy(context.Background(), "posts:5", "likes", 3).Result(); err != nil || v != 3 {
		t.Fatalf("HINCRBY = %d, %v", v, err)
	}
	all, err := rc.Do(context.Background(), "TALLY.COUNTER", "LIST").StringSlice()
	if err != nil {
		t.Fatal(all, err)
	}
	// serve opens the packages above store, which add their own counters
	// (timeline's "users", unread's): keep the one this test made.
	var list []string
	for _, l := range all {
		if strings.HasPrefix(l, "posts ") {
			list = append(list, l)
		}
	}
	if len(list) != 1 {
		t.Fatal(all)
	}
	if v, err := rc.Do(context.Background(), "DOT.MARK", "activity").Int64(); err != nil || v != 1 {
		t.Fatalf("DOT.MARK through tally serve = %d, %v", v, err)
	}

	resp, err := http.Get("http://" + p.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`tally_server_commands_total{command="hincrby",outcome="ok"} 1`, `tally_store_rows{counter="posts",tier="hot"} 1`} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("metrics lack %q", want)
		}
	}

	// Write until SIGTERM; count acknowledged increments.
	acked := make(chan int64, 1)
	go func() {
		var last int64
		for {
			v, err := rc.HIncrBy(context.Background(), "posts:7", "reposts", 1).Result()
			if err != nil {
				acked <- last
				return
			}
			last = v
		}
	}()
	time.Sleep(300 * time.Millisecond)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("serve exited %d after SIGTERM: %s", code, p.stderr)
	}
	n := <-acked
	if !regexp.MustCompile(`(?m)^checkpoint_seq \d+$`).MatchString(p.output()) {
		t.Errorf("no checkpoint_seq line in %q", p.output())
	}
	// The CLI reads what the server wrote; the checkpoint left no log to
	// replay.
	out := mustTally(t, "-d="+dir, "get", "posts", "5", "7")
	if want := fmt.Sprintf("5 reposts=0 likes=3\n7 reposts=%d likes=0\n", n); out != want {
		t.Errorf("after shutdown: %q, want %q", out, want)
	}
	if out := mustTally(t, "-d="+dir, "counter", "list"); out != strings.Join(all, "\n")+"\n" {
		t.Errorf("counter list %q, TALLY.COUNTER LIST %q", out, all)
	}
	if out := mustTally(t, "-d="+dir, "replay"); !strings.Contains(out, "records_replayed 0\n") {
		t.Errorf("replay after a clean shutdown: %s", out)
	}
}

// TestServeKill9 kills "tally serve" (sync durability, the default) while
// clients write, single commands and pipelines; after it every
// acknowledged HINCRBY is in the store.
func TestServeKill9(t *testing.T) {
	dir := newStore(t)
	p := startServe(t, "-d", dir)
	const clients = 8
	type result struct{ acked, sent int64 }
	results := make([]chan result, clients)
	stop := make(chan struct{})
	for c := 0; c < clients; c++ {
		results[c] = make(chan result, 1)
		go func(c int) {
			rc := redis.NewClient(&redis.Options{Addr: p.addr, PoolSize: 1, MaxRetries: -1})
			defer rc.Close()
			key := fmt.Sprintf("posts:%d", 100+c)
			var r result
			defer func() { results[c] <- r }()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if c%2 == 0 {
					r.sent++
					v, err := rc.HIncrBy(context.Background(), key, "likes", 1).Result()
					if err != nil {
						return
					}
					r.acked = v
					continue
				}
				pipe := rc.Pipeline()
				cmds := make([]*redis.IntCmd, 16)
				for i := range cmds {
					cmds[i] = pipe.HIncrBy(context.Background(), key, "likes", 1)
				}
				r.sent += int64(len(cmds))
				pipe.Exec(context.Background())
				for _, cmd := range cmds {
					if cmd.Err() != nil {
						return
					}
					r.acked = cmd.Val()
				}
			}
		}(c)
	}
	time.Sleep(700 * time.Millisecond)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait()
	close(stop)

	db, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	posts, err := db.Counter("posts")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for c := 0; c < clients; c++ {
		r := <-results[c]
		got, err := posts.GetColumn(uint64(100+c), "likes")
		if err != nil {
			t.Fatal(err)
		}
		if int64(got) < r.acked || int64(got) > r.sent {
			t.Errorf("client %d: %d acknowledged, %d sent, %d after restart", c, r.acked, r.sent, got)
		}
		total += r.acked
	}
	if total < 10 {
		t.Errorf("only %d writes acknowledged before the kill; the test proves little", total)
	}
	t.Logf("%d acknowledged increments survived kill -9", total)
	if err := db.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestServeRedisTools runs redis-cli and redis-benchmark against "tally
// serve" when they are installed.
func TestServeRedisTools(t *testing.T) {
	for _, tool := range []string{"redis-cli", "redis-benchmark"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipped: %s not installed (apt-get install redis-tools)", tool)
		}
	}
	dir := filepath.Join(t.TempDir(), "db")
	p := startServe(t, "-d", dir, "--create", "--durability", "nosync", "--requirepass", "pw")
	_, port, _ := net.SplitHostPort(p.addr)
	cli := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("redis-cli", append([]string{"-p", port, "--no-auth-warning", "-a", "pw"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimRight(string(out), "\n")
	}
	if out := cli("PING"); out != "PONG" {
		t.Fatalf("redis-cli PING = %q", out)
	}
	for _, c := range [][]string{
		{"TALLY.COUNTER", "ADD", "posts"}, {"TALLY.COLUMN", "ADD", "posts", "reposts"}, {"TALLY.COLUMN", "ADD", "posts", "likes"},
		// redis-benchmark -t incr sends INCR counter:__rand_int__ (Redis 7;
		// key:__rand_int__ before 6.2).
		{"TALLY.COUNTER", "ADD", "counter"}, {"TALLY.COLUMN", "ADD", "counter", "value"},
	} {
		if out := cli(c...); out != "OK" {
			t.Fatalf("redis-cli %v = %q", c, out)
		}
	}
	if out := cli("HINCRBY", "posts:1234", "likes", "5"); out != "5" {
		t.Fatalf("redis-cli HINCRBY = %q", out)
	}
	if out := cli("HGETALL", "posts:1234"); out != "reposts\n0\nlikes\n5" {
		t.Fatalf("redis-cli HGETALL = %q", out)
	}
	if out := cli("--no-raw", "TALLY.MGET", "posts", "1234", "1"); out != "1) 1) (integer) 0\n   2) (integer) 5\n2) 1) (integer) 0\n   2) (integer) 0" {
		t.Fatalf("redis-cli TALLY.MGET = %q", out)
	}
	if out := cli("COMMAND", "DOCS", "HINCRBY"); !strings.Contains(out, "never goes below 0") {
		t.Fatalf("redis-cli COMMAND DOCS = %q", out)
	}

	// redis-benchmark, unchanged: -t incr (INCR counter:__rand_int__) and a
	// HINCRBY on posts; then the totals.
	const n, ids = 5000, 100
	bench := func(args ...string) {
		t.Helper()
		cmd := exec.Command("redis-benchmark", append([]string{"-p", port, "-a", "pw", "-n", strconv.Itoa(n),
			"-r", strconv.Itoa(ids), "-c", "10", "-P", "8", "-q"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "requests per second") {
			t.Fatalf("redis-benchmark %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("redis-benchmark %s: %s", strings.Join(args, " "), strings.TrimSpace(string(out)))
	}
	bench("-t", "incr")
	bench("HINCRBY", "posts:__rand_int__", "likes", "1")
	rc := redis.NewClient(&redis.Options{Addr: p.addr, Password: "pw"})
	defer rc.Close()
	sum := func(counter string, col int) int64 {
		args := []any{"TALLY.MGET", counter}
		for id := 0; id < ids; id++ {
			args = append(args, id)
		}
		rows, err := rc.Do(context.Background(), args...).Slice()
		if err != nil {
			t.Fatal(err)
		}
		var s int64
		for _, r := range rows {
			s += r.([]any)[col].(int64)
		}
		return s
	}
	if got := sum("counter", 0); got != n {
		t.Errorf("after redis-benchmark -t incr -n %d: the counter sums to %d", n, got)
	}
	if got := sum("posts", 1); got != n {
		t.Errorf("after redis-benchmark HINCRBY -n %d: likes sum to %d (posts:1234 is outside the ids)", n, got)
	}

	// redis-cli's inspection modes (issue 20): --scan lists every stored
	// row, --bigkeys and --memkeys size them (SCAN, TYPE, HLEN, MEMORY
	// USAGE), --stat and --latency poll until stopped.
	keys := strings.Split(cli("--scan"), "\n")
	if len(keys) != 2*ids+1 || !slices.Contains(keys, "posts:1234") || !slices.Contains(keys, "counter:7") {
		t.Errorf("redis-cli --scan: %d keys (want %d): %.200q", len(keys), 2*ids+1, keys)
	}
	if got := cli("--scan", "--pattern", "posts:123*"); got != "posts:1234" {
		t.Errorf("redis-cli --scan --pattern posts:123*: %q", got)
	}
	for _, mode := range []string{"--bigkeys", "--memkeys"} {
		out := cli(mode)
		if !strings.Contains(out, fmt.Sprintf("Sampled %d keys", 2*ids+1)) || !strings.Contains(out, fmt.Sprintf("%d hashs", 2*ids+1)) || strings.Contains(out, "ERR") {
			t.Errorf("redis-cli %s:\n%s", mode, out)
		}
	}
	// They poll until killed; stdbuf makes redis-cli write each line at
	// once (its output is not a terminal here). Off a terminal --latency
	// prints "min max avg samples".
	if _, err := exec.LookPath("stdbuf"); err != nil {
		t.Log("skipped redis-cli --stat and --latency: stdbuf (coreutils) not installed")
	} else {
		for _, mode := range [][]string{{"--stat", "-i", "0.2"}, {"--latency", "-i", "0.2"}} {
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			args := append([]string{"-oL", "redis-cli", "-p", port, "--no-auth-warning", "-a", "pw"}, mode...)
			out, _ := exec.CommandContext(ctx, "stdbuf", args...).CombinedOutput()
			cancel()
			want := map[string]string{"--stat": "requests", "--latency": " "}[mode[0]]
			if !strings.Contains(string(out), want) || strings.Contains(string(out), "ERR") {
				t.Errorf("redis-cli %s:\n%s", mode[0], out)
			}
			t.Logf("redis-cli %s:\n%s", mode[0], out)
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("serve exited %d after SIGINT: %s", code, p.stderr)
	}
}

// TestServeTimeline: "tally serve" registers the TL.* group; what a client
// writes through it, the command line reads after shutdown.
func TestServeTimeline(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	p := startServe(t, "-d", dir, "--create", "--durability", "nosync")
	rc := p.client(t)
	ctx := context.Background()
	if n, err := rc.Do(ctx, "TL.FOLLOW", 1, 2, 3).Int(); err != nil || n != 2 {
		t.Fatalf("TL.FOLLOW = %d, %v", n, err)
	}
	if err := rc.Do(ctx, "TL.ACTIVE", 1).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := rc.Do(ctx, "TL.POST", 2, 10, 11, "WAIT").Slice(); err != nil || len(v) != 2 ||
		fmt.Sprint(v[0]) != "[post 10 status delivered deliveries 1]" {
		t.Fatalf("TL.POST = %v, %v", v, err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("serve exited %d: %s", code, p.stderr)
	}
	if out := mustTally(t, "-d="+dir, "home", "1"); out != "11 2\n10 2\nend\n" {
		t.Fatalf("home after serve: %q", out)
	}
}

// TestServeSlowlogThreshold: --slowlog-threshold sets what SLOWLOG records
// (0: every command, as Redis's slowlog-log-slower-than 0).
func TestServeSlowlogThreshold(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	p := startServe(t, "-d", dir, "--create", "--durability", "nosync", "--slowlog-threshold", "0")
	rc := p.client(t)
	ctx := context.Background()
	if v, err := rc.ConfigGet(ctx, "slowlog-log-slower-than").Result(); err != nil || v["slowlog-log-slower-than"] != "0" {
		t.Fatalf("CONFIG GET slowlog-log-slower-than = %v, %v", v, err)
	}
	rc.Ping(ctx)
	if n, err := rc.Do(ctx, "SLOWLOG", "LEN").Int(); err != nil || n == 0 {
		t.Fatalf("SLOWLOG LEN = %d, %v with threshold 0", n, err)
	}
}
