package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/redis/go-redis/v9"

	"github.com/tallydb/tally/internal/testutil"
	"github.com/tallydb/tally/replica"
	"github.com/tallydb/tally/replica/memtransport"
	"github.com/tallydb/tally/server"
	"github.com/tallydb/tally/store"
)

// The in-process fault test: 3 and 5 replicas in one process, each on its
// own crashable in-memory filesystem, over the in-memory network; random
// nodes crash (their filesystem is replaced by a crash clone of it: what
// was synced, and a random part of what was not) and restart on the
// clone, several rounds, while clients write through go-redis's
// ClusterClient. Afterwards every acknowledged write is on every replica,
// the replicas' logical dumps are equal, and every replica's Check passes.
//
// TALLY_CLUSTER_SEEDS=N runs N seeds per group size (default 1);
// TALLY_CLUSTER_SEED=S starts at seed S (default 1), to repeat a failure.
// Thread scheduling is not seeded: a seed fixes the workload's choices and
// which nodes crash when, not the interleaving.

// crashDir is every node's store directory, on its own filesystem.
const crashDir = "/tally"

// crashGroup is a group of cluster Nodes on crashable filesystems.
type crashGroup struct {
	t     *testing.T
	rng   *rand.Rand // crash choices; used by the test goroutine only
	net   *memtransport.Network
	peers []replica.Peer
	mu    sync.Mutex
	fss   map[uint64]*vfs.MemFS
	nodes map[uint64]*Node
	stop  chan struct{}
	done  chan struct{}
}

func newCrashGroup(t *testing.T, size int, seed uint64) *crashGroup {
	g := &crashGroup{t: t, rng: rand.New(rand.NewPCG(seed, 0xc4a5)), net: memtransport.New(),
		fss: map[uint64]*vfs.MemFS{}, nodes: map[uint64]*Node{},
		stop: make(chan struct{}), done: make(chan struct{})}
	for id := uint64(1); id <= uint64(size); id++ {
		g.peers = append(g.peers, replica.Peer{ID: id, RaftAddr: fmt.Sprintf("mem-%d", id), ClientAddr: freeAddr(t)})
		g.fss[id] = vfs.NewCrashableMem()
	}
	for _, p := range g.peers {
		g.start(p.ID)
	}
	go g.pump()
	t.Cleanup(func() {
		close(g.stop)
		<-g.done
		for _, p := range g.peers {
			g.crash(p.ID)
		}
	})
	return g
}

// pump delivers the network's messages to the running nodes.
func (g *crashGroup) pump() {
	defer close(g.done)
	for {
		select {
		case <-g.stop:
			return
		default:
		}
		if g.net.Len() == 0 {
			time.Sleep(100 * time.Microsecond)
			continue
		}
		m := g.net.Take(0)
		if m == nil {
			continue
		}
		g.mu.Lock()
		n := g.nodes[m.GetTo()]
		g.mu.Unlock()
		if n != nil {
			_ = n.Replica().Step(context.Background(), m)
		}
	}
}

// start starts node id on its filesystem.
func (g *crashGroup) start(id uint64) {
	g.t.Helper()
	p := g.peers[id-1]
	g.mu.Lock()
	fs := g.fss[id]
	g.mu.Unlock()
	n, err := Start(Config{
		Dir: crashDir, ID: id, ClientAddr: p.ClientAddr, Peers: g.peers,
		Transport:    g.net.Endpoint(id),
		TickInterval: 10 * time.Millisecond,
		// No snapshotter: the log must reach every restarted node.
		MaxLogEntries: 1 << 30,
		Durability:    store.SyncAlways,
		Store:         &store.Options{FS: fs, CacheSize: 4 << 20, MemTableSize: 4 << 20},
		Cluster:       server.ClusterOptions{ProposeTimeout: 3 * time.Second},
	})
	if err != nil {
		g.t.Fatalf("start %d: %v", id, err)
	}
	var ln net.Listener
	for range 100 { // the port was closed just now: it may linger
		if ln, err = net.Listen("tcp", p.ClientAddr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		g.t.Fatalf("listen %d: %v", id, err)
	}
	go n.Serve(ln)
	g.mu.Lock()
	g.nodes[id] = n
	g.mu.Unlock()
	g.net.SetDown(id, false)
}

// crash drops node id as a power loss would: it is cut off the network
// and its clients first (so nothing it persists from now on reaches
// anyone), its filesystem is replaced by a crash clone (every synced byte
// and a random part of the rest), and only then is the old instance shut
// down, on the filesystem nobody will open again.
func (g *crashGroup) crash(id uint64) {
	g.mu.Lock()
	n := g.nodes[id]
	delete(g.nodes, id)
	g.mu.Unlock()
	if n == nil {
		return
	}
	g.net.SetDown(id, true)
	n.Server().Close()
	clone := g.fss[id].CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: g.rng.IntN(101), RNG: g.rng})
	g.mu.Lock()
	g.fss[id] = clone
	g.mu.Unlock()
	_ = n.Replica().Stop()
	for _, p := range n.DB().Packages() {
		p.Close()
	}
	_ = n.DB().Close() // the old filesystem: what it says no longer matters
}

