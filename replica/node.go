package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/tallydb/tally/store"
)

// Errors of a replica, for errors.Is.
var (
	// ErrNotLeader: a write or membership change was sent to a replica that
	// is not the leader. The error is a *NotLeaderError naming the leader
	// when it is known.
	ErrNotLeader = errors.New("replica: not the leader")
	// ErrProposalDropped: the command was not applied and never will be
	// (raft refused it, or its entry was replaced by another leader's).
	// Retrying it is safe.
	ErrProposalDropped = errors.New("replica: proposal dropped")
	// ErrResultUnknown: the replica cannot tell whether the command
	// applied (its entry was covered by a snapshot this replica installed).
	ErrResultUnknown = errors.New("replica: proposal result unknown")
	// ErrStopped: the node is stopped, or stopped itself after a storage
	// failure. An in-flight command may or may not have applied.
	ErrStopped = errors.New("replica: stopped")
	// ErrInvalidConfig: Start was given a Config it cannot run with.
	ErrInvalidConfig = errors.New("replica: invalid config")
	// ErrNotCaughtUp: Promote was asked for a learner whose log is behind
	// the commit index.
	ErrNotCaughtUp = errors.New("replica: learner not caught up")
	// ErrUnknownMember: the id is not a member (or not a learner, for
	// Promote).
	ErrUnknownMember = errors.New("replica: unknown member")
	// ErrNoTransferee: leadership cannot be handed over: no other voter.
	ErrNoTransferee = errors.New("replica: no voter to transfer leadership to")
)

// NotLeaderError is the error of a write sent to a follower: Leader is the
// leader this replica knows of (zero if none).
type NotLeaderError struct{ Leader Peer }

func (e *NotLeaderError) Error() string {
	if e.Leader.ID == 0 {
		return "replica: not the leader (leader unknown)"
	}
	return fmt.Sprintf("replica: not the leader (leader %d at %s)", e.Leader.ID, e.Leader.ClientAddr)
}

// Unwrap makes errors.Is(err, ErrNotLeader) hold.
func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }

// Transport carries Raft messages between replicas. Send must not block
// for long (queue and return; a message it cannot deliver is dropped, and
// raft retries). The receiving side delivers messages with Node.Step.
type Transport interface {
	Send(msgs []*pb.Message)
	Close() error
}

// PeerUpdater is implemented by a transport that learns the members'
// addresses from the group: the node calls it with the member table
// whenever it changes.
type PeerUpdater interface {
	UpdatePeers(peers []Peer)
}

