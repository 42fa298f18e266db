package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The replication benchmarks (issue 22): a 3-replica tally group on
// loopback against one "tally serve" and against a redis-server primary
// with one replica, in one run with one tally binary and one Go client
// (runPipe), so the figures compare as ratios.
//
//   - writes: HINCRBY posts:ID likes 1 over Keyspace random ids, pipelined
//     (Conns connections × Pipeline commands per write) and one at a time
//     (LatConns connections), against one node, the group's leader and the
//     Redis primary, without and with "WAIT 1 0" appended to every batch
//     (Redis: the write is on the replica before the batch is answered,
//     the guarantee closest to a quorum commit; Redis 7.0 has no WAITAOF,
//     so the replica's fsync is not waited for). Latency is per batch:
//     from its write to its last reply.
//   - failover: a client writes HINCRBY one at a time to whichever replica
//     leads (following MOVED, trying the next replica on TRYAGAIN,
//     CLUSTERDOWN and connection errors); the leader is killed with
//     SIGKILL Failovers times; each time is from the kill to the first
//     write the new leader acknowledges. The killed replica is restarted
//     (cluster local start) and caught up before the next kill; at the end
//     every acknowledged increment must be in the counters.
//   - reads: HGET and HMGET pipelined over ReadRows loaded rows on one
//     node, on the leader (linearizable: ReadIndex), on the followers after
//     READONLY (stale by their lag), and on the Redis primary and replica.
//   - catch-up: CatchupRows rows written through the group, then a 4th
//     replica started empty and added as a learner; the time until its
//     applied index reaches the leader's, per GiB of the leader's store.

// ClusterConfig configures RunCluster. Zero fields take the defaults.
type ClusterConfig struct {
	// TallyBin is a built tally binary. Required.
	TallyBin string
	// Dir is the parent directory of the servers' data (default the
	// system temporary directory).
	Dir string
	// Phases are the parts to run, of "writes", "failover", "reads",
	// "catchup" (default all).
	Phases []string
	// Durabilities are the tally modes of the write phase, each paired
	// with Redis's appendfsync: sync with always, interval with everysec
	// (default both).
	Durabilities []string
	// Duration is each write and read test's length (default 10s).
	Duration time.Duration
	// Conns and Pipeline shape the pipelined tests (default 50 and 16).
	Conns, Pipeline int
	// LatConns is the number of connections of the one-at-a-time write
	// test (default 8).
	LatConns int
	// Keyspace is the range of ids written (default 1,000,000).
	Keyspace int
	// Failovers is the number of leader kills (default 12).
	Failovers int
	// ReadRows is the number of rows loaded before the read tests
	// (default 200,000).
	ReadRows int
	// CatchupRows is the number of rows loaded before a replica is added
	// (default 3,000,000).
	CatchupRows int
	// Log receives progress lines (default none).
	Log io.Writer
}

