package replica

// The replica's state machine around raft.RawNode: the Ready loop.
//
// core owns the RawNode, the log storage and the waiters of proposals and
// reads. It is driven by one goroutine: Node's loop in production, the
// deterministic simulation's loop in tests. Every event (a tick, a
// received message, a proposal) is followed by process, which handles
// every Ready in this order (the simple order of raft's README, no
// asynchronous storage writes):
//
//  1. A snapshot to install: the Snapshotter replaces the state machine,
//     then the log restarts after it (snapshot.go).
//  2. New entries and the hard state in one store batch, fsynced when
//     Config.Sync and raft says it must be (MustSync): an entry counts
//     toward the quorum only once it is durable here, because the
//     messages that acknowledge it are sent after this step. While the
//     fsync runs, the loop applies the committed entries that were
//     already durable, and a leader sends its appends (persist).
//  3. Messages to the other replicas.
//  4. Committed entries, applied in log order through store.ApplyEntry
//     (exactly once through crashes), with Clock set to each entry's
//     timestamp first; runs of commands go to Config.ApplyRun when it is
//     set, which may apply a run in one store commit marked as the
//     complete apply of all of its entries (store.Batch.MarkEntries).
//  5. Read states: the reads waiting for them get their index and
//     complete once it is applied.
//
// A proposal's fate is known when the entry at its index applies: its own
// entry (success, Apply's reply) or another one (ErrProposalDropped, the
// command was not applied and never will be). An entry of a later term
// than the proposal's also drops it: once an entry of term T is committed
// at index i, every log that holds it holds only terms >= T after i, so an
// entry of an older term beyond i can never commit. A proposal that
// raft refused outright (no leader, a transfer in progress) fails at once.
// Leadership loss alone does not fail a proposal: the next leader may still
// commit it, and the first entry of the next leader's term settles it.

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"

	"github.com/tallydb/tally/store"
)

// markEvery is how many applied entries may go by before the applied index
// is recorded with SetAppliedIndex (entries that commit nothing leave no
// mark of their own).
const markEvery = 128

const maxUint64 = ^uint64(0)

type proposal struct {
	id, term, index uint64
	// unlocated: proposed by a replica that forwards proposals
	// (Config.ForwardProposals) and not seen in this replica's log yet;
	// waited counts the ticks since (forward.go).
	unlocated bool
	waited    int
	done      chan struct{}
	reply     []byte
	err       error
}

func (p *proposal) finish(reply []byte, err error) {
	p.reply, p.err = reply, err
	close(p.done)
}

type readReq struct {
	done  chan struct{}
	index uint64
	err   error
}

// readBatch is the read index requests that one raft ReadIndex covers.
// It is asked again with a new context after each election timeout
// without an answer (a request can be dropped silently), and the answer
// to any of its contexts serves it: each was asked after every request
// of the batch arrived. The batch keeps its maxReadAsks newest contexts.
//
// Before, asking again forgot the earlier contexts: when a quorum's round
// trip outlasted the election timeout (a loaded machine: load 8-11 on 2
// cores), every answer came for a context already forgotten and no read
// ever completed while the leadership held (TestShardedCluster:
// "TRYAGAIN context deadline exceeded" until its timeout).
type readBatch struct {
	rctxs []string // oldest first
	reqs  []*readReq
	ticks int
}

// maxReadAsks bounds the contexts a readBatch waits on.
const maxReadAsks = 8

// has reports whether rctx is one of the batch's contexts.
func (b *readBatch) has(rctx []byte) bool {
	return slices.Contains(b.rctxs, string(rctx))
}

type core struct {
	cfg     Config
	db      *store.DB
	st      *logStorage
	rn      *raft.RawNode
	log     *slog.Logger
	members map[uint64]Peer

	nextID    uint64
	pending   map[uint64]*proposal // by proposal id
	byIndex   map[uint64]*proposal // proposals whose index is known
	applied   uint64
	appliedT  uint64 // term of the applied entry
	lastMark  uint64 // applied index last recorded with SetAppliedIndex
	lastTS    int64  // highest entry timestamp seen in the log (ms)
	lead      uint64
	state     raft.StateType
	sinceLead int // ticks since the last message from the leader

	readQueue   []*readReq
	readFlight  *readBatch
	readWaiting []*readReq
	readSeq     uint64

	transfers []chan struct{} // closed on a leadership change
	// confBarrier: no conf change may be proposed before this index is
	// applied (maxUint64: one was proposed and is not in the log yet).
	confBarrier uint64
	snapCache   *pb.Snapshot
	// snapFlights are the snapshots this leader sent and is waiting on,
	// by receiver (snapshot.go).
	snapFlights map[uint64]*snapFlight
	err         error // a storage failure: the replica stops
	m           *metrics
	// pub is the applied and commit index as the loop sets them, read by
	// Node.Status without waiting for the loop: the applied index is
	// stored before the entry's proposal is answered, so a Status read
	// after an answer never shows an index below the answered entry (the
	// rest of the status is published at most every statusEvery).
	pub struct{ applied, commit atomic.Uint64 }
}

