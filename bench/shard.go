package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The sharding benchmarks (issue 23): tally clusters of 1, 2 and 4 shards
// × 3 replicas ("tally cluster local start --shards S") against Redis
// Clusters of the same shape (S masters × 2 replicas, AOF on), with one
// client program: go-redis's ClusterClient (MOVED, CLUSTER SLOTS, one
// pipeline per node).
//
//   - throughput: per shape and system, HINCRBY posts:ID likes 1 over
//     Keyspace uniform ids, then (after loading ReadRows rows with HSET)
//     HMGET posts:ID reposts comments likes over the loaded ids; each
//     Goroutines goroutines × Pipeline commands per ClusterClient
//     pipeline, for Duration. Durability sync pairs with appendfsync
//     always, interval with everysec. The server processes' CPU time
//     (/proc/PID/stat) is measured across each test.
//   - move: a tally cluster of MoveShards shards is loaded with MoveRows
//     rows; then, once per entry of MoveWriters, under that many
//     goroutines of one-at-a-time HINCRBY, a node is added to the last
//     shard ("cluster local add-node") and the shard's leader (or a
//     follower, MoveFollower) is moved onto it ("cluster move", stopped
//     after MoveTimeout); the move's time is per GiB of the moved
//     replica's store, and every counter written since the load is read
//     back and checked.
//   - fanout (not run by default): one author with FanoutFollowers
//     followers over every shard of a FanoutShards-shard cluster of each
//     system posts once; the time until sampled active homes show the
//     post, and a sweep that every active home holds it once
//     (shard_fanout.go).

// ShardConfig configures RunShard. Zero fields take the defaults.
type ShardConfig struct {
	// TallyBin is a built tally binary. Required.
	TallyBin string
	// Dir is the parent of the servers' data (default the temp dir).
	Dir string
	// Phases are of "throughput", "move", "fanout" (default the first two).
	Phases []string
	// Shards are the shapes of the throughput phase (default 1, 2, 4).
	Shards []int
	// Systems are of "tally", "redis" (default both).
	Systems []string
	// Durabilities pair tally's mode with Redis's appendfsync: sync with
	// always, interval with everysec (default sync).
	Durabilities []string
	// Duration is each throughput test's length (default 10s).
	Duration time.Duration
	// Goroutines and Pipeline shape the throughput tests (default 64, 16).
	Goroutines, Pipeline int
	// Keyspace is the range of ids HINCRBY writes (default 1,000,000).
	Keyspace int
	// ReadRows are loaded before HMGET (default 200,000).
	ReadRows int
	// MoveShards, MoveRows and MoveDurability shape the move phase
	// (default 2, 3,000,000, interval).
	MoveShards     int
	MoveRows       int
	MoveDurability string
	// MoveFollower moves a follower rather than the leader.
	MoveFollower bool
	// MoveWriters are the write loads of successive moves on the same
	// loaded cluster, in goroutines of one-at-a-time HINCRBY (0: idle);
	// each moves the shard's current leader (or a follower) onto one more
	// new node (default 0, 1, 4).
	MoveWriters []int
	// MoveTimeout bounds each "cluster move" (default 3m); a move that
	// takes longer is stopped and reported as not finished.
	MoveTimeout time.Duration
	// FanoutShards, FanoutFollowers, FanoutActive (a share, 0..1) and
	// FanoutDurability shape the fan-out phase (default 2, 1,000,000,
	// 0.1, interval); FanoutSample active homes are polled after the post
	// (default 1,000) and FanoutTimeout bounds the wait for every active
	// home (default 10m).
	FanoutShards     int
	FanoutReplicas   int // per shard, the leader/master included (default 3)
	FanoutFollowers  int
	FanoutActive     float64
	FanoutDurability string
	FanoutSample     int
	FanoutTimeout    time.Duration
	// FanoutModes are tally's fan-out modes, of "pull" (the default
	// configuration) and "push" (PULLTHRESHOLD above the follower count);
	// default both.
	FanoutModes []string
	// Log receives progress lines (default none).
	Log io.Writer
}