func (c *ClusterConfig) fill() {
	if len(c.Phases) == 0 {
		c.Phases = []string{"writes", "failover", "reads", "catchup"}
	}
	if len(c.Durabilities) == 0 {
		c.Durabilities = []string{"sync", "interval"}
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if c.Conns == 0 {
		c.Conns = 50
	}
	if c.Pipeline == 0 {
		c.Pipeline = 16
	}
	if c.LatConns == 0 {
		c.LatConns = 8
	}
	if c.Keyspace == 0 {
		c.Keyspace = 1_000_000
	}
	if c.Failovers == 0 {
		c.Failovers = 12
	}
	if c.ReadRows == 0 {
		c.ReadRows = 200_000
	}
	if c.CatchupRows == 0 {
		c.CatchupRows = 3_000_000
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// validate reports every problem of a filled configuration.
func (c *ClusterConfig) validate() error {
	var errs []error
	if c.TallyBin == "" {
		errs = append(errs, errors.New("bench: ClusterConfig.TallyBin is required"))
	}
	for _, p := range c.Phases {
		if !slices.Contains([]string{"writes", "failover", "reads", "catchup"}, p) {
			errs = append(errs, fmt.Errorf("bench: unknown phase %q (want writes, failover, reads, catchup)", p))
		}
	}
	for _, d := range c.Durabilities {
		if d != "sync" && d != "interval" {
			errs = append(errs, fmt.Errorf("bench: durability %q: want sync or interval", d))
		}
	}
	if c.Conns < 1 || c.Pipeline < 1 || c.LatConns < 1 || c.Keyspace < 1 || c.Failovers < 1 || c.ReadRows < 1 || c.CatchupRows < 1 {
		errs = append(errs, errors.New("bench: counts must be positive"))
	}
	return errors.Join(errs...)
}

// WriteRow is one target of the write phase.
type WriteRow struct {
	Target     string // "tally 1 node", "tally 3 replicas", "redis + replica"
	Durability string // tally's mode; Redis's appendfsync is paired with it
	Wait       bool   // WAIT 1 0 after every batch (Redis)
	Piped      pipeResult
	Single     pipeResult
}

// ReadRow is one target of the read phase.
type ReadRow struct {
	Target string
	HGET   pipeResult
	HMGET  pipeResult
}

// ClusterReport is RunCluster's outcome.
type ClusterReport struct {
	Config   ClusterConfig
	Writes   []WriteRow
	Failover *FailoverResult
	Reads    []ReadRow
	Catchup  *CatchupResult
}

// RunCluster runs the configured phases in order and returns what it
// measured; the first phase that cannot run ends it with an error (the
// report holds the phases before it).
func RunCluster(ctx context.Context, cfg ClusterConfig) (*ClusterReport, error) {
	cfg.fill()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if skip := ServeSkip(); skip != "" {
		return nil, errors.New(skip)
	}
	parent, err := os.MkdirTemp(cfg.Dir, "clusterbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(parent)
	rep := &ClusterReport{Config: cfg}
	logf := func(format string, a ...any) { fmt.Fprintf(cfg.Log, format+"\n", a...) }
	sub := phaseDirs(parent)
	for _, phase := range cfg.Phases {
		var err error
		switch phase {
		case "writes":
			err = runWritePhase(ctx, &cfg, rep, sub, logf)
		case "failover":
			err = runFailoverPhase(ctx, &cfg, rep, sub, logf)
		case "reads":
			err = runReadPhase(ctx, &cfg, rep, sub, logf)
		case "catchup":
			err = runCatchupPhase(ctx, &cfg, rep, sub, logf)
		}
		if err != nil {
			return rep, fmt.Errorf("%s: %w", phase, err)
		}
	}
	return rep, nil
}

type subdirFunc func(name string) (string, error)

// writeTests runs the pipelined and the one-at-a-time write tests at addr.
func writeTests(ctx context.Context, cfg *ClusterConfig, row *WriteRow, addr string, logf func(string, ...any)) error {
	row.Piped = runPipe(ctx, pipeSpec{Addrs: []string{addr}, Conns: cfg.Conns, Pipeline: cfg.Pipeline, Op: opHINCRBY,
		Keyspace: cfg.Keyspace, Dur: cfg.Duration, Wait: row.Wait, Seed: 1, IgnoreLatFirst: time.Second})
	if row.Piped.Err != nil {
		return fmt.Errorf("%s %s: %w", row.Target, row.Durability, row.Piped.Err)
	}
	row.Single = runPipe(ctx, pipeSpec{Addrs: []string{addr}, Conns: cfg.LatConns, Pipeline: 1, Op: opHINCRBY,
		Keyspace: cfg.Keyspace, Dur: cfg.Duration, Wait: row.Wait, Seed: 2, IgnoreLatFirst: time.Second})
	if row.Single.Err != nil {
		return fmt.Errorf("%s %s: %w", row.Target, row.Durability, row.Single.Err)
	}
	logf("writes: %s %s wait=%v: pipelined %.0f/s p50 %v p99 %v; one at a time %.0f/s p50 %v p99 %v",
		row.Target, row.Durability, row.Wait, row.Piped.Rate(), fmtDur(row.Piped.Lat.Quantile(0.5)),
		fmtDur(row.Piped.Lat.Quantile(0.99)), row.Single.Rate(), fmtDur(row.Single.Lat.Quantile(0.5)),
		fmtDur(row.Single.Lat.Quantile(0.99)))
	return nil
}

func runWritePhase(ctx context.Context, cfg *ClusterConfig, rep *ClusterReport, sub subdirFunc, logf func(string, ...any)) error {
	for _, dur := range cfg.Durabilities {
		// One node.
		dir, err := sub("node-" + dur)
		if err != nil {
			return err
		}
		node, err := startNode(cfg.TallyBin, dir, dur)
		if err != nil {
			return err
		}
		row := WriteRow{Target: "tally 1 node", Durability: dur}
		err = writeTests(ctx, cfg, &row, node.addr, logf)
		node.stop()
		if err != nil {
			return err
		}
		rep.Writes = append(rep.Writes, row)

		// The group, through its leader.
		if dir, err = sub("group-" + dur); err != nil {
			return err
		}
		port, err := freePortRange(3)
		if err != nil {
			return err
		}
		g, err := startGroup(cfg.TallyBin, dir, dur, port, 3)
		if err != nil {
			return err
		}
		leader, err := g.leader()
		row = WriteRow{Target: "tally 3 replicas", Durability: dur}
		if err == nil {
			err = writeTests(ctx, cfg, &row, leader, logf)
		}
		if serr := g.stop(); err == nil {
			err = serr
		}
		if err != nil {
			return err
		}
		rep.Writes = append(rep.Writes, row)

		// Redis with one replica, without and with WAIT.
		for _, wait := range []bool{false, true} {
			if dir, err = sub("redis-" + dur); err != nil {
				return err
			}
			rp, err := startRedisPair(dir, redisFsync(dur))
			if err != nil {
				return err
			}
			row := WriteRow{Target: "redis + replica", Durability: dur, Wait: wait}
			err = writeTests(ctx, cfg, &row, rp.primary.addr, logf)
			rp.stop()
			if err != nil {
				return err
			}
			rep.Writes = append(rep.Writes, row)
		}
	}
	return nil
}

// phaseGroup starts a phase's 3-replica group (durability sync) in its
// own subdirectory, on a range of ports free (ports of them).
func phaseGroup(cfg *ClusterConfig, sub subdirFunc, name string, ports int) (*group, error) {
	dir, err := sub(name)
	if err != nil {
		return nil, err
	}
	port, err := freePortRange(ports)
	if err != nil {
		return nil, err
	}
	return startGroup(cfg.TallyBin, dir, "sync", port, 3)
}

func runFailoverPhase(ctx context.Context, cfg *ClusterConfig, rep *ClusterReport, sub subdirFunc, logf func(string, ...any)) error {
	g, err := phaseGroup(cfg, sub, "failover", 3)
	if err != nil {
		return err
	}
	defer g.stop()
	res := runFailover(ctx, g, cfg.Failovers, logf)
	rep.Failover = &res
	if res.Err != nil {
		return res.Err
	}
	logf("failover: p50 %v p99 %v max %v over %d kills; %d increments acknowledged, %d unknown, %d stored, %d lost",
		res.Quantile(0.5).Round(time.Millisecond), res.Quantile(0.99).Round(time.Millisecond),
		res.Quantile(1).Round(time.Millisecond), len(res.Times), res.Acked, res.Unknown, res.Stored, res.Lost)
	return nil
}

func readTests(ctx context.Context, cfg *ClusterConfig, target string, addrs []string, readonly bool, logf func(string, ...any)) (ReadRow, error) {
	row := ReadRow{Target: target}
	for _, op := range []pipeOp{opHGET, opHMGET} {
		r := runPipe(ctx, pipeSpec{Addrs: addrs, Conns: cfg.Conns, Pipeline: cfg.Pipeline, Op: op, Keyspace: cfg.ReadRows,
			Dur: cfg.Duration, ReadOnly: readonly, Seed: 3, IgnoreLatFirst: time.Second})
		if r.Err != nil {
			return row, fmt.Errorf("%s %s: %w", target, op, r.Err)
		}
		logf("reads: %s %s: %.0f/s p50 %v p99 %v", target, op, r.Rate(), fmtDur(r.Lat.Quantile(0.5)), fmtDur(r.Lat.Quantile(0.99)))
		if op == opHGET {
			row.HGET = r
		} else {
			row.HMGET = r
		}
	}
	return row, nil
}

func runReadPhase(ctx context.Context, cfg *ClusterConfig, rep *ClusterReport, sub subdirFunc, logf func(string, ...any)) error {
	load := func(addr string) error {
		d, err := loadRows(ctx, addr, cfg.ReadRows, 4, 1000)
		if err == nil {
			logf("reads: loaded %d rows at %s in %.1fs", cfg.ReadRows, addr, d.Seconds())
		}
		return err
	}
	// One node.
	dir, err := sub("reads-node")
	if err != nil {
		return err
	}
	node, err := startNode(cfg.TallyBin, dir, "sync")
	if err != nil {
		return err
	}
	err = load(node.addr)
	var row ReadRow
	if err == nil {
		row, err = readTests(ctx, cfg, "tally 1 node", []string{node.addr}, false, logf)
	}
	node.stop()
	if err != nil {
		return err
	}
	rep.Reads = append(rep.Reads, row)

	// The group: the leader, then the followers after READONLY.
	g, err := phaseGroup(cfg, sub, "reads-group", 3)
	if err != nil {
		return err
	}
	defer g.stop()
	leader, err := g.leader()
	if err != nil {
		return err
	}
	if err := load(leader); err != nil {
		return err
	}
	if err := waitCaughtUp(ctx, g, time.Minute); err != nil {
		return err
	}
	for _, t := range []struct {
		name     string
		addrs    []string
		readonly bool
	}{
		{"tally leader (ReadIndex)", []string{leader}, false},
		{"tally 2 followers (READONLY)", g.followers(leader), true},
		{"tally all 3 (READONLY)", append(g.followers(leader), leader), true},
	} {
		row, err := readTests(ctx, cfg, t.name, t.addrs, t.readonly, logf)
		if err != nil {
			return err
		}
		rep.Reads = append(rep.Reads, row)
	}
	if err := g.stop(); err != nil {
		return err
	}

	// Redis: the primary, then the replica.
	if dir, err = sub("reads-redis"); err != nil {
		return err
	}
	rp, err := startRedisPair(dir, "always")
	if err != nil {
		return err
	}
	defer rp.stop()
	if err := load(rp.primary.addr); err != nil {
		return err
	}
	for _, t := range []struct {
		name string
		addr string
	}{{"redis primary", rp.primary.addr}, {"redis replica", rp.replica.addr}} {
		row, err := readTests(ctx, cfg, t.name, []string{t.addr}, false, logf)
		if err != nil {
			return err
		}
		rep.Reads = append(rep.Reads, row)
	}
	return nil
}

func runCatchupPhase(ctx context.Context, cfg *ClusterConfig, rep *ClusterReport, sub subdirFunc, logf func(string, ...any)) error {
	g, err := phaseGroup(cfg, sub, "catchup", 4) // a fourth port for the new replica
	if err != nil {
		return err
	}
	defer g.stop()
	res := runCatchup(ctx, g, cfg.CatchupRows, logf)
	rep.Catchup = &res
	return res.Err
}

// Markdown renders the report's tables.
func (r *ClusterReport) Markdown() string {
	var b strings.Builder
	cfg := r.Config
	if len(r.Writes) > 0 {
		fmt.Fprintf(&b, "Writes: HINCRBY posts:ID likes 1, ids uniform over %d; pipelined: %d connections × %d commands "+
			"per batch; one at a time: %d connections; %v per test, the first second's latencies dropped. Latency is "+
			"per batch (write to last reply). \"WAIT\": `WAIT 1 0` appended to every batch (one per %d writes "+
			"pipelined, one per write one at a time).\n\n", cfg.Keyspace, cfg.Conns, cfg.Pipeline, cfg.LatConns,
			cfg.Duration, cfg.Pipeline)
		b.WriteString("| target | durability | pipelined writes/s | ÷ 1 node | batch p50 | batch p99 | one at a time writes/s | p50 | p99 |\n")
		b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		one := map[string]float64{}
		for _, w := range r.Writes {
			if w.Target == "tally 1 node" {
				one[w.Durability] = w.Piped.Rate()
			}
		}
		for _, w := range r.Writes {
			name, mode := w.Target, w.Durability
			if strings.HasPrefix(name, "redis") {
				mode = "appendfsync " + redisFsync(w.Durability)
				if w.Wait {
					name += ", WAIT 1 0"
				}
			}
			ratio := "—"
			if o := one[w.Durability]; o > 0 {
				ratio = fmtRatio(w.Piped.Rate() / o)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", name, mode, fmtRate(w.Piped.Rate()), ratio,
				fmtDur(w.Piped.Lat.Quantile(0.5)), fmtDur(w.Piped.Lat.Quantile(0.99)), fmtRate(w.Single.Rate()),
				fmtDur(w.Single.Lat.Quantile(0.5)), fmtDur(w.Single.Lat.Quantile(0.99)))
		}
		b.WriteString("\n")
	}
	if f := r.Failover; f != nil {
		fmt.Fprintf(&b, "Failover (3 replicas, durability sync, default 100 ms ticks): %d kills of the leader with SIGKILL "+
			"under one-at-a-time HINCRBY; time from the kill to the first write the new leader acknowledged.\n\n", len(f.Times))
		b.WriteString("| kills | p50 | p99 | max | each (ms) | increments acked | outcome unknown | stored | lost |\n")
		b.WriteString("| ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |\n")
		var each []string
		for _, t := range f.Times {
			each = append(each, fmt.Sprint(t.Milliseconds()))
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %d | %d | %d | %d |\n\n", len(f.Times), fmtDur(f.Quantile(0.5)),
			fmtDur(f.Quantile(0.99)), fmtDur(f.Quantile(1)), strings.Join(each, " "), f.Acked, f.Unknown, f.Stored, f.Lost)
	}
	if len(r.Reads) > 0 {
		fmt.Fprintf(&b, "Reads: %d rows loaded (HSET of 3 columns); HGET posts:ID likes and HMGET posts:ID reposts "+
			"comments likes, ids uniform over the rows, %d connections × %d per batch (spread round-robin over the "+
			"addresses), %v per test.\n\n", cfg.ReadRows, cfg.Conns, cfg.Pipeline, cfg.Duration)
		b.WriteString("| target | HGET/s | ÷ 1 node | batch p50 / p99 | HMGET/s | ÷ 1 node | batch p50 / p99 |\n")
		b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		var oneG, oneM float64
		for _, rr := range r.Reads {
			if rr.Target == "tally 1 node" {
				oneG, oneM = rr.HGET.Rate(), rr.HMGET.Rate()
			}
		}
		ratio := func(v, o float64) string {
			if o <= 0 {
				return "—"
			}
			return fmtRatio(v / o)
		}
		for _, rr := range r.Reads {
			fmt.Fprintf(&b, "| %s | %s | %s | %s / %s | %s | %s | %s / %s |\n", rr.Target,
				fmtRate(rr.HGET.Rate()), ratio(rr.HGET.Rate(), oneG), fmtDur(rr.HGET.Lat.Quantile(0.5)), fmtDur(rr.HGET.Lat.Quantile(0.99)),
				fmtRate(rr.HMGET.Rate()), ratio(rr.HMGET.Rate(), oneM), fmtDur(rr.HMGET.Lat.Quantile(0.5)), fmtDur(rr.HMGET.Lat.Quantile(0.99)))
		}
		b.WriteString("\n")
	}
	if c := r.Catchup; c != nil && c.Err == nil {
		b.WriteString("Catch-up: rows written through the 3-replica group (durability sync), the group idle, then a 4th " +
			"replica started empty (--join) and added as a learner (`tally cluster add`); time from the add to its " +
			"applied index reaching the leader's.\n\n")
		b.WriteString("| rows | load s | leader's log kept from | leader's store | leader's applied index | new replica's store | catch-up s | s per GiB of the leader's store |\n")
		b.WriteString("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		fmt.Fprintf(&b, "| %d | %.1f | %s | %s | %d | %s | %.2f | %.1f |\n\n", c.Rows, c.LoadSeconds, c.LogFirst,
			fmtMiB(float64(c.LeaderBytes)), c.LeaderIndex, fmtMiB(float64(c.NewBytes)), c.Seconds, c.SecondsPerGB())
	}
	return b.String()
}

// phaseDirs returns a function that makes the next numbered directory
// under parent for a phase's servers ("01-writes", "02-failover", ...).
func phaseDirs(parent string) func(name string) (string, error) {
	n := 0
	return func(name string) (string, error) {
		n++
		d := filepath.Join(parent, fmt.Sprintf("%02d-%s", n, name))
		return d, os.MkdirAll(d, 0o755)
	}
}