func (g *crashGroup) running() []uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ids []uint64
	for id := range g.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (g *crashGroup) node(id uint64) *Node {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.nodes[id]
}

// leader waits for a leader among the running nodes and returns its id.
func (g *crashGroup) leader() uint64 {
	g.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, id := range g.running() {
			if n := g.node(id); n != nil && n.Replica().Status().Role == "leader" {
				return id
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	g.t.Fatal("no leader")
	return 0
}

// settle waits until every running node applied the leader's commit.
func (g *crashGroup) settle() {
	g.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		want := g.node(g.leader()).Replica().Status().Commit
		ok := true
		for _, id := range g.running() {
			if n := g.node(id); n == nil || n.Replica().Status().Applied < want {
				ok = false
			}
		}
		if ok {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	g.t.Fatal("replicas did not catch up")
}

// acked records the writes a client saw acknowledged.
type acked struct {
	mu     sync.Mutex
	incr   map[int]int64     // posts:K likes: the largest HINCRBY reply
	posts  map[int][]int64   // author -> post ids TL.POST answered
	likes  map[[2]int]bool   // (item, user) LIKE.LIKE answered
	counts map[string]int    // acknowledged writes by command
	errs   map[string]int    // failed writes by their error's first word
	first  map[string]string // an example of each error kind
	unack  atomic.Int64      // writes not acknowledged
}

func newAcked() *acked {
	return &acked{incr: map[int]int64{}, posts: map[int][]int64{}, likes: map[[2]int]bool{},
		counts: map[string]int{}, errs: map[string]int{}, first: map[string]string{}}
}

// failed notes a write whose outcome the client does not know.
func (a *acked) failed(err error) {
	a.unack.Add(1)
	word, _, _ := strings.Cut(err.Error(), " ")
	a.mu.Lock()
	a.errs[word]++
	if a.first[word] == "" {
		a.first[word] = err.Error()
	}
	a.mu.Unlock()
}

// workload is the clients' write mix, shared by the in-process and the
// process fault tests' shapes: HINCRBY posts:K likes 1, TL.POST by one of
// the authors 1..tlAuthors (each followed by user followerOf(author)),
// LIKE.LIKE video ITEM USER.
const (
	incrKeys  = 20
	tlAuthors = 12
	likeItems = 200
	likeUsers = 50
)

func followerOf(author int) int { return 100 + author }

// setupWorkload declares what the workload writes to.
func setupWorkload(t *testing.T, c *redis.ClusterClient) {
	t.Helper()
	for _, cmd := range [][]any{
		{"TALLY.COUNTER", "ADD", "posts"}, {"TALLY.COLUMN", "ADD", "posts", "likes"},
		{"LIKE.BUSINESS", "ADD", "video"},
	} {
		do(t, c, cmd...)
	}
	for a := 1; a <= tlAuthors; a++ {
		do(t, c, "TL.FOLLOW", followerOf(a), a)
	}
}

// writer runs writes with c until stop closes, recording what was
// acknowledged in a; nextPost gives each TL.POST a new post id.
func writer(c *redis.ClusterClient, rng *rand.Rand, a *acked, nextPost func() int64, stop <-chan struct{}) {
	ctx := context.Background()
	for {
		select {
		case <-stop:
			return
		default:
		}
		switch r := rng.IntN(10); {
		case r < 5:
			k := rng.IntN(incrKeys)
			v, err := c.HIncrBy(ctx, fmt.Sprint("posts:", k), "likes", 1).Result()
			if err != nil {
				a.failed(err)
				continue
			}
			a.mu.Lock()
			a.incr[k] = max(a.incr[k], v)
			a.counts["HINCRBY"]++
			a.mu.Unlock()
		case r < 7:
			author, post := 1+rng.IntN(tlAuthors), nextPost()
			if err := c.Do(ctx, "TL.POST", author, post).Err(); err != nil {
				a.failed(err)
				continue
			}
			a.mu.Lock()
			a.posts[author] = append(a.posts[author], post)
			a.counts["TL.POST"]++
			a.mu.Unlock()
		default:
			item, user := rng.IntN(likeItems), 1+rng.IntN(likeUsers)
			if err := c.Do(ctx, "LIKE.LIKE", "video", item, user).Err(); err != nil {
				a.failed(err)
				continue
			}
			a.mu.Lock()
			a.likes[[2]int{item, user}] = true
			a.counts["LIKE.LIKE"]++
			a.mu.Unlock()
		}
	}
}

// pageAll reads every page of a TL.* page command (TL.POSTS, TL.HOME)
// with c, and returns the first element of each entry (the post id).
func pageAll(ctx context.Context, c interface {
	Do(context.Context, ...any) *redis.Cmd
}, cmd string, id int) ([]int64, error) {
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

// checkAcked checks every acknowledged write on the replica at addr (a
// READONLY connection: the replica must have applied the leader's commit
// already). It returns one line per lost write.
func checkAcked(ctx context.Context, addr string, a *acked) []string {
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, MaxRetries: -1, ReadTimeout: 20 * time.Second})
	defer c.Close()
	if err := c.Do(ctx, "READONLY").Err(); err != nil {
		return []string{fmt.Sprintf("READONLY: %v", err)}
	}
	var lost []string
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, w := range a.incr {
		got, err := c.HGet(ctx, fmt.Sprint("posts:", k), "likes").Int64()
		if err != nil || got < w {
			lost = append(lost, fmt.Sprintf("posts:%d likes = %d (%v), acknowledged %d", k, got, err, w))
		}
	}
	for author, posts := range a.posts {
		for _, cmd := range []struct {
			name string
			id   int
		}{{"TL.POSTS", author}, {"TL.HOME", followerOf(author)}} {
			got, err := pageAll(ctx, c, cmd.name, cmd.id)
			if err != nil {
				lost = append(lost, err.Error())
				continue
			}
			for _, p := range posts {
				if !slices.Contains(got, p) {
					lost = append(lost, fmt.Sprintf("%s %d lacks post %d of author %d", cmd.name, cmd.id, p, author))
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
			lost = append(lost, fmt.Sprintf("LIKE.STATES video %d: %v (%v)", user, v, err))
			continue
		}
		for i, s := range v {
			if s != "like" {
				lost = append(lost, fmt.Sprintf("user %d's like of item %d is %q", user, items[i], s))
			}
		}
	}
	return lost
}

// workloadDump reads, on the replica at addr (READONLY), everything the
// workload writes: every posts:K likes, every author's posts and every
// follower's whole home timeline, every item's like counts and every
// user's like states.
func workloadDump(ctx context.Context, t *testing.T, addr string) map[string]any {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, MaxRetries: -1, ReadTimeout: 20 * time.Second})
	defer c.Close()
	if err := c.Do(ctx, "READONLY").Err(); err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	get := func(name string, args ...any) {
		v, err := c.Do(ctx, args...).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			v = "error: " + err.Error()
		}
		out[name] = v
	}
	for k := range incrKeys {
		get(fmt.Sprint("posts:", k), "HGETALL", fmt.Sprint("posts:", k))
	}
	for a := 1; a <= tlAuthors; a++ {
		for _, q := range []struct {
			cmd string
			id  int
		}{{"TL.POSTS", a}, {"TL.HOME", followerOf(a)}} {
			v, err := pageAll(ctx, c, q.cmd, q.id)
			if err != nil {
				out[fmt.Sprint(q.cmd, q.id)] = "error: " + err.Error()
			} else {
				out[fmt.Sprint(q.cmd, q.id)] = v
			}
		}
	}
	items := []any{"LIKE.COUNTS", "video"}
	for it := range likeItems {
		items = append(items, it)
	}
	get("counts", items...)
	for u := 1; u <= likeUsers; u++ {
		args := []any{"LIKE.STATES", "video", u}
		get(fmt.Sprint("states:", u), append(args, items[2:]...)...)
	}
	return out
}

// TestCrashRestartUnderLoad crashes and restarts random minorities of a
// group of 3 and of 5 under writes, several rounds, and in the last round
// every node, then checks that nothing acknowledged was lost, the
// replicas converged and every store checks.
func TestCrashRestartUnderLoad(t *testing.T) {
	seeds := testutil.EnvInt(t, "TALLY_CLUSTER_SEEDS", 1)
	seed0, _ := testutil.EnvSeed(t, "TALLY_CLUSTER_SEED", 1)
	rounds := 5
	if testing.Short() {
		rounds = 2
	}
	for _, size := range []int{3, 5} {
		for i := range uint64(seeds) {
			seed := seed0 + i
			t.Run(fmt.Sprintf("replicas=%d/seed=%d", size, seed), func(t *testing.T) {
				crashRounds(t, size, seed, rounds)
			})
		}
	}
}

func crashRounds(t *testing.T, size int, seed uint64, rounds int) {
	g := newCrashGroup(t, size, seed)
	var addrs []string
	for _, p := range g.peers {
		addrs = append(addrs, p.ClientAddr)
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 16,
		DialTimeout: time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second})
	defer c.Close()
	g.leader()
	setupWorkload(t, c)

	a := newAcked()
	var post atomic.Int64
	post.Store(1000)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			writer(c, rand.New(rand.NewPCG(seed, uint64(w))), a, func() int64 { return post.Add(1) }, stop)
		}()
	}
	load := func(d time.Duration) {
		select {
		case <-time.After(d):
		case <-stop:
		}
	}
	started := time.Now()
	load(300 * time.Millisecond)
	crashes := 0
	for round := range rounds {
		// Crash a minority: one node, or with 5 sometimes two; the leader
		// at least every other round. The last round crashes every node
		// at once (a power loss of the whole group: with sync durability
		// nothing acknowledged may be lost either).
		victims := []uint64{}
		n := 1 + g.rng.IntN((size-1)/2)
		switch {
		case round == rounds-1:
			n = size
		case round%2 == 0:
			victims = append(victims, g.leader())
		}
		for len(victims) < n {
			id := uint64(1 + g.rng.IntN(size))
			if !slices.Contains(victims, id) {
				victims = append(victims, id)
			}
		}
		for _, id := range victims {
			g.crash(id)
			crashes++
		}
		t.Logf("round %d: crashed %v", round, victims)
		load(time.Duration(300+g.rng.IntN(500)) * time.Millisecond)
		for _, id := range victims {
			g.start(id)
		}
		load(time.Duration(200+g.rng.IntN(400)) * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	elapsed := time.Since(started)
	g.settle()

	ctx := context.Background()
	for _, p := range g.peers {
		for _, l := range checkAcked(ctx, p.ClientAddr, a) {
			t.Errorf("replica %d: lost an acknowledged write: %s", p.ID, l)
		}
	}
	var first map[string]any
	for _, p := range g.peers {
		d := dump(t, p.ClientAddr)
		for k, v := range workloadDump(ctx, t, p.ClientAddr) {
			d["workload:"+k] = v
		}
		if first == nil {
			first = d
			continue
		}
		for k, v := range first {
			if !reflect.DeepEqual(v, d[k]) {
				t.Errorf("replica %d: %s = %v, replica 1 has %v", p.ID, k, d[k], v)
			}
		}
	}
	for _, p := range g.peers {
		if err := g.node(p.ID).DB().Check(); err != nil {
			t.Errorf("replica %d: %v", p.ID, err)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	total := 0
	for _, n := range a.counts {
		total += n
	}
	if a.counts["HINCRBY"] == 0 || a.counts["TL.POST"] == 0 || a.counts["LIKE.LIKE"] == 0 {
		t.Errorf("a command was never acknowledged: %v", a.counts)
	}
	t.Logf("%d crashes in %v: %d writes acknowledged %v, %d not (%v; e.g. %v)",
		crashes, elapsed.Round(time.Millisecond), total, a.counts, a.unack.Load(), a.errs, a.first)
}
