package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tallydb/tally/replica"
	"github.com/tallydb/tally/replica/memtransport"
	"github.com/tallydb/tally/store"
)

// group is three cluster Nodes in one process over the in-memory
// network, each serving RESP on its own loopback port.
type group struct {
	t     *testing.T
	net   *memtransport.Network
	peers []replica.Peer
	dirs  map[uint64]string
	mu    sync.Mutex
	nodes map[uint64]*Node
	lns   map[uint64]net.Listener
	stop  chan struct{}
	done  chan struct{}
}

func newGroup(t *testing.T, size int) *group {
	g := &group{t: t, net: memtransport.New(), dirs: map[uint64]string{}, nodes: map[uint64]*Node{},
		lns: map[uint64]net.Listener{}, stop: make(chan struct{}), done: make(chan struct{})}
	root := t.TempDir()
	for id := uint64(1); id <= uint64(size); id++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln.Close() // the port, reserved for this node's restarts
		g.peers = append(g.peers, replica.Peer{ID: id, RaftAddr: fmt.Sprintf("mem-%d", id), ClientAddr: ln.Addr().String()})
		g.dirs[id] = filepath.Join(root, fmt.Sprint(id))
	}
	for _, p := range g.peers {
		g.start(p.ID)
	}
	go g.pump()
	t.Cleanup(func() {
		close(g.stop)
		<-g.done
		g.mu.Lock()
		ids := make([]uint64, 0, len(g.nodes))
		for id := range g.nodes {
			ids = append(ids, id)
		}
		g.mu.Unlock()
		for _, id := range ids {
			g.kill(id)
		}
	})
	return g
}