// publishApplied records index as applied (and so committed) for Status.
func (c *core) publishApplied(index uint64) {
	if c.pub.applied.Load() < index {
		c.pub.applied.Store(index) // only the loop stores
	}
	c.publishCommit(index)
}

// publishCommit records index as committed for Status.
func (c *core) publishCommit(index uint64) {
	if c.pub.commit.Load() < index {
		c.pub.commit.Store(index) // only the loop stores
	}
}

func newCore(cfg Config) (*core, error) {
	st, err := openStorage(cfg.DB)
	if err != nil {
		return nil, err
	}
	c := &core{
		cfg: cfg, db: cfg.DB, st: st, log: cfg.Logger,
		members: map[uint64]Peer{},
		pending: map[uint64]*proposal{}, byIndex: map[uint64]*proposal{},
		m: &metrics{observe: cfg.ObserveApply},
	}
	st.snapshots = c.snapshot
	boot, err := st.nextBoot()
	if err != nil {
		return nil, fmt.Errorf("replica: count the start: %w", err)
	}
	c.nextID = boot << 32
	c.readSeq = boot << 32 // a stale read response of an earlier start never matches
	if b, err := st.members(); err != nil {
		return nil, err
	} else if b != nil {
		if c.members, _, err = decodeMembers(b); err != nil {
			return nil, err
		}
	}
	// Restart the apply at the store's applied index: that entry may be
	// only partly applied (store/apply.go), and re-applying it is a no-op
	// for what it already committed.
	applied := cfg.DB.AppliedIndex()
	if applied > 0 {
		applied--
	}
	applied = max(applied, st.snap.GetIndex())
	applied = min(applied, st.hard.GetCommit())
	c.applied = applied
	c.publishApplied(applied)
	c.publishCommit(st.hard.GetCommit())
	c.appliedT, _ = st.Term(applied)
	c.lastMark = applied
	for _, e := range st.ents {
		c.noteTS(e)
	}
	rc := &raft.Config{
		ID:                        cfg.ID,
		ElectionTick:              cfg.ElectionTicks,
		HeartbeatTick:             cfg.HeartbeatTicks,
		Storage:                   st,
		Applied:                   applied,
		MaxSizePerMsg:             1 << 20,
		MaxInflightMsgs:           256,
		MaxUncommittedEntriesSize: 64 << 20,
		CheckQuorum:               true,
		PreVote:                   true,
		ReadOnlyOption:            raft.ReadOnlySafe,
		DisableProposalForwarding: !cfg.ForwardProposals,
		StepDownOnRemoval:         true,
		Logger:                    raftLogger{cfg.Logger},
	}
	if c.rn, err = raft.NewRawNode(rc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	fresh := raft.IsEmptyHardState(st.hard) && st.lastIndex() == 0 && len(st.conf.GetVoters()) == 0
	// A store without Raft state and without bootstrap peers (a joining
	// replica, or a replica that lost its state) waits to hear from the
	// group.
	if fresh && !cfg.Join && len(cfg.Peers) > 0 {
		peers := make([]raft.Peer, len(cfg.Peers))
		for i, p := range cfg.Peers {
			peers[i] = raft.Peer{ID: p.ID, Context: appendPeer(appendHeader(nil, header{}), p)}
		}
		if err := c.rn.Bootstrap(peers); err != nil {
			return nil, fmt.Errorf("%w: bootstrap: %w", ErrInvalidConfig, err)
		}
	}
	return c, nil
}

// tick advances raft's logical clock one tick.
func (c *core) tick() {
	c.rn.Tick()
	c.sinceLead++
	c.watchSnapshots()
	c.expireForwarded()
	if f := c.readFlight; f != nil {
		// A read index request can be dropped silently (no leader, a lost
		// message): ask again after an election timeout. An answer to an
		// earlier asking still serves (readBatch).
		if f.ticks++; f.ticks > c.cfg.ElectionTicks {
			f.ticks = 0
			c.askRead(f)
		}
	}
}

// step hands a received message to raft. Messages of unknown peers and
// local message types are refused by raft; those are not errors of this
// replica, so they are dropped.
func (c *core) step(m *pb.Message) {
	if m.GetFrom() == c.lead && c.lead != 0 {
		c.sinceLead = 0
	}
	if m.GetType() == pb.MessageType_MsgSnapStatus {
		c.snapshotRefused(m) // local to raft: a receiver's report
		return
	}
	if err := c.rn.Step(m); err != nil && c.log != nil {
		c.log.Debug("replica: step", "from", m.GetFrom(), "type", m.GetType().String(), "err", err)
	}
}

func (c *core) notLeader() error {
	return &NotLeaderError{Leader: c.members[c.lead]}
}

// stamp returns the timestamp of a new entry: the leader's clock, but never
// below an entry already in the log, so timestamps grow along the log.
func (c *core) stamp() int64 {
	ms := c.cfg.Now().UnixMilli()
	if ms < c.lastTS {
		ms = c.lastTS
	}
	c.lastTS = ms
	return ms
}

func (c *core) noteTS(e *pb.Entry) {
	if e.GetType() != pb.EntryNormal || len(e.GetData()) == 0 {
		return
	}
	if h, _, err := decodeHeader(e.GetData()); err == nil && h.millis > c.lastTS {
		c.lastTS = h.millis
	}
}

// register tracks a proposal raft accepted. Its index is learnt when its
// entry shows up in a Ready (located).
func (c *core) register(id uint64) *proposal {
	p := &proposal{id: id, term: c.rn.BasicStatus().GetTerm(), done: make(chan struct{})}
	c.pending[id] = p
	return p
}

// located records the index of this node's proposal h, appended at index
// in term.
func (c *core) located(h header, index, term uint64) {
	if h.node != c.cfg.ID {
		return
	}
	p := c.pending[h.proposal]
	if p == nil || p.index != 0 {
		return
	}
	if old := c.byIndex[index]; old != nil && old != p {
		// Our own earlier entry at this index was truncated (a new term):
		// it is gone.
		c.dropLocked(old)
	}
	p.index = index
	if p.unlocated {
		// A forwarded proposal's term is its entry's (forward.go).
		p.term, p.unlocated = term, false
	}
	c.byIndex[index] = p
}

// entryHeader returns the header of a command or conf change entry.
func entryHeader(e *pb.Entry) (header, bool) {
	switch e.GetType() {
	case pb.EntryNormal:
		if len(e.GetData()) == 0 {
			return header{}, false
		}
		h, _, err := decodeHeader(e.GetData())
		return h, err == nil
	case pb.EntryConfChangeV2:
		var cc pb.ConfChangeV2
		if proto.Unmarshal(e.GetData(), &cc) != nil || len(cc.GetContext()) == 0 {
			return header{}, false
		}
		h, _, err := decodeHeader(cc.GetContext())
		return h, err == nil
	}
	return header{}, false
}

// propose appends a command to the leader's log.
func (c *core) propose(data []byte) (*proposal, error) {
	q := newQueued(data)
	c.submitBatch([]queuedProposal{q})
	select {
	case <-q.p.done: // refused
		return nil, q.p.err
	default:
		return q.p, nil
	}
}

// maxPropBatch and maxPropBytes bound the commands, and their bytes,
// handed to raft in one proposal message by submitBatch.
const (
	maxPropBatch = 256
	maxPropBytes = 1 << 20
)

// submitBatch appends the commands of queued proposals to the leader's log
// and registers them, answering those that cannot be proposed. Commands
// go to raft in as few proposal messages as the bounds above allow: raft
// sends one append per follower per proposal message, so a batch of
// proposals costs each follower one message, one log append and one
// acknowledgement instead of one per proposal.
func (c *core) submitBatch(qs []queuedProposal) {
	for len(qs) > 0 {
		n, size := 0, 0
		for n < len(qs) && n < maxPropBatch && (n == 0 || size+len(qs[n].ent) <= maxPropBytes) {
			size += len(qs[n].ent)
			n++
		}
		c.submitMsg(qs[:n])
		qs = qs[n:]
	}
}

// submitMsg proposes qs in one proposal message.
func (c *core) submitMsg(qs []queuedProposal) {
	fail := func(err error) {
		for _, q := range qs {
			q.p.finish(nil, err)
		}
	}
	if c.err != nil {
		fail(c.err)
		return
	}
	forward := false
	if c.state != raft.StateLeader || c.cfg.ForwardProposals {
		if forward = c.forwarding(); !forward {
			fail(c.cannotForward())
			return
		}
	}
	ents := make([]*pb.Entry, len(qs))
	first := c.nextID + 1
	for i, q := range qs {
		c.nextID++
		h := header{node: c.cfg.ID, proposal: c.nextID, millis: c.stamp()}
		appendHeader(q.ent[:0], h) // into the room left for it
		ents[i] = &pb.Entry{Data: q.ent}
	}
	if err := c.rn.Step(&pb.Message{Type: pb.MessageType_MsgProp.Enum(), From: new(c.cfg.ID), Entries: ents}); err != nil {
		c.m.dropped.Add(int64(len(qs)))
		fail(fmt.Errorf("%w: %w", ErrProposalDropped, err))
		return
	}
	c.m.proposals.Add(int64(len(qs)))
	term := c.rn.BasicStatus().GetTerm()
	for i, q := range qs {
		q.p.id, q.p.term, q.p.unlocated = first+uint64(i), term, forward
		c.pending[q.p.id] = q.p
	}
}

// proposeConf proposes a one-change ConfChangeV2 carrying p in its
// context.
func (c *core) proposeConf(typ pb.ConfChangeType, p Peer) (*proposal, error) {
	if c.err != nil {
		return nil, c.err
	}
	if c.state != raft.StateLeader {
		return nil, c.notLeader()
	}
	// raft replaces a conf change proposed while another is not applied
	// (or before a new leader applied its log) with an empty entry; refuse
	// it here instead, so the caller knows to retry.
	if c.applied < c.confBarrier {
		return nil, fmt.Errorf("%w: a configuration change is in progress", ErrProposalDropped)
	}
	c.nextID++
	h := header{node: c.cfg.ID, proposal: c.nextID, millis: c.stamp()}
	cc := &pb.ConfChangeV2{
		Changes: []*pb.ConfChangeSingle{{Type: new(typ), NodeId: new(p.ID)}},
		Context: appendPeer(appendHeader(nil, h), p),
	}
	if err := c.rn.ProposeConfChange(cc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrProposalDropped, err)
	}
	c.confBarrier = maxUint64 // until the entry shows up in a Ready
	return c.register(h.proposal), nil
}

