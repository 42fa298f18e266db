package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// failoverKeys is how many keys the failover writer spreads its
// increments over (posts:0 .. posts:failoverKeys-1, column likes).
const failoverKeys = 1000

// failoverWriter writes HINCRBY posts:K likes 1 one at a time, K going
// round posts:0..failoverKeys-1, to the replica it believes leads: a MOVED
// reply sends it to the named address at once; TRYAGAIN, CLUSTERDOWN, any
// other error reply and connection errors make it try the next replica
// after retryPause. It counts acknowledged increments per key and the
// writes whose outcome it cannot know (an error after the command was
// sent: the write may or may not have applied).
type failoverWriter struct {
	addrs []string
	pause time.Duration

	mu struct {
		sync.Mutex
		acked    [failoverKeys]int64
		unknown  int64
		armed    bool
		oldAddr  string
		firstAck chan time.Time // receives the first ack from another replica once armed
	}
}

// retryPause is the failover writer's pause before trying another replica.
const retryPause = 10 * time.Millisecond

// arm makes the writer report (on the returned channel) the time of the
// first acknowledged write answered by a replica other than old.
func (w *failoverWriter) arm(old string) <-chan time.Time {
	ch := make(chan time.Time, 1)
	w.mu.Lock()
	w.mu.armed, w.mu.oldAddr, w.mu.firstAck = true, old, ch
	w.mu.Unlock()
	return ch
}

// run writes until ctx ends.
func (w *failoverWriter) run(ctx context.Context) {
	cur := w.addrs[0]
	next := func() {
		for i, a := range w.addrs {
			if a == cur {
				cur = w.addrs[(i+1)%len(w.addrs)]
				return
			}
		}
		cur = w.addrs[0]
	}
	var c *respConn
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	k := 0
	for ctx.Err() == nil {
		if c == nil {
			var err error
			if c, err = dialRESP(cur, time.Second); err != nil {
				c = nil
				next()
				time.Sleep(retryPause)
				continue
			}
			c.timeout = 2 * time.Second
		}
		r, err := c.do("HINCRBY", "posts:"+strconv.Itoa(k), "likes", "1")
		now := time.Now()
		if err == nil {
			if _, perr := strconv.ParseInt(r, 10, 64); perr != nil {
				err = fmt.Errorf("bench: HINCRBY replied %q", r)
			}
		}
		var re redisError
		switch {
		case err == nil:
			w.mu.Lock()
			w.mu.acked[k]++
			if w.mu.armed && cur != w.mu.oldAddr {
				w.mu.firstAck <- now
				w.mu.armed = false
			}
			w.mu.Unlock()
			k = (k + 1) % failoverKeys
		case errors.As(err, &re) && strings.HasPrefix(string(re), "MOVED "):
			// "MOVED slot host:port": the write did not run here.
			f := strings.Fields(string(re))
			c.Close()
			c = nil
			if len(f) == 3 {
				cur = f[2]
			} else {
				next()
			}
		case errors.As(err, &re) && (strings.HasPrefix(string(re), "TRYAGAIN") || strings.HasPrefix(string(re), "CLUSTERDOWN")):
			// Surely not applied (TRYAGAIN), or refused before proposing.
			time.Sleep(retryPause)
			c.Close()
			c = nil
			next()
		default:
			// A connection error or another error reply after the write was
			// sent: it may have applied.
			w.mu.Lock()
			w.mu.unknown++
			w.mu.Unlock()
			c.Close()
			c = nil
			next()
			time.Sleep(retryPause)
		}
	}
}

// FailoverResult is the failover benchmark's outcome: one duration per
// kill -9 of the leader, from the kill to the first write acknowledged by
// another replica, and the check that no acknowledged write was lost.
type FailoverResult struct {
	Times    []time.Duration
	Acked    int64 // acknowledged increments over the run
	Unknown  int64 // writes whose outcome the client could not know
	Stored   int64 // the sum of the counters read back at the end
	Lost     int64 // acknowledged increments missing at the end (must be 0)
	Terms    []int64
	Err      error
	Duration time.Duration
}

// Quantile returns the q-quantile of the failover times (nearest rank).
func (r FailoverResult) Quantile(q float64) time.Duration {
	if len(r.Times) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), r.Times...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// runFailover kills the leader of g with SIGKILL n times while a
