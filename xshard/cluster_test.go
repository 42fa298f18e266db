package xshard_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/cluster"
	"github.com/tallydb/tally/replica"
	"github.com/tallydb/tally/replica/memtransport"
	"github.com/tallydb/tally/server"
	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/xshard"
)

// shardGroup is one shard: three cluster Nodes in one process over their
// own in-memory network, each serving RESP on a loopback port, each with
// its Streams and (on the source shard) its Sender.
type shardGroup struct {
	t       *testing.T
	shard   uint32
	net     *memtransport.Network
	peers   []replica.Peer
	dirs    map[uint64]string
	peersOf xshard.Peers

	mu      sync.Mutex
	nodes   map[uint64]*cluster.Node
	streams map[uint64]*atomic.Pointer[xshard.Streams]
	senders map[uint64]context.CancelFunc
	sendWG  sync.WaitGroup
	stop    chan struct{}
	done    chan struct{}
}

func newShardGroup(t *testing.T, shard uint32, peersOf xshard.Peers) *shardGroup {
	g := &shardGroup{t: t, shard: shard, net: memtransport.New(), dirs: map[uint64]string{}, peersOf: peersOf,
		nodes: map[uint64]*cluster.Node{}, streams: map[uint64]*atomic.Pointer[xshard.Streams]{},
		senders: map[uint64]context.CancelFunc{}, stop: make(chan struct{}), done: make(chan struct{})}
	root := t.TempDir()
	for i := uint64(1); i <= 3; i++ {
		id := uint64(shard)*10 + i // replica ids are unique across the cluster
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
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
		for _, p := range g.peers {
			g.kill(p.ID)
		}
	})
	return g
}

func (g *shardGroup) pump() {
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
		if n := g.node(m.GetTo()); n != nil {
			_ = n.Replica().Step(context.Background(), m)
		}
	}
}

func (g *shardGroup) peer(id uint64) replica.Peer {
	for _, p := range g.peers {
		if p.ID == id {
			return p
		}
	}
	g.t.Fatalf("no replica %d", id)
	return replica.Peer{}
}

