package meta

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/tallydb/tally/replica"
	"github.com/tallydb/tally/shard"
	"github.com/tallydb/tally/store"
)

// ErrInvalidConfig is returned by Start for a configuration that cannot
// work.
var ErrInvalidConfig = errors.New("meta: invalid configuration")

// ErrClosed: the group was closed.
var ErrClosed = errors.New("meta: closed")

// Config configures a member of the metadata group.
type Config struct {
	// ID is this member's Raft id in the metadata group (not 0). It may
	// equal the process's data replica id: the groups are separate.
	ID uint64
	// Dir is the directory of the group's own store.
	Dir string
	// Peers are the first voters of a new group (ignored once the store
	// holds the group's state).
	Peers []replica.Peer
	// Join starts a member with no configuration that waits to be added
	// to the group as a learner (Replica().AddLearner on a member that is
	// the leader).
	Join bool
	// Transport carries the group's Raft messages; NewTransport, if set,
	// makes it from the hooks that deliver received messages (called once
	// by Start). One of them is required.
	Transport    replica.Transport
	NewTransport func(TransportHooks) (replica.Transport, error)
	// Durability is the store's and the Raft log's (as cluster.Config's).
	// The default is store.SyncAlways.
	Durability store.Durability
	// Store holds further store options (a test's FS, cache sizes). The
	// default is a small store: 1 MiB cache and memtable, no background
	// work.
	Store *store.Options
	// TickInterval, ElectionTicks, HeartbeatTicks and MaxLogEntries are
	// the replica's (replica.Config); zero means its defaults.
	TickInterval                  time.Duration
	ElectionTicks, HeartbeatTicks int
	MaxLogEntries                 uint64
	// Logger receives the replica's messages. The default discards them.
	Logger *slog.Logger
}

// TransportHooks are what a transport made by Config.NewTransport calls
// (as cluster.TransportHooks): Deliver with each received message,
// Unreachable with a peer a message could not be sent to, SnapshotStatus
// with a snapshot that could not be sent. Messages that arrive before
// the replica runs are dropped (Raft retries).
type TransportHooks struct {
	Deliver        func(*pb.Message)
	Unreachable    func(id uint64)
	SnapshotStatus func(id uint64, ok bool)
}