// failoverWriter writes, timing each failover, restarting the killed
// replica (cluster local start) and waiting until it has caught up before
// the next kill. At the end it reads the counters back from the leader.
func runFailover(ctx context.Context, g *group, n int, logf func(string, ...any)) FailoverResult {
	start := time.Now()
	var res FailoverResult
	var addrs []string
	for i := 1; i <= g.replicas; i++ {
		addrs = append(addrs, g.addr(i))
	}
	w := &failoverWriter{addrs: addrs}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); w.run(wctx) }()
	fail := func(err error) FailoverResult {
		stop()
		wg.Wait()
		res.Err = err
		res.Duration = time.Since(start)
		return res
	}
	for i := 0; i < n; i++ {
		if err := waitCaughtUp(ctx, g, 30*time.Second); err != nil {
			return fail(fmt.Errorf("before kill %d: %w", i+1, err))
		}
		time.Sleep(time.Second) // steady writes on the current leader
		li, err := g.leaderIndex()
		if err != nil {
			return fail(err)
		}
		pid, err := g.pid(li)
		if err != nil {
			return fail(err)
		}
		acked := w.arm(g.addr(li))
		killed := time.Now()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return fail(fmt.Errorf("kill -9 %d: %w", pid, err))
		}
		select {
		case t := <-acked:
			d := t.Sub(killed)
			res.Times = append(res.Times, d)
			st, _ := clusterStatus(firstOther(addrs, g.addr(li)))
			res.Terms = append(res.Terms, st.Term)
			logf("failover %d: killed replica %d (pid %d), first write acknowledged by the new leader after %v (term %d)",
				i+1, li, pid, d.Round(time.Millisecond), st.Term)
		case <-time.After(60 * time.Second):
			return fail(fmt.Errorf("kill %d: no write acknowledged within 60s of killing replica %d", i+1, li))
		case <-ctx.Done():
			return fail(ctx.Err())
		}
		// Let the process go before its ports are bound again.
		for j := 0; j < 100 && syscall.Kill(pid, 0) == nil; j++ {
			time.Sleep(10 * time.Millisecond)
		}
		if err := g.start(); err != nil {
			return fail(fmt.Errorf("restart replica %d: %w", li, err))
		}
	}
	stop()
	wg.Wait()
	w.mu.Lock()
	for _, a := range w.mu.acked {
		res.Acked += a
	}
	res.Unknown = w.mu.unknown
	acked := w.mu.acked
	w.mu.Unlock()
	if err := waitCaughtUp(ctx, g, 30*time.Second); err != nil {
		return fail(err)
	}
	leader, err := g.leader()
	if err != nil {
		return fail(err)
	}
	c, err := dialRESP(leader, redisTimeout)
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	for k := 0; k < failoverKeys; k++ {
		v, err := c.do("HGET", "posts:"+strconv.Itoa(k), "likes")
		if err != nil {
			return fail(err)
		}
		got, _ := strconv.ParseInt(v, 10, 64)
		res.Stored += got
		if got < acked[k] {
			res.Lost += acked[k] - got
		}
	}
	res.Duration = time.Since(start)
	return res
}

func firstOther(addrs []string, not string) string {
	for _, a := range addrs {
		if a != not {
			return a
		}
	}
	return not
}

// waitCaughtUp waits until every replica of g answers, they agree on a
// leader, and each one's applied index is within 1000 entries of the
// leader's commit index (writes go on meanwhile).
func waitCaughtUp(ctx context.Context, g *group, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		ok := true
		var commit int64
		var sts []replicaStatus
		for i := 1; i <= g.replicas; i++ {
			st, err := clusterStatus(g.addr(i))
			if err != nil {
				ok, last = false, err.Error()
				break
			}
			if st.Role == "leader" {
				commit = st.Commit
			}
			sts = append(sts, st)
		}
		if ok && commit > 0 {
			for i, st := range sts {
				if st.Applied+1000 < commit || st.LeaderAddr == "" {
					ok, last = false, fmt.Sprintf("replica %d applied %d, leader's commit %d", i+1, st.Applied, commit)
				}
			}
			if ok {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("bench: the group did not catch up in %v (%s)", timeout, last)
}

// hostPort splits addr's port as an int (0 if malformed).
func hostPort(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}