func (c *core) dropLocked(p *proposal) {
	delete(c.pending, p.id)
	if c.byIndex[p.index] == p {
		delete(c.byIndex, p.index)
	}
	c.m.dropped.Add(1)
	p.finish(nil, fmt.Errorf("%w: entry %d of term %d was replaced", ErrProposalDropped, p.index, p.term))
}

// settle resolves the proposals an applied entry decides (see the file
// comment): its own proposal, if it is one of this node's, succeeds; any
// other proposal at its index, or of an older term, is dropped.
func (c *core) settle(index, term uint64, h header, own bool, reply []byte) {
	c.publishApplied(index) // before any answer (Node.Status)
	if index >= c.confBarrier && c.confBarrier != maxUint64 {
		c.confBarrier = 0
	}
	if p := c.byIndex[index]; p != nil && !(own && p.id == h.proposal) {
		c.dropLocked(p)
	}
	if own {
		if p := c.pending[h.proposal]; p != nil {
			delete(c.pending, p.id)
			if c.byIndex[p.index] == p {
				delete(c.byIndex, p.index)
			}
			p.finish(reply, nil)
		}
	}
	if term > c.appliedT {
		for _, id := range sortedKeys(c.pending) {
			if p := c.pending[id]; p.term < term && !p.unlocated {
				c.dropLocked(p)
			}
		}
	}
}

