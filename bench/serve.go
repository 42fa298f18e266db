package bench

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tallydb/tally/bench/workload"
)

// The server comparison (issue 11): redis-benchmark against "tally serve"
// and redis-server on the same machine, in one run, with the same commands
// and flags, and each server's memory after loading the same items through
// RESP.
//
// Caveats, so the figures are read right:
//   - redis-benchmark draws ids uniformly from -r; ids that were not loaded
//     (all-zero items, and ids past Items) are misses: Redis answers nil or
//     an empty hash, tally answers the row's zeros (HGETALL: every column),
//     so tally sends more bytes for them.
//   - RSS counts each server's fixed costs. tally's include Pebble's
//     memtables (up to two of 32 MiB: the load's log records live there
//     until a flush), its block cache, and the Go heap's headroom between
//     collections (GOGC; set GOGC or GOMEMLIMIT in the server's environment
//     to trade CPU for memory). "tally tables" is the store's own account of
//     its rows (INFO tally_table_bytes). Small runs are dominated by these
//     fixed costs; the per-item figure means something from millions of
//     items on.
//   - The servers and redis-benchmark share the machine's cores.

// ServeConfig configures RunServe. Zero fields take the defaults of the
// full run.
type ServeConfig struct {
	// TallyBin is a built tally binary. Required.
	TallyBin string
	// Dir is the parent directory of the servers' data (default the system
	// temporary directory).
	Dir string
	// Items is the number of items "posts:0" .. "posts:Items-1" loaded
	// into each server before the memory figure, with the workload's three
	// columns (reposts, comments, likes) drawn from its skewed
	// distribution; all-zero items are not loaded (default 10,000,000).
	Items uint64
	// Requests is redis-benchmark's -n per test (default 2,000,000).
	Requests int
	// Keyspace is redis-benchmark's -r (default 1,000,000).
	Keyspace int
	// Clients and Pipeline are -c and -P (default 50 and 16).
	Clients, Pipeline int
	// Durability pairs tally's mode with Redis's persistence: "sync" with
	// appendfsync always, "interval" with appendfsync everysec, "nosync"
	// with no AOF (default "interval").
	Durability string
	// Log receives progress lines (default none).
	Log io.Writer
}

// NewServeOptions makes the ServeOptions of a runner's --serve-flags
// (split on white space) and --serve-log (a file appended to; empty:
// none). close closes the log file.
func NewServeOptions(flags, logPath string) (o ServeOptions, close func(), err error) {
	o.Flags = strings.Fields(flags)
	if logPath == "" {
		return o, func() {}, nil
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return o, nil, err
	}
	o.Log = f
	return o, func() { f.Close() }, nil
}

