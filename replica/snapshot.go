package replica

// Snapshots: catching up a replica the log cannot.
//
// When a replica is behind the leader's first log index (it is new, or it
// was down while the log was truncated), raft sends it a snapshot. A raft
// snapshot's Data here is an envelope (appendSnapshotData) around the
// Snapshotter's descriptor: the member table and the clock travel with it,
// so the receiver knows every member and applies the next entries at the
// right time. The leader makes the snapshot on demand, from its applied
// state, when raft asks for one (Storage.Snapshot); it is cached until the
// applied index moves.
//
// The receiver hands the descriptor to Snapshotter.Install, which replaces
// the state machine (for a real store: fetch the checkpoint the descriptor
// names, then have the host close and reopen the store on it) and returns
// the store to use from then on. The replica then rewrites its own Raft
// state in that store: the log restarts after the snapshot's index, its
// hard state (term and vote are its own, never the sender's), the
// ConfState and member table of the snapshot, and the applied mark.
//
// # In flight
//
// A snapshot takes the receiver seconds to minutes (fetch a checkpoint,
// reopen the store), while writers go on. The leader waits for it the way
// etcd raft means it to: the receiver's Progress stays in StateSnapshot
// (raft sends it heartbeats only) until the receiver acknowledges an index
// the log goes on from, and ReportSnapshot is called only when the
// snapshot failed. A flight (snapFlight, one per receiver) records the
// snapshot's index from the send, and while it lasts maybeCompact keeps
// the log after that index, so the receiver, once installed, goes on from
// the log (CockroachDB's raft log queue likewise keeps the log for a
// pending snapshot's index). A flight ends:
//
//   - when the receiver's Match reaches its index (installed);
//   - when the receiver refuses it (its Prepare failed: Node.Step sends a
//     rejected MsgSnapStatus, snapshotRefused): raft sends a new one;
//   - after Config.SnapshotTimeout with no sign of progress (no chunk of
//     its checkpoint served, SnapshotActivity): a receiver that died or
//     lost the message; raft probes it again;
//   - or when this replica stops leading or the receiver leaves.
//
// The log kept is bounded by Config.MaxHeldLogBytes of memory: past it the
// log is truncated as usual and the receiver needs another snapshot after
// its install. A message the transport could not send, or a receiver
// unreachable while its snapshot is in flight, makes raft send the same
// snapshot again (a restarted receiver resumes its fetch) but keeps the
// flight.
//
// Before this (issue 23), the leader reported every snapshot finished as
// soon as it sent it: raft probed the receiver, which was still fetching
// and rejected the probe, so raft sent snapshot after snapshot, the log
// was truncated past each, and a learner joining under four writers
// installed 28 snapshots in 4 minutes without catching up
// (bench/RESULTS.md "Shard move").

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"

	"github.com/tallydb/tally/store"
)

// Snapshotter creates and installs snapshots of the state machine.
type Snapshotter interface {
	// Create describes the state machine as it is now, with every entry up
	// to index applied (the node's loop does not apply more while Create
	// runs). The descriptor travels in a raft snapshot message, so it
	// should be small: a name for bulk data Install fetches.
	Create(ctx context.Context, index uint64) ([]byte, error)
	// Install replaces the state machine with the one data describes (at
	// entry index) and returns the store the replica uses from then on:
	// the same DB, or a new one the host reopened on the installed data.
	// A failed Install stops the replica.
	// A nil DB means the replica's store is unchanged.
	Install(ctx context.Context, index uint64, data []byte) (*store.DB, error)
}

// SnapshotPreparer is implemented by a Snapshotter whose Install has long
// work that can fail and be retried (fetching a checkpoint from the
// sender). When a snapshot message arrives, Node.Step runs Prepare on a
// goroutine of its own, one at a time, and hands the message to raft only
// once Prepare succeeded: raft then calls Install, which only swaps the
// prepared state in. A failed Prepare drops the message and tells the
// sender (a rejected MsgSnapStatus), which sends a snapshot again.
// A snapshot message arriving while one is being prepared waits its
// turn, and cuts the current one short if it is of a newer term
// (prepGate); those the replica's commit index already covers go to raft
// unprepared (it answers with its commit index).
type SnapshotPreparer interface {
	// Prepare readies the snapshot at index that data (the Snapshotter's
	// descriptor) describes, sent by replica from, so that Install is
	// quick and cannot fail for want of data.
	Prepare(ctx context.Context, from, index uint64, data []byte) error
}

// SnapshotActivity is implemented by a Snapshotter whose receivers fetch
// a snapshot's bulk data from the sender (CheckpointSnapshotter): the
// leader counts a fetch going on as progress of the snapshot, so a large
// install is not given up on while it runs (Config.SnapshotTimeout).
type SnapshotActivity interface {
	// LastServed returns when data of the snapshot at index was last
	// served to a receiver (zero if never).
	LastServed(index uint64) time.Time
}

