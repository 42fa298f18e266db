package bench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tallydb/tally/bench/workload"
	"github.com/tallydb/tally/internal/hist"
)

// RunConfig is what every target of one comparison shares.
type RunConfig struct {
	// Workload is the data set and operation mix.
	Workload *workload.Workload
	// Clients is the number of client goroutines. The default is 8.
	Clients int
	// Duration is how long the mixed workload runs per target. The default
	// is 10s.
	Duration time.Duration
	// OpsPerClient, when positive, ends the run after that many operations
	// per client instead of after Duration (for tests).
	OpsPerClient int
	// Dir is the parent of the targets' temporary directories. The default
	// is os.TempDir().
	Dir string
	// Verify is the number of items whose counts are checked after the load
	// and across the reopen. The default is 2000.
	Verify int
	// Log, if not nil, receives progress lines.
	Log io.Writer
	// Rate, when positive, runs the mixed workload open loop: Rate
	// operations a second in all (an operation is one write or one read
	// batch), each client sending one every Clients/Rate seconds on a
	// fixed schedule, the clients' schedules offset evenly so that sends
	// are 1/Rate apart overall. Each latency is counted from the
	// operation's scheduled send time, not from when it was sent: a stall
	// delays the operations scheduled behind it on the same client, and
	// each of them counts its wait (no coordinated omission). A client
	// behind its schedule sends at once, so a target that cannot sustain
	// Rate shows a lower rate than asked and latencies that grow with the
	// run. The default, 0, is closed loop: each client sends its next
	// operation when the last one is answered.
	Rate float64
	// clock is the runner's time source; nil means the wall clock (tests
	// give a fake one).
	clock clock
	// HeapProfile, if not empty, is a path prefix: once the memory figures
	// are taken, the runner writes the Go heap profile (inuse_space after a
	// collection) to HeapProfile + "-" + the target's label + ".pb.gz", for
	// the per-site table of bench/RESULTS.md.
	HeapProfile string
}

// Result is one target's figures.
type Result struct {
	Spec Spec
	// Err is the first error the target returned; the figures are then
	// partial.
	Err error
	// Counters is the number of counter values (items × columns).
	Counters uint64
	// Load is the time Load took.
	Load time.Duration
	// Elapsed is how long the mixed workload ran.
	Elapsed time.Duration
	// Reads and Writes count operations; ReadIDs counts the ids read.
	Reads, ReadIDs, Writes uint64
	// ReadLat and WriteLat are per-operation latencies: a whole read batch,
	// one write.
	ReadLat, WriteLat hist.Histogram
	// Mem and DiskBytes are measured after the run; -1 (every field of
	// Mem) if unknown.
	Mem       Memory
	DiskBytes int64
	// Recovery is the time Reopen took; -1 if unknown.
	Recovery time.Duration
}

// ReadIDsPerSec returns ids read per second.
func (r *Result) ReadIDsPerSec() float64 { return perSec(r.ReadIDs, r.Elapsed) }

// WritesPerSec returns writes per second.
func (r *Result) WritesPerSec() float64 { return perSec(r.Writes, r.Elapsed) }

func perSec(n uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func (c *RunConfig) fill() {
	if c.Clients <= 0 {
		c.Clients = 8
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Dir == "" {
		c.Dir = os.TempDir()
	}
	if c.Verify <= 0 {
		c.Verify = 2000
	}
	if c.clock == nil {
		c.clock = wallClock{}
	}
}

// clock is the time the runner's clients read and sleep on.
type clock interface {
	Now() time.Time
	Sleep(d time.Duration)
}

type wallClock struct{}

func (wallClock) Now() time.Time        { return time.Now() }
func (wallClock) Sleep(d time.Duration) { time.Sleep(d) }

// schedule is an open-loop client's send times: next, then every after
// the one before.
type schedule struct {
	next  time.Time
	every time.Duration
}

// pace returns the schedule of client i of clients sharing rate operations
// a second from start: one every clients/rate seconds, client i's first
// at start + i/rate, so that the clients' sends interleave 1/rate apart.
func pace(start time.Time, rate float64, clients, i int) *schedule {
	every := time.Duration(float64(clients) / rate * float64(time.Second))
	return &schedule{next: start.Add(time.Duration(float64(i) / rate * float64(time.Second))), every: every}
}

func (c *RunConfig) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, format+"\n", args...)
	}
}