func (c *ServeConfig) fill() {
	if c.Items == 0 {
		c.Items = 10_000_000
	}
	if c.Requests == 0 {
		c.Requests = 2_000_000
	}
	if c.Keyspace == 0 {
		c.Keyspace = 1_000_000
	}
	if c.Clients == 0 {
		c.Clients = 50
	}
	if c.Pipeline == 0 {
		c.Pipeline = 16
	}
	if c.Durability == "" {
		c.Durability = "interval"
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// ServeTest is one redis-benchmark command. Page is the number of items a
// request reads (10 for MGET and TALLY.MGET of ten keys), so items/s =
// requests/s × Page; an HMGET reads one item, so ten of them make a page.
type ServeTest struct {
	Name      string
	Args      []string // redis-benchmark's command (or -t TEST)
	Page      int
	TallyOnly bool
}

// ServeTests are the commands of the comparison.
func ServeTests() []ServeTest {
	ten := func(prefix string) []string {
		var a []string
		for i := 0; i < 10; i++ {
			a = append(a, prefix+"__rand_int__")
		}
		return a
	}
	return []ServeTest{
		{Name: "HINCRBY", Args: []string{"HINCRBY", "posts:__rand_int__", "likes", "1"}, Page: 1},
		{Name: "INCR (-t incr)", Args: []string{"-t", "incr"}, Page: 1},
		{Name: "HGETALL", Args: []string{"HGETALL", "posts:__rand_int__"}, Page: 1},
		{Name: "HMGET 3 columns", Args: []string{"HMGET", "posts:__rand_int__", "reposts", "comments", "likes"}, Page: 1},
		{Name: "MGET 10 keys", Args: append([]string{"MGET"}, ten("counter:")...), Page: 10},
		{Name: "TALLY.MGET 10 ids", Args: append([]string{"TALLY.MGET", "posts"}, ten("")...), Page: 10, TallyOnly: true},
	}
}

// ServeResult is one test on one server.
type ServeResult struct {
	Target, Test string
	Page         int
	RPS          float64 // requests per second
	P50, P99     float64 // latency in ms, as redis-benchmark reports it
	Err          error
}

// ServeMemory is one server's memory after loading the items.
type ServeMemory struct {
	Target         string
	Items          uint64 // non-zero items loaded
	RSSBefore, RSS int64  // resident set size before and after the load
	UsedMemory     int64  // INFO used_memory after the load (tally: Go heap objects)
	TableBytes     int64  // tally only: INFO tally_table_bytes (its own accounting)
	LoadSeconds    float64
	Err            error
}

// PerItem returns the RSS growth per loaded item.
func (m ServeMemory) PerItem() float64 {
	if m.Items == 0 {
		return 0
	}
	return float64(m.RSS-m.RSSBefore) / float64(m.Items)
}

// ServeSkip returns why the comparison cannot run ("" if it can).
func ServeSkip() string {
	for _, tool := range []string{"redis-server", "redis-benchmark"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Sprintf("skipped: %s not installed (apt-get install redis-server redis-tools)", tool)
		}
	}
	return ""
}

// RunServe runs the comparison: for each server in turn (tally, then
// redis), start it on a free loopback port in a fresh directory, load the
// items, measure memory, run every test, stop it.
func RunServe(cfg ServeConfig) ([]ServeResult, []ServeMemory, error) {
	cfg.fill()
	if cfg.TallyBin == "" {
		return nil, nil, errors.New("bench: ServeConfig.TallyBin is required")
	}
	if skip := ServeSkip(); skip != "" {
		return nil, nil, errors.New(skip)
	}
	parent, err := os.MkdirTemp(cfg.Dir, "servebench-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(parent)
	w, err := workload.New(workload.Config{Items: cfg.Items, Columns: 3, Seed: 1})
	if err != nil {
		return nil, nil, err
	}
	var results []ServeResult
	var mems []ServeMemory
	for _, target := range []string{"tally", "redis"} {
		dir := filepath.Join(parent, target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, err
		}
		srv, err := startServeTarget(&cfg, target, dir)
		if err != nil {
			return results, mems, fmt.Errorf("%s: %w", target, err)
		}
		fmt.Fprintf(cfg.Log, "%s: listening on %s (pid %d)\n", target, srv.addr, srv.cmd.Process.Pid)
		mem := srv.load(&cfg, w)
		mems = append(mems, mem)
		if mem.Err != nil {
			srv.stop()
			return results, mems, fmt.Errorf("%s: load: %w", target, mem.Err)
		}
		fmt.Fprintf(cfg.Log, "%s: loaded %d items in %.1fs, RSS %s -> %s\n", target, mem.Items, mem.LoadSeconds,
			fmtMiB(float64(mem.RSSBefore)), fmtMiB(float64(mem.RSS)))
		for _, test := range ServeTests() {
			if test.TallyOnly && target != "tally" {
				continue
			}
			r := srv.benchmark(&cfg, test)
			fmt.Fprintf(cfg.Log, "%s: %s: %.0f requests/s, p50 %.3f ms, p99 %.3f ms %v\n", target, test.Name, r.RPS, r.P50, r.P99, errString(r.Err))
			results = append(results, r)
		}
		if err := srv.stop(); err != nil {
			fmt.Fprintf(cfg.Log, "%s: stop: %v\n", target, err)
		}
	}
	return results, mems, nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return "error: " + err.Error()
}

// serveTarget is a running server process.
type serveTarget struct {
	name   string
	addr   string
	port   string
	cmd    *exec.Cmd
	log    io.Writer // also receives the process's stderr, if not nil
	exited chan error
}

// ServeOptions are how the tally-serve targets start "tally serve".
type ServeOptions struct {
	// Bin is the tally binary; empty skips the targets.
	Bin string
	// Flags are added to every server's command line (tallybench
	// --serve-flags): "--metrics-addr HOST:PORT --pprof" to profile a
	// served run.
	Flags []string
	// Log, if not nil, also receives every server's stderr (tallybench
	// --serve-log): its log, and with GODEBUG=gctrace=1 in the runner's
	// environment (which the server inherits) a line per collection.
	Log io.Writer
}

// skip is the Skip of a target that needs o.Bin.
func (o ServeOptions) skip() string {
	if o.Bin == "" {
		return "skipped: no tally binary (pass --tally BIN)"
	}
	return ""
}

// tallyServeCmd is the command line of "tally serve" on dir with durability
// (sync, interval or nosync) listening on addr, creating the store if dir
// is new.
func tallyServeCmd(o ServeOptions, dir, durability, addr string) *exec.Cmd {
	args := []string{"-d", dir, "--durability", durability, "serve", "--create", "--addr", addr}
	return exec.Command(o.Bin, append(args, o.Flags...)...)
}

// start starts t.cmd (set, not yet started) and waits until the server
// answers PING on t.addr, for a minute at most. t.cmd is replaced by a fresh
// copy of itself, so that a stopped target can be started again.
func (t *serveTarget) start() error {
	t.cmd = exec.Command(t.cmd.Path, t.cmd.Args[1:]...)
	stderr := &strings.Builder{}
	t.cmd.Stderr = stderr
	if t.log != nil {
		t.cmd.Stderr = io.MultiWriter(stderr, t.log)
	}
	if err := t.cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	t.exited = exited
	cmd := t.cmd
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("%s exited (%v): %s", t.name, err, lastLines(stderr.String(), 5))
		default:
		}
		if c, err := dialRESP(t.addr, time.Second); err == nil {
			pong, err := c.do("PING")
			c.Close()
			if err == nil && pong == "PONG" {
				return nil
			}
		}
		if time.Now().After(deadline) {
			t.cmd.Process.Kill()
			<-exited
			return fmt.Errorf("%s did not answer PING in time", t.name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func startServeTarget(cfg *ServeConfig, name, dir string) (*serveTarget, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	t := &serveTarget{name: name, port: strconv.Itoa(port), addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	switch name {
	case "tally":
		t.cmd = tallyServeCmd(ServeOptions{Bin: cfg.TallyBin}, filepath.Join(dir, "db"), cfg.Durability, t.addr)
	case "redis":
		args := []string{"--port", t.port, "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--daemonize", "no",
			"--logfile", filepath.Join(dir, "redis.log")}
		switch cfg.Durability {
		case "sync":
			args = append(args, "--appendonly", "yes", "--appendfsync", "always")
		case "interval":
			args = append(args, "--appendonly", "yes", "--appendfsync", "everysec")
		case "nosync":
			args = append(args, "--appendonly", "no")
		default:
			return nil, fmt.Errorf("bad durability %q: want sync, interval or nosync", cfg.Durability)
		}
		t.cmd = exec.Command("redis-server", args...)
	}
	if err := t.start(); err != nil {
		return nil, err
	}
	if name == "tally" {
		c, err := dialRESP(t.addr, redisTimeout)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		for _, cmd := range [][]string{
			{"TALLY.COUNTER", "ADD", "posts"},
			{"TALLY.COLUMN", "ADD", "posts", "reposts"},
			{"TALLY.COLUMN", "ADD", "posts", "comments"},
			{"TALLY.COLUMN", "ADD", "posts", "likes"},
			// redis-benchmark -t incr: INCR counter:__rand_int__ (Redis 6.2+),
			// INCR key:__rand_int__ before.
			{"TALLY.COUNTER", "ADD", "counter"},
			{"TALLY.COLUMN", "ADD", "counter", "value"},
			{"TALLY.COUNTER", "ADD", "key"},
			{"TALLY.COLUMN", "ADD", "key", "value"},
		} {
			if _, err := c.do(cmd...); err != nil {
				t.stop()
				return nil, fmt.Errorf("%v: %w", cmd, err)
			}
		}
	}
	return t, nil
}

// load writes the workload's non-zero items as posts:I with HSET of the
// three columns, pipelined on four connections, and measures memory.
func (t *serveTarget) load(cfg *ServeConfig, w *workload.Workload) ServeMemory {
	m := ServeMemory{Target: t.name}
	m.RSSBefore = procRSS(t.cmd.Process.Pid)
	start := time.Now()
	const conns, batch = 4, 1000
	var wg sync.WaitGroup
	var mu sync.Mutex
	errs := make([]error, conns)
	for k := 0; k < conns; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			c, err := dialRESP(t.addr, redisTimeout)
			if err != nil {
				errs[k] = err
				return
			}
			defer c.Close()
			var vals []uint64
			var n uint64
			for i := uint64(k); i < w.Len(); i += conns {
				vals = w.Values(i, vals)
				if workload.IsZero(vals) {
					continue
				}
				n++
				c.begin(8)
				c.argString("HSET")
				c.arg(strconv.AppendUint([]byte("posts:"), i, 10))
				for j, col := range []string{"reposts", "comments", "likes"} {
					c.argString(col)
					c.argInt(int64(vals[j]))
				}
				if c.pending == batch {
					if err := c.flush(); err != nil {
						errs[k] = err
						return
					}
					if err := c.drain(); err != nil {
						errs[k] = err
						return
					}
				}
			}
			if err := c.flush(); err == nil {
				err = c.drain()
				errs[k] = err
			} else {
				errs[k] = err
			}
			mu.Lock()
			m.Items += n
			mu.Unlock()
		}(k)
	}
	wg.Wait()
	m.LoadSeconds = time.Since(start).Seconds()
	if m.Err = errors.Join(errs...); m.Err != nil {
		return m
	}
	time.Sleep(time.Second) // let the servers settle (Redis's lazy frees, tally's checkpoint)
	m.RSS = procRSS(t.cmd.Process.Pid)
	c, err := dialRESP(t.addr, redisTimeout)
	if err != nil {
		m.Err = err
		return m
	}
	defer c.Close()
	if m.UsedMemory, err = infoInt(c, "memory", "used_memory"); err != nil {
		m.Err = err
	}
	if t.name == "tally" {
		m.TableBytes, _ = infoInt(c, "memory", "tally_table_bytes")
	}
	return m
}

// benchmark runs redis-benchmark with the configured flags and one test.
func (t *serveTarget) benchmark(cfg *ServeConfig, test ServeTest) ServeResult {
	r := ServeResult{Target: t.name, Test: test.Name, Page: test.Page}
	args := []string{"-h", "127.0.0.1", "-p", t.port, "-n", strconv.Itoa(cfg.Requests), "-r", strconv.Itoa(cfg.Keyspace),
		"-c", strconv.Itoa(cfg.Clients), "-P", strconv.Itoa(cfg.Pipeline), "--csv"}
	args = append(args, test.Args...)
	out, err := exec.Command("redis-benchmark", args...).CombinedOutput()
	if err != nil {
		r.Err = fmt.Errorf("redis-benchmark: %v: %s", err, lastLines(string(out), 3))
		return r
	}
	// --csv: a header line, then "test","rps","avg","min","p50","p95","p99","max".
	recs, err := csv.NewReader(strings.NewReader(lastCSV(string(out)))).ReadAll()
	if err != nil || len(recs) < 2 || len(recs[1]) < 7 {
		r.Err = fmt.Errorf("redis-benchmark output: %q", out)
		return r
	}
	if strings.Contains(string(out), "ERR") {
		r.Err = fmt.Errorf("error replies: %s", lastLines(string(out), 3))
	}
	r.RPS, _ = strconv.ParseFloat(recs[1][1], 64)
	r.P50, _ = strconv.ParseFloat(recs[1][4], 64)
	r.P99, _ = strconv.ParseFloat(recs[1][6], 64)
	return r
}

// lastCSV returns the lines of redis-benchmark's CSV output (it may print
// warnings first).
func lastCSV(out string) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, `"`) {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

func (t *serveTarget) stop() error {
	t.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-t.exited:
		return nil
	case <-time.After(2 * time.Minute):
		t.cmd.Process.Kill()
		<-t.exited
		return errors.New("did not stop after SIGTERM; killed")
	}
}

// procRSS returns VmRSS of a process in bytes (Linux), or 0.
func procRSS(pid int) int64 {
	v := procField(fmt.Sprintf("/proc/%d/status", pid), "VmRSS")
	f := strings.Fields(v)
	if len(f) < 1 {
		return 0
	}
	kb, _ := strconv.ParseInt(f[0], 10, 64)
	return kb << 10
}

// ServeTable renders the results as markdown: per test, tally and Redis
// requests/s and p99, and items/s where a request reads a page.
func ServeTable(results []ServeResult, mems []ServeMemory) string {
	var b strings.Builder
	b.WriteString("| command | tally req/s | redis req/s | tally/redis | tally items/s | redis items/s | tally p50/p99 ms | redis p50/p99 ms |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	by := map[string]map[string]ServeResult{}
	var order []string
	for _, r := range results {
		if by[r.Test] == nil {
			by[r.Test] = map[string]ServeResult{}
			order = append(order, r.Test)
		}
		by[r.Test][r.Target] = r
	}
	cell := func(r ServeResult, ok bool, f func(ServeResult) string) string {
		if !ok {
			return "—"
		}
		if r.Err != nil {
			return "error"
		}
		return f(r)
	}
	for _, name := range order {
		tr, tok := by[name]["tally"]
		rr, rok := by[name]["redis"]
		ratio := "—"
		if tok && rok && tr.Err == nil && rr.Err == nil && rr.RPS > 0 {
			ratio = fmtRatio(tr.RPS / rr.RPS)
		}
		rps := func(r ServeResult) string { return fmtRate(r.RPS) }
		items := func(r ServeResult) string { return fmtRate(r.RPS * float64(r.Page)) }
		lat := func(r ServeResult) string { return fmt.Sprintf("%.2f / %.2f", r.P50, r.P99) }
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", name, cell(tr, tok, rps), cell(rr, rok, rps), ratio,
			cell(tr, tok, items), cell(rr, rok, items), cell(tr, tok, lat), cell(rr, rok, lat))
	}
	b.WriteString("\n| server | items loaded | load s | RSS before | RSS after | RSS growth per item | used_memory | tally tables |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, m := range mems {
		tables := "—"
		if m.Target == "tally" {
			tables = fmtMiB(float64(m.TableBytes))
		}
		fmt.Fprintf(&b, "| %s | %d | %.1f | %s | %s | %.1f B | %s | %s |\n", m.Target, m.Items, m.LoadSeconds,
			fmtMiB(float64(m.RSSBefore)), fmtMiB(float64(m.RSS)), m.PerItem(), fmtMiB(float64(m.UsedMemory)), tables)
	}
	return b.String()
}

// fmtMiB formats a byte count in MiB.
func fmtMiB(v float64) string { return fmt.Sprintf("%.1f MiB", v/(1<<20)) }
