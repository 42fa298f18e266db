package replica

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/tallydb/tally/replica/memtransport"
	"github.com/tallydb/tally/store"
)

// joinSim is a simulation (sim_test.go) of a learner joining by snapshot
// under a steady writer: every round the leader proposes one command,
// every message is delivered, and every replica ticks once. A snapshot
// message to the learner is held for installRounds rounds before it is
// delivered, as a receiver holds one while it fetches a checkpoint; a
// snapshot message arriving meanwhile goes through the learner's
// prepGate, as in Node.Step: it waits for the held one (or is dropped),
// and one of a newer term cuts the held one short.
type joinSim struct {
	*sim
	learner       uint64
	installRounds int
	// drop: snapshot messages to the learner are lost (a receiver that
	// died silently) while drop is set.
	drop  bool
	held  *pb.Message
	due   int
	round int
	gate  prepGate
	// cut: the held message's prepare was cut short (prepGate.running's
	// cancel).
	cut bool
	// snapshots counts the snapshot messages that reached the learner's
	// side (held or dropped), refused the MsgSnapStatus ones it sent.
	snapshots int
}

func newJoinSim(t *testing.T, installRounds int, timeout time.Duration) *joinSim {
	s := newSim(t, 7, 3, 1)
	for _, n := range s.up() {
		n.c.cfg.SnapshotTimeout = timeout
	}
	// newSim's campaign may come before the bootstrap configuration
	// applied (raft refuses it then); elections are the harness's.
	for i := 0; s.leader() == nil; i++ {
		if i == 10 {
			t.Fatal("no leader elected")
		}
		_ = s.nodes[1].c.rn.Campaign()
		s.settle(20)
	}
	js := &joinSim{sim: s, learner: 4, installRounds: installRounds}
	for range 100 { // far past MaxLogEntries (16): the log is truncated
		js.step()
	}
	if first := s.leader().c.st.firstIndex(); first < 50 {
		t.Fatalf("leader's log starts at %d: not truncated", first)
	}
	return js
}

// write proposes one command on the leader.
func (js *joinSim) write() {
	l := js.leader()
	if l == nil {
		js.t.Fatal("no leader")
	}
	cmd := simCmd{key: uint64(js.rng.IntN(simKeys)), delta: 1}
	p, err := l.c.propose(encodeCmd(cmd))
	if err != nil && l.c.rn.BasicStatus().LeadTransferee != 0 {
		return // raft refuses proposals while it hands leadership over
	}
	if err != nil {
		js.t.Fatalf("propose: %v", err)
	}
	js.pending = append(js.pending, simProp{l.id, cmd, p})
}

// step runs one round.
func (js *joinSim) step() {
	js.round++
	js.write()
	for js.net.Len() > 0 {
		m := js.net.Take(0)
		if m == nil {
			continue
		}
		if m.GetType() == pb.MessageType_MsgSnap && m.GetTo() == js.learner {
			js.snapshots++
			if !js.drop && js.gate.offer(m) {
				js.hold(m)
			}
			continue
		}
		if n := js.nodes[m.GetTo()]; n != nil && n.c != nil {
			n.c.step(m)
		}
		js.processAll()
	}
	if js.held != nil && (js.cut || js.round >= js.due) {
		if !js.cut {
			js.nodes[js.learner].c.step(js.held)
			js.processAll()
		}
		js.held = nil
		if next := js.gate.finish(); next != nil {
			js.hold(next)
		}
	}
	for _, n := range js.up() {
		n.c.tick()
	}
	js.processAll()
	js.collect()
	js.check()
}

// hold starts preparing snapshot message m: it is delivered
// installRounds rounds later, unless cut short.
func (js *joinSim) hold(m *pb.Message) {
	js.held, js.due, js.cut = m, js.round+js.installRounds, false
	js.gate.running(m, func() { js.cut = true })
}

// addLearner adds the learner and starts it.
func (js *joinSim) addLearner() {
	l := js.leader()
	p := Peer{ID: js.learner, RaftAddr: fmt.Sprint("r", js.learner), ClientAddr: fmt.Sprint("c", js.learner)}
	pr, err := l.c.proposeConf(pb.ConfChangeType_ConfChangeAddLearnerNode, p)
	if err != nil {
		js.t.Fatal(err)
	}
	js.pending = append(js.pending, simProp{l.id, simCmd{key: confKey}, pr})
	js.start(js.nodes[js.learner], nil, true)
}

