// Package cluster runs one replica of a replicated tally database: a
// tally.DB (every package on one store), the RESP server in cluster mode
// (package server) and a Raft replica (package replica) wired together, as
// `tally serve --cluster` runs it and as a host embeds it.
//
// The wiring is the one place where the three meet:
//
//   - writes a client sends are encoded by the server and proposed to the
//     replica; every replica applies committed entries through
//     server.Server.Apply, serially, inside store.DB.ApplyEntry (exactly
//     once through crashes), or a run of them at once through
//     server.Server.ApplyRun, in one store commit that marks every entry
//     of the run applied (store.Batch.MarkEntries);
//   - the packages' clocks (timeline and likes Options.Now) are the
//     replica's Clock, set to each entry's timestamp before it applies, so
//     every replica evaluates a command at the same time;
//   - an entry that fails because the store failed (a full disk, an I/O
//     error) stops the replica instead of being skipped (Node.Err reports
//     it; tally serve exits non-zero and a supervisor restarts it);
//   - shutdown hands leadership to another voter first (Close), so a
//     rolling restart fails no write.
//
// See docs/ARCHITECTURE.md "Replication" for the design and what each
// durability mode can lose.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/likes"
	"github.com/tallydb/tally/replica"
	"github.com/tallydb/tally/server"
	"github.com/tallydb/tally/shard/meta"
	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/timeline"
	"github.com/tallydb/tally/xshard"
)

// ErrInvalidConfig is returned by Start for a configuration that cannot
// work.
var ErrInvalidConfig = errors.New("cluster: invalid configuration")

// Config configures a replica.
type Config struct {
	// Dir is the store's directory.
	Dir string
	// ID is this replica's id in the group (not 0).
	ID uint64
	// ClientAddr is the address clients reach this replica's RESP server
	// at ("ip:port"), announced in CLUSTER SLOTS and MOVED replies.
	ClientAddr string
	// Peers are the voters of a new group (ignored once the store holds
	// the group's state). Each names its RaftAddr and ClientAddr.
	Peers []replica.Peer
	// Join starts a replica with no configuration that waits to be added
	// to an existing group (TALLY.CLUSTER ADDLEARNER on the leader).
	Join bool
	// Durability is the store's and the Raft log's: with store.SyncAlways
	// (the default) a replica fsyncs the log before it acknowledges an
	// entry; with SyncInterval or SyncNever it does not (see
	// docs/ARCHITECTURE.md for what a simultaneous power loss of a
	// majority can lose).
	Durability store.Durability
	// Transport carries Raft messages; NewTransport, if set, makes it from
	// the function that delivers received messages (called once by Start).
	// One of them is required.
	Transport    replica.Transport
	NewTransport func(TransportHooks) (replica.Transport, error)
	// NewSnapshots, if set, makes the Snapshotter that creates and
	// installs snapshots for replicas behind the truncated log (called
	// once by Start, after the transport). reopen is what an install calls
	// once the received copy is staged: it closes this node's server,
	// packages and store, opens the database again on dir (store.Open
	// swaps the staged copy in) with a new server, and returns the new
	// store. Clients are disconnected meanwhile and reconnect.
	NewSnapshots func(db *store.DB, reopen func(dir string) (*store.DB, error)) (replica.Snapshotter, error)
	// Register, if set, registers the host's own commands with a server
	// (Start's, and the one a snapshot install opens).
	Register func(srv *server.Server, db *tallydb.DB) error
	// TickInterval, ElectionTicks, HeartbeatTicks, MaxLogEntries,
	// SnapshotTimeout and MaxHeldLogBytes are the replica's
	// (replica.Config); zero means its defaults.
	TickInterval                  time.Duration
	ElectionTicks, HeartbeatTicks int
	MaxLogEntries                 uint64
	SnapshotTimeout               time.Duration
	MaxHeldLogBytes               uint64
	// Server configures the RESP server; Cluster its cluster mode (Addr
	// defaults to ClientAddr).
	Server  *server.Options
	Cluster server.ClusterOptions
	// Store, Timeline and Likes are the packages' options (their clocks
	// are replaced by the replica's).
	Store    *store.Options
	Timeline *timeline.Options
	Likes    *likes.Options
	// Logger receives the replica's messages. The default discards them.
	Logger *slog.Logger
	// Sharding, if set, makes this replica part of a multi-shard cluster
	// (shards.go); nil is one shard serving every slot.
	Sharding *Sharding
}