// prepGate orders the snapshot messages a receiver prepares
// (SnapshotPreparer, Node.Step): one at a time, and none lost without a
// word to its sender. A message arriving while another is being prepared
// is kept and prepared next (the latest of the newest term; earlier ones
// wait no more), unless raft would ignore it or it is the same snapshot
// again. One of a newer term also cuts the current Prepare short: a
// receiver that heard from a new leader ignores the old leader's snapshot
// message once prepared.
//
// Before, a message arriving meanwhile was dropped. When leadership
// moved during a fetch, the new leader's snapshot was dropped while the
// old leader's was fetched, which raft then ignored (its term was over):
// the new leader waited SnapshotTimeout (30 s) for a snapshot nobody
// prepared, and TestSnapshotJoin's learner had applied nothing after
// 30 s.
type prepGate struct {
	mu     sync.Mutex
	cur    *pb.Message        // being prepared; nil: idle
	next   *pb.Message        // prepared after cur
	cancel context.CancelFunc // cur's Prepare, once running
}

// offer reports whether m is to be prepared now (nothing was); if not, m
// waits for the one being prepared, or is dropped (see the type).
func (g *prepGate) offer(m *pb.Message) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cur == nil {
		g.cur = m
		return true
	}
	if m.GetTerm() < g.cur.GetTerm() || sameSnapshot(m, g.cur) ||
		g.next != nil && m.GetTerm() < g.next.GetTerm() {
		return false
	}
	g.next = m
	if m.GetTerm() > g.cur.GetTerm() && g.cancel != nil {
		g.cancel()
	}
	return false
}

// running records how to cut m's Prepare short; it does so at once if a
// newer term's message came first.
func (g *prepGate) running(m *pb.Message, cancel context.CancelFunc) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cur != m {
		return
	}
	g.cancel = cancel
	if g.next != nil && g.next.GetTerm() > m.GetTerm() {
		cancel()
	}
}

// superseded reports whether a message of a newer term than m waits.
func (g *prepGate) superseded(m *pb.Message) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.next != nil && g.next.GetTerm() > m.GetTerm()
}

// finish ends the current message's turn and returns the one to prepare
// next (nil: the gate is idle, the next offer prepares).
func (g *prepGate) finish() *pb.Message {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cur, g.next, g.cancel = g.next, nil, nil
	return g.cur
}

// sameSnapshot reports whether a and b are the same snapshot from the
// same sender in the same term (raft sent it again).
func sameSnapshot(a, b *pb.Message) bool {
	return a.GetFrom() == b.GetFrom() && a.GetTerm() == b.GetTerm() &&
		a.GetSnapshot().GetMetadata().GetIndex() == b.GetSnapshot().GetMetadata().GetIndex()
}

// snapFlight is a snapshot a leader sent and waits on (see the file
// comment, "In flight").
type snapFlight struct {
	index  uint64
	idle   int       // ticks since the last sign of progress
	served time.Time // SnapshotActivity's last answer
}

// snapshotSent records the snapshot message m the leader sent. raft keeps
// the receiver's progress in StateSnapshot, sending it nothing else, until
// the receiver acknowledges an index the log goes on from or the snapshot
// is reported failed; the flight keeps the log after m's index
// (maybeCompact) until the receiver's Match reaches it, the receiver
// refuses it, or it times out (watchSnapshots). A send of the same
// snapshot again (raft resends it after a failure report) goes on with
// the same flight.
func (c *core) snapshotSent(m *pb.Message) {
	if c.snapFlights == nil {
		c.snapFlights = map[uint64]*snapFlight{}
	}
	index := m.GetSnapshot().GetMetadata().GetIndex()
	c.m.snapshotsSent.Add(1)
	if f := c.snapFlights[m.GetTo()]; f != nil && f.index == index {
		return
	}
	c.snapFlights[m.GetTo()] = &snapFlight{index: index}
	c.log.Info("replica: sent snapshot", "to", m.GetTo(), "index", index,
		"log_first", c.st.firstIndex(), "applied", c.applied)
}

