package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tallydb/tally/internal/hist"
)

// ccSpec is one closed-loop run through a go-redis ClusterClient:
// Goroutines goroutines, each sending Pipeline commands as one
// ClusterClient pipeline (which splits it by node and sends each node's
// part on its own connection concurrently) and waiting for every reply
// before the next, for Dur. IDs are uniform over [0, Keyspace).
type ccSpec struct {
	Addrs      []string
	Goroutines int
	Pipeline   int
	Op         pipeOp // opHINCRBY or opHMGET
	Keyspace   int
	Dur        time.Duration
	Seed       uint64
}

// ccResult is a ClusterClient run's outcome. Lat holds one value per
// pipeline: from Exec's start to its return.
type ccResult struct {
	Ops, Errs int64
	FirstErr  error
	Secs      float64
	Lat       hist.Histogram
}

// Rate returns the successful commands per second.
func (r ccResult) Rate() float64 {
	if r.Secs <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Secs
}

// runCC runs s. Failed commands (after go-redis's own MOVED/ASK/TRYAGAIN
// retries) are counted in Errs, not in Ops.
func runCC(ctx context.Context, s ccSpec) ccResult {
	if s.Goroutines < 1 || s.Pipeline < 1 || s.Keyspace < 1 || len(s.Addrs) == 0 {
		return ccResult{FirstErr: fmt.Errorf("%w: bad run %+v", errShardBench, s)}
	}
	cc := newClusterClient(s.Addrs, s.Goroutines)
	defer cc.Close()
	if err := cc.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() }); err != nil {
		return ccResult{FirstErr: err}
	}
	results := make([]ccResult, s.Goroutines)
	start := time.Now()
	deadline := start.Add(s.Dur)
	var wg sync.WaitGroup
	for g := range results {
		wg.Add(1)
		go func(r *ccResult, g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(s.Seed, uint64(g)))
			pipe := cc.Pipeline()
			for ctx.Err() == nil && time.Now().Before(deadline) {
				for i := 0; i < s.Pipeline; i++ {
					key := "posts:" + strconv.Itoa(rng.IntN(s.Keyspace))
					if s.Op == opHMGET {
						pipe.HMGet(ctx, key, clusterCols...)
					} else {
						pipe.HIncrBy(ctx, key, "likes", 1)
					}
				}
				t0 := time.Now()
				cmds, _ := pipe.Exec(ctx)
				r.Lat.Record(time.Since(t0))
				for _, c := range cmds {
					if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
						r.Errs++
						if r.FirstErr == nil {
							r.FirstErr = err
						}
					} else {
						r.Ops++
					}
				}
			}
		}(&results[g], g)
	}
	wg.Wait()
	out := ccResult{Secs: time.Since(start).Seconds()}
	for i := range results {
		out.Ops += results[i].Ops
		out.Errs += results[i].Errs
		out.Lat.Merge(&results[i].Lat)
		if out.FirstErr == nil {
			out.FirstErr = results[i].FirstErr
		}
	}
	return out
}