// password is the server's password, for the node's own RESP calls to
// other nodes.
func (c *Config) password() string {
	if c.Server == nil {
		return ""
	}
	return c.Server.Password
}

// TransportHooks are what a transport made by Config.NewTransport calls:
// Deliver with each received message (the replica's Step), Unreachable
// with a peer a message could not be sent to, SnapshotStatus with a
// snapshot that could not be sent (the replica's ReportUnreachable and
// ReportSnapshot). They may be called before Start returns: messages that
// arrive before the replica runs are dropped (Raft retries).
type TransportHooks struct {
	Deliver        func(*pb.Message)
	Unreachable    func(id uint64)
	SnapshotStatus func(id uint64, ok bool)
}

// Node is one running replica: the database, the server and the Raft
// replica.
type Node struct {
	cfg      Config
	openOpts tallydb.Options
	co       server.ClusterOptions
	ad       *adapter
	dbp      atomic.Pointer[tallydb.DB]
	srvp     atomic.Pointer[server.Server]
	rep      *replica.Node
	clock    *replica.Clock
	metrics  *raftCollector

	// swap is held while a snapshot install replaces the database and
	// the server (reopen); swapped counts the replacements, so Serve
	// knows a server closed for one from a server closed for good.
	swap struct {
		sync.Mutex
		n       int
		done    chan struct{}
		closing bool
	}

	// The multi-shard cluster's parts (nil without Config.Sharding).
	meta       *meta.Group
	topo       *topology
	streams    atomic.Pointer[xshard.Streams]
	sender     *xshard.Sender
	caller     *shardCaller // gathered reads' parts (gather.go); nil unsharded
	senderStop context.CancelFunc
	senderDone chan struct{}
	shardStop  chan struct{}
	shardDone  chan struct{}

	closeOnce sync.Once
	closeErr  error
	failed    atomic.Pointer[error]
}