func (c *ShardConfig) fill() {
	if len(c.Phases) == 0 {
		c.Phases = []string{"throughput", "move"}
	}
	if len(c.Shards) == 0 {
		c.Shards = []int{1, 2, 4}
	}
	if len(c.Systems) == 0 {
		c.Systems = []string{"tally", "redis"}
	}
	if len(c.Durabilities) == 0 {
		c.Durabilities = []string{"sync"}
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if c.Goroutines == 0 {
		c.Goroutines = 64
	}
	if c.Pipeline == 0 {
		c.Pipeline = 16
	}
	if c.Keyspace == 0 {
		c.Keyspace = 1_000_000
	}
	if c.ReadRows == 0 {
		c.ReadRows = 200_000
	}
	if c.MoveShards == 0 {
		c.MoveShards = 2
	}
	if c.MoveRows == 0 {
		c.MoveRows = 3_000_000
	}
	if len(c.MoveWriters) == 0 {
		c.MoveWriters = []int{0, 1, 4}
	}
	if c.MoveTimeout == 0 {
		c.MoveTimeout = 3 * time.Minute
	}
	if c.MoveDurability == "" {
		c.MoveDurability = "interval"
	}
	if c.FanoutShards == 0 {
		c.FanoutShards = 2
	}
	if c.FanoutReplicas == 0 {
		c.FanoutReplicas = 3
	}
	if c.FanoutFollowers == 0 {
		c.FanoutFollowers = 1_000_000
	}
	if c.FanoutActive == 0 {
		c.FanoutActive = 0.1
	}
	if c.FanoutDurability == "" {
		c.FanoutDurability = "interval"
	}
	if c.FanoutSample == 0 {
		c.FanoutSample = 1000
	}
	if len(c.FanoutModes) == 0 {
		c.FanoutModes = []string{"pull", "push"}
	}
	if c.FanoutTimeout == 0 {
		c.FanoutTimeout = 10 * time.Minute
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

func (c *ShardConfig) validate() error {
	var errs []error
	if c.TallyBin == "" {
		errs = append(errs, fmt.Errorf("%w: ShardConfig.TallyBin is required", errShardBench))
	}
	for _, p := range c.Phases {
		if p != "throughput" && p != "move" && p != "fanout" {
			errs = append(errs, fmt.Errorf("%w: unknown phase %q (want throughput, move, fanout)", errShardBench, p))
		}
	}
	for _, s := range c.Systems {
		if s != "tally" && s != "redis" {
			errs = append(errs, fmt.Errorf("%w: unknown system %q (want tally, redis)", errShardBench, s))
		}
	}
	for _, d := range append(slices.Clone(c.Durabilities), c.MoveDurability, c.FanoutDurability) {
		if d != "sync" && d != "interval" {
			errs = append(errs, fmt.Errorf("%w: durability %q: want sync or interval", errShardBench, d))
		}
	}
	for _, s := range c.Shards {
		if s < 1 || s > 16 {
			errs = append(errs, fmt.Errorf("%w: shards %d: want 1..16", errShardBench, s))
		}
	}
	for _, w := range c.MoveWriters {
		if w < 0 {
			errs = append(errs, fmt.Errorf("%w: move writers %d: want 0 or more", errShardBench, w))
		}
	}
	for _, m := range c.FanoutModes {
		if m != "pull" && m != "push" {
			errs = append(errs, fmt.Errorf("%w: fan-out mode %q: want pull or push", errShardBench, m))
		}
	}
	if c.FanoutActive <= 0 || c.FanoutActive > 1 {
		errs = append(errs, fmt.Errorf("%w: fan-out active share %v: want (0, 1]", errShardBench, c.FanoutActive))
	}
	if c.FanoutShards < 1 || c.FanoutShards > 16 || c.FanoutReplicas < 1 || c.FanoutReplicas > 5 || c.FanoutFollowers < 1 || c.FanoutSample < 0 || c.FanoutTimeout < 0 {
		errs = append(errs, fmt.Errorf("%w: fan-out shards 1..16, followers ≥ 1", errShardBench))
	}
	if c.MoveTimeout < 0 || c.MoveShards < 1 || c.Goroutines < 1 || c.Pipeline < 1 || c.Keyspace < 1 || c.ReadRows < 1 || c.MoveRows < 1 {
		errs = append(errs, fmt.Errorf("%w: counts must be positive", errShardBench))
	}
	return errors.Join(errs...)
}

// ShardRow is one throughput test: one system, shape and durability.
type ShardRow struct {
	System     string // "tally" or "redis"
	Shards     int
	Durability string // tally's; Redis's appendfsync is paired with it
	Load       string // load average at the start
	HINCRBY    ccResult
	HMGET      ccResult
	// CPU of every server process across each test.
	IncrCPU, ReadCPU time.Duration
}

// MovePhase is the move phase's outcome.
type MovePhase struct {
	Shards   int
	Rows     int
	LoadTime time.Duration
	Load     string // load average before loading
	Moves    []MoveResult
}

// MoveResult is one move.
type MoveResult struct {
	Shard       uint32
	Writers     int // goroutines of the write load
	FromID      int
	ToID        int
	FromLeader  bool
	Done        bool  // the move finished within MoveTimeout
	Snapshots   int   // snapshots the new node installed (its log's "installed snapshot" lines)
	FromStore   int64 // bytes of the moved replica's directory before the move
	ToStore     int64 // bytes of the new replica's directory after the move
	Steps       []MoveStep
	Wall        time.Duration // the cluster move command, start to exit
	Writes      int64         // acknowledged trickle writes
	WriteSecs   float64
	WriteErrs   map[string]int64
	MaxLat      time.Duration
	Checked     int
	Bad         []string
	Load, After string // load averages before and after the move
}

// MoveStep is one line of "tally cluster move": a step and its time
// (cumulative from the command's start).
type MoveStep struct {
	Name string
	At   time.Duration
}

// ShardReport is RunShard's outcome.
type ShardReport struct {
	Config ShardConfig
	Rows   []ShardRow
	Move   *MovePhase
	Fanout *FanoutPhase
}

// RunShard runs the configured phases; the first that cannot run ends it
// with an error (the report holds what was measured before).
func RunShard(ctx context.Context, cfg ShardConfig) (*ShardReport, error) {
	cfg.fill()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if skip := ServeSkip(); skip != "" {
		return nil, errors.New(skip)
	}
	parent, err := os.MkdirTemp(cfg.Dir, "shardbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(parent)
	logf := func(format string, a ...any) { fmt.Fprintf(cfg.Log, format+"\n", a...) }
	rep := &ShardReport{Config: cfg}
	sub := phaseDirs(parent)
	for _, phase := range cfg.Phases {
		var err error
		switch phase {
		case "throughput":
			err = runShardThroughput(ctx, &cfg, rep, sub, logf)
		case "move":
			err = runShardMove(ctx, &cfg, rep, sub, logf)
		case "fanout":
			err = runShardFanout(ctx, &cfg, rep, sub, logf)
		}
		if err != nil {
			return rep, fmt.Errorf("%s: %w", phase, err)
		}
	}
	return rep, nil
}

func runShardThroughput(ctx context.Context, cfg *ShardConfig, rep *ShardReport, sub subdirFunc, logf func(string, ...any)) error {
	for _, dur := range cfg.Durabilities {
		for _, shards := range cfg.Shards {
			for _, sys := range cfg.Systems {
				dir, err := sub(fmt.Sprintf("%s-%d-%s", sys, shards, dur))
				if err != nil {
					return err
				}
				var cl shardCluster
				if sys == "tally" {
					cl, err = startTallyShards(ctx, cfg.TallyBin, dir, dur, shards, 3, 0)
				} else {
					cl, err = startRedisShards(ctx, dir, redisFsync(dur), shards)
				}
				if err != nil {
					return fmt.Errorf("%s %d shards: %w", sys, shards, err)
				}
				row, err := throughputTests(ctx, cfg, cl, sys, shards, dur, logf)
				cl.Stop()
				if err != nil {
					return err
				}
				rep.Rows = append(rep.Rows, row)
			}
		}
	}
	return nil
}

func throughputTests(ctx context.Context, cfg *ShardConfig, cl shardCluster, sys string, shards int, dur string, logf func(string, ...any)) (ShardRow, error) {
	row := ShardRow{System: sys, Shards: shards, Durability: dur, Load: loadAvg()}
	addrs, pids := cl.Addrs(), cl.Pids()
	spec := ccSpec{Addrs: addrs, Goroutines: cfg.Goroutines, Pipeline: cfg.Pipeline, Op: opHINCRBY,
		Keyspace: cfg.Keyspace, Dur: cfg.Duration, Seed: 1}
	c0 := sumCPU(pids)
	row.HINCRBY = runCC(ctx, spec)
	row.IncrCPU = sumCPU(pids) - c0
	logf("%s %d shards %s: HINCRBY %.0f/s (%d errors %v), load %s", sys, shards, dur, row.HINCRBY.Rate(), row.HINCRBY.Errs, row.HINCRBY.FirstErr, row.Load)
	if ctx.Err() != nil {
		return row, ctx.Err()
	}
	if _, err := loadCC(ctx, addrs, cfg.ReadRows, 16, 500); err != nil {
		return row, fmt.Errorf("%s %d shards: loading rows: %w", sys, shards, err)
	}
	spec.Op, spec.Keyspace, spec.Seed = opHMGET, cfg.ReadRows, 2
	c0 = sumCPU(pids)
	row.HMGET = runCC(ctx, spec)
	row.ReadCPU = sumCPU(pids) - c0
	logf("%s %d shards %s: HMGET %.0f/s (%d errors %v)", sys, shards, dur, row.HMGET.Rate(), row.HMGET.Errs, row.HMGET.FirstErr)
	return row, ctx.Err()
}

func runShardMove(ctx context.Context, cfg *ShardConfig, rep *ShardReport, sub subdirFunc, logf func(string, ...any)) error {
	dir, err := sub("move")
	if err != nil {
		return err
	}
	t, err := startTallyShards(ctx, cfg.TallyBin, dir, cfg.MoveDurability, cfg.MoveShards, 3, len(cfg.MoveWriters))
	if err != nil {
		return err
	}
	defer t.Stop()
	ph := &MovePhase{Shards: cfg.MoveShards, Rows: cfg.MoveRows, Load: loadAvg()}
	rep.Move = ph
	logf("move: loading %d rows", cfg.MoveRows)
	if ph.LoadTime, err = loadCC(ctx, t.Addrs(), cfg.MoveRows, 16, 1000); err != nil {
		return fmt.Errorf("loading: %w", err)
	}
	logf("move: loaded in %v", ph.LoadTime.Round(time.Millisecond))
	// The last shard starts on the last 3 nodes (node ids are 1..S×3,
	// shard (i-1)/3+1); each move replaces one of its replicas.
	first := (cfg.MoveShards-1)*3 + 1
	members := []int{first, first + 1, first + 2}
	var prev *trickle // the writes so far, which every later check includes
	for i, w := range cfg.MoveWriters {
		m := MoveResult{Shard: uint32(cfg.MoveShards), Writers: w, Load: loadAvg()}
		err := moveOnce(ctx, cfg, t, dir, members, &m, uint64(100+i), &prev, logf)
		ph.Moves = append(ph.Moves, m)
		if err != nil {
			return err
		}
		if !m.Done {
			// The learner left behind would skew every later move.
			break
		}
		for i, id := range members {
			if id == m.FromID {
				members[i] = m.ToID
			}
		}
	}
	return nil
}

// moveOnce moves one replica of the shard (whose replicas' node ids are
// members) onto a new node under m.Writers goroutines of writes.
func moveOnce(ctx context.Context, cfg *ShardConfig, t *tallyShards, dir string, members []int, m *MoveResult, seed uint64, prev **trickle, logf func(string, ...any)) error {
	for _, id := range members {
		st, err := clusterStatus(t.addr(id))
		if err != nil {
			return err
		}
		if (st.Role == "leader") != cfg.MoveFollower {
			m.FromID, m.FromLeader = id, st.Role == "leader"
			break
		}
	}
	if m.FromID == 0 {
		return fmt.Errorf("%w: no replica of shard %d to move", errShardBench, m.Shard)
	}
	m.FromStore = dirBytes(filepath.Join(dir, fmt.Sprintf("node-%d", m.FromID)))
	var tr *trickle
	if m.Writers > 0 {
		tr = startTrickle(ctx, t.Addrs(), m.Writers, cfg.MoveRows, seed, *prev)
		*prev = tr
		time.Sleep(2 * time.Second)
	}
	finish := func() {
		if tr != nil {
			tr.finish()
		}
	}
	out, err := exec.CommandContext(ctx, cfg.TallyBin, "cluster", "local", "add-node", "-d", dir,
		"--shard", strconv.Itoa(int(m.Shard))).CombinedOutput()
	if err != nil {
		finish()
		return fmt.Errorf("add-node: %v: %s", err, lastLines(string(out), 5))
	}
	addr, toID, raftAddr, err := parseAddNode(string(out))
	if err != nil {
		finish()
		return err
	}
	m.ToID = toID
	logf("move: %d writers: node %d added at %s; moving replica %d (leader %v, store %s)", m.Writers, toID, addr, m.FromID, m.FromLeader, fmtMiB(float64(m.FromStore)))
	mctx, cancel := context.WithTimeout(ctx, cfg.MoveTimeout)
	t0 := time.Now()
	out, err = exec.CommandContext(mctx, cfg.TallyBin, "cluster", "move", strconv.Itoa(int(m.Shard)), strconv.Itoa(m.FromID),
		strconv.Itoa(toID), raftAddr, addr, "--addr", t.Addrs()[0]).CombinedOutput()
	m.Wall = time.Since(t0)
	timedOut := mctx.Err() != nil && ctx.Err() == nil
	cancel()
	m.Steps, _ = parseMoveSteps(string(out))
	m.Snapshots = countLines(filepath.Join(dir, fmt.Sprintf("node-%d.log", toID)), "replica: installed snapshot")
	switch {
	case err == nil:
		if m.Steps, err = parseMoveSteps(string(out)); err != nil {
			finish()
			return err
		}
		m.Done = true
	case timedOut:
		logf("move: not finished after %v (%d snapshots installed on the new node)", cfg.MoveTimeout, m.Snapshots)
	default:
		finish()
		return fmt.Errorf("cluster move: %v: %s", err, lastLines(string(out), 5))
	}
	logf("move: %v: %s", m.Wall.Round(time.Millisecond), strings.TrimSpace(string(out)))
	if tr != nil {
		time.Sleep(3 * time.Second)
		tr.finish()
		m.Writes, m.WriteSecs, m.WriteErrs, m.MaxLat = tr.ok, tr.secs, tr.errs, tr.maxLat
		m.Checked, m.Bad, err = tr.verify(ctx)
		if err != nil {
			return fmt.Errorf("reading back: %w", err)
		}
	}
	m.ToStore = dirBytes(filepath.Join(dir, fmt.Sprintf("node-%d", toID)))
	m.After = loadAvg()
	if len(m.Bad) > 0 {
		return fmt.Errorf("%w: %d counters wrong after the move, e.g. %s", errShardBench, len(m.Bad), m.Bad[0])
	}
	return nil
}

// countLines returns the number of lines of the file at path holding s.
func countLines(path, s string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), s)
}

// parseAddNode reads "ADDR PID ID RAFT_ADDR" from add-node's output.
func parseAddNode(out string) (addr string, id int, raftAddr string, err error) {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || !strings.Contains(f[0], ":") || !strings.Contains(f[3], ":") {
			continue
		}
		if id, err = strconv.Atoi(f[2]); err == nil && id > 0 {
			return f[0], id, f[3], nil
		}
	}
	return "", 0, "", fmt.Errorf("%w: no \"ADDR PID ID RAFT_ADDR\" line in add-node's output %q", errShardBench, out)
}

// parseMoveSteps reads "STEP SECONDSs" lines from cluster move's output;
// it wants at least one and the last to be "removed".
func parseMoveSteps(out string) ([]MoveStep, error) {
	var steps []MoveStep
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || !strings.HasSuffix(f[1], "s") {
			continue
		}
		d, err := time.ParseDuration(f[1])
		if err != nil {
			continue
		}
		steps = append(steps, MoveStep{Name: f[0], At: d})
	}
	if len(steps) == 0 || steps[len(steps)-1].Name != "removed" {
		return steps, fmt.Errorf("%w: cluster move did not report its replica removed: %q", errShardBench, out)
	}
	return steps, nil
}