func sortedKeys[V any](m map[uint64]V) []uint64 {
	ks := make([]uint64, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// readIndex queues a linearizable read barrier.
func (c *core) readIndex(r *readReq) {
	if c.err != nil {
		r.err = c.err
		close(r.done)
		return
	}
	c.readQueue = append(c.readQueue, r)
}

// askRead asks raft for a read index for f under a new context.
func (c *core) askRead(f *readBatch) {
	c.readSeq++
	rctx := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, c.cfg.ID), c.readSeq)
	if len(f.rctxs) == maxReadAsks {
		f.rctxs = slices.Delete(f.rctxs, 0, 1)
	}
	f.rctxs = append(f.rctxs, string(rctx))
	c.rn.ReadIndex(rctx)
}

// process handles every Ready raft has, then what they unblocked.
func (c *core) process() {
	if c.err != nil {
		return
	}
	if len(c.readQueue) > 0 && c.readFlight == nil {
		c.readFlight = &readBatch{reqs: c.readQueue}
		c.readQueue = nil
		c.askRead(c.readFlight)
	}
	for c.rn.HasReady() {
		rd := c.rn.Ready()
		if err := c.handle(&rd); err != nil {
			c.fail(err)
			return
		}
		c.rn.Advance(rd)
		for _, m := range rd.Messages {
			if m.GetType() == pb.MessageType_MsgSnap {
				c.snapshotSent(m)
			}
		}
	}
	c.finishReads()
	if err := c.maybeCompact(); err != nil {
		c.fail(err)
	}
}

