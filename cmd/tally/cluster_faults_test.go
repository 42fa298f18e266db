package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tallydb/tally/replica"
	"github.com/tallydb/tally/server"
	"github.com/tallydb/tally/store"
)

// TestClusterFaults runs three "tally serve --cluster" processes whose raft
// traffic goes through fault-injecting proxies (one per directed pair of
// replicas), writes HINCRBY, TL.POST and LIKE.LIKE through go-redis's
// ClusterClient from several goroutines the whole time, and in sequence:
// kills the leader with SIGKILL (and restarts it), stops a follower with
// SIGSTOP for a few seconds, delays every raft link, and partitions the
// leader from both followers (the majority elects a new leader, the old
// one steps down by CheckQuorum), then heals. Afterwards every
// acknowledged write is on every replica, the replicas agree, and every
// replica's TALLY.VERIFY and, after a clean shutdown, "tally verify"
// pass.
func TestClusterFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and injects faults for about 20s")
	}
	fc := newFaultCluster(t, 3)
	ctx := context.Background()
	// Two clients: "app" gives up on a command after a few tries and then
	// has the client reload its slot map (go-redis reloads it by itself
	// only on MOVED or every 10s, and a dead or cut-off master never sends
	// MOVED), as an application that wants its writes back soon after a
	// failover does; "plain" is go-redis's ClusterClient as it comes.
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: fc.clientAddrs(), MaxRedirects: 3,
		DialTimeout: time.Second, ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second})
	defer c.Close()
	plain := redis.NewClusterClient(&redis.ClusterOptions{Addrs: fc.clientAddrs(),
		DialTimeout: time.Second, ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second})
	defer plain.Close()
	leader := fc.waitLeader(0, 30*time.Second)
	t.Logf("leader %d", leader)
	for _, cmd := range [][]any{
		{"TALLY.COUNTER", "ADD", "posts"}, {"TALLY.COLUMN", "ADD", "posts", "likes"},
		{"LIKE.BUSINESS", "ADD", "video"},
	} {
		fc.mustDo(c, cmd...)
	}
	for a := 1; a <= cfAuthors; a++ {
		fc.mustDo(c, "TL.FOLLOW", cfFollowerOf(a), a)
	}

	a := newCFAcked()
	var post atomic.Int64
	post.Store(1000)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client, label := c, "app"
			if w == 4 {
				client, label = plain, "plain"
			}
			cfWriter(client, label, rand.New(rand.NewPCG(22, uint64(w))), a, func() int64 { return post.Add(1) }, stop)
		}()
	}
	type fault struct {
		name    string
		at      time.Time
		elected time.Duration
	}
	var faults []fault
	defer func() { // a failed test stops the writers too
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	started := time.Now()
	phase := func(name string, d time.Duration) {
		before := a.total()
		time.Sleep(d)
		t.Logf("%s: %d writes acknowledged in %v", name, a.total()-before, d)
	}
	phase("warm-up", time.Second)

	// 1. kill -9 of the leader; the others elect a new one and writes go on.
	leader = fc.waitLeader(0, 10*time.Second)
	term := fc.status(leader).term
	killed := time.Now()
	fc.procs[leader].kill(syscall.SIGKILL)
	fc.procs[leader].waitExit(t)
	next := fc.waitLeader(leader, 20*time.Second)
	elected := time.Since(killed)
	resumed := fc.probeWrite(a, 20*time.Second)
	phase("leader dead", 2*time.Second)
	t.Logf("kill -9 of leader %d (term %d): replica %d leads (term %d) after %v; a write (a plain client to each replica in turn) succeeded after %v",
		leader, term, next, fc.status(next).term, ms(elected), ms(resumed.Sub(killed)))
	faults = append(faults, fault{"kill -9 of the leader", killed, elected})
	restarted := time.Now()
	fc.procs[leader].start(t)
	fc.waitCaughtUp(20 * time.Second)
	t.Logf("replica %d restarted, caught up after %v", leader, ms(time.Since(restarted)))
	phase("all up", time.Second)

	// 2. SIGSTOP of a follower for a few seconds, then SIGCONT.
	leader = fc.waitLeader(0, 10*time.Second)
	follower := fc.follower(leader)
	fc.procs[follower].kill(syscall.SIGSTOP)
	stopped := time.Now()
	phase(fmt.Sprintf("follower %d stopped", follower), 3*time.Second)
	fc.procs[follower].kill(syscall.SIGCONT)
	resumedF := time.Now()
	fc.waitCaughtUp(20 * time.Second)
	if l := fc.waitLeader(0, 10*time.Second); l != leader {
		t.Logf("leadership moved from %d to %d while follower %d was stopped", leader, l, follower)
	}
	t.Logf("follower %d stopped for %v, caught up %v after SIGCONT", follower, ms(resumedF.Sub(stopped)), ms(time.Since(resumedF)))

	// 3. 30ms of latency on every raft link.
	for _, p := range fc.proxies {
		p.SetDelay(30 * time.Millisecond)
	}
	phase("30ms raft latency", 2*time.Second)
	for _, p := range fc.proxies {
		p.SetDelay(0)
	}

	// 4. The leader cut off from both followers: the majority elects a new
	// leader, the old one steps down (CheckQuorum), then the partition heals.
	leader = fc.waitLeader(0, 10*time.Second)
	term = fc.status(leader).term
	cut := time.Now()
	fc.isolate(leader, true)
	next = fc.waitLeader(leader, 20*time.Second)
	elected = time.Since(cut)
	var stepDown time.Duration
	for deadline := time.Now().Add(20 * time.Second); ; {
		if st := fc.status(leader); st.ok && st.role != "leader" {
			stepDown = time.Since(cut)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the isolated leader %d did not step down in 20s", leader)
		}
		time.Sleep(20 * time.Millisecond)
	}
	resumed = fc.probeWrite(a, 20*time.Second)
	phase("partitioned", 2*time.Second)
	t.Logf("leader %d (term %d) isolated: replica %d leads (term %d) after %v, the old leader stepped down after %v; a write (a plain client to each replica in turn) succeeded after %v",
		leader, term, next, fc.status(next).term, ms(elected), ms(stepDown), ms(resumed.Sub(cut)))
	faults = append(faults, fault{"the leader partitioned away", cut, elected})
	fc.isolate(leader, false)
	healed := time.Now()
	fc.waitCaughtUp(20 * time.Second)
	t.Logf("healed: replica %d caught up after %v", leader, ms(time.Since(healed)))
	phase("healed", time.Second)

	close(stop)
	wg.Wait()
	t.Logf("writes for %v: %s", time.Since(started).Round(time.Millisecond), a.summary())
	for _, f := range faults {
		// The first acknowledgment after the new leader was seen (a reply
		// the old leader sent just before the fault may arrive after it).
		after := f.at.Add(f.elected)
		t.Logf("%s: the ClusterClient writers' first acknowledged write came after %s (app), %s (plain)",
			f.name, since(a.firstAfter("app", after), f.at), since(a.firstAfter("plain", after), f.at))
	}
	// Every replica applies the highest commit index any replica reports
	// (not only the one the leader reports: a replica that answered a
	// write may know a higher commit than a leader's last status), so
	// every acknowledged write is applied everywhere before the checks.
	statuses := fc.waitHighestApplied(30 * time.Second)

	// Every acknowledged write is on every replica, and they agree.
	var first map[string]string
	lostOn := map[string][]int{} // a lost write's description: the replicas that lack it
	var losses []cfLoss
	for id := 1; id <= 3; id++ {
		addr := fc.procs[id].clientAddr
		for _, l := range cfCheckAcked(ctx, addr, a) {
			t.Errorf("replica %d: lost an acknowledged write: %s", id, l.what)
			if lostOn[l.what] == nil {
				losses = append(losses, l)
			}
			lostOn[l.what] = append(lostOn[l.what], id)
		}
		d := cfDump(ctx, t, addr)
		if first == nil {
			first = d
		} else {
			for k, v := range first {
				if d[k] != v {
					t.Errorf("replica %d: %s = %.200s, replica 1 has %.200s", id, k, d[k], v)
				}
			}
		}
		rc := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, MaxRetries: -1, ReadTimeout: time.Minute})
		if err := rc.Do(ctx, "TALLY.VERIFY").Err(); err != nil {
			t.Errorf("replica %d: TALLY.VERIFY: %v", id, err)
		}
		rc.Close()
	}
	// A clean shutdown (SIGTERM: exit 0), then the offline verify.
	for id := 1; id <= 3; id++ {
		fc.procs[id].kill(syscall.SIGTERM)
	}
	for id := 1; id <= 3; id++ {
		if code := fc.procs[id].waitExit(t); code != 0 {
			t.Errorf("replica %d exited %d after SIGTERM", id, code)
		}
		if out := tallyCmd(t, "-d", fc.procs[id].dir, "verify"); !strings.HasPrefix(out, "ok\n") {
			t.Errorf("replica %d: tally verify printed %q", id, out)
		}
	}

	// The Raft logs, read back from the stopped replicas' stores: always
	// for one key (so the diagnostics below are known to work), and for
	// every lost write, with where it is missing and each replica's
	// indexes before the checks.
	probe := cfLoss{what: "HINCRBY posts:0", tokens: []string{"posts:0"}}
	for id := 1; id <= 3; id++ {
		ents, last, err := cfLogTouching(fc.procs[id].dir, probe.tokens)
		if err != nil {
			t.Errorf("replica %d: read its raft log: %v", id, err)
			continue
		}
		t.Logf("replica %d: raft log up to %d, %d entries touch %s", id, last, len(ents), probe.what)
	}
	for _, l := range losses {
		var has []int
		for id := 1; id <= 3; id++ {
			if !slices.Contains(lostOn[l.what], id) {
				has = append(has, id)
			}
		}
		t.Logf("lost %q: missing on replicas %v, present on %v", l.what, lostOn[l.what], has)
		for id := 1; id <= 3; id++ {
			st := statuses[id]
			ents, last, err := cfLogTouching(fc.procs[id].dir, l.tokens)
			t.Logf("  replica %d: %s applied %d commit %d term %d before the checks; raft log up to %d (%v); entries touching %q:\n    %s",
				id, st.role, st.applied, st.commit, st.term, last, err, l.tokens, strings.Join(ents, "\n    "))
		}
	}
}