// Run loads the workload into a fresh instance of spec's target, checks a
// sample of counts, runs the mixed workload on Clients goroutines, measures
// memory and disk, reopens the target and checks the same sample survived.
func Run(cfg RunConfig, spec Spec) Result {
	cfg.fill()
	w := cfg.Workload
	res := Result{Spec: spec, Counters: w.Counters(), Mem: Memory{-1, -1, -1}, DiskBytes: -1, Recovery: -1}
	if spec.Skip != "" {
		return res
	}
	dir, err := os.MkdirTemp(cfg.Dir, "tallybench-")
	if err != nil {
		res.Err = err
		return res
	}
	defer os.RemoveAll(dir)
	t, err := spec.Open(dir, w)
	if err != nil {
		res.Err = fmt.Errorf("open: %w", err)
		return res
	}
	defer func() {
		if err := t.Close(); err != nil && res.Err == nil {
			res.Err = fmt.Errorf("close: %w", err)
		}
	}()
	res.Err = run(&cfg, t, &res)
	return res
}

func run(cfg *RunConfig, t Target, res *Result) error {
	w := cfg.Workload
	cfg.logf("%s: loading %d items", res.Spec.Label(), w.Len())
	start := time.Now()
	if err := t.Load(w); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	res.Load = time.Since(start)

	sample := verifySample(w, cfg.Verify)
	c, err := t.NewClient()
	if err != nil {
		return err
	}
	if err := checkLoaded(w, c, sample); err != nil {
		c.Close()
		return err
	}
	if err := c.Close(); err != nil {
		return err
	}

	cfg.logf("%s: running %d clients", res.Spec.Label(), cfg.Clients)
	if err := runMix(cfg, t, res); err != nil {
		return fmt.Errorf("run: %w", err)
	}

	// Read the sample as the run left it; the reopened target must agree.
	c, err = t.NewClient()
	if err != nil {
		return err
	}
	before, err := readAll(c, sample, w.Columns())
	c.Close()
	if err != nil {
		return err
	}
	if res.Mem, err = t.Memory(); err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	if cfg.HeapProfile != "" {
		if err := writeHeapProfile(cfg.HeapProfile + "-" + profileName(res.Spec.Label()) + ".pb.gz"); err != nil {
			return fmt.Errorf("heap profile: %w", err)
		}
	}
	if res.DiskBytes, err = t.DiskBytes(); err != nil {
		return fmt.Errorf("disk: %w", err)
	}
	cfg.logf("%s: reopening", res.Spec.Label())
	if res.Recovery, err = t.Reopen(); err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	c, err = t.NewClient()
	if err != nil {
		return err
	}
	defer c.Close()
	after, err := readAll(c, sample, w.Columns())
	if err != nil {
		return err
	}
	for i := range before {
		if before[i] != after[i] {
			id := sample[i/w.Columns()]
			return fmt.Errorf("after reopen id %d column %d reads %d, before %d", id, i%w.Columns(), after[i], before[i])
		}
	}
	return nil
}

// verifySample returns n ids spread over all items (zero ones included).
func verifySample(w *workload.Workload, n int) []uint64 {
	if uint64(n) > w.Len() {
		n = int(w.Len())
	}
	ids := make([]uint64, n)
	for k := range ids {
		ids[k] = w.ID(uint64(k) * w.Len() / uint64(n))
	}
	return ids
}

func checkLoaded(w *workload.Workload, c Client, ids []uint64) error {
	got, err := readAll(c, ids, w.Columns())
	if err != nil {
		return err
	}
	var want []uint64
	for k := range ids {
		want = w.Values(uint64(k)*w.Len()/uint64(len(ids)), want)
		for j, v := range want {
			if g := got[k*w.Columns()+j]; g != v {
				return fmt.Errorf("after load id %d column %d reads %d, want %d", ids[k], j, g, v)
			}
		}
	}
	return nil
}

