package bench

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallydb/tally/bench/workload"
	"github.com/tallydb/tally/internal/hist"
	"github.com/tallydb/tally/internal/testutil"
)

// fakeClock is a clock that moves only when slept on or advanced; it
// counts the sleeps.
type fakeClock struct {
	*testutil.Clock
	sleeps atomic.Int64
}

func (c *fakeClock) Sleep(d time.Duration) {
	if d <= 0 {
		panic("fakeClock: sleep of a non-positive duration")
	}
	c.sleeps.Add(1)
	c.Advance(d)
}

// timedClient is a Client whose k-th operation takes service(k) of the
// fake clock; it records when each operation was sent and its kind.
type timedClient struct {
	clk     *fakeClock
	service func(k int) time.Duration
	sent    []time.Time
	write   []bool
}

func (c *timedClient) op(write bool) {
	c.sent = append(c.sent, c.clk.Now())
	c.write = append(c.write, write)
	c.clk.Advance(c.service(len(c.sent) - 1))
}

func (c *timedClient) MultiGet(ids []uint64, dst []uint64) ([]uint64, error) {
	c.op(false)
	return dst[:0], nil
}

func (c *timedClient) Incr(id uint64, col int, delta int64) error {
	c.op(true)
	return nil
}

func (c *timedClient) Close() error { return nil }

// TestOpenLoopLatencyFromSchedule runs one open-loop client on a fake clock
// at 1,000 operations a second, each taking 100µs except the sixth, which
// stalls for 10ms. Sends must follow the schedule (every 1ms) while the
// client keeps up, go at once while it is behind, and every latency must
// run from the scheduled time: the operations queued behind the stall count
// their wait, which a closed loop (the same client, no schedule) does not.
func TestOpenLoopLatencyFromSchedule(t *testing.T) {
	const (
		n     = 60
		every = time.Millisecond
		fast  = 100 * time.Microsecond
		stall = 10 * time.Millisecond
	)
	service := func(k int) time.Duration {
		if k == 5 {
			return stall
		}
		return fast
	}
	w := workload.MustNew(workload.Config{Seed: 2, Items: 1000})
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)

	for _, open := range []bool{true, false} {
		clk := &fakeClock{Clock: testutil.NewClock(t0)}
		cfg := RunConfig{Workload: w, Clients: 1, OpsPerClient: n, clock: clk}
		if open {
			cfg.Rate = float64(time.Second / every)
		}
		cfg.fill()
		c := &timedClient{clk: clk, service: service}
		var st clientStats
		var stop atomic.Bool
		var sched *schedule
		if open {
			sched = pace(t0, cfg.Rate, 1, 0)
			if sched.every != every || !sched.next.Equal(t0) {
				t.Fatalf("pace: first %v every %v, want %v every %v", sched.next, sched.every, t0, every)
			}
		}
		if err := clientLoop(&cfg, c, w.Ops(0), &st, &stop, sched); err != nil {
			t.Fatal(err)
		}
		if len(c.sent) != n {
			t.Fatalf("open=%v: %d operations sent, want %d", open, len(c.sent), n)
		}

		// The model: operation k is scheduled at t0 + k*every (open loop)
		// or when the one before finished (closed loop), sent at the later
		// of that and the previous one's end, and its latency runs from
		// the scheduled time.
		var wantRead, wantWrite hist.Histogram
		var late int
		done := t0
		for k := 0; k < n; k++ {
			sched := done
			if open {
				sched = t0.Add(time.Duration(k) * every)
			}
			sent := sched
			if done.After(sent) {
				sent = done
			}
			if !c.sent[k].Equal(sent) {
				t.Errorf("open=%v: operation %d sent at +%v, want +%v", open, k, c.sent[k].Sub(t0), sent.Sub(t0))
			}
			done = sent.Add(service(k))
			lat := done.Sub(sched)
			if lat > 2*fast {
				late++
			}
			if c.write[k] {
				wantWrite.Record(lat)
			} else {
				wantRead.Record(lat)
			}
		}
		if st.readLat != wantRead || st.writeLat != wantWrite {
			t.Errorf("open=%v: latencies differ from the model: reads p50 %v max %v (want %v, %v), writes p50 %v max %v (want %v, %v)",
				open, st.readLat.Quantile(0.5), st.readLat.Max(), wantRead.Quantile(0.5), wantRead.Max(),
				st.writeLat.Quantile(0.5), st.writeLat.Max(), wantWrite.Quantile(0.5), wantWrite.Max())
		}
		if st.reads+st.writes != n || st.reads == 0 || st.writes == 0 {
			t.Errorf("open=%v: %d reads %d writes", open, st.reads, st.writes)
		}
		// The stall is one slow operation closed loop, and makes the ten
		// behind it slow too open loop (10ms of backlog drained at 0.9ms a
		// slot).
		if want := map[bool]int{true: 11, false: 1}[open]; late != want {
			t.Errorf("open=%v: %d operations over %v in the model, want %d", open, late, 2*fast, want)
		}
		if open && clk.sleeps.Load() == 0 || !open && clk.sleeps.Load() != 0 {
			t.Errorf("open=%v: %d sleeps", open, clk.sleeps.Load())
		}
	}
}

// TestPaceInterleaves: the clients' schedules together send one operation
// every 1/rate, each client one every clients/rate.
func TestPaceInterleaves(t *testing.T) {
	t0 := time.Unix(0, 0)
	const clients, rate = 4, 2000.0
	scheds := make([]*schedule, clients)
	for i := range scheds {
		scheds[i] = pace(t0, rate, clients, i)
		if scheds[i].every != 2*time.Millisecond {
			t.Fatalf("client %d: every %v, want 2ms", i, scheds[i].every)
		}
	}
	for k := 0; k < 40; k++ {
		s := scheds[k%clients]
		if want := t0.Add(time.Duration(k) * 500 * time.Microsecond); !s.next.Equal(want) {
			t.Fatalf("send %d at %v, want %v", k, s.next.Sub(t0), want.Sub(t0))
		}
		s.next = s.next.Add(s.every)
	}
}

// TestRunOpenLoop runs the Pebble target open loop on the wall clock: the
// run completes with every operation counted (no figure depends on timing).
func TestRunOpenLoop(t *testing.T) {
	cfg := smokeConfig(t)
	cfg.Rate = 50_000
	checkResult(t, cfg, Run(cfg, PebbleSpecs()[0]))
}