// cfLoss is an acknowledged write missing on a replica: what it is, and
// the arguments an entry that made it carries (all of them).
type cfLoss struct {
	what   string
	tokens []string
}

// cfLogTouching opens the stopped replica's store at dir read-only and
// returns its Raft log entries whose commands carry every one of tokens
// as an argument (one line each: index, term, proposer, the command),
// and the log's last index.
func cfLogTouching(dir string, tokens []string) ([]string, uint64, error) {
	db, err := store.Open(dir, &store.Options{ReadOnly: true, Families: replica.Families()})
	if err != nil {
		return nil, 0, err
	}
	defer db.Close()
	var out []string
	var last uint64
	var derr error
	err = replica.ReadLog(db, 1, func(e replica.LogEntry) bool {
		last = e.Index
		if len(e.Command) == 0 {
			return true
		}
		cmds, err := server.DecodeCommand(e.Command)
		if err != nil {
			derr = fmt.Errorf("entry %d: %w", e.Index, err)
			return false
		}
		for _, argv := range cmds {
			all := true
			for _, tok := range tokens {
				all = all && slices.ContainsFunc(argv, func(a []byte) bool { return string(a) == tok })
			}
			if all {
				out = append(out, fmt.Sprintf("index %d term %d by replica %d (proposal %#x, %d commands): %q",
					e.Index, e.Term, e.Node, e.Proposal, len(cmds), argv))
			}
		}
		return true
	})
	return out, last, errors.Join(err, derr)
}