func (c *core) handle(rd *raft.Ready) error {
	becameLeader := false
	if ss := rd.SoftState; ss != nil {
		becameLeader = ss.RaftState == raft.StateLeader && c.state != raft.StateLeader
		if ss.Lead != c.lead || ss.RaftState != c.state {
			for _, ch := range c.transfers {
				close(ch)
			}
			c.transfers = nil
		}
		if ss.Lead != c.lead {
			c.sinceLead = 0
			c.m.leaderChanges.Add(1)
		}
		if ss.RaftState != raft.StateLeader {
			c.confBarrier = 0
		}
		c.lead, c.state = ss.Lead, ss.RaftState
	}
	if rd.Snapshot != nil && !raft.IsEmptySnap(rd.Snapshot) {
		if err := c.install(rd.Snapshot, rd.HardState); err != nil {
			return err
		}
	}
	sent := false
	if len(rd.Entries) > 0 || (rd.HardState != nil && !raft.IsEmptyHardState(rd.HardState)) {
		var err error
		if sent, err = c.persist(rd); err != nil {
			return err
		}
		for _, e := range rd.Entries {
			c.noteTS(e)
			if h, ok := entryHeader(e); ok {
				c.located(h, e.GetIndex(), e.GetTerm())
			}
			if e.GetType() != pb.EntryNormal && c.state == raft.StateLeader {
				c.confBarrier = e.GetIndex() // a conf change: no other until it applies
			}
		}
		if becameLeader {
			// raft refuses conf changes until a new leader applied its
			// whole log (pendingConfIndex).
			c.confBarrier = c.st.lastIndex()
		}
	}
	if len(rd.Messages) > 0 && !sent {
		c.cfg.Transport.Send(rd.Messages)
	}
	if rd.HardState != nil {
		c.publishCommit(rd.HardState.GetCommit())
	}
	if err := c.applyEntries(rd.CommittedEntries); err != nil {
		return err
	}
	for _, rs := range rd.ReadStates {
		if f := c.readFlight; f != nil && f.has(rs.RequestCtx) {
			for _, r := range f.reqs {
				r.index = rs.Index
			}
			c.readWaiting = append(c.readWaiting, f.reqs...)
			c.readFlight = nil
		}
	}
	return nil
}

// persist writes a Ready's entries and hard state to the log (step 2 of
// the file comment) and reports whether it sent the Ready's messages too.
//
// When the write waits for an fsync it runs on another goroutine, and the
// loop meanwhile does what does not depend on it:
//
//   - It applies the committed entries that were durable here before this
//     Ready (commands only, in order; a configuration change and what
//     follows it waits). Their apply commits are store commits like any
//     other; the log batch is SetLocal, so it never counts as a commit of
//     the entry applying meanwhile.
//   - On the leader, when the hard state's term and vote are unchanged, it
//     sends the messages (appends and heartbeats to the followers: the
//     leader writes its log in parallel with theirs, section 10.2.1 of the
//     Raft thesis, as etcd raft's README allows). Its own acknowledgement
//     counts only after Advance, that is once the write is durable, and a
//     new term or vote is always durable before any message.
func (c *core) persist(rd *raft.Ready) (sent bool, err error) {
	prevLast, prevTerm, prevVote := c.st.lastIndex(), c.st.hard.GetTerm(), c.st.hard.GetVote()
	b := c.db.NewBatch()
	b.SetLocal() // node-local: never an applying entry's commit
	sync := c.cfg.Sync && rd.MustSync
	b.SetSync(sync)
	commit, err := c.st.stage(b, rd.Entries, rd.HardState)
	if err != nil {
		b.Close()
		return false, fmt.Errorf("replica: append to the raft log: %w", err)
	}
	if !sync || rd.Snapshot != nil && !raft.IsEmptySnap(rd.Snapshot) {
		err = b.Commit()
		b.Close()
	} else {
		// The log write goes on beside the sends and applies below; a
		// deterministic run (the simulation) makes it after them, one of
		// the orders the concurrent write allows.
		done := make(chan error, 1)
		write := func() {
			err := b.Commit()
			b.Close()
			done <- err
		}
		if !c.cfg.serialPersist {
			go write()
		}
		hs := rd.HardState
		if c.state == raft.StateLeader && len(rd.Messages) > 0 &&
			(hs == nil || hs.GetTerm() == prevTerm && hs.GetVote() == prevVote) {
			c.cfg.Transport.Send(rd.Messages)
			sent = true
		}
		durable := prevLast
		if len(rd.Entries) > 0 {
			durable = min(durable, rd.Entries[0].GetIndex()-1)
		}
		ready := 0
		for _, e := range rd.CommittedEntries {
			if e.GetIndex() > durable || e.GetType() != pb.EntryNormal {
				break
			}
			ready++
		}
		applyErr := c.applyEntries(rd.CommittedEntries[:ready])
		if c.cfg.serialPersist {
			write()
		}
		err = <-done
		if applyErr != nil {
			return false, applyErr
		}
	}
	if err != nil {
		return false, fmt.Errorf("replica: append to the raft log: %w", err)
	}
	commit()
	return sent, nil
}

