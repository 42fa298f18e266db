package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/tallydb/tally/replica"
	"github.com/tallydb/tally/replica/memtransport"
	"github.com/tallydb/tally/server"
	"github.com/tallydb/tally/store"
)

// The in-process sharded cluster (issue 23): three shards of three cluster
// Nodes plus the metadata group (a voter on the first node of each shard,
// the other nodes its learners), each group on its own in-memory network
// with a pump goroutine, every node serving RESP on a loopback port. A
// seeded loop writes through go-redis's ClusterClient while shard
// leaders and metadata voters are killed and restarted, a shard leader is
// partitioned from its followers, and a replica of a shard moves to a new
// node; afterwards the cluster is compared with a model of the
// acknowledged writes.
//
// TALLY_SHARD_SEED=S picks the seed (default 1), TALLY_SHARD_STEPS=N the
// number of operations (default 300). A seed fixes the workload's and the
// faults' choices, not the threads' interleaving. TALLY_SHARD_LATENCY_MS=D
// delays every raft message D ms, as a loaded machine's slow loops and
// pumps do (load 8-11 on 2 cores); D=60 makes a heartbeat's round trip
// outlast the 100 ms election timeout after which a read index request is
// asked again (replica's readBatch: reads never completed there before).

// shardSim is the cluster: the nodes of every shard and the metadata group.
type shardSim struct {
	t         *testing.T
	root      string
	metaNet   *memtransport.Network
	nets      map[uint32]*memtransport.Network
	peers     map[uint32][]replica.Peer // each shard's first voters
	metaPeers []replica.Peer
	addr      map[uint64]string
	shardOf   map[uint64]uint32
	joined    map[uint64]bool // started with Join (added by a move)

	mu      sync.Mutex
	nodes   map[uint64]*Node
	removed map[uint64]bool // moved away: not restarted, not checked
	stop    chan struct{}
	pumps   sync.WaitGroup
	latency time.Duration // TALLY_SHARD_LATENCY_MS
}

const simShards = 3

func simRaftAddr(id uint64) string { return fmt.Sprintf("mem-%d:1", id) }

func newShardSim(t *testing.T) *shardSim {
	return newShardSimAt(t, func(uint64) string { return freeAddr(t) })
}

// newShardSimAt is newShardSim with node id's client address from addr.
func newShardSimAt(t *testing.T, addr func(id uint64) string) *shardSim {
	s := &shardSim{t: t, root: t.TempDir(), metaNet: memtransport.New(), nets: map[uint32]*memtransport.Network{},
		peers: map[uint32][]replica.Peer{}, addr: map[uint64]string{}, shardOf: map[uint64]uint32{},
		joined: map[uint64]bool{}, nodes: map[uint64]*Node{}, removed: map[uint64]bool{}, stop: make(chan struct{}),
		latency: time.Duration(envInt(t, "TALLY_SHARD_LATENCY_MS", 0)) * time.Millisecond}
	for sh := uint32(1); sh <= simShards; sh++ {
		s.nets[sh] = memtransport.New()
		for i := uint64(1); i <= 3; i++ {
			id := uint64(sh)*10 + i
			s.addr[id] = addr(id)
			s.shardOf[id] = sh
			p := replica.Peer{ID: id, RaftAddr: simRaftAddr(id), ClientAddr: s.addr[id]}
			s.peers[sh] = append(s.peers[sh], p)
			if i == 1 {
				s.metaPeers = append(s.metaPeers, replica.Peer{ID: id, RaftAddr: fmt.Sprintf("meta-%d:1", id), ClientAddr: s.addr[id]})
			}
		}
	}
	for id := range s.addr {
		s.start(id)
	}
	for sh, nw := range s.nets {
		s.pump(nw, func(n *Node) *replica.Node {
			if n.cfg.Sharding.Shard != sh {
				return nil
			}
			return n.Replica()
		})
	}
	s.pump(s.metaNet, func(n *Node) *replica.Node { return n.meta.Replica() })
	t.Cleanup(func() {
		close(s.stop)
		s.pumps.Wait()
		for _, id := range s.running() {
			s.kill(id)
		}
	})
	return s
}