// Group is this process's member of the metadata group. Its methods are
// safe for concurrent use.
type Group struct {
	cfg Config
	db  *store.DB
	fam *store.Family
	rep *replica.Node
	log *slog.Logger

	// st is the state machine, owned by the replica's apply loop.
	st *state
	// cur is the current map, published after each stored change.
	cur atomic.Pointer[shard.Map]

	reqBase uint64
	reqSeq  atomic.Uint64

	// mu guards the change notification: changed is closed and replaced
	// whenever the map changes; fns are OnChange's callbacks.
	mu      sync.Mutex
	changed chan struct{}
	fns     []func(*shard.Map)
	closed  bool

	stop      chan struct{}
	notified  chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// Start opens the group's store in cfg.Dir (creating it if new), loads
// the map and starts the member's replica.
func Start(cfg Config) (*Group, error) {
	var errs []error
	if cfg.ID == 0 {
		errs = append(errs, errors.New("ID 0"))
	}
	if cfg.Dir == "" {
		errs = append(errs, errors.New("no Dir"))
	}
	if (cfg.Transport == nil) == (cfg.NewTransport == nil) {
		errs = append(errs, errors.New("give exactly one of Transport and NewTransport"))
	}
	if !cfg.Join && len(cfg.Peers) == 0 {
		errs = append(errs, errors.New("no Peers and not Join"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	so := store.Options{CacheSize: 1 << 20, MemTableSize: 1 << 20, DisableBackground: true}
	if cfg.Store != nil {
		so = *cfg.Store
	}
	so.Durability = cfg.Durability
	so.Families = append(append(so.Families[:len(so.Families):len(so.Families)], replica.Families()...), familySpec)
	db, err := store.Open(cfg.Dir, &so)
	if err != nil {
		return nil, err
	}
	g := &Group{cfg: cfg, db: db, log: cfg.Logger, changed: make(chan struct{}), stop: make(chan struct{}), notified: make(chan struct{})}
	fail := func(err error) (*Group, error) { return nil, errors.Join(err, db.Close()) }
	if g.fam, err = db.Family(familySpec.Name); err != nil {
		return fail(err)
	}
	if g.st, err = g.load(); err != nil {
		return fail(err)
	}
	g.cur.Store(g.st.m)
	var seed [8]byte
	if _, err := crand.Read(seed[:]); err != nil {
		return fail(err)
	}
	g.reqBase = binary.BigEndian.Uint64(seed[:]) &^ (1<<32 - 1) // room for 2^32 requests per start
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
			return fail(err)
		}
	}
	r, err := replica.Start(replica.Config{
		ID:               cfg.ID,
		DB:               db,
		Peers:            cfg.Peers,
		Join:             cfg.Join,
		Transport:        tr,
		Apply:            g.apply,
		Snapshots:        (*snapshots)(g),
		Sync:             cfg.Durability == store.SyncAlways,
		TickInterval:     cfg.TickInterval,
		ElectionTicks:    cfg.ElectionTicks,
		HeartbeatTicks:   cfg.HeartbeatTicks,
		MaxLogEntries:    cfg.MaxLogEntries,
		ForwardProposals: true,
		Logger:           cfg.Logger,
	})
	if err != nil {
		if tr != nil {
			tr.Close()
		}
		return fail(err)
	}
	g.rep = r
	rep.Store(r)
	go g.notifyLoop()
	return g, nil
}

// load reads the stored state (a new state if there is none).
func (g *Group) load() (*state, error) {
	v, ok, err := g.fam.Get(keyState, nil)
	if err != nil {
		return nil, err
	}
	if !ok {
		return newState(), nil
	}
	return decodeState(v)
}

// store writes s as the group's state and publishes its map. It runs on
// the replica's loop (Apply, Install).
func (g *Group) store(s *state) error {
	b := g.db.NewBatch()
	defer b.Close()
	if err := g.fam.Put(b, keyState, appendState(nil, s)); err != nil {
		return err
	}
	if err := b.Commit(); err != nil {
		return err
	}
	g.st = s
	if old := g.cur.Load(); old == nil || s.m == nil || old.Epoch != s.m.Epoch || !old.Equal(s.m) {
		g.cur.Store(s.m)
		g.mu.Lock()
		close(g.changed)
		g.changed = make(chan struct{})
		g.mu.Unlock()
	}
	return nil
}

// apply is the replica's Apply: one command on the state machine.
func (g *Group) apply(index uint64, data []byte) ([]byte, error) {
	if index <= g.st.index {
		return nil, nil // applied before a restart or covered by an install
	}
	s := g.st.clone()
	reply := s.apply(index, data)
	if err := g.store(s); err != nil {
		return nil, err
	}
	return reply, nil
}

// Map returns the current map, nil before the Create op applied here. The
// map is shared and immutable: do not modify it.
func (g *Group) Map() *shard.Map { return g.cur.Load() }

// WaitEpoch waits until this member's map has at least epoch and returns
// it.
func (g *Group) WaitEpoch(ctx context.Context, epoch uint64) (*shard.Map, error) {
	for {
		g.mu.Lock()
		ch, closed := g.changed, g.closed
		g.mu.Unlock()
		if m := g.Map(); m != nil && m.Epoch >= epoch {
			return m, nil
		}
		if closed {
			return nil, ErrClosed
		}
		select {
		case <-ch:
		case <-g.stop:
			return nil, ErrClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// OnChange registers fn, called on the group's notification goroutine
// with the map after each change seen (in epoch order; a change made
// while fn runs may be skipped for a later one, never the latest). fn
// must not block for long: it delays the other callbacks, not the group.
// It is not called with the map current at registration: read Map.
func (g *Group) OnChange(fn func(*shard.Map)) {
	g.mu.Lock()
	g.fns = append(g.fns, fn)
	g.mu.Unlock()
}

func (g *Group) notifyLoop() {
	defer close(g.notified)
	var last *shard.Map
	for {
		g.mu.Lock()
		ch := g.changed
		fns := g.fns
		g.mu.Unlock()
		if m := g.Map(); m != last && m != nil && (last == nil || m.Epoch > last.Epoch) {
			last = m
			for _, fn := range fns {
				fn(m)
			}
			continue
		}
		select {
		case <-ch:
		case <-g.stop:
			return
		}
	}
}

// Propose applies op through the group's log from any member (a
// follower's or learner's proposal is forwarded to the leader) and
// returns the map it made, once it applied on this member. A refused op
// returns shard's named error (shard.ErrStaleTerm, ...), the same on every
// member. A proposal whose fate is unknown, or dropped by a leader change,
// is retried with the same request id until ctx ends, so the op applies at
// most once; when a retry finds it applied already, the map returned is
// this member's current map (at the op's epoch or later).
func (g *Group) Propose(ctx context.Context, op shard.Op) (*shard.Map, error) {
	id := reqID{node: g.cfg.ID, seq: g.reqBase + g.reqSeq.Add(1)}
	data := appendCommand(nil, id, op)
	tick := g.cfg.TickInterval
	if tick <= 0 {
		tick = 100 * time.Millisecond
	}
	for {
		reply, err := g.rep.Propose(ctx, data)
		if err == nil {
			return g.decodeReply(reply)
		}
		if !errors.Is(err, replica.ErrProposalDropped) && !errors.Is(err, replica.ErrResultUnknown) && !errors.Is(err, replica.ErrNotLeader) {
			return nil, err
		}
		g.log.Debug("meta: retrying a proposal", "op", op.Kind.String(), "err", err)
		t := time.NewTimer(tick)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (last attempt: %w)", ctx.Err(), err)
		}
	}
}

func (g *Group) decodeReply(b []byte) (*shard.Map, error) {
	if len(b) == 0 {
		// Only an entry re-applied after a restart has no reply, and no
		// proposal of this start waits for one.
		return nil, fmt.Errorf("%w: empty reply", ErrCorrupt)
	}
	switch b[0] {
	case replyApplied:
		return shard.Decode(b[1:])
	case replyRefused:
		if len(b) < 2 {
			break
		}
		return nil, errOf(b[1], string(b[2:]))
	case replyRepeated:
		if len(b) < 2 {
			break
		}
		code := b[1]
		epoch, n := binary.Uvarint(b[2:])
		if n <= 0 {
			break
		}
		if code != 0 {
			return nil, errOf(code, string(b[2+n:]))
		}
		if m := g.Map(); m != nil && m.Epoch >= epoch {
			return m, nil
		}
		return nil, fmt.Errorf("%w: repeated request at epoch %d, map behind", ErrCorrupt, epoch)
	}
	return nil, fmt.Errorf("%w: reply kind %d", ErrCorrupt, b[0])
}

// Replica returns the member's replica (Status, AddLearner, Promote,
// Remove, TransferLeadership).
func (g *Group) Replica() *replica.Node { return g.rep }

// Close stops the member: a leader hands leadership to another voter
// first (up to 5 seconds), then the replica stops and the store closes.
func (g *Group) Close() error {
	g.closeOnce.Do(func() {
		if st := g.rep.Status(); st.Role == "leader" && len(st.Members) > 1 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := g.rep.TransferLeadership(ctx); err != nil && !errors.Is(err, replica.ErrNoTransferee) {
				g.log.Warn("meta: leadership transfer before close failed", "err", err)
			}
			cancel()
		}
		g.closeErr = g.halt()
	})
	return g.closeErr
}

// halt stops the replica and closes the store without a transfer (Close,
// and a test's crash).
func (g *Group) halt() error {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	close(g.stop)
	<-g.notified
	var errs []error
	if err := g.rep.Stop(); err != nil && !errors.Is(err, replica.ErrStopped) {
		errs = append(errs, err)
	}
	errs = append(errs, g.db.Close())
	return errors.Join(errs...)
}

// snapshots is the group's replica.Snapshotter: a snapshot is the state
// value itself (see the package doc).
type snapshots Group

// Create returns the encoded state; the replica's loop does not apply
// while it runs, so g.st is the state at index.
func (s *snapshots) Create(_ context.Context, index uint64) ([]byte, error) {
	g := (*Group)(s)
	st := g.st.clone()
	if st.index < index {
		st.index = index // entries up to index that wrote nothing here
	}
	return appendState(nil, st), nil
}

// Install writes the received state (at entry index) as the group's.
func (s *snapshots) Install(_ context.Context, index uint64, data []byte) (*store.DB, error) {
	g := (*Group)(s)
	st, err := decodeState(data)
	if err != nil {
		return nil, err
	}
	if st.index < index {
		st.index = index
	}
	if err := g.store(st); err != nil {
		return nil, err
	}
	g.log.Info("meta: installed a snapshot", "index", index, "epoch", epochOf(st.m))
	return nil, nil
}