func (c *core) finishReads() {
	kept := c.readWaiting[:0]
	for _, r := range c.readWaiting {
		if r.index <= c.applied {
			close(r.done)
		} else {
			kept = append(kept, r)
		}
	}
	clear(c.readWaiting[len(kept):])
	c.readWaiting = kept
}

// applyEntries applies committed entries in order: runs of commands
// through Config.ApplyRun when it is set (runLen), the others one by one.
func (c *core) applyEntries(ents []*pb.Entry) error {
	for i := 0; i < len(ents); {
		if n := c.runLen(ents[i:]); n > 0 {
			if err := c.applyRun(ents[i : i+n]); err != nil {
				return err
			}
			i += n
			continue
		}
		if err := c.apply(ents[i]); err != nil {
			return err
		}
		i++
	}
	return nil
}

// runLen returns how many entries at the start of ents may go to
// Config.ApplyRun as one run: consecutive commands (normal entries with a
// command, which a new leader's empty entry is not) not applied yet, the
// first above the store's AppliedIndex (the entry at AppliedIndex may be
// partly applied, and only ApplyEntry skips the part that is). 0: apply the
// first alone.
func (c *core) runLen(ents []*pb.Entry) int {
	if c.cfg.ApplyRun == nil || len(ents) == 0 {
		return 0
	}
	first := ents[0].GetIndex()
	if first <= c.applied || first <= c.db.AppliedIndex() {
		return 0
	}
	n := 0
	for _, e := range ents {
		if e.GetType() != pb.EntryNormal || len(e.GetData()) == 0 || e.GetIndex() != first+uint64(n) {
			break
		}
		if _, _, err := decodeHeader(e.GetData()); err != nil {
			break // apply reports it
		}
		n++
	}
	return n
}

// applyRun applies every entry of a run (runLen) through Config.ApplyRun,
// calling it again on what it did not take: each part it takes is either
// folded into one store commit or left to Apply, one entry at a time.
func (c *core) applyRun(ents []*pb.Entry) error {
	hs := make([]header, len(ents))
	cmds := make([][]byte, len(ents))
	for k, e := range ents {
		h, cmd, err := decodeHeader(e.GetData())
		if err != nil {
			return fmt.Errorf("entry %d: %w", e.GetIndex(), err)
		}
		hs[k], cmds[k] = h, cmd
	}
	for i := 0; i < len(ents); {
		// The clock is not moved before ApplyRun: it folds only commands
		// that do not read it, and an entry it leaves to Apply must see its
		// own timestamp (apply sets it), whatever run it was handed in.
		first, last := ents[i].GetIndex(), ents[len(ents)-1].GetIndex()
		start := time.Now()
		n, replies, folded, err := c.cfg.ApplyRun(first, cmds[i:])
		if err != nil {
			return fmt.Errorf("replica: apply entries %d..%d: %w", first, last, err)
		}
		if n < 1 || n > len(ents)-i || folded && len(replies) != n {
			return fmt.Errorf("replica: apply entries %d..%d: ApplyRun took %d entries with %d replies", first, last, n, len(replies))
		}
		if !folded {
			for _, e := range ents[i : i+n] {
				if err := c.apply(e); err != nil {
					return err
				}
			}
			i += n
			continue
		}
		c.m.runDone(n, time.Since(start))
		for k, e := range ents[i : i+n] {
			h := hs[i+k]
			c.cfg.Clock.advance(h.millis)
			c.settle(e.GetIndex(), e.GetTerm(), h, h.node == c.cfg.ID, replies[k])
			c.applied, c.appliedT = e.GetIndex(), e.GetTerm()
		}
		c.lastMark = max(c.lastMark, c.applied) // the run's commit carries its mark
		i += n
	}
	return nil
}