// Config configures a replica.
type Config struct {
	// ID is this replica's Raft id (not 0).
	ID uint64
	// DB is the store holding the Raft families and the state machine's
	// data.
	DB *store.DB
	// Peers are the bootstrap voters of a new group (ignored when the store
	// already holds Raft state).
	Peers []Peer
	// Join starts with no configuration, to be added by the group (as a
	// learner).
	Join bool
	// Transport sends messages to the other replicas. Stop closes it.
	Transport Transport
	// Apply runs a committed command, inside store.ApplyEntry; its result
	// is the reply Propose returns on the proposing replica. It must be
	// deterministic: the same command on the same state gives the same
	// writes on every replica.
	//
	// An error means the entry could not be applied here (the store
	// failed: a full disk, an I/O error), not that the command failed (a
	// command's own error is part of its reply, the same on every
	// replica): the replica stops with it (ErrStopped wrapping it) without
	// recording the entry as applied, and applies it again when restarted,
	// so no replica skips an entry another applied.
	Apply func(index uint64, data []byte) ([]byte, error)
	// ApplyRun, if set, applies a run of consecutive committed commands at
	// once (cmds[k] is entry first+k's command, as Apply gets it), so a
	// Ready's many small entries cost one store commit instead of one each.
	// It returns how many entries n (1 <= n <= len(cmds)) at the start of
	// cmds it took, and either folded true with their replies (replies[k]
	// is what Apply would have returned for entry first+k), having applied
	// them in one store commit marked with store.Batch.MarkEntries(first,
	// first+n-1), or folded false, having changed nothing: the replica then
	// applies those n entries through Apply one at a time. It is never
	// called inside store.DB.ApplyEntry, and only for entries above the
	// store's AppliedIndex. Clock is not set to the entries' timestamps
	// while it runs (it is at the last applied entry's; an entry left to
	// Apply gets its own), so it must fold only commands that do not read
	// the clock. An error is treated as Apply's.
	ApplyRun func(first uint64, cmds [][]byte) (n int, replies [][]byte, folded bool, err error)
	// Snapshots creates and installs snapshots; nil: a replica behind the
	// truncated log cannot catch up (see snapshot.go).
	Snapshots Snapshotter
	// Clock is set to each entry's timestamp before it applies. The
	// default is a new Clock.
	Clock *Clock
	// Now is the leader's wall clock for entry timestamps. The default is
	// time.Now.
	Now func() time.Time
	// Sync fsyncs the Raft log before a replica acknowledges an entry
	// (durability sync). The default is false.
	Sync bool
	// TickInterval is the Raft tick. The default is 100ms.
	TickInterval time.Duration
	// ElectionTicks and HeartbeatTicks are the election timeout and the
	// heartbeat interval in ticks. The defaults are 10 and 1.
	ElectionTicks, HeartbeatTicks int
	// MaxLogEntries is the most log entries kept behind the applied index.
	// The default is 10000.
	MaxLogEntries uint64
	// SnapshotTimeout is how long a leader waits on a snapshot it sent
	// with no sign of progress before it counts the snapshot failed (raft
	// then probes the replica and may send another). Signs of progress:
	// the message sent, and, when the Snapshotter is a SnapshotActivity
	// (CheckpointSnapshotter), a chunk of the snapshot's checkpoint
	// served. Until then the leader sends that replica nothing but
	// heartbeats and keeps the log after the snapshot's index (up to
	// MaxHeldLogBytes), so the replica goes on from the log once it
	// installed it. A receiver whose Prepare failed says so at once
	// (SnapshotPreparer). The default is 30s.
	SnapshotTimeout time.Duration
	// MaxHeldLogBytes bounds the log a leader keeps in memory for a
	// replica installing a snapshot, beyond MaxLogEntries (entry data
	// plus a fixed overhead per entry): past it the log is truncated as
	// usual and the replica needs another snapshot after the one it
	// installs. The default is 256 MiB.
	MaxHeldLogBytes uint64
	// ForwardProposals lets a follower or learner propose: raft forwards
	// the command to the leader, and Propose on this replica returns once
	// the entry applied here (forward.go). A replica that knows no leader
	// fails the proposal with ErrProposalDropped (also a *NotLeaderError);
	// one whose forwarded command does not show up in its log within a few
	// election timeouts fails it with ErrResultUnknown. The default is
	// false: a follower answers ErrNotLeader (the data shards, whose
	// clients follow MOVED).
	ForwardProposals bool
	// ObserveApply, if set, is told how long each entry took to apply
	// (the host's latency histogram); it runs on the replica's loop and
	// must be quick.
	ObserveApply func(time.Duration)
	// serialPersist makes a Ready's log write after its sends and applies
	// instead of beside them (persist), so a run driven by one goroutine
	// (the deterministic simulation) does the same on every run.
	serialPersist bool
	// Logger receives the replica's and raft's messages. The default
	// discards them.
	Logger *slog.Logger
}