// waitHighestApplied waits until every replica has applied the highest
// commit index any replica reports, and returns their statuses then.
func (fc *faultCluster) waitHighestApplied(within time.Duration) map[int]replicaStatus {
	fc.t.Helper()
	deadline := time.Now().Add(within)
	for {
		sts := map[int]replicaStatus{}
		var high uint64
		for id := 1; id <= len(fc.procs); id++ {
			st := fc.status(id)
			sts[id] = st
			high = max(high, st.commit)
		}
		ok := high > 0
		for _, st := range sts {
			ok = ok && st.ok && st.applied >= high
		}
		if ok {
			return sts
		}
		if time.Now().After(deadline) {
			fc.t.Fatalf("the replicas did not all apply commit index %d in %v: %+v", high, within, sts)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// since is at-t0 rounded, or "none yet" for a zero at.
func since(at, t0 time.Time) string {
	if at.IsZero() {
		return "none yet"
	}
	return ms(at.Sub(t0)).String()
}

// replicaProc is one "tally serve --cluster" child process.
type replicaProc struct {
	id         int
	dir, log   string
	clientAddr string
	args       []string
	env        []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	code int
}

func (p *replicaProc) start(t *testing.T) {
	t.Helper()
	log, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(os.Args[0], p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start replica %d: %v", p.id, err)
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		code := 0
		if err != nil {
			code = -1
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
		}
		p.mu.Lock()
		p.code = code
		p.mu.Unlock()
		close(done)
	}()
}

// kill sends sig to the process, if it runs.
func (p *replicaProc) kill(sig syscall.Signal) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
	default:
		_ = cmd.Process.Signal(sig)
	}
}

// waitExit waits for the process to exit and returns its exit code.
func (p *replicaProc) waitExit(t *testing.T) int {
	t.Helper()
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("replica %d did not exit", p.id)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code
}

func (p *replicaProc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// faultCluster is a group of replica processes whose raft traffic from
// replica i to replica j goes through proxies[{i, j}].
type faultCluster struct {
	t       *testing.T
	procs   map[int]*replicaProc
	proxies map[[2]int]*faultProxy
}

// freeAddr returns a loopback address that was free a moment ago.
func freeLoopback(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func newFaultCluster(t *testing.T, n int) *faultCluster {
	t.Helper()
	fc := &faultCluster{t: t, procs: map[int]*replicaProc{}, proxies: map[[2]int]*faultProxy{}}
	root := t.TempDir()
	raft := map[int]string{}
	for i := 1; i <= n; i++ {
		raft[i] = freeLoopback(t)
		fc.procs[i] = &replicaProc{id: i, dir: filepath.Join(root, fmt.Sprint("node-", i)),
			log: filepath.Join(root, fmt.Sprintf("node-%d.log", i)), clientAddr: freeLoopback(t)}
	}
	for i := 1; i <= n; i++ {
		for j := 1; j <= n; j++ {
			if i == j {
				continue
			}
			p, err := newFaultProxy(raft[j])
			if err != nil {
				t.Fatal(err)
			}
			fc.proxies[[2]int{i, j}] = p
		}
	}
	env := []string{"TALLY_TEST_MAIN=1", secretEnv + "=fault-test-secret-0123456789"}
	for i := 1; i <= n; i++ {
		// Replica i reaches j through proxy i→j. The member table each
		// replica bootstraps from its own --peers is its own (the bootstrap
		// entries are not sent), and no snapshot is ever needed (the log
		// is kept), so the addresses stay per replica.
		var peers []string
		for j := 1; j <= n; j++ {
			addr := raft[j]
			if i != j {
				addr = fc.proxies[[2]int{i, j}].Addr()
			}
			peers = append(peers, fmt.Sprintf("%d=%s/%s", j, addr, fc.procs[j].clientAddr))
		}
		p := fc.procs[i]
		p.env = env
		p.args = []string{"-d", p.dir, "--durability", "sync", "serve", "--create", "--cluster",
			"--id", strconv.Itoa(i), "--addr", p.clientAddr, "--raft-addr", raft[i],
			"--peers", strings.Join(peers, ","), "--max-log-entries", "10000000"}
		p.start(t)
	}
	t.Cleanup(func() {
		for _, p := range fc.procs {
			p.kill(syscall.SIGCONT)
			p.kill(syscall.SIGKILL)
		}
		for _, p := range fc.procs {
			p.mu.Lock()
			done := p.done
			p.mu.Unlock()
			if done != nil {
				<-done
			}
		}
		for _, p := range fc.proxies {
			p.Close()
		}
		if t.Failed() {
			for i := 1; i <= n; i++ {
				b, _ := os.ReadFile(fc.procs[i].log)
				lines := strings.Split(strings.TrimSpace(string(b)), "\n")
				if len(lines) > 40 {
					lines = lines[len(lines)-40:]
				}
				t.Logf("replica %d's log (last lines):\n%s", i, strings.Join(lines, "\n"))
			}
		}
	})
	return fc
}

func (fc *faultCluster) clientAddrs() []string {
	var out []string
	for i := 1; i <= len(fc.procs); i++ {
		out = append(out, fc.procs[i].clientAddr)
	}
	return out
}

// isolate cuts (or heals) every raft link between replica id and the
// others, both ways.
func (fc *faultCluster) isolate(id int, cut bool) {
	for pair, p := range fc.proxies {
		if pair[0] == id || pair[1] == id {
			if cut {
				p.Cut()
			} else {
				p.Heal()
			}
		}
	}
}

// replicaStatus is TALLY.CLUSTER STATUS of one replica.
type replicaStatus struct {
	ok              bool
	role            string
	term, leader    uint64
	commit, applied uint64
}

func (fc *faultCluster) status(id int) replicaStatus {
	var st replicaStatus
	p := fc.procs[id]
	if !p.running() {
		return st
	}
	rc := redis.NewClient(&redis.Options{Addr: p.clientAddr, MaxRetries: -1, DialTimeout: 300 * time.Millisecond,
		ReadTimeout: 300 * time.Millisecond})
	defer rc.Close()
	v, err := rc.Do(context.Background(), "TALLY.CLUSTER", "STATUS").Slice()
	if err != nil {
		return st
	}
	num := func(x any) uint64 { u, _ := strconv.ParseUint(fmt.Sprint(x), 10, 64); return u }
	for i := 0; i+1 < len(v); i += 2 {
		switch v[i] {
		case "role":
			st.role = fmt.Sprint(v[i+1])
		case "term":
			st.term = num(v[i+1])
		case "leader":
			st.leader = num(v[i+1])
		case "commit":
			st.commit = num(v[i+1])
		case "applied":
			st.applied = num(v[i+1])
		}
	}
	st.ok = st.role != ""
	return st
}

// waitLeader waits until a replica other than not says it leads, and
// every replica that answers and is not cut off agrees or knows no
// leader yet; it returns the leader's id.
func (fc *faultCluster) waitLeader(not int, within time.Duration) int {
	fc.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for id := 1; id <= len(fc.procs); id++ {
			if id == not {
				continue
			}
			if st := fc.status(id); st.ok && st.role == "leader" {
				return id
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	fc.t.Fatalf("no leader (other than %d) in %v", not, within)
	return 0
}

// follower returns a replica that is not leader.
func (fc *faultCluster) follower(leader int) int {
	for id := 1; id <= len(fc.procs); id++ {
		if id != leader {
			return id
		}
	}
	return 0
}

// waitCaughtUp waits until every replica applied the leader's commit.
func (fc *faultCluster) waitCaughtUp(within time.Duration) {
	fc.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		l := fc.waitLeader(0, time.Until(deadline))
		want := fc.status(l).commit
		ok := want > 0
		for id := 1; id <= len(fc.procs); id++ {
			if st := fc.status(id); !st.ok || st.applied < want {
				ok = false
			}
		}
		if ok {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	fc.t.Fatalf("the replicas did not catch up in %v", within)
}

// mustDo runs a setup write, retrying while the group has no leader.
func (fc *faultCluster) mustDo(c *redis.ClusterClient, args ...any) {
	fc.t.Helper()
	var err error
	for range 200 {
		if err = c.Do(context.Background(), args...).Err(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	fc.t.Fatalf("%v: %v", args, err)
}

// probeWrite sends HINCRBY posts:0 likes 1 to each running replica in
// turn, with a plain client (no slot map: a follower answers MOVED or
// CLUSTERDOWN), until one acknowledges it, and returns when: the group's
// write availability. The acknowledged increment is recorded in a (not
// among the writers' acknowledgment times).
func (fc *faultCluster) probeWrite(a *cfAcked, within time.Duration) time.Time {
	fc.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for id := 1; id <= len(fc.procs); id++ {
			p := fc.procs[id]
			if !p.running() {
				continue
			}
			rc := redis.NewClient(&redis.Options{Addr: p.clientAddr, MaxRetries: -1, DialTimeout: 300 * time.Millisecond,
				ReadTimeout: 3 * time.Second})
			v, err := rc.HIncrBy(context.Background(), "posts:0", "likes", 1).Result()
			rc.Close()
			if err == nil {
				a.mu.Lock()
				a.incr[0] = max(a.incr[0], v)
				a.counts["HINCRBY"]++
				a.mu.Unlock()
				return time.Now()
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	fc.t.Fatalf("no write was acknowledged in %v", within)
	return time.Time{}
}

// The workload, as in package cluster's fault test: HINCRBY posts:K likes
// 1, TL.POST by an author 1..cfAuthors (each followed by
// cfFollowerOf(author)), LIKE.LIKE video ITEM USER.
const (
	cfIncrKeys  = 20
	cfAuthors   = 12
	cfLikeItems = 200
	cfLikeUsers = 50
)

func cfFollowerOf(author int) int { return 100 + author }

// cfAcked records the writes the clients saw acknowledged.
type cfAcked struct {
	mu     sync.Mutex
	incr   map[int]int64          // posts:K likes: the largest HINCRBY reply
	posts  map[int][]int64        // author -> post ids TL.POST answered
	likes  map[[2]int]bool        // (item, user) LIKE.LIKE answered
	counts map[string]int         // acknowledged writes by command
	errs   map[string]int         // failed writes by their error's first word
	first  map[string]string      // an example of each kind of error
	times  map[string][]time.Time // when each acknowledgment came, by client
}

func newCFAcked() *cfAcked {
	return &cfAcked{incr: map[int]int64{}, posts: map[int][]int64{}, likes: map[[2]int]bool{},
		counts: map[string]int{}, errs: map[string]int{}, first: map[string]string{},
		times: map[string][]time.Time{}}
}

// failed notes a write whose outcome the client does not know.
func (a *cfAcked) failed(err error) {
	word, _, _ := strings.Cut(err.Error(), " ")
	a.mu.Lock()
	defer a.mu.Unlock()
	a.errs[word]++
	if a.first[word] == "" {
		a.first[word] = err.Error()
	}
}

// ack counts one acknowledged write of cmd by client; the caller holds
// a.mu.
func (a *cfAcked) ack(client, cmd string) {
	a.counts[cmd]++
	a.times[client] = append(a.times[client], time.Now())
}

// firstAfter returns client's first acknowledgment after t (zero if
// none).
func (a *cfAcked) firstAfter(client string, t time.Time) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	var first time.Time
	for _, at := range a.times[client] {
		if at.After(t) && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first
}

func (a *cfAcked) total() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, v := range a.counts {
		n += v
	}
	return n
}

func (a *cfAcked) summary() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	n, f := 0, 0
	for _, v := range a.counts {
		n += v
	}
	for _, v := range a.errs {
		f += v
	}
	return fmt.Sprintf("%d acknowledged %v, %d not %v (e.g. %q)", n, a.counts, f, a.errs, a.first)
}

// cfWriter writes with c until stop closes, recording what was
// acknowledged in a under label; nextPost gives each TL.POST a new post
// id. The "app" writer has c reload its slot map after an error.
func cfWriter(c *redis.ClusterClient, label string, rng *rand.Rand, a *cfAcked, nextPost func() int64, stop <-chan struct{}) {
	ctx := context.Background()
	failed := func(err error) {
		a.failed(err)
		if label == "app" {
			c.ReloadState(ctx)
			time.Sleep(20 * time.Millisecond)
		}
	}
	for {
		select {
		case <-stop:
			return
		default:
		}
		switch r := rng.IntN(10); {
		case r < 5:
			k := rng.IntN(cfIncrKeys)
			v, err := c.HIncrBy(ctx, fmt.Sprint("posts:", k), "likes", 1).Result()
			if err != nil {
				failed(err)
				continue
			}
			a.mu.Lock()
			a.incr[k] = max(a.incr[k], v)
			a.ack(label, "HINCRBY")
			a.mu.Unlock()
		case r < 7:
			author, post := 1+rng.IntN(cfAuthors), nextPost()
			if err := c.Do(ctx, "TL.POST", author, post).Err(); err != nil {
				failed(err)
				continue
			}
			a.mu.Lock()
			a.posts[author] = append(a.posts[author], post)
			a.ack(label, "TL.POST")
			a.mu.Unlock()
		default:
			item, user := rng.IntN(cfLikeItems), 1+rng.IntN(cfLikeUsers)
			if err := c.Do(ctx, "LIKE.LIKE", "video", item, user).Err(); err != nil {
				failed(err)
				continue
			}
			a.mu.Lock()
			a.likes[[2]int{item, user}] = true
			a.ack(label, "LIKE.LIKE")
			a.mu.Unlock()
		}
	}
}

// cfPageAll reads every page of TL.POSTS or TL.HOME of id and returns the
// post ids.
func cfPageAll(ctx context.Context, c *redis.Client, cmd string, id int) ([]int64, error) {
	var out []int64
	cursor := ""
	for range 1000 {
		args := []any{cmd, id, "LIMIT", 1000}
		if cursor != "" {
			args = append(args, "CURSOR", cursor)
		}
		v, err := c.Do(ctx, args...).Slice()
		if err != nil {
			return nil, err
		}
		if len(v) != 2 {
			return nil, fmt.Errorf("%s %d: reply %v", cmd, id, v)
		}
		entries, _ := v[1].([]any)
		for _, e := range entries {
			switch e := e.(type) {
			case int64:
				out = append(out, e)
			case []any:
				if len(e) > 0 {
					if p, ok := e[0].(int64); ok {
						out = append(out, p)
					}
				}
			}
		}
		if v[0] == nil {
			return out, nil
		}
		cursor = fmt.Sprint(v[0])
	}
	return nil, fmt.Errorf("%s %d: more than 1000 pages", cmd, id)
}

// cfCheckAcked checks every acknowledged write on the replica at addr
// through a READONLY connection (the replica has applied the leader's
// commit) and returns one loss per lost write.
func cfCheckAcked(ctx context.Context, addr string, a *cfAcked) []cfLoss {
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, MaxRetries: -1, ReadTimeout: 20 * time.Second})
	defer c.Close()
	if err := c.Do(ctx, "READONLY").Err(); err != nil {
		return []cfLoss{{what: fmt.Sprintf("READONLY: %v", err)}}
	}
	var lost []cfLoss
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, w := range a.incr {
		got, err := c.HGet(ctx, fmt.Sprint("posts:", k), "likes").Int64()
		if err != nil || got < w {
			lost = append(lost, cfLoss{fmt.Sprintf("posts:%d likes = %d (%v), acknowledged %d", k, got, err, w), []string{fmt.Sprint("posts:", k)}})
		}
	}
	for author, posts := range a.posts {
		for _, q := range []struct {
			cmd string
			id  int
		}{{"TL.POSTS", author}, {"TL.HOME", cfFollowerOf(author)}} {
			got, err := cfPageAll(ctx, c, q.cmd, q.id)
			if err != nil {
				lost = append(lost, cfLoss{what: err.Error()})
				continue
			}
			for _, p := range posts {
				if !slices.Contains(got, p) {
					lost = append(lost, cfLoss{fmt.Sprintf("%s %d lacks post %d of author %d", q.cmd, q.id, p, author), []string{fmt.Sprint(p)}})
				}
			}
		}
	}
	byUser := map[int][]int{}
	for l := range a.likes {
		byUser[l[1]] = append(byUser[l[1]], l[0])
	}
	for user, items := range byUser {
		slices.Sort(items)
		args := []any{"LIKE.STATES", "video", user}
		for _, it := range items {
			args = append(args, it)
		}
		v, err := c.Do(ctx, args...).StringSlice()
		if err != nil || len(v) != len(items) {
			lost = append(lost, cfLoss{what: fmt.Sprintf("LIKE.STATES video %d: %v (%v)", user, v, err)})
			continue
		}
		for i, s := range v {
			if s != "like" {
				lost = append(lost, cfLoss{fmt.Sprintf("user %d's like of item %d is %q", user, items[i], s),
					[]string{"LIKE.LIKE", fmt.Sprint(items[i]), fmt.Sprint(user)}})
			}
		}
	}
	return lost
}

// cfDump reads, on the replica at addr (READONLY), everything the
// workload writes: posts:K likes, every author's posts and follower's
// home timeline, every user's like states.
func cfDump(ctx context.Context, t *testing.T, addr string) map[string]string {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, MaxRetries: -1, ReadTimeout: 20 * time.Second})
	defer c.Close()
	if err := c.Do(ctx, "READONLY").Err(); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k := range cfIncrKeys {
		v, err := c.HGet(ctx, fmt.Sprint("posts:", k), "likes").Result()
		out[fmt.Sprint("posts:", k)] = fmt.Sprint(v, err)
	}
	for a := 1; a <= cfAuthors; a++ {
		for _, q := range []struct {
			cmd string
			id  int
		}{{"TL.POSTS", a}, {"TL.HOME", cfFollowerOf(a)}} {
			v, err := cfPageAll(ctx, c, q.cmd, q.id)
			out[fmt.Sprint(q.cmd, " ", q.id)] = fmt.Sprint(v, err)
		}
	}
	for u := 1; u <= cfLikeUsers; u++ {
		args := []any{"LIKE.STATES", "video", u}
		for it := range cfLikeItems {
			args = append(args, it)
		}
		v, err := c.Do(ctx, args...).Result()
		out[fmt.Sprint("states ", u)] = fmt.Sprint(v, err)
	}
	return out
}