// pump delivers the network's messages to the running nodes.
func (g *group) pump() {
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

func (g *group) start(id uint64) {
	g.t.Helper()
	p := g.peers[id-1]
	n, err := Start(Config{
		Dir: g.dirs[id], ID: id, ClientAddr: p.ClientAddr, Peers: g.peers,
		Transport:    g.net.Endpoint(id),
		TickInterval: 10 * time.Millisecond,
		Durability:   store.SyncAlways,
		Store:        &store.Options{CacheSize: 4 << 20, MemTableSize: 4 << 20},
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
	g.nodes[id], g.lns[id] = n, ln
	g.mu.Unlock()
	g.net.SetDown(id, false)
}

// kill stops a node without handing over leadership: its server and
// replica stop at once, as when its machine dies (the store is closed
// cleanly; crashes are the replica package's and the process tests').
func (g *group) kill(id uint64) {
	g.mu.Lock()
	n := g.nodes[id]
	delete(g.nodes, id)
	g.mu.Unlock()
	if n == nil {
		return
	}
	g.net.SetDown(id, true)
	n.Server().Close()
	_ = n.Replica().Stop()
	for _, p := range n.DB().Packages() {
		p.Close()
	}
	if err := n.DB().Close(); err != nil {
		g.t.Errorf("close %d: %v", id, err)
	}
}

func (g *group) node(id uint64) *Node {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.nodes[id]
}

// leader waits for a leader among the running nodes.
func (g *group) leader() *Node {
	g.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		g.mu.Lock()
		for _, n := range g.nodes {
			if n.Replica().Status().Role == "leader" {
				g.mu.Unlock()
				return n
			}
		}
		g.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	g.t.Fatal("no leader")
	return nil
}

// settle waits until every running node applied the leader's commit.
func (g *group) settle() {
	g.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		want := g.leader().Replica().Status().Commit
		ok := true
		g.mu.Lock()
		for _, n := range g.nodes {
			if n.Replica().Status().Applied < want {
				ok = false
			}
		}
		g.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	g.t.Fatal("replicas did not catch up")
}

func (g *group) clusterClient() *redis.ClusterClient {
	var addrs []string
	for _, p := range g.peers {
		addrs = append(addrs, p.ClientAddr)
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 16,
		DialTimeout: time.Second, ReadTimeout: 20 * time.Second, WriteTimeout: 5 * time.Second})
	g.t.Cleanup(func() { c.Close() })
	return c
}

// do runs a write through the cluster client, retrying what the client
// reports as retryable while a leader is being elected.
func do(t *testing.T, c *redis.ClusterClient, args ...any) any {
	t.Helper()
	var err error
	for range 200 {
		var v any
		v, err = c.Do(context.Background(), args...).Result()
		if err == nil || errors.Is(err, redis.Nil) {
			return v
		}
		if s := err.Error(); len(s) >= 10 && (s[:8] == "TRYAGAIN" || s[:11] == "CLUSTERDOWN" || isNetErr(err)) {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if s := err.Error(); len(s) > 4 && s[:4] == "ERR " {
			return s // the command's own error, the same on every replica
		}
		break
	}
	t.Fatalf("%v: %v", args, err)
	return nil
}

func isNetErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, net.ErrClosed) || err.Error() == "EOF" ||
		len(err.Error()) > 6 && err.Error()[:6] == "dial t"
}

// dump reads a logical image of one node's data over RESP (READONLY on a
// follower): every counter row, home page, like count and unread count
// the workload can have touched.
func dump(t *testing.T, addr string) map[string]any {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
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
	for id := range 20 {
		get(fmt.Sprint("posts:", id), "HGETALL", fmt.Sprint("posts:", id))
		get(fmt.Sprint("views:", id), "TALLY.GET", "views", id)
		get(fmt.Sprint("likes:", id), "LIKE.COUNTS", "video", id)
	}
	for u := 1; u <= 12; u++ {
		get(fmt.Sprint("home:", u), "TL.HOME", u)
		get(fmt.Sprint("unread:", u), "UNREAD.GET", u)
		get(fmt.Sprint("feed:", u), "UNREAD.FEED", u)
	}
	return out
}

// TestReplicatedWorkload drives a random workload over every package
// through go-redis's ClusterClient against a group of three, kills the
// leader midway (the client follows MOVED to the new one) and restarts
// it; afterwards every replica's logical dump is the same.
func TestReplicatedWorkload(t *testing.T) {
	g := newGroup(t, 3)
	c := g.clusterClient()
	g.leader()
	for _, cmd := range [][]any{
		{"TALLY.COUNTER", "ADD", "posts"}, {"TALLY.COLUMN", "ADD", "posts", "likes"},
		{"TALLY.COLUMN", "ADD", "posts", "comments"},
		{"TALLY.COUNTER", "ADD", "views"}, {"TALLY.COLUMN", "ADD", "views", "n", "MAX", 64},
		{"LIKE.BUSINESS", "ADD", "video"}, {"UNREAD.KIND", "ADD", "msg"},
	} {
		do(t, c, cmd...)
	}
	rng := rand.New(rand.NewPCG(22, 3))
	post := 1000
	step := func() {
		switch r := rng.IntN(10); {
		case r < 2:
			do(t, c, "HINCRBY", fmt.Sprint("posts:", rng.IntN(20)), []string{"likes", "comments"}[rng.IntN(2)], rng.IntN(7)-2)
		case r < 3:
			do(t, c, "TALLY.INCR", "views", rng.IntN(20), "n", rng.IntN(1000))
		case r < 5:
			verb := []string{"LIKE.LIKE", "LIKE.UNLIKE", "LIKE.DISLIKE"}[rng.IntN(3)]
			do(t, c, verb, "video", rng.IntN(20), 1+rng.IntN(12))
		case r < 6:
			do(t, c, []string{"TL.FOLLOW", "TL.UNFOLLOW"}[rng.IntN(2)], 1+rng.IntN(12), 1+rng.IntN(12))
		case r < 8:
			post++
			do(t, c, "TL.POST", 1+rng.IntN(12), post, "WAIT")
		case r < 9:
			do(t, c, "UNREAD.INCR", 1+rng.IntN(12), "msg", 1+rng.IntN(3))
		default:
			do(t, c, "UNREAD.FEEDRESET", 1+rng.IntN(12))
		}
	}
	for range 150 {
		step()
	}
	// The leader dies; writes go on through the new one.
	dead := g.leader().cfg.ID
	g.kill(dead)
	for range 100 {
		step()
	}
	g.start(dead)
	for range 50 {
		step()
	}
	g.settle()
	var first map[string]any
	for _, p := range g.peers {
		d := dump(t, p.ClientAddr)
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
	if t.Failed() {
		return
	}
	// The dump is not trivially equal: it holds data of every package.
	for _, k := range []string{"home:1", "likes:3", "posts:4", "views:5"} {
		if first[k] == nil {
			t.Errorf("%s is empty in every replica: the workload wrote nothing there", k)
		}
	}
	for _, n := range []*Node{g.node(1), g.node(2), g.node(3)} {
		if err := n.DB().Check(); err != nil {
			t.Errorf("replica %d: %v", n.cfg.ID, err)
		}
	}
}