// apply applies one committed entry.
func (c *core) apply(e *pb.Entry) error {
	index, term := e.GetIndex(), e.GetTerm()
	if index <= c.applied {
		return nil
	}
	var h header
	var own bool
	var reply []byte
	switch e.GetType() {
	case pb.EntryNormal:
		if len(e.GetData()) == 0 {
			break // a new leader's empty entry
		}
		hh, cmd, err := decodeHeader(e.GetData())
		if err != nil {
			return fmt.Errorf("entry %d: %w", index, err)
		}
		h, own = hh, hh.node == c.cfg.ID
		c.cfg.Clock.advance(h.millis)
		start := time.Now()
		err = c.db.ApplyEntry(index, func() (err error) {
			reply, err = c.cfg.Apply(index, cmd)
			return err
		})
		c.m.applyDone(time.Since(start))
		if err != nil {
			return fmt.Errorf("replica: apply entry %d: %w", index, err)
		}
	case pb.EntryConfChange, pb.EntryConfChangeV2:
		hh, err := c.applyConf(e)
		if err != nil {
			return fmt.Errorf("replica: apply conf change %d: %w", index, err)
		}
		h, own = hh, hh.node == c.cfg.ID && hh.proposal != 0
	}
	c.settle(index, term, h, own, reply)
	c.applied, c.appliedT = index, term
	if c.applied-c.lastMark >= markEvery {
		return c.mark()
	}
	return nil
}

// mark records the applied index in the store.
func (c *core) mark() error {
	if c.applied <= c.lastMark {
		return nil
	}
	if err := c.db.SetAppliedIndex(c.applied); err != nil {
		return fmt.Errorf("replica: record applied index: %w", err)
	}
	c.lastMark = c.applied
	return nil
}

// applyConf applies a conf change entry to raft and to the member table,
// persisting both with the entry's apply mark.
func (c *core) applyConf(e *pb.Entry) (header, error) {
	var cc pb.ConfChangeI
	var ctx []byte
	if e.GetType() == pb.EntryConfChange {
		var v1 pb.ConfChange
		if err := proto.Unmarshal(e.GetData(), &v1); err != nil {
			return header{}, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		cc, ctx = &v1, v1.GetContext()
	} else {
		var v2 pb.ConfChangeV2
		if err := proto.Unmarshal(e.GetData(), &v2); err != nil {
			return header{}, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		cc, ctx = &v2, v2.GetContext()
	}
	var h header
	if len(ctx) > 0 {
		hh, rest, err := decodeHeader(ctx)
		if err != nil {
			return header{}, err
		}
		h = hh
		p, _, err := decodePeer(rest)
		if err != nil {
			return header{}, err
		}
		for _, ch := range cc.AsV2().GetChanges() {
			switch ch.GetType() {
			case pb.ConfChangeType_ConfChangeRemoveNode:
				delete(c.members, ch.GetNodeId())
			default:
				if ch.GetNodeId() == p.ID {
					c.members[p.ID] = p
				}
			}
		}
	}
	was := inConf(c.st.conf, c.cfg.ID)
	cs := c.rn.ApplyConfChange(cc)
	if was && !inConf(cs, c.cfg.ID) && len(cs.GetVoters()) > 0 {
		// This replica was removed: it will not see the entries that
		// settle its proposals.
		for _, id := range sortedKeys(c.pending) {
			if p := c.pending[id]; p.id != h.proposal {
				delete(c.pending, id)
				delete(c.byIndex, p.index)
				p.finish(nil, fmt.Errorf("%w: this replica was removed from the group", ErrResultUnknown))
			}
		}
	}
	if u, ok := c.cfg.Transport.(PeerUpdater); ok {
		u.UpdatePeers(c.memberList())
	}
	return h, c.db.ApplyEntry(e.GetIndex(), func() error {
		b := c.db.NewBatch()
		defer b.Close()
		commit, err := c.st.stageConf(b, cs, appendMembers(nil, c.members))
		if err != nil {
			return err
		}
		if err := b.Commit(); err != nil {
			return err
		}
		commit()
		return nil
	})
}

func (c *core) memberList() []Peer {
	out := make([]Peer, 0, len(c.members))
	for _, id := range sortedKeys(c.members) {
		out = append(out, c.members[id])
	}
	return out
}

// holdFactor bounds the log a leader keeps for a replica that the log
// still covers: up to this many times MaxLogEntries behind the applied
// index.
const holdFactor = 64

// maybeCompact truncates the log behind the slowest replica the leader
// knows of, keeping at most MaxLogEntries behind the applied index for a
// replica the log no longer covers, but more for two kinds of replicas:
//
//   - One installing a snapshot this leader sent (a flight, snapshot.go,
//     from the send until the replica's Match reaches the snapshot or the
//     leader gives up on it): the log after the snapshot's index is kept,
//     whatever its length, while the log in memory stays within
//     MaxHeldLogBytes. Without it a snapshot that takes longer to install
//     than the log takes to grow by MaxLogEntries always ends behind the
//     log, and a replica joining a shard under write load never catches
//     up (issue 23: 28 installs in 4 minutes, bench/RESULTS.md "Shard
//     move").
//   - One the log still covers (behind after a pause, or catching up
//     after an install): up to holdFactor times MaxLogEntries behind the
//     applied index, so it goes on from the log instead of falling behind
//     it.
func (c *core) maybeCompact() error {
	target := c.applied
	var hold uint64 // the lowest index a replica needs kept after
	if c.state == raft.StateLeader {
		first := c.st.snap.GetIndex()
		c.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
			if id == c.cfg.ID {
				return
			}
			if pr.Match < target {
				target = pr.Match
			}
			at := pr.Match
			if at >= first && c.applied-min(c.applied, at) <= holdFactor*c.cfg.MaxLogEntries && (hold == 0 || at < hold) {
				hold = at
			}
		})
		if at := c.snapshotHold(); at >= first && at > 0 && (hold == 0 || at < hold) {
			hold = at
		}
	} else {
		target = 0
	}
	if c.applied > c.cfg.MaxLogEntries {
		floor := c.applied - c.cfg.MaxLogEntries
		if hold > 0 && hold < floor {
			floor = hold
		}
		target = max(target, floor)
	}
	step := max(c.cfg.MaxLogEntries/8, 1)
	if target < c.st.snap.GetIndex()+step {
		return nil
	}
	if err := c.mark(); err != nil { // the mark goes first in Pebble's WAL
		return err
	}
	if err := c.st.compact(target); err != nil {
		return fmt.Errorf("replica: truncate the raft log: %w", err)
	}
	return nil
}