// watchSnapshots (every tick) ends the flights of snapshots installed
// (the receiver's Match reached the index) or whose receiver left, and
// those with no sign of progress for SnapshotTimeout: raft is told the
// snapshot failed, and the log is no longer kept for it.
func (c *core) watchSnapshots() {
	if len(c.snapFlights) == 0 {
		return
	}
	if c.state != raft.StateLeader {
		clear(c.snapFlights)
		return
	}
	prs := map[uint64]tracker.Progress{}
	c.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		prs[id] = pr
	})
	limit := max(int(c.cfg.SnapshotTimeout/c.cfg.TickInterval), 1)
	act, _ := c.cfg.Snapshots.(SnapshotActivity)
	for _, id := range sortedKeys(c.snapFlights) {
		f := c.snapFlights[id]
		pr, ok := prs[id]
		if !ok {
			delete(c.snapFlights, id)
			continue
		}
		if pr.Match >= f.index {
			delete(c.snapFlights, id)
			if pr.State == tracker.StateSnapshot {
				// Installed, but the log no longer goes on from it
				// (MaxHeldLogBytes): raft leaves the replica waiting
				// until told, then probes it and sends a newer one.
				c.rn.ReportSnapshot(id, raft.SnapshotFinish)
			}
			continue
		}
		f.idle++
		if act != nil {
			if t := act.LastServed(f.index); t.After(f.served) {
				f.served, f.idle = t, 0
			}
		}
		if f.idle >= limit {
			delete(c.snapFlights, id)
			c.m.snapshotsFailed.Add(1)
			c.log.Warn("replica: snapshot timed out", "to", id, "index", f.index, "after", c.cfg.SnapshotTimeout)
			c.rn.ReportSnapshot(id, raft.SnapshotFailure)
		}
	}
}

// snapshotUnreachable: a message to id could not be sent. While id has a
// snapshot in flight, raft is told the snapshot failed, so it sends it
// again once id answers (a receiver restarted during its fetch resumes
// it); the flight, and the log kept for it, go on.
func (c *core) snapshotUnreachable(id uint64) {
	if c.snapFlights[id] != nil {
		c.rn.ReportSnapshot(id, raft.SnapshotFailure)
	}
}

// snapshotRefused handles a receiver's report (MsgSnapStatus, rejected)
// that it could not prepare the snapshot at m.Index this leader sent it
// (its checkpoint may be gone): the flight ends, the cached snapshot is
// not sent again, and raft may send a new one at once.
func (c *core) snapshotRefused(m *pb.Message) {
	f := c.snapFlights[m.GetFrom()]
	if f == nil || f.index != m.GetIndex() || !m.GetReject() || c.state != raft.StateLeader {
		return
	}
	delete(c.snapFlights, m.GetFrom())
	if c.snapCache.GetMetadata().GetIndex() == f.index {
		c.snapCache = nil
	}
	c.m.snapshotsFailed.Add(1)
	c.log.Info("replica: snapshot refused by its receiver", "from", m.GetFrom(), "index", f.index)
	c.rn.ReportSnapshot(m.GetFrom(), raft.SnapshotFailure)
}

// snapshotHold returns the lowest index a snapshot in flight needs the
// log kept after (0: none), while the log in memory is within
// MaxHeldLogBytes.
func (c *core) snapshotHold() uint64 {
	if c.state != raft.StateLeader || c.st.bytes > c.cfg.MaxHeldLogBytes {
		return 0
	}
	var hold uint64
	for _, f := range c.snapFlights {
		if hold == 0 || f.index < hold {
			hold = f.index
		}
	}
	return hold
}

// ownStateKey is the context key of a replica's own Raft state during an
// install (Snapshotter.Install's ctx).
type ownStateKey struct{}

// ownState is what must stay this replica's in a store swapped in by an
// install: its hard state (term, vote; commit at least the snapshot's
// index) and its boot counter.
type ownState struct {
	hard *pb.HardState
	boot uint64
}

// ownStateKVs returns the raw keys and values of ctx's ownState, for
// store.PutStaged, or nil.
func ownStateKVs(ctx context.Context) [][2][]byte {
	st, ok := ctx.Value(ownStateKey{}).(ownState)
	if !ok {
		return nil
	}
	return [][2][]byte{
		{keyHard, appendHardState(nil, st.hard)},
		{keyBoot, binary.BigEndian.AppendUint64(nil, st.boot)},
	}
}

// appendSnapshotData wraps a Snapshotter's descriptor.
//
//	field    width  meaning
//	-------  -----  ---------------------------------------
//	millis   8      Clock of the snapshot's state, Unix ms
//	members  n      member table (appendMembers)
//	desc     rest   the Snapshotter's descriptor
func appendSnapshotData(dst []byte, millis int64, members map[uint64]Peer, desc []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(millis))
	dst = appendMembers(dst, members)
	return append(dst, desc...)
}

func decodeSnapshotData(b []byte) (int64, map[uint64]Peer, []byte, error) {
	if len(b) < 8 {
		return 0, nil, nil, fmt.Errorf("%w: snapshot data of %d bytes", ErrCorrupt, len(b))
	}
	ms := int64(binary.BigEndian.Uint64(b))
	m, rest, err := decodeMembers(b[8:])
	return ms, m, rest, err
}