// loadCC writes rows posts:0 .. posts:rows-1 through a ClusterClient with
// HSET of clusterCols (values as loadRows's), batch commands per pipeline
// on conns goroutines, and returns how long it took.
func loadCC(ctx context.Context, addrs []string, rows, conns, batch int) (time.Duration, error) {
	cc := newClusterClient(addrs, conns)
	defer cc.Close()
	start := time.Now()
	errs := make([]error, conns)
	var wg sync.WaitGroup
	for k := 0; k < conns; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			pipe := cc.Pipeline()
			for i := k; i < rows && ctx.Err() == nil; i += conns {
				vals := make([]any, 0, 2*len(clusterCols))
				for j, col := range clusterCols {
					vals = append(vals, col, 1+(i*(j+3))%1000)
				}
				pipe.HSet(ctx, "posts:"+strconv.Itoa(i), vals...)
				if pipe.Len() == batch || i+conns >= rows {
					if _, err := pipe.Exec(ctx); err != nil {
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

// loadedLikes is the value loadCC gives posts:i's column "likes" (the
// third of clusterCols).
func loadedLikes(i int) int64 { return int64(1 + (i*5)%1000) }

// trickle is a light write load: goroutines each sending HINCRBY posts:ID
// likes 1 one at a time through a ClusterClient, over ids below keyspace
// (which loadCC loaded), remembering per id how many were acknowledged
// and how many failed, so the counters can be checked afterwards.
type trickle struct {
	cc   *redis.ClusterClient
	stop context.CancelFunc
	done chan struct{}

	mu     sync.Mutex
	acked  map[int]int64
	failed map[int]int64
	errs   map[string]int64 // error text → count
	ok     int64            // this load's acknowledged writes
	maxLat time.Duration
	secs   float64
}

// startTrickle starts the load. With prev (a finished load on the same
// rows), the new one carries prev's acknowledged and failed writes on, so
// verify checks the counters against everything written since loadCC;
// seed picks the ids.
func startTrickle(ctx context.Context, addrs []string, goroutines, keyspace int, seed uint64, prev *trickle) *trickle {
	ctx, cancel := context.WithCancel(ctx)
	t := &trickle{cc: newClusterClient(addrs, goroutines), stop: cancel, done: make(chan struct{}),
		acked: map[int]int64{}, failed: map[int]int64{}, errs: map[string]int64{}}
	if prev != nil {
		maps.Copy(t.acked, prev.acked)
		maps.Copy(t.failed, prev.failed)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			for ctx.Err() == nil {
				id := rng.IntN(keyspace)
				t0 := time.Now()
				err := t.cc.HIncrBy(ctx, "posts:"+strconv.Itoa(id), "likes", 1).Err()
				lat := time.Since(t0)
				if ctx.Err() != nil && err != nil {
					// Cancelled mid-command: its outcome is unknown.
					t.mu.Lock()
					t.failed[id]++
					t.mu.Unlock()
					return
				}
				t.mu.Lock()
				if err != nil {
					t.failed[id]++
					t.errs[err.Error()]++
				} else {
					t.acked[id]++
					t.ok++
				}
				t.maxLat = max(t.maxLat, lat)
				t.mu.Unlock()
			}
		}(g)
	}
	go func() {
		wg.Wait()
		t.secs = time.Since(start).Seconds()
		close(t.done)
	}()
	return t
}

// finish stops the load and waits for its goroutines.
func (t *trickle) finish() {
	t.stop()
	<-t.done
}

// verify reads back every id the load (and the loads before it) touched and reports the ids whose
// likes are below loadedLikes + acknowledged (a lost write) or above it
// plus the failed attempts (a write applied twice). Call after finish.
func (t *trickle) verify(ctx context.Context) (checked int, bad []string, err error) {
	defer t.cc.Close()
	ids := make(map[int]bool, len(t.acked)+len(t.failed))
	for id := range t.acked {
		ids[id] = true
	}
	for id := range t.failed {
		ids[id] = true
	}
	pipe := t.cc.Pipeline()
	order := make([]int, 0, len(ids))
	for id := range ids {
		order = append(order, id)
		pipe.HGet(ctx, "posts:"+strconv.Itoa(id), "likes")
	}
	cmds, err := pipe.Exec(ctx)
	if err != nil {
		return 0, nil, err
	}
	for i, c := range cmds {
		id := order[i]
		got, err := c.(*redis.StringCmd).Int64()
		if err != nil {
			return checked, bad, fmt.Errorf("HGET posts:%d likes: %w", id, err)
		}
		lo := loadedLikes(id) + t.acked[id]
		hi := lo + t.failed[id]
		if got < lo || got > hi {
			bad = append(bad, fmt.Sprintf("posts:%d likes %d, want %d..%d", id, got, lo, hi))
		}
		checked++
	}
	return checked, bad, nil
}