// start starts replica id with the stream commands, TEST.XSEND, and a
// Sender (which sends only while the replica leads).
func (g *shardGroup) start(id uint64) {
	g.t.Helper()
	p := g.peer(id)
	g.mu.Lock()
	sp := g.streams[id]
	if sp == nil {
		sp = &atomic.Pointer[xshard.Streams]{}
		g.streams[id] = sp
	}
	g.mu.Unlock()
	register := func(srv *server.Server, db *tallydb.DB) error {
		st, err := xshard.Open(db.Store(), g.shard, nil)
		if err != nil {
			return err
		}
		sp.Store(st)
		return srv.Register(append(xshard.Commands(st), xsendCommand(st, db.Store()))...)
	}
	n, err := cluster.Start(cluster.Config{
		Dir: g.dirs[id], ID: id, ClientAddr: p.ClientAddr, Peers: g.peers,
		Transport: g.net.Endpoint(id), TickInterval: 10 * time.Millisecond,
		Durability: store.SyncInterval,
		Store:      &store.Options{CacheSize: 4 << 20, MemTableSize: 4 << 20},
		Register:   register,
	})
	if err != nil {
		g.t.Fatalf("start %d: %v", id, err)
	}
	var ln net.Listener
	for range 100 {
		if ln, err = net.Listen("tcp", p.ClientAddr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		g.t.Fatalf("listen %d: %v", id, err)
	}
	go n.Serve(ln)
	snd, err := xshard.NewSender(xshard.SenderConfig{
		Streams:    sp.Load,
		Leader:     leadership{n},
		Peers:      g.peersOf,
		Proposer:   proposer{n},
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
		Poll: 10 * time.Millisecond, Timeout: 2 * time.Second,
		MaxBatch: 16,
	})
	if err != nil {
		g.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.mu.Lock()
	g.nodes[id], g.senders[id] = n, cancel
	g.mu.Unlock()
	g.sendWG.Add(1)
	go func() {
		defer g.sendWG.Done()
		snd.Run(ctx)
	}()
	g.net.SetDown(id, false)
}

// kill stops a replica at once, as when its machine dies.
func (g *shardGroup) kill(id uint64) {
	g.mu.Lock()
	n, cancel := g.nodes[id], g.senders[id]
	delete(g.nodes, id)
	delete(g.senders, id)
	g.mu.Unlock()
	if n == nil {
		return
	}
	cancel()
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

func (g *shardGroup) node(id uint64) *cluster.Node {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.nodes[id]
}

func (g *shardGroup) running() []*cluster.Node {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ns []*cluster.Node
	for _, n := range g.nodes {
		ns = append(ns, n)
	}
	return ns
}

// leader returns the current leader, or nil.
func (g *shardGroup) leader() *cluster.Node {
	for _, n := range g.running() {
		if n.Replica().Status().Role == "leader" {
			return n
		}
	}
	return nil
}

func (g *shardGroup) waitLeader() *cluster.Node {
	g.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if n := g.leader(); n != nil {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
	g.t.Fatalf("shard %d: no leader", g.shard)
	return nil
}

func (g *shardGroup) leaderAddr() string {
	if n := g.leader(); n != nil {
		return g.peer(n.Replica().Status().ID).ClientAddr
	}
	return g.peers[0].ClientAddr // a follower redirects, or refuses: the sender retries
}

// do runs a command on the leader, retrying through elections.
func (g *shardGroup) do(args ...any) (any, error) {
	var err error
	for range 200 {
		c := redis.NewClient(&redis.Options{Addr: g.waitLeaderAddr(), MaxRetries: -1, Protocol: 2})
		var v any
		v, err = c.Do(context.Background(), args...).Result()
		c.Close()
		if err == nil || errors.Is(err, redis.Nil) {
			return v, err
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, err
}

func (g *shardGroup) waitLeaderAddr() string {
	n := g.waitLeader()
	return g.peer(n.Replica().Status().ID).ClientAddr
}

type leadership struct{ n *cluster.Node }

func (l leadership) IsLeader() bool { return l.n.Replica().Status().Role == "leader" }

type proposer struct{ n *cluster.Node }

func (p proposer) Propose(ctx context.Context, argv [][]byte) error {
	data, err := server.EncodeCommand(argv)
	if err != nil {
		return err
	}
	reply, err := p.n.Replica().Propose(ctx, data)
	if err != nil {
		return err
	}
	if len(reply) > 0 && reply[0] == '-' {
		return errors.New(string(reply[1:]))
	}
	return nil
}

// peerMap resolves shard ids to their groups' leaders.
type peerMap struct {
	mu     sync.Mutex
	groups map[uint32]*shardGroup
}

func (m *peerMap) LeaderAddr(_ context.Context, shard uint32) (string, error) {
	m.mu.Lock()
	g := m.groups[shard]
	m.mu.Unlock()
	if g == nil {
		return "", fmt.Errorf("no shard %d", shard)
	}
	return g.leaderAddr(), nil
}

// xsendCommand is TEST.XSEND target id delta: a replicated write whose own
// effect (sent:id n += delta on this shard) commits in one batch with a
// message for target (HINCRBY posts:id likes delta), as a cross-shard
// operation does.
func xsendCommand(st *xshard.Streams, db *store.DB) server.Command {
	return server.Command{Name: "TEST.XSEND", Arity: 4, Flags: server.FlagWrite, Summary: "test", Group: "tally",
		Handler: func(c *server.Conn, args [][]byte) {
			target, err1 := strconv.ParseUint(string(args[1]), 10, 32)
			id, err2 := strconv.ParseUint(string(args[2]), 10, 64)
			delta, err3 := strconv.ParseInt(string(args[3]), 10, 64)
			if err := errors.Join(err1, err2, err3); err != nil {
				c.WriteErr(err)
				return
			}
			b := db.NewBatch()
			defer b.Close()
			if err := b.Incr("sent", id, "n", delta); err != nil {
				c.WriteErr(err)
				return
			}
			seq, err := st.Stage(b).Append(uint32(target), [][]byte{[]byte("HINCRBY"),
				[]byte("posts:" + string(args[2])), []byte("likes"), args[3]})
			if err == nil {
				err = b.Commit()
			}
			if err != nil {
				c.WriteErr(err)
				return
			}
			c.WriteUint(seq)
		}}
}

// TestStreamAcrossLeaderChanges runs two shards of three replicas: shard
// 1's writes append HINCRBY messages for shard 2 while the leaders of both
// shards are killed, restarted and transferred. At the end shard 2's
// counters equal shard 1's record of what it sent, row by row, on every
// replica (nothing lost, nothing applied twice), and shard 1's outbox is
// empty on every replica.
func TestStreamAcrossLeaderChanges(t *testing.T) {
	pm := &peerMap{groups: map[uint32]*shardGroup{}}
	src := newShardGroup(t, 1, pm)
	dst := newShardGroup(t, 2, pm)
	pm.mu.Lock()
	pm.groups[1], pm.groups[2] = src, dst
	pm.mu.Unlock()
	for _, c := range [][]any{{"TALLY.COUNTER", "ADD", "sent"}, {"TALLY.COLUMN", "ADD", "sent", "n"}} {
		if _, err := src.do(c...); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range [][]any{{"TALLY.COUNTER", "ADD", "posts"}, {"TALLY.COLUMN", "ADD", "posts", "likes"}} {
		if _, err := dst.do(c...); err != nil {
			t.Fatal(err)
		}
	}

	const sends, rows = 400, 20
	faults := map[int]func(){
		80: func() { // kill shard 1's leader, restart it later
			id := src.waitLeader().Replica().Status().ID
			src.kill(id)
			time.AfterFunc(300*time.Millisecond, func() { src.start(id) })
		},
		160: func() { // kill shard 2's leader
			id := dst.waitLeader().Replica().Status().ID
			dst.kill(id)
			time.AfterFunc(300*time.Millisecond, func() { dst.start(id) })
		},
		240: func() { // hand over both leaderships
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = dst.waitLeader().Replica().TransferLeadership(ctx)
			_ = src.waitLeader().Replica().TransferLeadership(ctx)
		},
		320: func() { // kill shard 2's leader and shard 1's together
			a := src.waitLeader().Replica().Status().ID
			b := dst.waitLeader().Replica().Status().ID
			src.kill(a)
			dst.kill(b)
			time.AfterFunc(200*time.Millisecond, func() { src.start(a); dst.start(b) })
		},
	}
	var failed int
	for i := range sends {
		if f := faults[i]; f != nil {
			f()
		}
		// Outcomes may be unknown across a kill: the check compares with
		// shard 1's own counters, which commit with the messages.
		if _, err := src.do("TEST.XSEND", 2, i%rows+1, i%5+1); err != nil {
			failed++
		}
	}
	time.Sleep(600 * time.Millisecond) // the last restarts
	if len(src.running()) != 3 || len(dst.running()) != 3 {
		t.Fatalf("replicas running: %d, %d", len(src.running()), len(dst.running()))
	}

	// Wait until every replica of shard 1 has an empty outbox.
	deadline := time.Now().Add(20 * time.Second)
	for {
		pending := uint64(0)
		for _, sp := range src.streams {
			st, err := sp.Load().Status(time.Now())
			if err != nil {
				t.Fatal(err)
			}
			for _, ts := range st.Targets {
				pending += ts.Pending
			}
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d messages still pending", pending)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Shard 2's replicas must all have applied what its leader did.
	sent := map[uint64]uint64{}
	var appended uint64
	for id := uint64(1); id <= rows; id++ {
		v, err := src.do("HGET", fmt.Sprintf("sent:%d", id), "n")
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		n, _ := strconv.ParseUint(fmt.Sprint(v), 10, 64)
		sent[id] = n
		appended += n
	}
	if appended == 0 {
		t.Fatal("nothing was sent")
	}
	srcStatus, err := src.streams[src.waitLeader().Replica().Status().ID].Load().Status(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	lastSeq := srcStatus.Targets[0].LastAppended
	deadline = time.Now().Add(20 * time.Second)
	for _, p := range dst.peers {
		for {
			last, err := dst.streams[p.ID].Load().LastApplied(1)
			if err != nil {
				t.Fatal(err)
			}
			if last == lastSeq {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %d of shard 2 applied up to %d of %d", p.ID, last, lastSeq)
			}
			time.Sleep(20 * time.Millisecond)
		}
		c, err := dst.node(p.ID).DB().Store().Counter("posts")
		if err != nil {
			t.Fatal(err)
		}
		for id := uint64(1); id <= rows; id++ {
			got, err := c.GetColumn(id, "likes")
			if err != nil {
				t.Fatal(err)
			}
			if got != sent[id] {
				t.Errorf("replica %d: posts:%d likes = %d, shard 1 sent %d", p.ID, id, got, sent[id])
			}
		}
	}
	t.Logf("%d sends (%d failed or unknown), %d messages, total delta %d", sends, failed, lastSeq, appended)
}
