package cluster

// A replica in a multi-shard cluster (issue 23): the metadata group's
// member on this node, the topology the server routes by, and the loop
// that keeps the map's view of this node's shard (leader hint, replicas)
// current.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/replica"
	"github.com/tallydb/tally/server"
	"github.com/tallydb/tally/shard"
	"github.com/tallydb/tally/shard/meta"
	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/xshard"
)

// Sharding places a replica in a multi-shard cluster.
type Sharding struct {
	// Shard is this replica's shard (1 or more): the Raft group of
	// Config.Peers.
	Shard uint32
	// MetaDir is the directory of this node's member of the metadata
	// group (a small store of its own, outside Config.Dir).
	MetaDir string
	// MetaRaftAddr is the address the metadata group's transport listens
	// on, announced when this node joins the group.
	MetaRaftAddr string
	// MetaPeers are the metadata group's voters; each ClientAddr is that
	// node's RESP address (where TALLY.SHARDS JOIN is sent).
	MetaPeers []replica.Peer
	// MetaJoin makes this node a learner of the metadata group: it asks a
	// voter to add it (TALLY.SHARDS JOIN) until it is a member. Without
	// it this node must be one of MetaPeers.
	MetaJoin bool
	// NewMetaTransport makes the metadata group's transport, as
	// Config.NewTransport makes the shard's.
	NewMetaTransport func(TransportHooks) (replica.Transport, error)
}

// shardLoopInterval is how often a replica checks that the map's view of
// its shard is current and, while not a member of the metadata group yet,
// asks to join it.
const shardLoopInterval = 200 * time.Millisecond