// pump delivers a network's messages to the running nodes' replicas, each
// s.latency after it was sent.
func (s *shardSim) pump(nw *memtransport.Network, rep func(*Node) *replica.Node) {
	type delayed struct {
		m   *pb.Message
		due time.Time
	}
	s.pumps.Add(1)
	go func() {
		defer s.pumps.Done()
		var held []delayed // in the order sent
		for {
			select {
			case <-s.stop:
				return
			default:
			}
			for nw.Len() > 0 {
				if m := nw.Take(0); m != nil {
					held = append(held, delayed{m, time.Now().Add(s.latency)})
				}
			}
			if len(held) == 0 || time.Now().Before(held[0].due) {
				time.Sleep(100 * time.Microsecond)
				continue
			}
			m := held[0].m
			held = held[1:]
			if n := s.node(m.GetTo()); n != nil {
				if r := rep(n); r != nil {
					_ = r.Step(context.Background(), m)
				}
			}
		}
	}()
}

func (s *shardSim) isMetaVoter(id uint64) bool {
	return slices.ContainsFunc(s.metaPeers, func(p replica.Peer) bool { return p.ID == id })
}

func (s *shardSim) start(id uint64) {
	s.t.Helper()
	sh := s.shardOf[id]
	cfg := Config{
		Dir: filepath.Join(s.root, fmt.Sprint(id)), ID: id, ClientAddr: s.addr[id],
		Transport:    s.nets[sh].Endpoint(id),
		TickInterval: 10 * time.Millisecond,
		// No snapshotter: the log reaches every restarted and added node.
		MaxLogEntries: 1 << 30,
		Durability:    store.SyncInterval,
		Store:         &store.Options{CacheSize: 2 << 20, MemTableSize: 2 << 20},
		Cluster:       server.ClusterOptions{ProposeTimeout: 2 * time.Second},
		Sharding: &Sharding{Shard: sh, MetaDir: filepath.Join(s.root, fmt.Sprint(id, ".meta")),
			MetaRaftAddr: fmt.Sprintf("meta-%d:1", id), MetaPeers: s.metaPeers, MetaJoin: !s.isMetaVoter(id),
			NewMetaTransport: func(TransportHooks) (replica.Transport, error) { return s.metaNet.Endpoint(id), nil }},
	}
	if s.joined[id] {
		cfg.Join = true
	} else {
		cfg.Peers = s.peers[sh]
	}
	n, err := Start(cfg)
	if err != nil {
		s.t.Fatalf("start %d: %v", id, err)
	}
	var ln net.Listener
	for range 100 { // the port was closed just now: it may linger
		if ln, err = net.Listen("tcp", s.addr[id]); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		s.t.Fatalf("listen %d: %v", id, err)
	}
	go n.Serve(ln)
	s.mu.Lock()
	s.nodes[id] = n
	s.mu.Unlock()
	s.nets[sh].SetDown(id, false)
	s.metaNet.SetDown(id, false)
}

// kill stops a node at once, as when its machine dies: off both networks
// and its clients first, then its loops, replicas and stores stop (the
// stores close cleanly; crashes are faults_test.go's).
func (s *shardSim) kill(id uint64) {
	s.mu.Lock()
	n := s.nodes[id]
	delete(s.nodes, id)
	s.mu.Unlock()
	if n == nil {
		return
	}
	s.nets[s.shardOf[id]].SetDown(id, true)
	s.metaNet.SetDown(id, true)
	n.closeOnce.Do(func() {
		n.Server().Close()
		close(n.shardStop)
		<-n.shardDone
		n.stopSender()
		_ = n.Replica().Stop()
		for _, p := range n.DB().Packages() {
			p.Close()
		}
		if err := n.DB().Close(); err != nil {
			s.t.Errorf("close %d: %v", id, err)
		}
		if err := n.closeMeta(); err != nil {
			s.t.Errorf("close the metadata member of %d: %v", id, err)
		}
	})
}

func (s *shardSim) node(id uint64) *Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nodes[id]
}

func (s *shardSim) running() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []uint64
	for id := range s.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (s *shardSim) runningOf(sh uint32) []uint64 {
	var ids []uint64
	for _, id := range s.running() {
		if s.shardOf[id] == sh {
			ids = append(ids, id)
		}
	}
	return ids
}

