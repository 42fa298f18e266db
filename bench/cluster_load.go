package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/tallydb/tally/internal/hist"
)

// pipeOp is the command a pipelined run sends.
type pipeOp int

const (
	opHINCRBY pipeOp = iota // HINCRBY posts:ID likes 1
	opHGET                  // HGET posts:ID likes
	opHMGET                 // HMGET posts:ID reposts comments likes
)

func (o pipeOp) String() string {
	return [...]string{"HINCRBY", "HGET", "HMGET"}[o]
}

// pipeSpec is one closed-loop pipelined run: Conns connections, spread
// round-robin over Addrs, each sending Pipeline commands in one write and
// waiting for their replies before the next batch, for Dur. IDs are drawn
// uniformly from [0, Keyspace).
type pipeSpec struct {
	Addrs          []string
	Conns          int
	Pipeline       int
	Op             pipeOp
	Keyspace       int
	Dur            time.Duration
	ReadOnly       bool // send READONLY first (reads on a tally follower)
	Wait           bool // append "WAIT 1 0" to every batch (Redis)
	WaitReplicas   int  // WAIT's numreplicas (default 1)
	Seed           uint64
	IgnoreLatFirst time.Duration // batches sent in this first span are not recorded (warm-up)
}

// pipeResult is a run's outcome. Lat holds one value per batch: the time
// from its write to its last reply, which is when every command of the
// batch (and its WAIT) is acknowledged.
type pipeResult struct {
	Ops  int64 // commands answered, WAIT not counted
	Secs float64
	Lat  hist.Histogram
	Err  error
}

// Rate returns commands per second.
func (r pipeResult) Rate() float64 {
	if r.Secs <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Secs
}

// runPipe runs s and returns its merged figures. Any error reply or
// connection error fails the run (a benchmark with failed writes measures
// nothing).
func runPipe(ctx context.Context, s pipeSpec) pipeResult {
	if s.Conns < 1 || s.Pipeline < 1 || s.Keyspace < 1 || len(s.Addrs) == 0 {
		return pipeResult{Err: fmt.Errorf("bench: bad pipelined run %+v", s)}
	}
	if s.WaitReplicas == 0 {
		s.WaitReplicas = 1
	}
	conns := make([]*respConn, s.Conns)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	for k := range conns {
		c, err := dialRESP(s.Addrs[k%len(s.Addrs)], redisTimeout)
		if err != nil {
			return pipeResult{Err: err}
		}
		conns[k] = c
		if s.ReadOnly {
			if r, err := c.do("READONLY"); err != nil || r != "OK" {
				return pipeResult{Err: fmt.Errorf("READONLY on %s: %q %v", s.Addrs[k%len(s.Addrs)], r, err)}
			}
		}
	}
	results := make([]pipeResult, s.Conns)
	start := time.Now()
	deadline := start.Add(s.Dur)
	warm := start.Add(s.IgnoreLatFirst)
	var wg sync.WaitGroup
	for k, c := range conns {
		wg.Add(1)
		go func(k int, c *respConn) {
			defer wg.Done()
			r := &results[k]
			rng := rand.New(rand.NewPCG(s.Seed, uint64(k)))
			var key []byte
			for ctx.Err() == nil {
				t0 := time.Now()
				if t0.After(deadline) {
					break
				}
				for i := 0; i < s.Pipeline; i++ {
					key = strconv.AppendUint(append(key[:0], "posts:"...), uint64(rng.IntN(s.Keyspace)), 10)
					switch s.Op {
					case opHINCRBY:
						c.begin(4)
						c.argString("HINCRBY")
						c.arg(key)
						c.argString("likes")
						c.argString("1")
					case opHGET:
						c.begin(3)
						c.argString("HGET")
						c.arg(key)
						c.argString("likes")
					case opHMGET:
						c.begin(5)
						c.argString("HMGET")
						c.arg(key)
						for _, col := range clusterCols {
							c.argString(col)
						}
					}
				}
				if s.Wait {
					c.begin(3)
					c.argString("WAIT")
					c.argInt(int64(s.WaitReplicas))
					c.argString("0")
				}
				if err := c.flush(); err != nil {
					r.Err = err
					return
				}
				if err := c.drain(); err != nil {
					r.Err = err
					return
				}
				if t0.After(warm) {
					r.Lat.Record(time.Since(t0))
				}
				r.Ops += int64(s.Pipeline)
			}
		}(k, c)
	}
	wg.Wait()
	out := pipeResult{Secs: time.Since(start).Seconds()}
	var errs []error
	for i := range results {
		out.Ops += results[i].Ops
		out.Lat.Merge(&results[i].Lat)
		if results[i].Err != nil {
			errs = append(errs, fmt.Errorf("connection %d: %w", i, results[i].Err))
		}
	}
	if len(errs) > 0 {
		out.Err = errs[0] // the first suffices; the others usually repeat it
	}
	if out.Err == nil {
		out.Err = ctx.Err()
	}
	return out
}

// loadRows writes rows posts:0 .. posts:rows-1 at addr with HSET of
// clusterCols (values derived from the id, all non-zero), pipelined by
// batch on conns connections, and returns how long it took.
func loadRows(ctx context.Context, addr string, rows, conns, batch int) (time.Duration, error) {
	start := time.Now()
	errs := make([]error, conns)
	var wg sync.WaitGroup
	for k := 0; k < conns; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			c, err := dialRESP(addr, redisTimeout)
			if err != nil {
				errs[k] = err
				return
			}
			defer c.Close()
			var key []byte
			for i := k; i < rows && ctx.Err() == nil; i += conns {
				key = strconv.AppendUint(append(key[:0], "posts:"...), uint64(i), 10)
				c.begin(8)
				c.argString("HSET")
				c.arg(key)
				for j, col := range clusterCols {
					c.argString(col)
					c.argInt(int64(1 + (i*(j+3))%1000))
				}
				if c.pending == batch || i+conns >= rows {
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
			errs[k] = ctx.Err()
		}(k)
	}
	wg.Wait()
	return time.Since(start), errors.Join(errs...)
}
