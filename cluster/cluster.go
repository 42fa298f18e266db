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
//     once through crashes);
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
	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/timeline"
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
	NewTransport func(deliver func(*pb.Message)) (replica.Transport, error)
	// Snapshots, if set, makes and installs snapshots for replicas behind
	// the truncated log.
	Snapshots replica.Snapshotter
	// TickInterval, ElectionTicks, HeartbeatTicks and MaxLogEntries are
	// the replica's (replica.Config); zero means its defaults.
	TickInterval                  time.Duration
	ElectionTicks, HeartbeatTicks int
	MaxLogEntries                 uint64
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
}

// Node is one running replica: the database, the server and the Raft
// replica.
type Node struct {
	cfg   Config
	db    *tallydb.DB
	srv   *server.Server
	rep   *replica.Node
	clock *replica.Clock

	stopped   chan struct{} // closed when the replica stopped on its own
	closeOnce sync.Once
	closeErr  error
	failed    atomic.Pointer[error]
}

// Start opens the database in cfg.Dir (creating it if the directory is
// new or empty: a host that must not create one checks first), starts the replica and registers
// every command with the server. The server is not serving yet: call
// Serve.
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
	n := &Node{cfg: cfg, clock: replica.NewClock(), stopped: make(chan struct{})}
	so := store.Options{}
	if cfg.Store != nil {
		so = *cfg.Store
	}
	so.Durability = cfg.Durability
	so.Families = append(so.Families, replica.Families()...)
	to := timeline.Options{}
	if cfg.Timeline != nil {
		to = *cfg.Timeline
	}
	to.Now = n.clock.Now
	lo := likes.Options{}
	if cfg.Likes != nil {
		lo = *cfg.Likes
	}
	lo.Now = n.clock.Now
	db, err := tallydb.Open(cfg.Dir, &tallydb.Options{Store: &so, Timeline: &to, Likes: &lo})
	if err != nil {
		return nil, err
	}
	n.db = db
	srv, err := server.New(db.Store(), cfg.Server)
	if err != nil {
		return nil, n.fail(err)
	}
	n.srv = srv
	if err := srv.RegisterDB(db); err != nil {
		return nil, n.fail(err)
	}
	if err := srv.Register(n.commands()...); err != nil {
		return nil, n.fail(err)
	}
	tr := cfg.Transport
	var rep atomic.Pointer[replica.Node]
	if cfg.NewTransport != nil {
		tr, err = cfg.NewTransport(func(m *pb.Message) {
			if r := rep.Load(); r != nil {
				_ = r.Step(context.Background(), m)
			}
		})
		if err != nil {
			return nil, n.fail(err)
		}
	}
	r, err := replica.Start(replica.Config{
		ID:             cfg.ID,
		DB:             db.Store(),
		Peers:          cfg.Peers,
		Join:           cfg.Join,
		Transport:      tr,
		Apply:          n.apply,
		Snapshots:      cfg.Snapshots,
		Clock:          n.clock,
		Sync:           cfg.Durability == store.SyncAlways,
		TickInterval:   cfg.TickInterval,
		ElectionTicks:  cfg.ElectionTicks,
		HeartbeatTicks: cfg.HeartbeatTicks,
		MaxLogEntries:  cfg.MaxLogEntries,
		Logger:         cfg.Logger,
	})
	if err != nil {
		if tr != nil {
			tr.Close()
		}
		return nil, n.fail(err)
	}
	n.rep = r
	rep.Store(r)
	co := cfg.Cluster
	if co.Addr == "" {
		co.Addr = cfg.ClientAddr
	}
	if err := srv.SetReplication(&adapter{r: r, tick: tickOf(cfg)}, co); err != nil {
		_ = r.Stop()
		return nil, n.fail(err)
	}
	return n, nil
}

func tickOf(cfg Config) time.Duration {
	if cfg.TickInterval > 0 {
		return cfg.TickInterval
	}
	return 100 * time.Millisecond
}

// fail closes what Start opened and returns err.
func (n *Node) fail(err error) error {
	if n.srv != nil {
		n.srv.Close()
	}
	return errors.Join(err, n.db.Close())
}

// apply is the replica's Apply: the server runs the entry's commands, and
// a store that failed under them makes the entry fail (it is applied
// again after a restart) rather than count as applied with error replies.
func (n *Node) apply(_ uint64, data []byte) ([]byte, error) {
	reply := n.srv.Apply(data)
	if err := n.db.Store().Writable(); err != nil {
		n.failed.Store(&err)
		return nil, err
	}
	return reply, nil
}

// DB returns the database.
func (n *Node) DB() *tallydb.DB { return n.db }

// Server returns the RESP server.
func (n *Node) Server() *server.Server { return n.srv }

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

// Serve serves RESP clients on ln until Close.
func (n *Node) Serve(ln net.Listener) error { return n.srv.Serve(ln) }

// Close shuts the replica down: a leader hands leadership to the most
// caught-up voter first (waiting up to ctx's deadline, or 5 seconds), then
// the server finishes the commands it received (within ctx), the replica
// stops, the store checkpoints and closes.
func (n *Node) Close(ctx context.Context) error {
	n.closeOnce.Do(func() {
		var errs []error
		if n.rep.Status().Role == "leader" && len(n.rep.Status().Members) > 1 {
			tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := n.rep.TransferLeadership(tctx); err != nil && !errors.Is(err, replica.ErrNoTransferee) {
				n.cfg.Logger.Warn("leadership transfer before shutdown failed", "err", err)
			}
			cancel()
		}
		if err := n.srv.Shutdown(ctx); err != nil && !errors.Is(err, server.ErrServerClosed) {
			errs = append(errs, err)
		}
		if err := n.rep.Stop(); err != nil && !errors.Is(err, replica.ErrStopped) {
			errs = append(errs, err)
		}
		for _, p := range n.db.Packages() {
			p.Close()
		}
		if n.db.Store().Writable() == nil {
			errs = append(errs, n.db.Store().Checkpoint())
		}
		errs = append(errs, n.db.Close())
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

// adapter is the replica as server.Replication sees it.
type adapter struct {
	r    *replica.Node
	tick time.Duration
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