// readAll reads ids in batches of 10.
func readAll(c Client, ids []uint64, cols int) ([]uint64, error) {
	out := make([]uint64, 0, len(ids)*cols)
	var buf []uint64
	for i := 0; i < len(ids); i += 10 {
		j := min(i+10, len(ids))
		var err error
		if buf, err = c.MultiGet(ids[i:j], buf); err != nil {
			return nil, err
		}
		if len(buf) != (j-i)*cols {
			return nil, fmt.Errorf("MultiGet of %d ids returned %d values, want %d", j-i, len(buf), (j-i)*cols)
		}
		out = append(out, buf...)
	}
	return out, nil
}

type clientStats struct {
	reads, readIDs, writes uint64
	readLat, writeLat      hist.Histogram
	err                    error
}

func runMix(cfg *RunConfig, t Target, res *Result) error {
	clients := make([]Client, cfg.Clients)
	for i := range clients {
		c, err := t.NewClient()
		if err != nil {
			for _, c := range clients[:i] {
				c.Close()
			}
			return err
		}
		clients[i] = c
	}
	stats := make([]clientStats, cfg.Clients)
	var stop atomic.Bool
	var wg sync.WaitGroup
	start := cfg.clock.Now()
	for i := range clients {
		var sched *schedule
		if cfg.Rate > 0 {
			sched = pace(start, cfg.Rate, cfg.Clients, i)
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			st := &stats[i]
			st.err = clientLoop(cfg, clients[i], cfg.Workload.Ops(i), st, &stop, sched)
			if st.err != nil {
				stop.Store(true)
			}
		}(i)
	}
	if cfg.OpsPerClient <= 0 {
		timer := time.AfterFunc(cfg.Duration, func() { stop.Store(true) })
		defer timer.Stop()
	}
	wg.Wait()
	res.Elapsed = cfg.clock.Now().Sub(start)
	var errs []error
	for i := range stats {
		st := &stats[i]
		res.Reads += st.reads
		res.ReadIDs += st.readIDs
		res.Writes += st.writes
		res.ReadLat.Merge(&st.readLat)
		res.WriteLat.Merge(&st.writeLat)
		errs = append(errs, st.err, clients[i].Close())
	}
	return errors.Join(errs...)
}

// clientLoop runs one client's operations until stop (or OpsPerClient),
// closed loop when sched is nil, else open loop on sched (RunConfig.Rate):
// each operation waits for its scheduled time unless it is already late,
// and its latency runs from that time.
func clientLoop(cfg *RunConfig, c Client, s *workload.OpStream, st *clientStats, stop *atomic.Bool, sched *schedule) error {
	var op workload.Op
	clk := cfg.clock
	dst := make([]uint64, 0, cfg.Workload.Config().BatchSize*cfg.Workload.Columns())
	for n := 0; cfg.OpsPerClient <= 0 || n < cfg.OpsPerClient; n++ {
		if stop.Load() {
			return nil
		}
		s.Next(&op)
		var t0 time.Time
		if sched != nil {
			t0 = sched.next
			sched.next = t0.Add(sched.every)
			if d := t0.Sub(clk.Now()); d > 0 {
				clk.Sleep(d)
			}
		} else {
			t0 = clk.Now()
		}
		var err error
		if op.Kind == workload.OpRead {
			dst, err = c.MultiGet(op.IDs, dst)
			st.readLat.Record(clk.Now().Sub(t0))
			st.reads++
			st.readIDs += uint64(len(op.IDs))
		} else {
			err = c.Incr(op.ID, op.Col, op.Delta)
			st.writeLat.Record(clk.Now().Sub(t0))
			st.writes++
		}
		if err != nil {
			return fmt.Errorf("%v: %w", op.Kind, err)
		}
	}
	return nil
}

// writeHeapProfile writes the heap profile, after a collection so that
// inuse_space is live data, to path.
func writeHeapProfile(path string) error {
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// profileName turns a target label into a file name part.
func profileName(label string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '_'
	}, label)
}