func (cfg *Config) withDefaults() (Config, error) {
	c := *cfg
	if c.Clock == nil {
		c.Clock = NewClock()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.TickInterval <= 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	if c.ElectionTicks <= 0 {
		c.ElectionTicks = 10
	}
	if c.HeartbeatTicks <= 0 {
		c.HeartbeatTicks = 1
	}
	if c.MaxLogEntries == 0 {
		c.MaxLogEntries = 10000
	}
	if c.SnapshotTimeout <= 0 {
		c.SnapshotTimeout = 30 * time.Second
	}
	if c.MaxHeldLogBytes == 0 {
		c.MaxHeldLogBytes = 256 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	var errs []error
	if c.ID == 0 {
		errs = append(errs, errors.New("ID 0"))
	}
	if c.DB == nil {
		errs = append(errs, errors.New("no DB"))
	}
	if c.Transport == nil {
		errs = append(errs, errors.New("no Transport"))
	}
	if c.Apply == nil {
		errs = append(errs, errors.New("no Apply"))
	}
	if c.HeartbeatTicks >= c.ElectionTicks {
		errs = append(errs, fmt.Errorf("HeartbeatTicks %d not below ElectionTicks %d", c.HeartbeatTicks, c.ElectionTicks))
	}
	for _, p := range c.Peers {
		if err := validPeer(p); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return c, nil
}

// Member is a member of the group as a replica sees it.
type Member struct {
	Peer
	Voter bool
	// Match is the highest log index known to be on the member (the
	// leader's view; 0 elsewhere).
	Match uint64
}

// Status is a replica's state.
type Status struct {
	ID      uint64
	Role    string // "leader", "follower", "candidate", "precandidate", "learner"
	Term    uint64
	Leader  Peer // zero if unknown
	Commit  uint64
	Applied uint64
	Members []Member
	// LastLeaderContact is the time since the last message from the
	// leader (in ticks of TickInterval).
	LastLeaderContact time.Duration
	LogFirst, LogLast uint64
}

// Node is a running replica: a goroutine drives the Ready loop (core.go).
// All methods are safe for concurrent use.
type Node struct {
	cfg   Config
	c     *core // owned by the loop goroutine
	recvc chan *pb.Message
	ctlc  chan func(*core)
	// Proposals wait in props for the loop, which takes them all at once
	// (takeProposals); propc (capacity 1) wakes it. A proposal costs its
	// caller one hand-off to the loop and one back with the reply.
	propMu sync.Mutex
	props  []queuedProposal
	spare  []queuedProposal // the loop's last batch, reused
	propc  chan struct{}
	stopc  chan struct{}
	done   chan struct{}
	// prep orders the snapshot messages being prepared (Step).
	prep     prepGate
	prepMu   sync.Mutex // guards prepStop and prepWG.Add
	prepStop bool
	prepWG   sync.WaitGroup
	// status is what Status returns, published by the loop (statusAt:
	// when, owned by the loop).
	status      atomic.Pointer[Status]
	statusAt    time.Time
	statusLead  uint64
	statusState raft.StateType
}

// openCore fills cfg's defaults and opens the replica's core on cfg.DB.
func openCore(cfg Config) (Config, *core, error) {
	c0, err := cfg.withDefaults()
	if err != nil {
		return Config{}, nil, err
	}
	c, err := newCore(c0)
	return c0, c, err
}

// Start opens the replica on cfg.DB and starts its loop.
func Start(cfg Config) (*Node, error) {
	c0, c, err := openCore(cfg)
	if err != nil {
		return nil, err
	}
	n := &Node{
		cfg: c0, c: c,
		recvc: make(chan *pb.Message, 4096),
		ctlc:  make(chan func(*core), 1024),
		propc: make(chan struct{}, 1),
		stopc: make(chan struct{}),
		done:  make(chan struct{}),
	}
	if u, ok := c0.Transport.(PeerUpdater); ok && len(c.members) > 0 {
		u.UpdatePeers(c.memberList())
	}
	go n.run()
	return n, nil
}

// maxBatch bounds the events handled before one Ready, so a burst of
// proposals shares one log append and fsync without starving ticks.
const maxBatch = 256

func (n *Node) run() {
	defer close(n.done)
	t := time.NewTicker(n.cfg.TickInterval)
	defer t.Stop()
	c := n.c
	n.publishStatus(c, true)
	for {
		select {
		case <-n.stopc:
			c.failAll(ErrStopped)
			return
		case <-t.C:
			c.tick()
			n.publishStatus(c, true)
		case m := <-n.recvc:
			c.step(m)
		case fn := <-n.ctlc:
			fn(c)
		case <-n.propc:
		}
	drain:
		for range maxBatch {
			select {
			case m := <-n.recvc:
				c.step(m)
			case fn := <-n.ctlc:
				fn(c)
			default:
				break drain
			}
		}
		n.takeProposals(c)
		c.process()
		n.publishStatus(c, false)
	}
}

// queuedProposal is a command waiting for the loop: ent is the entry's
// data, headerLen bytes of room for the header (the loop writes it) then a
// copy of the command, made by the proposer so that the loop does not copy
// and the caller may reuse its buffer once Propose returns.
type queuedProposal struct {
	p   *proposal
	ent []byte
}

// newQueued returns a proposal of command data for the queue.
func newQueued(data []byte) queuedProposal {
	ent := make([]byte, headerLen+len(data))
	copy(ent[headerLen:], data)
	return queuedProposal{p: &proposal{done: make(chan struct{})}, ent: ent}
}

// takeProposals submits every queued proposal to raft, answering those it
// refuses at once.
func (n *Node) takeProposals(c *core) {
	n.propMu.Lock()
	batch := n.props
	n.props = n.spare[:0]
	n.propMu.Unlock()
	c.submitBatch(batch)
	clear(batch)
	n.spare = batch
}

// do runs fn on the loop and waits for it.
func (n *Node) do(ctx context.Context, fn func(*core)) error {
	ran := make(chan struct{})
	select {
	case n.ctlc <- func(c *core) { fn(c); close(ran) }:
	case <-n.done:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ran:
		return nil
	case <-n.done:
		return ErrStopped
	}
}

// wait waits for p, ctx or the node's end.
func (n *Node) wait(ctx context.Context, p *proposal) ([]byte, error) {
	select {
	case <-p.done:
		return p.reply, p.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-n.done:
		select {
		case <-p.done:
			return p.reply, p.err
		default:
			return nil, ErrStopped
		}
	}
}

// Propose replicates a command and waits until it is committed and applied
// on this replica; it returns Apply's reply. On a replica that is not the
// leader it fails with a *NotLeaderError (ErrNotLeader), unless
// Config.ForwardProposals is set. ErrProposalDropped
// means the command was not applied and never will be: retry it.
// ErrResultUnknown, ErrStopped and ctx's error mean the command may still
// apply (or have applied): only an idempotent command can be retried
// blindly then.
func (n *Node) Propose(ctx context.Context, data []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case <-n.done:
		return nil, ErrStopped
	default:
	}
	q := newQueued(data)
	n.propMu.Lock()
	n.props = append(n.props, q)
	n.propMu.Unlock()
	select {
	case n.propc <- struct{}{}:
	default: // the loop is woken already
	}
	return n.wait(ctx, q.p)
}

// ReadIndex is a linearizable read barrier: it returns once this replica
// applied everything committed before the call (raft's ReadIndex with
// ReadOnlySafe: the leader confirms its leadership with a quorum first).
// It works on followers and learners too. Concurrent callers share one
// ReadIndex request.
func (n *Node) ReadIndex(ctx context.Context) error {
	r := &readReq{done: make(chan struct{})}
	if err := n.do(ctx, func(c *core) { c.readIndex(r) }); err != nil {
		return err
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	case <-n.done:
		return ErrStopped
	}
}

// Step delivers a message received from another replica. A snapshot
// message, when the Snapshotter is a SnapshotPreparer, is delivered once
// its Prepare succeeded (on a goroutine of the node's; Step returns at
// once).
func (n *Node) Step(ctx context.Context, m *pb.Message) error {
	if m.GetType() == pb.MessageType_MsgSnap {
		if p, ok := n.cfg.Snapshots.(SnapshotPreparer); ok {
			return n.prepareSnapshot(p, m)
		}
	}
	return n.deliver(ctx, m)
}

func (n *Node) deliver(ctx context.Context, m *pb.Message) error {
	select {
	case n.recvc <- m:
		return nil
	case <-n.done:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// prepareSnapshot runs p.Prepare for snapshot message m, then delivers it
// (SnapshotPreparer). One snapshot is prepared at a time; one arriving
// meanwhile waits its turn in n.prep (prepGate), and cuts short the one
// being prepared if it is of a newer term.
func (n *Node) prepareSnapshot(p SnapshotPreparer, m *pb.Message) error {
	n.prepMu.Lock()
	defer n.prepMu.Unlock()
	if n.prepStop {
		return ErrStopped
	}
	if !n.prep.offer(m) {
		return nil // waits for, or is, the one being prepared
	}
	n.prepWG.Add(1)
	go func() {
		defer n.prepWG.Done()
		for ; m != nil; m = n.prep.finish() {
			n.prepareOne(p, m)
		}
	}()
	return nil
}

// prepareOne prepares snapshot message m and delivers it, or tells its
// sender it could not.
func (n *Node) prepareOne(p SnapshotPreparer, m *pb.Message) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n.prep.running(m, cancel)
	go func() {
		select {
		case <-n.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	index := m.GetSnapshot().GetMetadata().GetIndex()
	var commit uint64
	if err := n.do(ctx, func(c *core) { commit = c.st.hard.GetCommit() }); err != nil {
		return
	}
	if index <= commit {
		// Nothing to fetch: raft answers with the commit index, which
		// ends the sender's wait on this snapshot.
		_ = n.deliver(ctx, m)
		return
	}
	_, _, desc, err := decodeSnapshotData(m.GetSnapshot().GetData())
	if err == nil {
		err = p.Prepare(ctx, m.GetFrom(), index, desc)
	}
	if err != nil {
		if n.prep.superseded(m) {
			// A snapshot of a newer term arrived: raft would ignore this
			// one, and its sender no longer leads.
			n.cfg.Logger.Info("replica: prepare snapshot given up for a newer term's", "from", m.GetFrom(), "index", index)
			return
		}
		n.cfg.Logger.Warn("replica: prepare snapshot", "from", m.GetFrom(), "index", index, "err", err)
		// The sender waits on this snapshot (Config.SnapshotTimeout):
		// tell it, so it can send another now.
		refused := &pb.Message{Type: pb.MessageType_MsgSnapStatus.Enum(), To: new(m.GetFrom()),
			From: new(n.cfg.ID), Index: new(index), Reject: new(true)}
		n.report(func(c *core) { c.cfg.Transport.Send([]*pb.Message{refused}) })
		return
	}
	_ = n.deliver(ctx, m)
}

// ReportUnreachable tells raft that a message to replica id could not be
// sent (the transport calls it): the leader stops streaming entries to it
// optimistically and probes it instead. It never blocks; when the node is
// busy the report is dropped.
func (n *Node) ReportUnreachable(id uint64) {
	n.report(func(c *core) {
		c.rn.ReportUnreachable(id)
		c.snapshotUnreachable(id)
	})
}

// ReportSnapshot tells raft whether the snapshot sent to replica id was
// delivered (the transport calls it with false when it could not send the
// snapshot message, so raft sends one again). It never blocks.
func (n *Node) ReportSnapshot(id uint64, ok bool) {
	st := raft.SnapshotFinish
	if !ok {
		st = raft.SnapshotFailure
	}
	n.report(func(c *core) { c.rn.ReportSnapshot(id, st) })
}

func (n *Node) report(fn func(*core)) {
	select {
	case n.ctlc <- fn:
	default:
	}
}

// TransferLeadership hands leadership to the most caught-up voter and
// waits until this replica is no longer the leader. On a replica that is
// not the leader it does nothing.
func (n *Node) TransferLeadership(ctx context.Context) error {
	for {
		var changed chan struct{}
		var err error
		var leader bool
		if e := n.do(ctx, func(c *core) {
			if c.state != raft.StateLeader {
				return
			}
			leader = true
			to := c.transferTarget()
			if to == 0 {
				err = ErrNoTransferee
				return
			}
			c.rn.TransferLeader(to)
			changed = make(chan struct{})
			c.transfers = append(c.transfers, changed)
		}); e != nil {
			return e
		}
		if err != nil || !leader {
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-n.done:
			return ErrStopped
		}
	}
}

// TransferLeadershipTo hands leadership to voter to (0: the most
// caught-up voter, as TransferLeadership) and waits until this replica
// is no longer the leader. A transfer that raft abandons (the target did
// not take over within an election timeout) is asked again, until ctx
// ends. to must be a voter other than this replica (ErrUnknownMember);
// on a replica that is not the leader it does nothing, so a caller that
// finds to leading afterwards knows the transfer is done. The new leader
// is to unless an election intervened (read Status).
func (n *Node) TransferLeadershipTo(ctx context.Context, to uint64) error {
	if to == 0 {
		return n.TransferLeadership(ctx)
	}
	if to == n.cfg.ID {
		return fmt.Errorf("%w: %d is this replica", ErrUnknownMember, to)
	}
	retry := 2 * time.Duration(n.cfg.ElectionTicks) * n.cfg.TickInterval
	for {
		var changed chan struct{}
		var err error
		if e := n.do(ctx, func(c *core) {
			if c.state != raft.StateLeader {
				return
			}
			if _, ok := c.rn.Status().Config.Voters.IDs()[to]; !ok {
				err = fmt.Errorf("%w: %d is not a voter", ErrUnknownMember, to)
				return
			}
			c.rn.TransferLeader(to)
			changed = make(chan struct{})
			c.transfers = append(c.transfers, changed)
		}); e != nil {
			return e
		}
		if err != nil || changed == nil {
			return err
		}
		t := time.NewTimer(retry)
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-n.done:
			t.Stop()
			return ErrStopped
		}
		t.Stop()
	}
}

// AddLearner adds p as a learner (it receives the log but does not vote).
func (n *Node) AddLearner(ctx context.Context, p Peer) error {
	if err := validPeer(p); err != nil {
		return err
	}
	return n.confChange(ctx, pb.ConfChangeType_ConfChangeAddLearnerNode, func(c *core) (Peer, error) { return p, nil })
}

// Promote makes learner id a voter, once its log has caught up with the
// commit index (ErrNotCaughtUp otherwise).
func (n *Node) Promote(ctx context.Context, id uint64) error {
	return n.confChange(ctx, pb.ConfChangeType_ConfChangeAddNode, func(c *core) (Peer, error) {
		st := c.rn.Status()
		pr, ok := st.Progress[id]
		if !ok || !pr.IsLearner {
			return Peer{}, fmt.Errorf("%w: %d is not a learner", ErrUnknownMember, id)
		}
		if pr.Match < st.GetCommit() {
			return Peer{}, fmt.Errorf("%w: learner %d has %d of %d", ErrNotCaughtUp, id, pr.Match, st.GetCommit())
		}
		return c.members[id], nil
	})
}

// Remove removes member id from the group.
func (n *Node) Remove(ctx context.Context, id uint64) error {
	return n.confChange(ctx, pb.ConfChangeType_ConfChangeRemoveNode, func(c *core) (Peer, error) {
		p, ok := c.members[id]
		if !ok {
			return Peer{}, fmt.Errorf("%w: %d", ErrUnknownMember, id)
		}
		return p, nil
	})
}

func (n *Node) confChange(ctx context.Context, typ pb.ConfChangeType, peer func(*core) (Peer, error)) error {
	var p *proposal
	var err error
	if e := n.do(ctx, func(c *core) {
		if c.state != raft.StateLeader {
			err = c.notLeader()
			return
		}
		var pe Peer
		if pe, err = peer(c); err != nil {
			return
		}
		p, err = c.proposeConf(typ, pe)
	}); e != nil {
		return e
	}
	if err != nil {
		return err
	}
	_, err = n.wait(ctx, p)
	return err
}

// Status returns the replica's state.
//
// It never waits for the replica's loop: it returns the status the loop
// last published (at most statusEvery old, or as of the loop's last
// step while the loop is busy, as in a snapshot install), so a server
// may call it per request, and a request asking for it never waits on an
// install that waits for the server's requests to end.
func (n *Node) Status() Status {
	select {
	case <-n.done:
		return Status{ID: n.cfg.ID, Role: "stopped"}
	default:
	}
	s := Status{ID: n.cfg.ID, Role: "follower"}
	if p := n.status.Load(); p != nil {
		s = *p
	}
	// The indexes as of now, not of the last publication: a proposal
	// answered before this call is covered (core.pub).
	s.Applied = max(s.Applied, n.c.pub.applied.Load())
	s.Commit = max(s.Commit, n.c.pub.commit.Load(), s.Applied)
	return s
}

// statusEvery bounds how often the loop publishes its status.
const statusEvery = time.Millisecond

// publishStatus publishes c's status for Status, at most every
// statusEvery unless force.
func (n *Node) publishStatus(c *core, force bool) {
	now := time.Now()
	changed := c.lead != n.statusLead || c.state != n.statusState
	if !force && !changed && now.Sub(n.statusAt) < statusEvery {
		return
	}
	n.statusAt, n.statusLead, n.statusState = now, c.lead, c.state
	s := c.status()
	n.status.Store(&s)
}

// Stop stops the loop, fails every waiter with ErrStopped and closes the
// transport. The store stays open (the host closes it).
func (n *Node) Stop() error {
	select {
	case <-n.stopc:
	default:
		close(n.stopc)
	}
	<-n.done
	n.prepMu.Lock()
	n.prepStop = true
	n.prepMu.Unlock()
	n.prepWG.Wait() // a snapshot being prepared stops with the node
	return n.cfg.Transport.Close()
}

// DB returns the store the replica uses now (a snapshot install may have
// replaced the one in Config).
func (n *Node) DB() *store.DB {
	var db *store.DB
	if n.do(context.Background(), func(c *core) { db = c.db }) != nil {
		return n.c.db // the loop ended: nothing changes it any more
	}
	return db
}

// raftLogger routes raft's log to slog.
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) Debug(v ...any)              { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Debugf(f string, v ...any)   { r.l.Debug(fmt.Sprintf(f, v...)) }
func (r raftLogger) Info(v ...any)               { r.l.Info(fmt.Sprint(v...)) }
func (r raftLogger) Infof(f string, v ...any)    { r.l.Info(fmt.Sprintf(f, v...)) }
func (r raftLogger) Warning(v ...any)            { r.l.Warn(fmt.Sprint(v...)) }
func (r raftLogger) Warningf(f string, v ...any) { r.l.Warn(fmt.Sprintf(f, v...)) }
func (r raftLogger) Error(v ...any)              { r.l.Error(fmt.Sprint(v...)) }
func (r raftLogger) Errorf(f string, v ...any)   { r.l.Error(fmt.Sprintf(f, v...)) }
func (r raftLogger) Fatal(v ...any)              { r.l.Error(fmt.Sprint(v...)); panic(fmt.Sprint(v...)) }
func (r raftLogger) Fatalf(f string, v ...any)   { s := fmt.Sprintf(f, v...); r.l.Error(s); panic(s) }
func (r raftLogger) Panic(v ...any)              { panic(fmt.Sprint(v...)) }
func (r raftLogger) Panicf(f string, v ...any)   { panic(fmt.Sprintf(f, v...)) }