// Start opens the database in cfg.Dir (creating it if the directory is
// new or empty: a host that must not create one checks first), starts the
// replica and registers every command with the server. The server is not
// serving yet: call Serve.
func Start(cfg Config) (*Node, error) {
	if cfg.ID == 0 {
		return nil, fmt.Errorf("%w: replica id 0", ErrInvalidConfig)
	}
	if cfg.ClientAddr == "" {
		return nil, fmt.Errorf("%w: no client address", ErrInvalidConfig)
	}
	if (cfg.Transport == nil) == (cfg.NewTransport == nil) {
		return nil, fmt.Errorf("%w: give exactly one of Transport and NewTransport", ErrInvalidConfig)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	n := newNode(cfg)
	if cfg.Sharding != nil {
		if err := n.startSharding(); err != nil {
			return nil, err
		}
		n.co.Topology = n.topo
		n.co.Broadcast = n.broadcast
		n.caller = newShardCaller(cfg.password())
		n.co.Gather = n.caller
	}
	if err := n.open(cfg.Dir); err != nil {
		return nil, errors.Join(err, n.closeMeta())
	}
	db := n.DB()
	var err error
	tr := cfg.Transport
	var rep atomic.Pointer[replica.Node]
	if cfg.NewTransport != nil {
		tr, err = cfg.NewTransport(TransportHooks{
			Deliver: func(m *pb.Message) {
				if r := rep.Load(); r != nil {
					_ = r.Step(context.Background(), m)
				}
			},
			Unreachable: func(id uint64) {
				if r := rep.Load(); r != nil {
					r.ReportUnreachable(id)
				}
			},
			SnapshotStatus: func(id uint64, ok bool) {
				if r := rep.Load(); r != nil {
					r.ReportSnapshot(id, ok)
				}
			},
		})
		if err != nil {
			return nil, n.fail(err)
		}
	}
	var snaps replica.Snapshotter
	if cfg.NewSnapshots != nil {
		if snaps, err = cfg.NewSnapshots(db.Store(), n.reopen); err != nil {
			if tr != nil {
				tr.Close()
			}
			return nil, n.fail(err)
		}
		n.metrics.snaps = snaps
	}
	// The server is in cluster mode before the replica applies its first
	// entry: a restarted replica applies its log at once, and the apply
	// reads the cluster options (Broadcast: a keyless entry applied before
	// would not reach the other shards from this replica's outbox). The
	// adapter gets its replica below, before anything serves.
	n.ad = &adapter{}
	if err := n.Server().SetReplication(n.ad, n.co); err != nil {
		if tr != nil {
			tr.Close()
		}
		return nil, n.fail(err)
	}
	r, err := replica.Start(replica.Config{
		ID:              cfg.ID,
		DB:              db.Store(),
		Peers:           cfg.Peers,
		Join:            cfg.Join,
		Transport:       tr,
		Apply:           n.apply,
		ApplyRun:        n.applyRun,
		Snapshots:       snaps,
		Clock:           n.clock,
		Sync:            cfg.Durability == store.SyncAlways,
		TickInterval:    cfg.TickInterval,
		ElectionTicks:   cfg.ElectionTicks,
		HeartbeatTicks:  cfg.HeartbeatTicks,
		MaxLogEntries:   cfg.MaxLogEntries,
		SnapshotTimeout: cfg.SnapshotTimeout,
		MaxHeldLogBytes: cfg.MaxHeldLogBytes,
		ObserveApply:    func(d time.Duration) { n.metrics.apply.Observe(d.Seconds()) },
		Logger:          cfg.Logger,
	})
	if err != nil {
		if tr != nil {
			tr.Close()
		}
		return nil, n.fail(err)
	}
	n.rep = r
	rep.Store(r)
	n.ad.r = r
	if n.meta != nil {
		if err := n.startSender(); err != nil {
			_ = r.Stop()
			return nil, n.fail(err)
		}
		n.shardStop, n.shardDone = make(chan struct{}), make(chan struct{})
		go n.shardLoop()
	}
	return n, nil
}

// newNode makes a Node for cfg with its packages' options (Start's first
// part, before anything runs; the deterministic simulation builds its
// nodes with it).
func newNode(cfg Config) *Node {
	n := &Node{cfg: cfg, clock: replica.NewClock()}
	n.metrics = newRaftCollector(n)
	so := store.Options{}
	if cfg.Store != nil {
		so = *cfg.Store
	}
	so.Durability = cfg.Durability
	so.Families = append(so.Families, replica.Families()...)
	if cfg.Sharding != nil {
		so.Families = append(so.Families, xshard.Families()...)
	}
	to := timeline.Options{}
	if cfg.Timeline != nil {
		to = *cfg.Timeline
	}
	to.Now = n.clock.Now
	if cfg.Sharding != nil {
		to.Remote = &remote{n: n}
	}
	lo := likes.Options{}
	if cfg.Likes != nil {
		lo = *cfg.Likes
	}
	lo.Now = n.clock.Now
	n.openOpts = tallydb.Options{Store: &so, Timeline: &to, Likes: &lo}
	n.co = cfg.Cluster
	if n.co.Addr == "" {
		n.co.Addr = cfg.ClientAddr
	}
	return n
}

// open opens the database in dir and a server on it with every command
// registered (cluster mode is set by the caller).
func (n *Node) open(dir string) error {
	db, err := tallydb.Open(dir, &n.openOpts)
	if err != nil {
		return err
	}
	srv, err := server.New(db.Store(), n.cfg.Server)
	if err == nil {
		err = srv.RegisterDB(db)
	}
	if err == nil {
		err = srv.Register(n.commands()...)
	}
	if err == nil && n.cfg.Sharding != nil {
		err = n.registerSharding(srv, db)
	}
	if err == nil {
		err = srv.RegisterCollector(n.metrics)
	}
	if err == nil && n.cfg.Register != nil {
		err = n.cfg.Register(srv, db)
	}
	if err != nil {
		if srv != nil {
			srv.Close()
		}
		return errors.Join(err, db.Close())
	}
	n.dbp.Store(db)
	n.srvp.Store(srv)
	return nil
}

// reopen is a snapshot install's Reopen: the server, the packages and the
// store close, the database opens again on dir (store.Open swaps the
// staged copy in) with a new server in cluster mode, and Serve goes on
// with it on the same address. The replica's loop waits in Install
// meanwhile, so no entry applies.
func (n *Node) reopen(dir string) (*store.DB, error) {
	n.swap.Lock()
	if n.swap.closing {
		n.swap.Unlock()
		return nil, fmt.Errorf("cluster: closing")
	}
	n.swap.n++
	done := make(chan struct{})
	n.swap.done = done
	n.swap.Unlock()
	defer close(done)
	n.Server().Close()
	db := n.DB()
	for _, p := range db.Packages() {
		p.Close()
	}
	if err := db.Close(); err != nil {
		n.cfg.Logger.Warn("closing the store before a snapshot install", "err", err)
	}
	if err := n.open(dir); err != nil {
		return nil, err
	}
	if err := n.Server().SetReplication(n.ad, n.co); err != nil {
		return nil, err
	}
	n.cfg.Logger.Info("reopened the database on an installed snapshot")
	return n.DB().Store(), nil
}

// fail closes what Start opened and returns err.
func (n *Node) fail(err error) error {
	n.stopSender()
	n.Server().Close()
	return errors.Join(err, n.DB().Close(), n.closeMeta())
}

// closeMeta closes the metadata group's member, if this node has one.
func (n *Node) closeMeta() error {
	if n.meta == nil {
		return nil
	}
	return n.meta.Close()
}

// apply is the replica's Apply: the server runs the entry's commands, and
// a store that failed under them makes the entry fail (it is applied
// again after a restart) rather than count as applied with error replies.
func (n *Node) apply(_ uint64, data []byte) ([]byte, error) {
	reply := n.Server().Apply(data)
	if err := n.DB().Store().Writable(); err != nil {
		n.failed.Store(&err)
		return nil, err
	}
	return reply, nil
}

// applyRun is the replica's ApplyRun: the server folds a run of entries
// of batchable writes into one store commit (server.Server.ApplyRun); a
// store that failed makes the run fail as in apply.
func (n *Node) applyRun(first uint64, cmds [][]byte) (int, [][]byte, bool, error) {
	took, replies, folded := n.Server().ApplyRun(first, cmds)
	if err := n.DB().Store().Writable(); err != nil {
		n.failed.Store(&err)
		return 0, nil, false, err
	}
	return took, replies, folded, nil
}

// DB returns the database (a new one after a snapshot install).
func (n *Node) DB() *tallydb.DB { return n.dbp.Load() }

// Server returns the RESP server (a new one after a snapshot install).
func (n *Node) Server() *server.Server { return n.srvp.Load() }

// Replica returns the Raft replica.
func (n *Node) Replica() *replica.Node { return n.rep }

// Clock returns the clock the packages read.
func (n *Node) Clock() *replica.Clock { return n.clock }

// Err returns the error that stopped the replica on its own (a store that
// failed under an entry), or nil.
func (n *Node) Err() error {
	if p := n.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// Serve serves RESP clients on ln until Close. A snapshot install closes
// the server and opens another: Serve then listens again on ln's address
// and serves on.
func (n *Node) Serve(ln net.Listener) error {
	addr := ln.Addr().String()
	for {
		n.swap.Lock()
		before := n.swap.n
		n.swap.Unlock()
		err := n.Server().Serve(ln)
		n.swap.Lock()
		swapped, done, closing := n.swap.n != before, n.swap.done, n.swap.closing
		n.swap.Unlock()
		if !swapped || closing {
			return err
		}
		<-done
		for i := 0; ; i++ {
			if ln, err = net.Listen("tcp", addr); err == nil {
				break
			}
			if i == 50 {
				return fmt.Errorf("cluster: listen again on %s after a snapshot install: %w", addr, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// Close shuts the replica down: a leader hands leadership to the most
// caught-up voter first (waiting up to ctx's deadline, or 5 seconds), then
// the server finishes the commands it received (within ctx), the replica
// stops, the store checkpoints and closes.
func (n *Node) Close(ctx context.Context) error {
	n.closeOnce.Do(func() {
		n.swap.Lock()
		n.swap.closing = true
		n.swap.Unlock()
		var errs []error
		if n.rep.Status().Role == "leader" && len(n.rep.Status().Members) > 1 {
			tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := n.rep.TransferLeadership(tctx); err != nil && !errors.Is(err, replica.ErrNoTransferee) {
				n.cfg.Logger.Warn("leadership transfer before shutdown failed", "err", err)
			}
			cancel()
		}
		if n.shardStop != nil {
			close(n.shardStop)
			<-n.shardDone
		}
		n.stopSender()
		if err := n.Server().Shutdown(ctx); err != nil && !errors.Is(err, server.ErrServerClosed) {
			errs = append(errs, err)
		}
		if n.caller != nil {
			n.caller.Close()
		}
		if err := n.rep.Stop(); err != nil && !errors.Is(err, replica.ErrStopped) {
			errs = append(errs, err)
		}
		db := n.DB()
		for _, p := range db.Packages() {
			p.Close()
		}
		if db.Store().Writable() == nil {
			errs = append(errs, db.Store().Checkpoint())
		}
		errs = append(errs, db.Close(), n.closeMeta())
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

// adapter is the replica as server.Replication sees it.
type adapter struct {
	r *replica.Node
}

func (a *adapter) Propose(ctx context.Context, data []byte) ([]byte, error) {
	reply, err := a.r.Propose(ctx, data)
	return reply, a.err(err)
}

func (a *adapter) ReadIndex(ctx context.Context) error { return a.err(a.r.ReadIndex(ctx)) }

// err maps the replica's errors to the server's: a follower names the
// leader; a proposal that surely did not apply may be retried.
func (a *adapter) err(err error) error {
	var nl *replica.NotLeaderError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &nl):
		return &server.NotLeaderError{LeaderID: nl.Leader.ID, Addr: nl.Leader.ClientAddr}
	case errors.Is(err, replica.ErrProposalDropped):
		return fmt.Errorf("%w: %w", server.ErrTryAgain, err)
	}
	return err
}

func (a *adapter) Status() server.ReplicationStatus {
	st := a.r.Status()
	out := server.ReplicationStatus{
		Role:       roleOf(st.Role),
		ID:         st.ID,
		LeaderID:   st.Leader.ID,
		LeaderAddr: st.Leader.ClientAddr,
		Term:       st.Term,
		Commit:     st.Commit,
		Applied:    st.Applied,
	}
	if out.Role != server.RoleLeader && st.Leader.ID != 0 {
		out.LastLeaderContact = time.Now().Add(-st.LastLeaderContact)
	}
	for _, m := range st.Members {
		sm := server.Member{ID: m.ID, Addr: m.ClientAddr, Voter: m.Voter, Match: m.Match}
		switch {
		case m.ID == st.ID:
			sm.Active = true
			if out.Role != server.RoleLeader {
				sm.Match = st.Applied
			}
		case out.Role == server.RoleLeader:
			sm.Active = m.Match > 0
		}
		if st.LogLast > sm.Match {
			sm.Lag = st.LogLast - sm.Match
		}
		if m.ID == st.ID && out.Role == server.RoleLeader {
			sm.Match, sm.Lag = st.LogLast, 0
		}
		out.Members = append(out.Members, sm)
	}
	return out
}

func roleOf(r string) server.Role {
	switch r {
	case "leader":
		return server.RoleLeader
	case "candidate", "precandidate":
		return server.RoleCandidate
	case "learner":
		return server.RoleLearner
	}
	return server.RoleFollower
}