func (s *Sharding) validate(cfg *Config) error {
	var errs []error
	if s.Shard == 0 {
		errs = append(errs, errors.New("shard id 0"))
	}
	if s.MetaDir == "" {
		errs = append(errs, errors.New("no metadata directory"))
	}
	if s.NewMetaTransport == nil {
		errs = append(errs, errors.New("no metadata transport"))
	}
	if len(s.MetaPeers) == 0 {
		errs = append(errs, errors.New("no metadata peers"))
	}
	if !s.MetaJoin && !slices.ContainsFunc(s.MetaPeers, func(p replica.Peer) bool { return p.ID == cfg.ID }) {
		errs = append(errs, fmt.Errorf("replica %d is not one of the metadata voters and does not join", cfg.ID))
	}
	if s.MetaJoin && s.MetaRaftAddr == "" {
		errs = append(errs, errors.New("joining the metadata group needs its raft address"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: sharding: %v", ErrInvalidConfig, err)
	}
	return nil
}

// topology is the map as the server routes by it: the view of the
// latest map the metadata group applied on this node (nil before the
// cluster is created: every slot is then CLUSTERDOWN).
type topology struct {
	self uint32
	view atomic.Pointer[server.TopologyView]
}

func (t *topology) View() *server.TopologyView { return t.view.Load() }

func (t *topology) update(m *shard.Map) {
	if m == nil {
		return
	}
	if v := t.view.Load(); v != nil && v.Epoch >= m.Epoch {
		return
	}
	t.view.Store(viewOf(m, t.self))
}

// viewOf converts a map to the server's view of it.
func viewOf(m *shard.Map, self uint32) *server.TopologyView {
	v := &server.TopologyView{Epoch: m.Epoch, Self: self}
	for _, s := range m.Shards {
		ts := server.TopologyShard{ID: s.ID, Leader: s.Leader}
		for _, r := range s.Replicas {
			ts.Nodes = append(ts.Nodes, server.TopologyNode{ID: r.ID, Addr: r.ClientAddr})
		}
		v.Shards = append(v.Shards, ts)
	}
	for _, r := range m.Ranges {
		v.Ranges = append(v.Ranges, server.SlotRange{From: int(r.From), To: int(r.To), Shard: r.Shard})
	}
	return v
}

// startSharding starts this node's member of the metadata group and the
// topology (before the shard's replica: the server routes by it from its
// first command).
func (n *Node) startSharding() error {
	s := n.cfg.Sharding
	if err := s.validate(&n.cfg); err != nil {
		return err
	}
	n.topo = &topology{self: s.Shard}
	var g atomic.Pointer[meta.Group]
	mc := meta.Config{
		ID:         n.cfg.ID,
		Dir:        s.MetaDir,
		Peers:      s.MetaPeers,
		Join:       s.MetaJoin,
		Durability: n.cfg.Durability,
		Logger:     n.cfg.Logger.With("group", "meta"),
		NewTransport: func(h meta.TransportHooks) (replica.Transport, error) {
			return s.NewMetaTransport(TransportHooks{Deliver: h.Deliver, Unreachable: h.Unreachable, SnapshotStatus: h.SnapshotStatus})
		},
		TickInterval: n.cfg.TickInterval, ElectionTicks: n.cfg.ElectionTicks, HeartbeatTicks: n.cfg.HeartbeatTicks,
	}
	if s.MetaJoin {
		mc.Peers = nil
	}
	grp, err := meta.Start(mc)
	if err != nil {
		return err
	}
	g.Store(grp)
	n.meta = grp
	grp.OnChange(n.topo.update)
	n.topo.update(grp.Map())
	return nil
}

// registerSharding opens the cross-shard streams on a database the node
// opened (Start's, or a snapshot install's) and registers the sharded
// cluster's commands with its server.
func (n *Node) registerSharding(srv *server.Server, db *tallydb.DB) error {
	st, err := xshard.Open(db.Store(), n.cfg.Sharding.Shard, &xshard.Options{Now: n.clock.Now})
	if err != nil {
		return err
	}
	n.streams.Store(st)
	if err := srv.Register(xshard.Commands(st)...); err != nil {
		return err
	}
	return srv.Register(n.shardCommands()...)
}

// mapWait bounds how long an apply waits for this node's first slot map
// (a learner of the metadata group may apply its shard's entries before
// the map reaches it).
const mapWait = time.Minute

// view returns the slot map's view, waiting for the first map if there is
// none yet: an apply must decide from the map the leader decided from.
func (n *Node) view() (*server.TopologyView, error) {
	if v := n.topo.View(); v != nil {
		return v, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), mapWait)
	defer cancel()
	m, err := n.meta.WaitEpoch(ctx, 1)
	if err != nil {
		return nil, fmt.Errorf("cluster: no slot map after %v: %w", mapWait, err)
	}
	n.topo.update(m)
	return n.topo.View(), nil
}

// broadcast is ClusterOptions.Broadcast: a write with no keys (a schema
// change, DOT.MARK, NOTICE.POST) applied on this shard from a client's
// entry goes on to every other shard through the cross-shard streams, in
// the entry's first commit (before the command's own), so every shard
// applies it exactly once. The messages for every shard commit together
// (all or none). A command the local shard then refuses (a counter that
// exists) is refused the same way on the others. The streams' own
// commands and TALLY.EXEC (the CLI's commands, classified one by one) are
// not broadcast.
func (n *Node) broadcast(_ *server.Command, args [][]byte) error {
	switch strings.ToUpper(string(args[0])) {
	case xshard.CmdRecv, xshard.CmdAck, "TALLY.EXEC":
		return nil
	}
	v, err := n.view()
	if err != nil {
		return err
	}
	// Every target's message in one batch: a refused append (a full
	// outbox) sends to no shard rather than to some.
	b := n.DB().Store().NewBatch()
	defer b.Close()
	stage := n.streams.Load().Stage(b)
	for _, s := range v.Shards {
		if s.ID == v.Self {
			continue
		}
		if _, err := stage.Append(s.ID, args); err != nil {
			return err
		}
	}
	if len(v.Shards) < 2 {
		return nil
	}
	return b.Commit()
}

// remote is the timeline's Remote on a sharded replica: a user's shard is
// the slot map's for Slot(decimal id), and messages go into the cross-shard
// outbox in the batch of the write that causes them.
type remote struct {
	n *Node
	// stage is the outbox stage of the batch being built: the timeline
	// may send several messages from one batch (one Stage per batch use,
	// so their sequence numbers follow each other). Only the serial apply
	// sends.
	stage struct {
		sync.Mutex
		b   *store.Batch
		use uint64
		st  *xshard.Stage
	}
}

func (r *remote) Local(user uint64) bool { return r.ShardOf(user) == r.n.cfg.Sharding.Shard }

func (r *remote) ShardOf(user uint64) uint32 {
	v, err := r.n.view()
	if err != nil {
		// No map after mapWait: nothing can be routed here either; the
		// apply goes on as if the user were local rather than stall the
		// shard.
		r.n.cfg.Logger.Error("timeline: no slot map for a user's shard", "user", user, "err", err)
		return r.n.cfg.Sharding.Shard
	}
	s := v.ShardOf(server.Slot(strconv.AppendUint(nil, user, 10)))
	if s == nil {
		return r.n.cfg.Sharding.Shard
	}
	return s.ID
}

func (r *remote) Send(b *store.Batch, shard uint32, argv [][]byte) error {
	r.stage.Lock()
	defer r.stage.Unlock()
	if r.stage.b != b || r.stage.use != b.Use() || r.stage.st == nil {
		st := r.n.streams.Load()
		if st == nil {
			return fmt.Errorf("cluster: no cross-shard streams on this store")
		}
		r.stage.b, r.stage.use, r.stage.st = b, b.Use(), st.Stage(b)
	}
	_, err := r.stage.st.Append(shard, argv)
	return err
}

// startSender starts the delivery of this shard's outboxes (it sends only
// while this replica leads the shard).
func (n *Node) startSender() error {
	snd, err := xshard.NewSender(xshard.SenderConfig{
		Streams:  n.streams.Load,
		Leader:   leadership{n},
		Peers:    shardPeers{n},
		Proposer: proposer{n},
		Password: n.cfg.password(),
		Logger:   n.cfg.Logger.With("part", "xshard"),
	})
	if err != nil {
		return err
	}
	n.sender = snd
	ctx, cancel := context.WithCancel(context.Background())
	n.senderStop = cancel
	n.senderDone = make(chan struct{})
	go func() {
		defer close(n.senderDone)
		_ = snd.Run(ctx)
	}()
	return nil
}

// stopSender stops the outbox delivery (Close).
func (n *Node) stopSender() {
	if n.senderStop != nil {
		n.senderStop()
		<-n.senderDone
	}
}

type leadership struct{ n *Node }

func (l leadership) IsLeader() bool { return l.n.rep.Status().Role == "leader" }

type shardPeers struct{ n *Node }

func (p shardPeers) LeaderAddr(_ context.Context, id uint32) (string, error) {
	v := p.n.topo.View()
	if v == nil {
		return "", errors.New("cluster: no slot map yet")
	}
	s := v.Shard(id)
	if s == nil {
		return "", fmt.Errorf("cluster: no shard %d in the slot map", id)
	}
	for _, nd := range s.Nodes {
		if nd.ID == s.Leader {
			return nd.Addr, nil
		}
	}
	if len(s.Nodes) == 0 {
		return "", fmt.Errorf("cluster: shard %d has no replicas", id)
	}
	return s.Nodes[0].Addr, nil
}

type proposer struct{ n *Node }

func (p proposer) Propose(ctx context.Context, argv [][]byte) error {
	data, err := server.EncodeCommand(argv)
	if err != nil {
		return err
	}
	reply, err := p.n.ad.Propose(ctx, data)
	if err != nil {
		return err
	}
	if len(reply) > 0 && reply[0] == '-' {
		return fmt.Errorf("cluster: %s", strings.TrimSpace(string(reply[1:])))
	}
	return nil
}

// shardLoop keeps the map's view of this shard current while this
// replica leads it (the leader hint and the replica list, so every node's
// CLUSTER SLOTS and MOVED name the right addresses), and joins the
// metadata group while this node is not a member yet. It runs until
// Close.
func (n *Node) shardLoop() {
	defer close(n.shardDone)
	t := time.NewTicker(shardLoopInterval)
	defer t.Stop()
	var lastJoin time.Time
	for {
		select {
		case <-n.shardStop:
			return
		case <-t.C:
		}
		if n.cfg.Sharding.MetaJoin && !n.metaMember() && time.Since(lastJoin) > time.Second {
			lastJoin = time.Now()
			n.joinMeta()
			continue
		}
		n.publishShard()
	}
}

// metaMember reports whether this node is a member of the metadata group.
func (n *Node) metaMember() bool {
	st := n.meta.Replica().Status()
	return slices.ContainsFunc(st.Members, func(m replica.Member) bool { return m.ID == n.cfg.ID })
}

// joinMeta asks each metadata voter in turn to add this node as a learner.
func (n *Node) joinMeta() {
	s := n.cfg.Sharding
	for _, p := range s.MetaPeers {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rc := redis.NewClient(&redis.Options{Addr: p.ClientAddr, MaxRetries: -1, DialTimeout: time.Second,
			ReadTimeout: 5 * time.Second, Password: n.cfg.password()})
		err := rc.Do(ctx, "TALLY.SHARDS", "JOIN", n.cfg.ID, s.MetaRaftAddr, n.co.Addr).Err()
		rc.Close()
		cancel()
		if err == nil {
			n.cfg.Logger.Info("joined the metadata group", "via", p.ClientAddr)
			return
		}
	}
}

// publishShard proposes this shard's leader hint and replica list to the
// metadata group when this replica leads the shard and the map differs.
func (n *Node) publishShard() {
	st := n.rep.Status()
	if st.Role != "leader" {
		return
	}
	m := n.meta.Map()
	if m == nil {
		return
	}
	sh := m.Shard(n.cfg.Sharding.Shard)
	if sh == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if want := replicasOf(st.Members); !slices.Equal(want, sh.Replicas) && len(want) > 0 {
		if _, err := n.meta.Propose(ctx, shard.SetReplicas(sh.ID, want)); err != nil && !errors.Is(err, shard.ErrUnchanged) {
			n.cfg.Logger.Debug("publish the shard's replicas", "err", err)
		}
		return
	}
	if sh.Leader != st.ID || sh.LeaderTerm < st.Term {
		if _, err := n.meta.Propose(ctx, shard.SetLeader(sh.ID, st.ID, st.Term)); err != nil &&
			!errors.Is(err, shard.ErrUnchanged) && !errors.Is(err, shard.ErrStaleTerm) {
			n.cfg.Logger.Debug("publish the shard's leader", "err", err)
		}
	}
}

// replicasOf is the group's member table as a shard's replicas, voters
// first (a map's first replica is where MOVED points without a hint).
func replicasOf(members []replica.Member) []shard.Replica {
	var out []shard.Replica
	for _, voter := range []bool{true, false} {
		for _, m := range members {
			if m.Voter == voter {
				out = append(out, shard.Replica{ID: m.ID, RaftAddr: m.RaftAddr, ClientAddr: m.ClientAddr})
			}
		}
	}
	return out
}

// ParseReplicas reads a replica list "ID=RAFT_ADDR/CLIENT_ADDR,..." (the
// form of tally serve's --peers): ids 1 or more and distinct, addresses
// HOST:PORT.
func ParseReplicas(s string) ([]replica.Peer, error) {
	var out []replica.Peer
	seen := map[uint64]bool{}
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		idStr, addrs, ok := strings.Cut(item, "=")
		raft, client, ok2 := strings.Cut(addrs, "/")
		id, err := strconv.ParseUint(idStr, 10, 64)
		if !ok || !ok2 || err != nil || id == 0 {
			return nil, fmt.Errorf("%w: bad replica %q: want ID=RAFT_HOST:PORT/CLIENT_HOST:PORT", ErrInvalidConfig, item)
		}
		for _, a := range []string{raft, client} {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return nil, fmt.Errorf("%w: bad replica %q: %q is not HOST:PORT", ErrInvalidConfig, item, a)
			}
		}
		if seen[id] {
			return nil, fmt.Errorf("%w: replica id %d twice", ErrInvalidConfig, id)
		}
		seen[id] = true
		out = append(out, replica.Peer{ID: id, RaftAddr: raft, ClientAddr: client})
	}
	return out, nil
}