// caughtUp reports whether the leader sees the learner's log at its
// commit index.
func (js *joinSim) caughtUp() bool {
	st := js.leader().c.rn.Status()
	pr, ok := st.Progress[js.learner]
	return ok && pr.Match >= st.GetCommit()
}

// promote makes the learner a voter and checks the group converges.
func (js *joinSim) promote() {
	l := js.leader()
	pr, err := l.c.proposeConf(pb.ConfChangeType_ConfChangeAddNode, l.c.members[js.learner])
	if err != nil {
		js.t.Fatalf("promote: %v", err)
	}
	js.pending = append(js.pending, simProp{l.id, simCmd{key: confKey}, pr})
	for range 20 {
		js.step()
	}
	if _, ok := js.leader().c.rn.Status().Config.Voters.IDs()[js.learner]; !ok {
		js.t.Fatalf("learner %d not a voter after its promotion", js.learner)
	}
	js.finish()
}

// TestSnapshotJoinUnderWrites: a learner joins by snapshot while a steady
// writer runs, its install taking 300 rounds (300 entries, 19 times
// MaxLogEntries); it goes on from the log after that one snapshot and is
// promoted. Before the leader kept the log for a snapshot in flight it
// reported each snapshot finished as soon as it sent it, truncated the
// log past it, and the learner got snapshot after snapshot (issue 23: a
// shard move under four writers never finished).
func TestSnapshotJoinUnderWrites(t *testing.T) {
	js := newJoinSim(t, 300, time.Hour)
	js.addLearner()
	for i := 0; !js.caughtUp() || js.held != nil; i++ {
		if i == 2000 {
			t.Fatalf("learner not caught up after %d rounds: %d snapshots sent to it, %d installed", i, js.snapshots, js.installs)
		}
		js.step()
	}
	if js.installs != 1 {
		t.Fatalf("%d snapshots installed (%d sent to the learner), want 1", js.installs, js.snapshots)
	}
	l := js.leader()
	if got := l.c.m.snapshotsFailed.Load(); got != 0 {
		t.Fatalf("leader gave up on %d snapshots", got)
	}
	js.promote()
}

// TestSnapshotInFlightTimesOut: a snapshot whose receiver never answers
// (its message lost without a report) keeps the log for SnapshotTimeout
// only: then the leader truncates it and sends a newer snapshot, which the
// learner installs.
func TestSnapshotInFlightTimesOut(t *testing.T) {
	const timeoutTicks = 50
	js := newJoinSim(t, 5, timeoutTicks*time.Millisecond) // the sim ticks every ms
	js.drop = true
	js.addLearner()
	l := js.leader()
	for js.snapshots == 0 {
		js.step()
	}
	flight := l.c.snapFlights[js.learner]
	if flight == nil {
		t.Fatal("no snapshot in flight after one was sent")
	}
	// The log after the snapshot is kept until the timeout...
	for range timeoutTicks - 2 {
		js.step()
		if first := l.c.st.firstIndex(); first > flight.index+1 {
			t.Fatalf("round %d: log truncated to %d, past the snapshot in flight at %d", js.round, first, flight.index)
		}
	}
	// ...and not after it.
	js.drop = false
	for i := 0; l.c.st.firstIndex() <= flight.index+1; i++ {
		if i == 100 {
			t.Fatalf("log still starts at %d, snapshot in flight at %d: never timed out", l.c.st.firstIndex(), flight.index)
		}
		js.step()
	}
	if got := l.c.m.snapshotsFailed.Load(); got != 1 {
		t.Fatalf("leader gave up on %d snapshots, want 1", got)
	}
	for i := 0; !js.caughtUp() || js.held != nil; i++ {
		if i == 2000 {
			t.Fatalf("learner not caught up after %d rounds", i)
		}
		js.step()
	}
	if f := l.c.snapFlights[js.learner]; f != nil {
		t.Fatalf("snapshot at %d still in flight after the learner caught up", f.index)
	}
	if js.installs != 1 {
		t.Fatalf("%d snapshots installed, want 1 (the one after the timeout)", js.installs)
	}
	js.promote()
}