// Markdown renders the report.
func (r *ShardReport) Markdown() string {
	var b strings.Builder
	c := r.Config
	if len(r.Rows) > 0 {
		fmt.Fprintf(&b, "go-redis ClusterClient, %d goroutines × %d commands per pipeline, %v per test; HINCRBY over %d ids, HMGET over %d loaded rows. "+
			"CPU: every server process's user+system time across the test, per command.\n\n",
			c.Goroutines, c.Pipeline, c.Duration, c.Keyspace, c.ReadRows)
		b.WriteString("| system | shards × replicas | durability | load at start | HINCRBY/s | p50 / p99 per pipeline | server CPU per HINCRBY | HMGET/s | p50 / p99 | server CPU per HMGET | errors |\n")
		b.WriteString("| --- | --- | --- | --- | ---: | --- | ---: | ---: | --- | ---: | --- |\n")
		for _, row := range r.Rows {
			dur := row.Durability
			if row.System == "redis" {
				dur = "appendfsync " + redisFsync(dur)
			}
			errs := fmt.Sprintf("%d / %d", row.HINCRBY.Errs, row.HMGET.Errs)
			if e := cmp(row.HINCRBY.FirstErr, row.HMGET.FirstErr); e != nil {
				errs += fmt.Sprintf(" (%v)", e)
			}
			fmt.Fprintf(&b, "| %s | %d × 3 | %s | %s | %s | %s / %s | %s | %s | %s / %s | %s | %s |\n",
				row.System, row.Shards, dur, row.Load,
				fmtRate(row.HINCRBY.Rate()), fmtDur(row.HINCRBY.Lat.Quantile(0.5)), fmtDur(row.HINCRBY.Lat.Quantile(0.99)), perOp(row.IncrCPU, row.HINCRBY.Ops),
				fmtRate(row.HMGET.Rate()), fmtDur(row.HMGET.Lat.Quantile(0.5)), fmtDur(row.HMGET.Lat.Quantile(0.99)), perOp(row.ReadCPU, row.HMGET.Ops), errs)
		}
		b.WriteString("\n")
	}
	if ph := r.Move; ph != nil {
		fmt.Fprintf(&b, "Move: %d shards × 3, durability %s, %d rows loaded through the cluster in %v (load %s before loading); "+
			"then, one after the other on that cluster, shard %d's leader (or a follower, as the table says) moved onto a new node with "+
			"`cluster local add-node` + `cluster move` (timeout %v), under goroutines of one-at-a-time HINCRBY over the loaded rows.\n\n",
			ph.Shards, c.MoveDurability, ph.Rows, ph.LoadTime.Round(time.Millisecond), ph.Load, ph.Shards, c.MoveTimeout)
		b.WriteString("| writers | moved replica (store) | new replica's store after | move (command wall time) | steps (cumulative) | snapshots installed | s per GiB of the moved store | writes acked during (rate) | write errors | max write latency | counters checked | load before / after |\n")
		b.WriteString("| ---: | --- | ---: | ---: | --- | ---: | ---: | --- | --- | ---: | --- | --- |\n")
		for _, m := range ph.Moves {
			role := "follower"
			if m.FromLeader {
				role = "leader"
			}
			var steps []string
			for _, s := range m.Steps {
				steps = append(steps, fmt.Sprintf("%s %.3fs", s.Name, s.At.Seconds()))
			}
			wall := fmt.Sprintf("%.2fs", m.Wall.Seconds())
			perGiB := fmt.Sprintf("%.1f", m.Wall.Seconds()/(float64(m.FromStore)/(1<<30)))
			if !m.Done {
				wall = fmt.Sprintf("**not finished** (stopped at %.0fs)", m.Wall.Seconds())
				perGiB = "—"
			}
			var errs []string
			for e, n := range m.WriteErrs {
				errs = append(errs, fmt.Sprintf("%d× %q", n, e))
			}
			slices.Sort(errs)
			errText := "0"
			if len(errs) > 0 {
				errText = strings.Join(errs, "; ")
			}
			writes, checked, maxLat := "—", "—", "—"
			if m.Writers > 0 {
				writes = fmt.Sprintf("%d (%.0f/s)", m.Writes, float64(m.Writes)/m.WriteSecs)
				checked = fmt.Sprintf("%d, all right", m.Checked)
				if len(m.Bad) > 0 {
					checked = fmt.Sprintf("%d, %d WRONG (e.g. %s)", m.Checked, len(m.Bad), m.Bad[0])
				}
				maxLat = fmtDur(m.MaxLat)
			} else {
				errText = "—"
			}
			fmt.Fprintf(&b, "| %d | %d, %s (%s) | %s | %s | %s | %d | %s | %s | %s | %s | %s | %s / %s |\n",
				m.Writers, m.FromID, role, fmtMiB(float64(m.FromStore)), fmtMiB(float64(m.ToStore)), wall, strings.Join(steps, ", "),
				m.Snapshots, perGiB, writes, errText, maxLat, checked, m.Load, m.After)
		}
		b.WriteString("\n")
	}
	if r.Fanout != nil {
		r.Fanout.markdown(&b, c)
	}
	return b.String()
}

// cmp returns the first non-nil error.
func cmp(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// perOp formats cpu divided by ops in µs.
func perOp(cpu time.Duration, ops int64) string {
	if ops <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f µs", float64(cpu.Microseconds())/float64(ops))
}