// leader waits for a leader of shard sh among its running nodes.
func (s *shardSim) leader(sh uint32) uint64 {
	s.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, id := range s.runningOf(sh) {
			if n := s.node(id); n != nil && n.Replica().Status().Role == "leader" {
				return id
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.t.Fatalf("shard %d: no leader", sh)
	return 0
}

// settle waits until every running node of every shard applied its
// leader's commit, and every node holds the same map epoch.
func (s *shardSim) settle() {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for sh := uint32(1); sh <= simShards; sh++ {
		for {
			want := s.node(s.leader(sh)).Replica().Status().Commit
			ok := true
			for _, id := range s.runningOf(sh) {
				if n := s.node(id); n == nil || n.Replica().Status().Applied < want {
					ok = false
				}
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				s.t.Fatalf("shard %d: replicas did not catch up", sh)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// pending is the messages waiting in every running node's outboxes.
func (s *shardSim) pending() uint64 {
	s.t.Helper()
	var total uint64
	for _, id := range s.running() {
		n := s.node(id)
		if n == nil {
			continue
		}
		st, err := n.streams.Load().Status(time.Now())
		if err != nil {
			s.t.Fatalf("node %d: xstatus: %v", id, err)
		}
		for _, ts := range st.Targets {
			total += ts.Pending
		}
	}
	return total
}

// quiesce waits until every outbox is empty and every replica caught up,
// twice in a row (an applied message may send more).
func (s *shardSim) quiesce() {
	s.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	calm := 0
	for calm < 2 {
		s.settle()
		if p := s.pending(); p == 0 {
			calm++
		} else {
			calm = 0
			if time.Now().After(deadline) {
				s.t.Fatalf("%d cross-shard messages still pending", p)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// adminDo sends a command to node id's RESP address, retrying while the
// group elects a leader or the map is not there yet.
func (s *shardSim) adminDo(addr func() string, args ...any) any {
	s.t.Helper()
	var err error
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		c := redis.NewClient(&redis.Options{Addr: addr(), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 10 * time.Second})
		var v any
		v, err = c.Do(context.Background(), args...).Result()
		c.Close()
		if err == nil {
			return v
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("%v: %v", args, err)
	return nil
}

// createMap creates the slot map on node 21 (any node would do: it is
// proposed to the metadata group) and waits until every running node
// holds it. It returns TALLY.SHARDS CREATE's SHARD REPLICAS pairs.
func (s *shardSim) createMap() []any {
	s.t.Helper()
	var pairs []any
	for sh := uint32(1); sh <= simShards; sh++ {
		var rs []string
		for _, p := range s.peers[sh] {
			rs = append(rs, fmt.Sprintf("%d=%s/%s", p.ID, p.RaftAddr, p.ClientAddr))
		}
		pairs = append(pairs, sh, strings.Join(rs, ","))
	}
	s.adminDo(func() string { return s.addr[21] }, append([]any{"TALLY.SHARDS", "CREATE"}, pairs...)...)
	deadline := time.Now().Add(30 * time.Second)
	for _, id := range s.running() {
		for s.node(id).topo.View() == nil {
			if time.Now().After(deadline) {
				s.t.Fatalf("node %d has no map", id)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return pairs
}

// simOutcome classifies a write's error: nil acknowledged; errRetry did
// not apply (a redirect, an election); errUnknown may have applied.
var (
	errRetry   = errors.New("not applied: retry")
	errUnknown = errors.New("outcome unknown")
)

func simOutcome(err error) error {
	switch {
	case err == nil:
		return nil
	case strings.HasPrefix(err.Error(), "MOVED ") || strings.HasPrefix(err.Error(), "ASK ") ||
		strings.HasPrefix(err.Error(), "TRYAGAIN") || strings.HasPrefix(err.Error(), "CLUSTERDOWN"):
		return errRetry
	case strings.Contains(err.Error(), "may or may not have been applied") || isNetErr(err) ||
		errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "i/o timeout") ||
		strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "broken pipe"):
		return errUnknown
	}
	return err
}

// simModel is what the acknowledged writes say.
type simModel struct {
	follow    map[[2]int]bool // (user, author) -> follows, per the last write
	followUnk map[[2]int]bool // the last write of the pair has an unknown outcome
	posts     map[int]map[int]bool
	postUnk   map[int]int     // post -> author: published with an unknown outcome
	unpostUnk map[int]int     // post -> author: unpublished with an unknown outcome
	like      map[[2]int]bool // (item, user) -> liked
	likeUnk   map[[2]int]bool
	incrMax   map[int]int64 // posts:K likes: the largest acknowledged reply
	incrTries map[int]int64 // posts:K likes: increments sent
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

// TestShardedCluster drives follows, posts, unpublishes, likes, reads and
// HINCRBY through go-redis's ClusterClient against three shards and the
// metadata group while faults strike, then checks: each user's followees
// and each author's followers agree (the two sides of the edges live on
// different shards), counts equal set sizes, every home is exactly its
// followees' posts newest first, each once, feed unread counts the posts
// since a reset, like counts and acknowledged increments are there, every
// replica of a shard has the same logical dump, and Check passes on every
// node.
func TestShardedCluster(t *testing.T) {
	seed := uint64(envInt(t, "TALLY_SHARD_SEED", 1))
	steps := envInt(t, "TALLY_SHARD_STEPS", 300)
	t0 := time.Now()
	s := newShardSim(t)
	ctx := context.Background()

	pairs := s.createMap()
	// Bad TALLY.SHARDS requests are refused and change nothing: a second
	// CREATE, odd pairs, shard 0, a bad replica list, JOIN with a bad id.
	// (Leader hints may move the epoch meanwhile: the slots and shards
	// are what a bad request could change.)
	layout := func() string {
		m := s.node(21).meta.Map()
		out := fmt.Sprint(m.Ranges)
		for _, sh := range m.Shards {
			out += fmt.Sprint(sh.ID, sh.Replicas)
		}
		return out
	}
	before := layout()
	admin := redis.NewClient(&redis.Options{Addr: s.addr[21]})
	for _, bad := range [][]any{
		append([]any{"TALLY.SHARDS", "CREATE"}, pairs...),
		{"TALLY.SHARDS", "CREATE", 1, "1=a:1/127.0.0.1:1", 2},
		{"TALLY.SHARDS", "CREATE", 0, "1=a:1/127.0.0.1:1"},
		{"TALLY.SHARDS", "CREATE", 1, "x=nonsense"},
		{"TALLY.SHARDS", "JOIN", 0, "a:1", "127.0.0.1:1"},
	} {
		if err := admin.Do(ctx, bad...).Err(); err == nil {
			t.Fatalf("%v: accepted", bad)
		}
	}
	admin.Close()
	if got := layout(); got != before {
		t.Fatalf("refused TALLY.SHARDS requests changed the map:\n%s\nwas\n%s", got, before)
	}

	var addrs []string
	for _, id := range s.running() {
		addrs = append(addrs, s.addr[id])
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 8,
		DialTimeout: time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second})
	t.Cleanup(func() { c.Close() })

	// run sends one command until it applied or surely did not (errRetry is
	// retried; each retry is the same command, so a write's double apply
	// is only possible where go-redis itself retries, which the model
	// tolerates: follows, posts and likes are idempotent, increments are
	// checked as bounds).
	var retries, unknowns int
	var unknownErrs []string
	run := func(keyPos int8, args ...any) (any, error) {
		for i := 0; ; i++ {
			cmd := redis.NewCmd(ctx, args...)
			if keyPos > 0 {
				cmd.SetFirstKeyPos(keyPos)
			}
			_ = c.Process(ctx, cmd)
			v, err := cmd.Result()
			if errors.Is(err, redis.Nil) {
				err = nil
			}
			out := simOutcome(err)
			if out == errRetry || out == errUnknown {
				// go-redis reloads its slot map on MOVED, or every 10 s:
				// a dead or cut-off leader would get the writes until then.
				c.ReloadState(ctx)
			}
			if out == errRetry && i < 300 {
				retries++
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if out == errUnknown {
				unknowns++
				if len(unknownErrs) < 8 {
					unknownErrs = append(unknownErrs, fmt.Sprintf("%v: %v", args[0], err))
				}
			}
			if out != nil && out != errUnknown {
				return v, fmt.Errorf("%v: %w", args, err)
			}
			return v, out
		}
	}
	must := func(keyPos int8, args ...any) any {
		t.Helper()
		for range 50 {
			v, err := run(keyPos, args...)
			if err == nil {
				return v
			}
			if !errors.Is(err, errUnknown) {
				t.Fatalf("%v: %v", args, err)
			}
		}
		t.Fatalf("%v: no outcome after 50 tries", args)
		return nil
	}

	// Keyless schema writes are broadcast: wait until every shard has them.
	must(0, "TALLY.COUNTER", "ADD", "posts")
	must(0, "TALLY.COLUMN", "ADD", "posts", "likes")
	must(0, "LIKE.BUSINESS", "ADD", "video")
	const users, items, rows = 24, 16, 24
	s.quiesce()
	for k := range rows {
		must(0, "HINCRBY", fmt.Sprint("posts:", k), "likes", 0)
	}
	userShard := map[uint32]int{}
	for u := 1; u <= users; u++ {
		userShard[s.node(s.running()[0]).topo.View().ShardOf(server.Slot([]byte(strconv.Itoa(u)))).ID]++
	}
	if len(userShard) != simShards {
		t.Fatalf("users spread over shards %v: want every shard", userShard)
	}

	m := &simModel{follow: map[[2]int]bool{}, followUnk: map[[2]int]bool{}, posts: map[int]map[int]bool{},
		postUnk: map[int]int{}, unpostUnk: map[int]int{}, like: map[[2]int]bool{}, likeUnk: map[[2]int]bool{},
		incrMax: map[int]int64{}, incrTries: map[int]int64{}}
	for a := 1; a <= users; a++ {
		m.posts[a] = map[int]bool{}
	}
	rng := rand.New(rand.NewPCG(seed, 0x5ba4d))
	nextPost := 1000
	var errs []string
	fail := func(err error) {
		if len(errs) < 10 {
			errs = append(errs, err.Error())
		}
	}
	step := func() {
		switch r := rng.IntN(100); {
		case r < 30:
			u, a := 1+rng.IntN(users), 1+rng.IntN(users-1)
			if a >= u {
				a++
			}
			follow := rng.IntN(3) > 0
			verb := "TL.UNFOLLOW"
			if follow {
				verb = "TL.FOLLOW"
			}
			_, err := run(0, verb, u, a)
			switch {
			case err == nil:
				m.follow[[2]int{u, a}], m.followUnk[[2]int{u, a}] = follow, false
			case errors.Is(err, errUnknown):
				m.follow[[2]int{u, a}], m.followUnk[[2]int{u, a}] = follow, true
			default:
				fail(err)
			}
		case r < 50:
			a := 1 + rng.IntN(users)
			nextPost++
			_, err := run(0, "TL.POST", a, nextPost)
			switch {
			case err == nil:
				m.posts[a][nextPost] = true
			case errors.Is(err, errUnknown):
				m.postUnk[nextPost] = a
			default:
				fail(err)
			}
		case r < 55:
			a := 1 + rng.IntN(users)
			var ps []int
			for p := range m.posts[a] {
				ps = append(ps, p)
			}
			if len(ps) == 0 {
				return
			}
			slices.Sort(ps)
			p := ps[rng.IntN(len(ps))]
			_, err := run(0, "TL.UNPOST", a, p)
			switch {
			case err == nil:
				delete(m.posts[a], p)
			case errors.Is(err, errUnknown):
				delete(m.posts[a], p)
				m.unpostUnk[p] = a
			default:
				fail(err)
			}
		case r < 70:
			it, u := rng.IntN(items), 1+rng.IntN(users)
			liked := rng.IntN(3) > 0
			verb := "LIKE.UNLIKE"
			if liked {
				verb = "LIKE.LIKE"
			}
			_, err := run(2, verb, "video", it, u)
			switch {
			case err == nil:
				m.like[[2]int{it, u}], m.likeUnk[[2]int{it, u}] = liked, false
			case errors.Is(err, errUnknown):
				m.like[[2]int{it, u}], m.likeUnk[[2]int{it, u}] = liked, true
			default:
				fail(err)
			}
		case r < 80:
			k := rng.IntN(rows)
			m.incrTries[k]++
			v, err := run(0, "HINCRBY", fmt.Sprint("posts:", k), "likes", 1)
			switch {
			case err == nil:
				m.incrMax[k] = max(m.incrMax[k], v.(int64))
			case !errors.Is(err, errUnknown):
				fail(err)
			}
		case r < 90:
			if _, err := run(0, "TL.HOME", 1+rng.IntN(users), "LIMIT", 50); err != nil && !errors.Is(err, errUnknown) {
				fail(err)
			}
		default:
			if _, err := run(0, "UNREAD.FEED", 1+rng.IntN(users)); err != nil && !errors.Is(err, errUnknown) {
				fail(err)
			}
		}
	}

	// Faults, one every faultEvery steps, in turn.
	faultEvery := max(steps/8, 10)
	type restart struct {
		at int
		id uint64
	}
	var restarts []restart
	var partitioned chan struct{} // closed when the partition heals
	moved := false
	var faultLog []string
	fault := func(i, k int) {
		switch k % 4 {
		case 0: // a shard's leader dies, restarts later
			sh := uint32(1 + rng.IntN(simShards))
			id := s.leader(sh)
			s.kill(id)
			restarts = append(restarts, restart{i + 5 + rng.IntN(faultEvery/2+1), id})
			faultLog = append(faultLog, fmt.Sprintf("step %d: kill shard %d leader %d", i, sh, id))
		case 1: // a metadata voter dies, restarts later
			var vs []uint64
			for _, p := range s.metaPeers {
				if s.node(p.ID) != nil {
					vs = append(vs, p.ID)
				}
			}
			if len(vs) < 3 {
				return // another voter is down: keep the group's quorum
			}
			id := vs[rng.IntN(len(vs))]
			s.kill(id)
			restarts = append(restarts, restart{i + 5 + rng.IntN(faultEvery/2+1), id})
			faultLog = append(faultLog, fmt.Sprintf("step %d: kill metadata voter %d", i, id))
		case 2: // a shard's leader is cut off its followers for a while
			sh := uint32(1 + rng.IntN(simShards))
			id := s.leader(sh)
			for _, o := range s.runningOf(sh) {
				if o != id {
					s.nets[sh].Partition(id, o)
				}
			}
			nw, d := s.nets[sh], time.Duration(300+rng.IntN(700))*time.Millisecond
			healed := make(chan struct{})
			time.AfterFunc(d, func() { nw.Heal(); close(healed) })
			partitioned = healed
			faultLog = append(faultLog, fmt.Sprintf("step %d: partition shard %d leader %d for %v", i, sh, id, d))
		case 3: // a replica of a shard moves to a new node
			if moved {
				return
			}
			moved = true
			faultLog = append(faultLog, fmt.Sprintf("step %d: %s", i, s.move(uint32(1+rng.IntN(simShards)))))
		}
	}
	nfault := 0
	var slow []string // steps over 250ms: where the faults cost time
	for i := range steps {
		for j := 0; j < len(restarts); j++ {
			if restarts[j].at <= i {
				s.start(restarts[j].id)
				restarts = slices.Delete(restarts, j, j+1)
				j--
			}
		}
		if partitioned != nil {
			select {
			case <-partitioned:
				partitioned = nil
			default:
			}
		}
		if i > 0 && i%faultEvery == 0 && partitioned == nil && len(restarts) == 0 {
			fault(i, nfault)
			nfault++
		}
		t1 := time.Now()
		step()
		if d := time.Since(t1); d > 250*time.Millisecond {
			slow = append(slow, fmt.Sprintf("%d:%v", i, d.Round(10*time.Millisecond)))
		}
	}
	for _, r := range restarts {
		s.start(r.id)
	}
	if partitioned != nil {
		<-partitioned
	}
	for _, e := range errs {
		t.Errorf("write refused: %s", e)
	}
	tRun := time.Since(t0)

	s.quiesce()

	ids := func(args ...any) []int { // a paged list read to its end
		t.Helper()
		var out []int
		cursor := ""
		for {
			a := append([]any{}, args...)
			a = append(a, "LIMIT", 1000)
			if cursor != "" {
				a = append(a, "CURSOR", cursor)
			}
			v := must(0, a...)
			page, ok := v.([]any)
			if !ok || len(page) != 2 {
				t.Fatalf("%v = %v", args, v)
			}
			for _, it := range page[1].([]any) {
				if rec, ok := it.([]any); ok {
					it = rec[0]
				}
				n, _ := strconv.Atoi(fmt.Sprint(it))
				out = append(out, n)
			}
			if page[0] == nil {
				return out
			}
			cursor = fmt.Sprint(page[0])
		}
	}
	// Resolve the unknown outcomes by reading the truth back: the unknown
	// write was the last of its pair, so what the cluster holds now is
	// what the model must say. (The checks below then hold both sides of
	// each edge, the counts and the homes to it.)
	for p, unk := range m.followUnk {
		if unk {
			m.follow[p] = must(0, "TL.ISFOLLOWING", p[0], p[1]) == int64(1)
		}
	}
	for p, unk := range m.likeUnk {
		if unk {
			v, _ := must(3, "LIKE.STATES", "video", p[1], p[0]).([]any)
			if len(v) != 1 {
				t.Fatalf("LIKE.STATES video %d %d = %v", p[1], p[0], v)
			}
			m.like[p] = v[0] == "like"
		}
	}
	for p, a := range m.postUnk {
		if slices.Contains(ids("TL.POSTS", a), p) {
			m.posts[a][p] = true
		}
	}
	for p, a := range m.unpostUnk {
		if slices.Contains(ids("TL.POSTS", a), p) {
			m.posts[a][p] = true
		}
	}
	followees := map[int][]int{}
	followers := map[int][]int{}
	edges := 0
	for p, on := range m.follow {
		if on {
			followees[p[0]] = append(followees[p[0]], p[1])
			followers[p[1]] = append(followers[p[1]], p[0])
			edges++
		}
	}
	var homeSizes int
	for u := 1; u <= users; u++ {
		slices.Sort(followees[u])
		slices.Sort(followers[u])
		if got := ids("TL.FOLLOWEES", u); !slices.Equal(got, followees[u]) && !(len(got) == 0 && len(followees[u]) == 0) {
			t.Errorf("TL.FOLLOWEES %d = %v, model %v", u, got, followees[u])
		}
		got := ids("TL.FOLLOWERS", u)
		slices.Sort(got)
		if !slices.Equal(got, followers[u]) && !(len(got) == 0 && len(followers[u]) == 0) {
			t.Errorf("TL.FOLLOWERS %d = %v, model %v", u, got, followers[u])
		}
		var posts []int
		for p := range m.posts[u] {
			posts = append(posts, p)
		}
		slices.SortFunc(posts, func(x, y int) int { return y - x })
		if got := ids("TL.POSTS", u); !slices.Equal(got, posts) && !(len(got) == 0 && len(posts) == 0) {
			t.Errorf("TL.POSTS %d = %v, model %v", u, got, posts)
		}
		info := must(0, "TL.USER", u)
		want := map[string]int{"followers": len(followers[u]), "followees": len(followees[u]), "posts": len(posts)}
		if got := fieldInts(info); !reflect.DeepEqual(got, want) {
			t.Errorf("TL.USER %d = %v, model %v", u, got, want)
		}
	}
	if t.Failed() {
		return
	}
	home := func(u int) []int {
		var want []int
		for _, a := range followees[u] {
			for p := range m.posts[a] {
				want = append(want, p)
			}
		}
		slices.SortFunc(want, func(x, y int) int { return y - x })
		return want
	}
	deadline := time.Now().Add(30 * time.Second)
	for u := 1; u <= users; u++ {
		want := home(u)
		homeSizes += len(want)
		for {
			got := ids("TL.HOME", u)
			if slices.Equal(got, want) || len(got) == 0 && len(want) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("TL.HOME %d = %v, model %v (followees %v)", u, got, want, followees[u])
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var likeTotal int
	for it := range items {
		want := 0
		for u := 1; u <= users; u++ {
			if m.like[[2]int{it, u}] {
				want++
			}
		}
		likeTotal += want
		v := must(2, "LIKE.COUNTS", "video", it)
		arr, _ := v.([]any)
		if len(arr) != 1 {
			t.Fatalf("LIKE.COUNTS video %d = %v", it, v)
		}
		if got := fieldInts(arr[0]); got["likes"] != want || got["dislikes"] != 0 {
			t.Errorf("LIKE.COUNTS video %d = %v, model likes=%d", it, got, want)
		}
	}
	for k := range rows {
		got, err := c.HGet(ctx, fmt.Sprint("posts:", k), "likes").Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("posts:%d: %v", k, err)
		}
		if got < m.incrMax[k] || got > m.incrTries[k] {
			t.Errorf("posts:%d likes = %d, acknowledged up to %d of %d sent", k, got, m.incrMax[k], m.incrTries[k])
		}
	}

	// Feed unread against the pull-everything model: after a reset, each
	// author posts once more; a user's feed counts their followees' posts.
	for u := 1; u <= users; u++ {
		must(0, "UNREAD.FEEDRESET", u)
	}
	for a := 1; a <= users; a++ {
		nextPost++
		must(0, "TL.POST", a, nextPost)
		m.posts[a][nextPost] = true
	}
	s.quiesce()
	deadline = time.Now().Add(30 * time.Second)
	for u := 1; u <= users; u++ {
		for {
			v := must(0, "UNREAD.FEED", u)
			if got, _ := v.(int64); got == int64(len(followees[u])) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("UNREAD.FEED %d = %v, model %d (followees %v)", u, v, len(followees[u]), followees[u])
			}
			time.Sleep(50 * time.Millisecond)
		}
		if got, want := ids("TL.HOME", u), home(u); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("after the last posts: TL.HOME %d = %v, model %v", u, got, want)
		}
	}

	// Every replica of a shard holds the same data; Check passes everywhere.
	s.quiesce()
	for sh := uint32(1); sh <= simShards; sh++ {
		rs := s.runningOf(sh)
		var first map[string]any
		for _, id := range rs {
			d := dump(t, s.addr[id])
			if first == nil {
				first = d
				continue
			}
			for k, v := range first {
				if !reflect.DeepEqual(v, d[k]) {
					t.Errorf("shard %d replica %d: %s = %v, replica %d has %v", sh, id, k, d[k], rs[0], v)
				}
			}
		}
	}
	for _, id := range s.running() {
		if err := s.node(id).DB().Check(); err != nil {
			t.Errorf("node %d: %v", id, err)
		}
	}
	t.Logf("seed %d, %d steps in %v (total %v): users per shard %v; %d retries of refused writes, %d unknown outcomes "+
		"(%d follows, %d likes, %d posts, %d unposts resolved); %d follow edges, %d home entries, %d likes; faults: %s; slow steps: %v; unknown outcomes: %q",
		seed, steps, tRun.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond), userShard, retries, unknowns,
		countTrue(m.followUnk), countTrue(m.likeUnk), len(m.postUnk), len(m.unpostUnk), edges, homeSizes, likeTotal,
		strings.Join(faultLog, "; "), slow, unknownErrs)
}

func countTrue[K comparable](m map[K]bool) int {
	n := 0
	for _, v := range m {
		if v {
			n++
		}
	}
	return n
}

// fieldInts reads a RESP3 map or a RESP2 field/value array of integers.
func fieldInts(v any) map[string]int {
	out := map[string]int{}
	switch x := v.(type) {
	case map[any]any:
		for k, val := range x {
			n, _ := strconv.Atoi(fmt.Sprint(val))
			out[fmt.Sprint(k)] = n
		}
	case []any:
		for i := 0; i+1 < len(x); i += 2 {
			n, _ := strconv.Atoi(fmt.Sprint(x[i+1]))
			out[fmt.Sprint(x[i])] = n
		}
	}
	return out
}

// move moves a follower of shard sh to a new node: the node starts empty
// with Join, is added as a learner on the shard's leader, promoted once it
// caught up, and the follower is removed and stopped.
func (s *shardSim) move(sh uint32) string {
	s.t.Helper()
	id := uint64(sh)*10 + 4
	s.addr[id] = freeAddr(s.t)
	s.shardOf[id] = sh
	s.joined[id] = true
	s.start(id)
	leaderAddr := func() string { return s.addr[s.leader(sh)] }
	s.adminDo(leaderAddr, "TALLY.CLUSTER", "ADDLEARNER", id, simRaftAddr(id), s.addr[id])
	deadline := time.Now().Add(30 * time.Second)
	for s.node(id).Replica().Status().Applied < s.node(s.leader(sh)).Replica().Status().Commit {
		if time.Now().After(deadline) {
			s.t.Fatalf("the new node %d of shard %d did not catch up", id, sh)
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.adminDo(leaderAddr, "TALLY.CLUSTER", "PROMOTE", id)
	var from uint64
	lead := s.leader(sh)
	for _, o := range s.runningOf(sh) {
		if o != lead && o != id && !s.isMetaVoter(o) {
			from = o
		}
	}
	if from == 0 {
		return fmt.Sprintf("shard %d: added node %d, no follower to remove", sh, id)
	}
	s.adminDo(leaderAddr, "TALLY.CLUSTER", "REMOVE", from)
	s.kill(from)
	s.mu.Lock()
	s.removed[from] = true
	s.mu.Unlock()
	return fmt.Sprintf("shard %d: moved node %d to new node %d", sh, from, id)
}