// TestSnapshotRefused: a receiver that cannot prepare a snapshot says so
// (MsgSnapStatus, rejected), and the leader sends a new one at once
// instead of waiting for SnapshotTimeout.
func TestSnapshotRefused(t *testing.T) {
	js := newJoinSim(t, 5, time.Hour)
	js.drop = true
	js.addLearner()
	l := js.leader()
	for js.snapshots == 0 {
		js.step()
	}
	flight := l.c.snapFlights[js.learner]
	if flight == nil {
		t.Fatal("no snapshot in flight after one was sent")
	}
	js.drop = false
	// What Node.Step sends when Prepare fails.
	js.nodes[js.learner].c.cfg.Transport.Send([]*pb.Message{{Type: pb.MessageType_MsgSnapStatus.Enum(),
		To: new(l.id), From: new(js.learner), Index: new(flight.index), Reject: new(true)}})
	for i := 0; !js.caughtUp() || js.held != nil; i++ {
		if i == 2000 {
			t.Fatalf("learner not caught up after %d rounds", i)
		}
		js.step()
	}
	if got := l.c.m.snapshotsFailed.Load(); got != 1 {
		t.Fatalf("leader gave up on %d snapshots, want 1 (the refused one)", got)
	}
	if js.installs != 1 {
		t.Fatalf("%d snapshots installed, want 1", js.installs)
	}
	js.promote()
}

// TestSnapshotHoldBounded: the log kept for a snapshot in flight stays
// within MaxHeldLogBytes; past it the leader truncates the log as usual,
// and the learner, behind it after its 300-round install, gets a second
// snapshot (a quick one here) and goes on from the log.
func TestSnapshotHoldBounded(t *testing.T) {
	js := newJoinSim(t, 300, time.Hour)
	const bound = 100 * (entryOverhead + 16 + headerLen) // about 100 entries
	l := js.leader()
	l.c.cfg.MaxHeldLogBytes = bound
	js.addLearner()
	var most uint64
	for i := 0; !js.caughtUp() || js.held != nil; i++ {
		if i == 2000 {
			t.Fatalf("learner not caught up after %d rounds: %d installed", i, js.installs)
		}
		js.step()
		most = max(most, l.c.st.bytes)
		if js.installs == 1 {
			js.installRounds = 5 // the second install is quick
		}
	}
	// A round appends one entry before the log is truncated again.
	if most > bound+2*(entryOverhead+16+headerLen) {
		t.Fatalf("leader held %d bytes of log, bound %d", most, bound)
	}
	if js.installs != 2 {
		t.Fatalf("%d snapshots installed, want 2 (the first ended behind the bounded log)", js.installs)
	}
	js.promote()
}

// TestSnapshotJoinLeaderChange: leadership moves while the learner
// prepares the first leader's snapshot (300 rounds). The new leader's
// snapshot, arriving meanwhile, is prepared instead (the old one, of an
// ended term, would be ignored by raft): the learner catches up after one
// install, with SnapshotTimeout an hour. When Node.Step dropped a
// snapshot arriving during a prepare, the new leader waited
// SnapshotTimeout for a snapshot nobody prepared (TestSnapshotJoin:
// "replica 4 applied 0" after 30 s on a loaded machine).
func TestSnapshotJoinLeaderChange(t *testing.T) {
	js := newJoinSim(t, 300, time.Hour)
	js.addLearner()
	for i := 0; js.held == nil; i++ {
		if i == 100 {
			t.Fatal("no snapshot sent to the learner")
		}
		js.step()
	}
	old := js.leader()
	if old.id != js.held.GetFrom() {
		t.Fatalf("snapshot from %d, leader %d", js.held.GetFrom(), old.id)
	}
	to := uint64(1)
	if old.id == 1 {
		to = 2
	}
	old.c.rn.TransferLeader(to)
	for i := 0; js.leader() == nil || js.leader() == old; i++ {
		if i == 100 {
			t.Fatal("leadership did not move")
		}
		js.step()
	}
	for i := 0; !js.caughtUp() || js.held != nil; i++ {
		if i == 2000 {
			t.Fatalf("learner not caught up %d rounds after the leader change: %d snapshots sent to it, %d installed",
				i, js.snapshots, js.installs)
		}
		js.step()
	}
	if js.installs != 1 {
		t.Fatalf("%d snapshots installed, want 1 (the new leader's)", js.installs)
	}
	if got := js.leader().c.m.snapshotsFailed.Load(); got != 0 {
		t.Fatalf("the new leader gave up on %d snapshots", got)
	}
	js.promote()
}