// fail stops the replica after a storage failure: raft cannot go on once a
// Ready could not be persisted. Every waiter fails with the error.
func (c *core) fail(err error) {
	if c.err != nil {
		return
	}
	c.err = fmt.Errorf("%w: %w", ErrStopped, err)
	if c.log != nil {
		c.log.Error("replica: stopped", "err", err)
	}
	c.failAll(c.err)
}

func (c *core) failAll(err error) {
	for _, id := range sortedKeys(c.pending) {
		c.pending[id].finish(nil, err)
	}
	clear(c.pending)
	clear(c.byIndex)
	var reads []*readReq
	reads = append(reads, c.readQueue...)
	reads = append(reads, c.readWaiting...)
	if c.readFlight != nil {
		reads = append(reads, c.readFlight.reqs...)
	}
	for _, r := range reads {
		r.err = err
		close(r.done)
	}
	c.readQueue, c.readWaiting, c.readFlight = nil, nil, nil
	for _, ch := range c.transfers {
		close(ch)
	}
	c.transfers = nil
}

// transferTarget returns the voter other than this node with the highest
// Match, or 0.
func (c *core) transferTarget() uint64 {
	voters := c.rn.Status().Config.Voters.IDs()
	var best, bestMatch uint64
	c.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if _, ok := voters[id]; !ok || id == c.cfg.ID || pr.IsLearner {
			return
		}
		if best == 0 || pr.Match > bestMatch || (pr.Match == bestMatch && id < best) {
			best, bestMatch = id, pr.Match
		}
	})
	return best
}

// status reports the replica's state.
func (c *core) status() Status {
	rs := c.rn.Status()
	s := Status{
		ID:                c.cfg.ID,
		Role:              roleName(rs.RaftState),
		Term:              rs.GetTerm(),
		Leader:            c.members[rs.Lead],
		Commit:            rs.GetCommit(),
		Applied:           c.applied,
		LogFirst:          c.st.firstIndex(),
		LogLast:           c.st.lastIndex(),
		LastLeaderContact: time.Duration(c.sinceLead) * c.cfg.TickInterval,
	}
	if rs.Lead == 0 {
		s.Leader = Peer{}
	}
	learners := rs.Config.Learners
	if _, ok := learners[c.cfg.ID]; ok && rs.RaftState == raft.StateFollower {
		s.Role = "learner"
	}
	for _, id := range sortedKeys(c.members) {
		_, learner := learners[id]
		m := Member{Peer: c.members[id], Voter: !learner}
		if pr, ok := rs.Progress[id]; ok {
			m.Match = pr.Match
		}
		s.Members = append(s.Members, m)
	}
	return s
}

func roleName(s raft.StateType) string {
	switch s {
	case raft.StateLeader:
		return "leader"
	case raft.StateCandidate:
		return "candidate"
	case raft.StatePreCandidate:
		return "precandidate"
	default:
		return "follower"
	}
}