// snapshot is Storage.Snapshot: the state at the applied index.
func (c *core) snapshot() (*pb.Snapshot, error) {
	if c.cfg.Snapshots == nil {
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	// The cached snapshot serves while the log still holds every entry
	// after it: a receiver fetching a large checkpoint is sent the same
	// snapshot again (raft probes it until it applied one), and a new
	// checkpoint per probe would delete the one it is fetching. A
	// configuration change since makes a new one (raft refuses a snapshot
	// whose ConfState does not hold the receiver).
	if s := c.snapCache; s != nil && s.GetMetadata().GetIndex() >= c.st.snap.GetIndex() &&
		proto.Equal(s.GetMetadata().GetConfState(), c.st.conf) {
		return s, nil
	}
	term, err := c.st.Term(c.applied)
	if err != nil {
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	desc, err := c.cfg.Snapshots.Create(context.Background(), c.applied)
	if err != nil {
		if c.log != nil {
			c.log.Warn("replica: create snapshot", "index", c.applied, "err", err)
		}
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	c.snapCache = &pb.Snapshot{
		Data: appendSnapshotData(nil, c.cfg.Clock.Now().UnixMilli(), c.members, desc),
		Metadata: &pb.SnapshotMetadata{
			Index:     new(c.applied),
			Term:      new(term),
			ConfState: proto.Clone(c.st.conf).(*pb.ConfState),
		},
	}
	return c.snapCache, nil
}

// install installs a received snapshot (step 1 of the Ready order).
func (c *core) install(s *pb.Snapshot, hs *pb.HardState) error {
	meta := s.GetMetadata()
	index := meta.GetIndex()
	if c.cfg.Snapshots == nil {
		return fmt.Errorf("replica: snapshot at %d received with no Snapshotter", index)
	}
	millis, members, desc, err := decodeSnapshotData(s.GetData())
	if err != nil {
		return err
	}
	// This replica's own hard state (term and vote), from before the
	// install: the new store holds the sender's.
	prevHard := proto.Clone(c.st.hard).(*pb.HardState)
	// What this replica's hard state will be in the new store; a
	// Snapshotter that swaps stores writes it into the copy before the
	// swap (ownState), so a crash between the swap and resetTo below never
	// leaves the sender's term and vote as this replica's.
	own := prevHard
	if hs != nil && !raft.IsEmptyHardState(hs) {
		own = proto.Clone(hs).(*pb.HardState)
	}
	if own.GetCommit() < index {
		own.Commit = new(index)
	}
	ctx := context.WithValue(context.Background(), ownStateKey{}, ownState{hard: own, boot: c.nextID >> 32})
	db, err := c.cfg.Snapshots.Install(ctx, index, desc)
	if err != nil {
		return fmt.Errorf("replica: install snapshot at %d: %w", index, err)
	}
	if db != nil && db != c.db {
		st, err := openStorage(db)
		if err != nil {
			return err
		}
		st.snapshots = c.snapshot
		// The raft.RawNode keeps the storage it was given: replace its
		// contents in place.
		*c.st = *st
		c.db, c.cfg.DB = db, db
		// The boot counter is this replica's, not the sender's: proposal
		// ids must never repeat across this replica's starts.
		if err := c.st.keepBoot(c.nextID >> 32); err != nil {
			return err
		}
	}
	hard := prevHard
	if hs != nil && !raft.IsEmptyHardState(hs) {
		hard = proto.Clone(hs).(*pb.HardState)
	}
	if hard.GetCommit() < index {
		hard.Commit = new(index)
	}
	if err := c.st.resetTo(meta, hard, appendMembers(nil, members)); err != nil {
		return fmt.Errorf("replica: reset the raft log at %d: %w", index, err)
	}
	if err := c.db.SetAppliedIndex(index); err != nil {
		return err
	}
	c.members = members
	if u, ok := c.cfg.Transport.(PeerUpdater); ok {
		u.UpdatePeers(c.memberList())
	}
	c.m.installs.Add(1)
	c.cfg.Clock.advance(millis)
	if millis > c.lastTS {
		c.lastTS = millis
	}
	// Proposals at or below the snapshot's index may be in it or not: the
	// replica cannot tell. The others are settled by the term rule. An
	// unlocated forwarded proposal may still show up after the snapshot
	// (forward.go): it waits on.
	for _, id := range sortedKeys(c.pending) {
		if p := c.pending[id]; p.index <= index && !p.unlocated {
			delete(c.pending, id)
			delete(c.byIndex, p.index)
			p.finish(nil, fmt.Errorf("%w: entry %d was covered by a snapshot", ErrResultUnknown, p.index))
		}
	}
	c.settle(index, meta.GetTerm(), header{}, false, nil)
	c.applied, c.appliedT, c.lastMark = index, meta.GetTerm(), index
	c.publishApplied(index)
	c.snapCache = nil
	return nil
}