// gateSnaps is a SnapshotPreparer whose Prepare reports each call's index
// on calls; the one at blockIndex waits for its context, the others fail.
type gateSnaps struct {
	calls      chan uint64
	blockIndex uint64
}

func (g *gateSnaps) Create(context.Context, uint64) ([]byte, error) {
	return nil, errors.New("gateSnaps: no Create")
}

func (g *gateSnaps) Install(context.Context, uint64, []byte) (*store.DB, error) {
	return nil, errors.New("gateSnaps: no Install")
}

func (g *gateSnaps) Prepare(ctx context.Context, _, index uint64, _ []byte) error {
	g.calls <- index
	if index == g.blockIndex {
		<-ctx.Done()
		return ctx.Err()
	}
	return errors.New("gateSnaps: refused")
}

// TestNodePrepareNewerTerm drives Node.Step's prepare goroutine (not the
// sim's model of it): while the snapshot of term 2 at 10 is prepared, the
// same message again is dropped, one of term 2 at 11 waits, and one of
// term 3 at 12 (a new leader's) takes its place and cuts the first short.
// The first's sender is told nothing (it no longer leads); the new one is
// prepared, and its refusal reaches its sender.
func TestNodePrepareNewerTerm(t *testing.T) {
	net := memtransport.New()
	db, err := store.Open("n", &store.Options{FS: vfs.NewMem(), DisableBackground: true, CacheSize: 1 << 20, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	snaps := &gateSnaps{calls: make(chan uint64, 8), blockIndex: 10}
	n, err := Start(Config{ID: 4, DB: db, Join: true, Transport: net.Endpoint(4), Snapshots: snaps,
		TickInterval: time.Hour, Apply: func(uint64, []byte) ([]byte, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stopped := false
	defer func() {
		if !stopped {
			_ = n.Stop()
		}
	}()
	snap := func(from, term, index uint64) *pb.Message {
		return &pb.Message{Type: pb.MessageType_MsgSnap.Enum(), From: new(from), To: new(uint64(4)), Term: new(term),
			Snapshot: &pb.Snapshot{Data: appendSnapshotData(nil, 0, map[uint64]Peer{}, []byte("desc")),
				Metadata: &pb.SnapshotMetadata{Index: new(index), Term: new(term)}}}
	}
	ctx := context.Background()
	next := func() uint64 {
		t.Helper()
		select {
		case i := <-snaps.calls:
			return i
		case <-time.After(time.Minute):
			t.Fatal("no Prepare call in a minute")
			return 0
		}
	}
	if err := n.Step(ctx, snap(1, 2, 10)); err != nil {
		t.Fatal(err)
	}
	if got := next(); got != 10 {
		t.Fatalf("prepared %d first, want 10", got)
	}
	for _, m := range []*pb.Message{snap(1, 2, 10), snap(1, 2, 11), snap(2, 3, 12)} {
		if err := n.Step(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if got := next(); got != 12 {
		t.Fatalf("prepared %d after 10, want 12 (the newer term's)", got)
	}
	for deadline := time.Now().Add(time.Minute); net.Len() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no refusal sent in a minute")
		}
	}
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true // every prepare has ended (Stop waits for them)
	if len(snaps.calls) != 0 {
		t.Fatalf("prepared %d more after 12", <-snaps.calls)
	}
	if net.Len() != 1 {
		t.Fatalf("%d messages sent, want one refusal", net.Len())
	}
	m := net.Take(0)
	if m.GetType() != pb.MessageType_MsgSnapStatus || m.GetTo() != 2 || m.GetIndex() != 12 || !m.GetReject() {
		t.Fatalf("sent %v, want the refusal of 12 to 2", m)
	}
}
