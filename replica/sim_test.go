package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/tallydb/tally/replica/memtransport"
	"github.com/tallydb/tally/store"
)

// The deterministic simulation: replicas driven from one seeded loop, with
// no goroutines: ticks, message delivery (in a random order, dropped,
// duplicated), partitions, crashes on a filesystem that loses unsynced
// writes, restarts, elections, leadership transfers and membership
// changes, under a workload of counter increments checked against a model
// after every step.
//
// Elections: the simulated election timeout is out of reach of the ticks,
// so elections happen only when the harness calls one (every replica
// forgets its leader, then one campaigns) and raft's randomized timeouts
// cannot make a seed's run differ between two runs.

const simKeys = 4

// confKey marks a conf change proposal in the sim's pending list.
const confKey = ^uint64(0)

type simCmd struct {
	key   uint64
	delta uint64
}

func encodeCmd(c simCmd) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, c.key), c.delta)
}

func decodeCmd(b []byte) (simCmd, bool) {
	if len(b) != 16 {
		return simCmd{}, false
	}
	return simCmd{binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])}, true
}

type simNode struct {
	id    uint64
	fs    *vfs.MemFS
	db    *store.DB
	cnt   *store.Counter
	c     *core // nil while down
	clock *Clock
}

type sim struct {
	t       *testing.T
	rng     *rand.Rand
	net     *memtransport.Network
	nodes   map[uint64]*simNode
	ids     []uint64
	now     time.Time
	log     map[uint64]simCmd // committed commands by index (the model)
	leaders map[uint64]uint64 // term -> leader
	pending []simProp
	acked   []simAck
	reads   []simRead
	steps   int
	// what happened, for the log and for the test's minimum
	installs, crashes, confs, runs int
}

type simProp struct {
	node uint64
	cmd  simCmd
	p    *proposal
}

type simAck struct {
	index uint64
	cmd   simCmd
}

type simRead struct {
	node  uint64
	r     *readReq
	floor uint64 // highest acknowledged index when the read started
}

// simSnapshots is the sim's Snapshotter: a snapshot is the counter's values.
type simSnapshots struct {
	s *sim
	n *simNode
}

func (s simSnapshots) Create(_ context.Context, index uint64) ([]byte, error) {
	var out []byte
	for k := range uint64(simKeys) {
		v, err := s.n.cnt.GetColumn(k, "v")
		if err != nil {
			return nil, err
		}
		out = binary.BigEndian.AppendUint64(out, v)
	}
	return out, nil
}

func (s simSnapshots) Install(_ context.Context, index uint64, data []byte) (*store.DB, error) {
	if len(data) != 8*simKeys {
		return nil, fmt.Errorf("snapshot of %d bytes", len(data))
	}
	s.s.installs++
	// The state and the apply mark of index commit together.
	return nil, s.n.db.ApplyEntry(index, func() error {
		b := s.n.db.NewBatch()
		defer b.Close()
		for k := range uint64(simKeys) {
			if err := b.Set("c", k, binary.BigEndian.Uint64(data[8*k:])); err != nil {
				return err
			}
		}
		return b.Commit()
	})
}

// applyRun is the sim's Config.ApplyRun: a random prefix of the run, its
// increments in one batch marked with MarkEntries; sometimes it leaves the
// prefix to Apply instead, as a host does for commands it cannot fold.
func (s *sim) applyRun(n *simNode, first uint64, cmds [][]byte) (int, [][]byte, bool, error) {
	took := 1 + s.rng.IntN(len(cmds))
	if s.rng.IntN(4) == 0 {
		return took, nil, false, nil
	}
	b := n.db.NewBatch()
	defer b.Close()
	for k, data := range cmds[:took] {
		index := first + uint64(k)
		cmd, ok := decodeCmd(data)
		if !ok {
			s.t.Errorf("node %d: bad command at %d", n.id, index)
			return took, nil, false, nil
		}
		if prev, ok := s.log[index]; ok && prev != cmd {
			s.t.Errorf("node %d applies %v at %d, another replica applied %v", n.id, cmd, index, prev)
		}
		if err := b.Incr("c", cmd.key, "v", int64(cmd.delta)); err != nil {
			s.t.Errorf("node %d: stage %d: %v", n.id, index, err)
		}
	}
	if err := b.MarkEntries(first, first+uint64(took)-1); err != nil {
		s.t.Errorf("node %d: mark %d..%d: %v", n.id, first, first+uint64(took)-1, err)
	}
	if err := b.Commit(); err != nil {
		s.t.Errorf("node %d: commit run %d..%d: %v", n.id, first, first+uint64(took)-1, err)
		return took, nil, false, nil
	}
	s.runs++
	replies := make([][]byte, took)
	for k, data := range cmds[:took] {
		cmd, _ := decodeCmd(data)
		s.log[first+uint64(k)] = cmd
		replies[k] = binary.BigEndian.AppendUint64(nil, b.Result(k))
	}
	return took, replies, true, nil
}

func (s *sim) openStore(n *simNode) {
	db, err := store.Open("n", &store.Options{FS: n.fs, DisableBackground: true, CacheSize: 1 << 20, MemTableSize: 1 << 20})
	if err != nil {
		s.t.Fatalf("node %d: open: %v", n.id, err)
	}
	if _, err := db.Counter("c"); err != nil {
		if err := db.CreateCounter("c", store.CounterOptions{}); err != nil {
			s.t.Fatal(err)
		}
		if err := db.AddColumn("c", "v", store.ColumnOptions{MaxBits: 64}); err != nil {
			s.t.Fatal(err)
		}
	}
	n.db = db
	n.cnt, err = db.Counter("c")
	if err != nil {
		s.t.Fatal(err)
	}
}

func (s *sim) start(n *simNode, peers []Peer, join bool) {
	s.openStore(n)
	cfg := Config{
		ID: n.id, DB: n.db, Peers: peers, Join: join,
		Transport: s.net.Endpoint(n.id),
		Apply: func(index uint64, data []byte) ([]byte, error) {
			cmd, ok := decodeCmd(data)
			if !ok {
				s.t.Errorf("node %d: bad command at %d", n.id, index)
				return nil, nil
			}
			if prev, ok := s.log[index]; ok && prev != cmd {
				s.t.Errorf("node %d applies %v at %d, another replica applied %v", n.id, cmd, index, prev)
			}
			s.log[index] = cmd
			v, err := n.cnt.Incr(cmd.key, "v", int64(cmd.delta))
			if err != nil {
				s.t.Errorf("node %d: apply %d: %v", n.id, index, err)
			}
			return binary.BigEndian.AppendUint64(nil, v), nil
		},
		ApplyRun:     func(first uint64, cmds [][]byte) (int, [][]byte, bool, error) { return s.applyRun(n, first, cmds) },
		Snapshots:    simSnapshots{s, n},
		Clock:        n.clock,
		Now:          func() time.Time { return s.now },
		Sync:         true,
		TickInterval: time.Millisecond,
		// One goroutine drives the run: the same seed, the same run.
		serialPersist: true,
		// Out of the ticks' reach: the harness calls elections.
		ElectionTicks:  1 << 30,
		HeartbeatTicks: 1,
		MaxLogEntries:  16,
		// A dropped snapshot message is given up on after 20 ticks.
		SnapshotTimeout: 20 * time.Millisecond,
	}
	c0, err := cfg.withDefaults()
	if err != nil {
		s.t.Fatal(err)
	}
	n.c, err = newCore(c0)
	if err != nil {
		s.t.Fatalf("node %d: start: %v", n.id, err)
	}
	s.net.SetDown(n.id, false)
}

func newSim(t *testing.T, seed uint64, voters, spare int) *sim {
	s := &sim{
		t: t, rng: rand.New(rand.NewPCG(seed, 22)), net: memtransport.New(),
		nodes: map[uint64]*simNode{}, now: time.UnixMilli(1_700_000_000_000),
		log: map[uint64]simCmd{}, leaders: map[uint64]uint64{},
	}
	var peers []Peer
	for i := 1; i <= voters; i++ {
		peers = append(peers, Peer{ID: uint64(i), RaftAddr: fmt.Sprintf("r%d", i), ClientAddr: fmt.Sprintf("c%d", i)})
	}
	for i := 1; i <= voters+spare; i++ {
		n := &simNode{id: uint64(i), fs: vfs.NewCrashableMem(), clock: NewClock()}
		s.nodes[n.id] = n
		s.ids = append(s.ids, n.id)
		if i <= voters {
			s.start(n, peers, false)
		}
	}
	// The first leader.
	s.nodes[1].c.rn.Campaign()
	s.settle(200)
	return s
}

func (s *sim) up() []*simNode {
	var out []*simNode
	for _, id := range s.ids {
		if n := s.nodes[id]; n.c != nil {
			out = append(out, n)
		}
	}
	return out
}

func (s *sim) leader() *simNode {
	var best *simNode
	for _, n := range s.up() {
		if n.c.state == raft.StateLeader && (best == nil || n.c.rn.BasicStatus().GetTerm() > best.c.rn.BasicStatus().GetTerm()) {
			best = n
		}
	}
	return best
}

// processAll runs every up replica's Ready handling.
func (s *sim) processAll() {
	for _, n := range s.up() {
		n.c.process()
		if n.c.err != nil {
			s.t.Fatalf("node %d failed: %v", n.id, n.c.err)
		}
	}
}

// deliver hands the i-th message to its receiver.
func (s *sim) deliver(i int) {
	m := s.net.Take(i)
	if m == nil {
		return
	}
	if n := s.nodes[m.GetTo()]; n != nil && n.c != nil {
		n.c.step(m)
	}
}

// settle delivers every message and ticks until the network is quiet.
func (s *sim) settle(rounds int) {
	for range rounds {
		for s.net.Len() > 0 {
			s.deliver(0)
			s.processAll()
		}
		for _, n := range s.up() {
			n.c.tick()
		}
		s.processAll()
		s.collect()
		s.check()
	}
}

// collect records finished proposals and reads.
func (s *sim) collect() {
	kept := s.pending[:0]
	for _, p := range s.pending {
		select {
		case <-p.p.done:
			switch {
			case p.p.err == nil && p.cmd.key == confKey:
				s.confs++
			case p.p.err == nil:
				s.acked = append(s.acked, simAck{p.p.index, p.cmd})
				if got := s.log[p.p.index]; got != p.cmd {
					s.t.Fatalf("proposal %v acknowledged at %d, log holds %v", p.cmd, p.p.index, got)
				}

			}
		default:
			kept = append(kept, p)
		}
	}
	s.pending = kept
	keptR := s.reads[:0]
	for _, r := range s.reads {
		select {
		case <-r.r.done:
			n := s.nodes[r.node]
			if r.r.err == nil && n.c != nil && n.c.applied < r.floor {
				s.t.Fatalf("read on node %d returned at applied %d, below acknowledged %d", r.node, n.c.applied, r.floor)
			}
		default:
			keptR = append(keptR, r)
		}
	}
	s.reads = keptR
}

// check verifies the invariants: one leader per term, every up replica's
// counters equal to the model's at its applied index, acknowledged writes
// in the log.
func (s *sim) check() {
	s.t.Helper()
	for _, n := range s.up() {
		if n.c.state == raft.StateLeader {
			term := n.c.rn.BasicStatus().GetTerm()
			if l, ok := s.leaders[term]; ok && l != n.id {
				s.t.Fatalf("step %d: two leaders in term %d: %d and %d", s.steps, term, l, n.id)
			}
			s.leaders[term] = n.id
		}
		var want [simKeys]uint64
		for idx, cmd := range s.log {
			if idx <= n.c.applied {
				want[cmd.key] += cmd.delta
			}
		}
		for k := range uint64(simKeys) {
			got, err := n.cnt.GetColumn(k, "v")
			if err != nil {
				s.t.Fatal(err)
			}
			if got != want[k] {
				s.t.Fatalf("step %d: node %d at applied %d: key %d = %d, model %d", s.steps, n.id, n.c.applied, k, got, want[k])
			}
		}
		if got, want := n.c.st.bytes, entriesSize(n.c.st.ents); got != want {
			s.t.Fatalf("step %d: node %d: log counted as %d bytes, holds %d", s.steps, n.id, got, want)
		}
		if a := n.db.AppliedIndex(); a > n.c.applied {
			s.t.Fatalf("step %d: node %d: store's AppliedIndex %d ahead of applied %d", s.steps, n.id, a, n.c.applied)
		}
	}
}

func (s *sim) crash(n *simNode) {
	s.crashes++
	crashed := n.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: s.rng.IntN(101), RNG: s.rng})
	n.c.failAll(ErrStopped)
	n.c = nil
	s.net.SetDown(n.id, true)
	_ = n.db.Close() // writes to the discarded filesystem
	n.fs = crashed
	// Proposals of the crashed replica: their fate is unknown.
	kept := s.pending[:0]
	for _, p := range s.pending {
		if p.node != n.id {
			kept = append(kept, p)
		}
	}
	s.pending = kept
}

func (s *sim) maxAcked() uint64 {
	var m uint64
	for _, a := range s.acked {
		m = max(m, a.index)
	}
	return m
}

// step does one random action, then lets every replica process.
func (s *sim) step() {
	s.steps++
	r := s.rng.IntN(100)
	up := s.up()
	switch {
	case r < 40 && s.net.Len() > 0: // deliver random messages (reorders)
		for k := s.rng.IntN(8); k >= 0 && s.net.Len() > 0; k-- {
			s.deliver(s.rng.IntN(s.net.Len()))
			s.processAll()
		}
	case r < 42 && s.net.Len() > 0:
		s.net.Drop(s.rng.IntN(s.net.Len()))
	case r < 44 && s.net.Len() > 0:
		s.net.Duplicate(s.rng.IntN(s.net.Len()))
	case r < 54:
		for _, n := range up {
			n.c.tick()
		}
		s.now = s.now.Add(time.Duration(s.rng.IntN(50)) * time.Millisecond)
	case r < 76:
		if l := s.leader(); l != nil {
			// A batch of commands in one proposal message, as Node's
			// loop proposes what its callers queued.
			var qs []queuedProposal
			var cmds []simCmd
			for k := 1 + s.rng.IntN(4); k > 0; k-- {
				cmd := simCmd{key: uint64(s.rng.IntN(simKeys)), delta: uint64(1 + s.rng.IntN(9))}
				cmds = append(cmds, cmd)
				qs = append(qs, newQueued(encodeCmd(cmd)))
			}
			l.c.submitBatch(qs)
			for i, q := range qs {
				select {
				case <-q.p.done:
					if err := q.p.err; !errors.Is(err, ErrProposalDropped) && !errors.Is(err, ErrNotLeader) {
						s.t.Fatalf("propose: %v", err)
					}
				default:
					s.pending = append(s.pending, simProp{l.id, cmds[i], q.p})
				}
			}
		}
	case r < 79 && len(up) > 0:
		n := up[s.rng.IntN(len(up))]
		rr := &readReq{done: make(chan struct{})}
		n.c.readIndex(rr)
		s.reads = append(s.reads, simRead{n.id, rr, s.maxAcked()})
	case r < 81 && len(up) > 0: // an election
		for _, n := range up {
			_ = n.c.rn.ForgetLeader()
		}
		_ = up[s.rng.IntN(len(up))].c.rn.Campaign()
	case r < 83:
		if l := s.leader(); l != nil {
			if to := l.c.transferTarget(); to != 0 {
				l.c.rn.TransferLeader(to)
			}
		}
	case r < 84 && len(up) > 0 && len(up) > len(s.ids)/2: // crash one
		s.crash(up[s.rng.IntN(len(up))])
	case r < 88: // restart a crashed replica
		for _, id := range s.ids {
			if n := s.nodes[id]; n.c == nil && n.db != nil {
				s.start(n, nil, false)
				break
			}
		}
	case r < 89:
		a, b := s.ids[s.rng.IntN(len(s.ids))], s.ids[s.rng.IntN(len(s.ids))]
		if a != b {
			s.net.Partition(a, b)
		}
	case r < 92:
		s.net.Heal()
	case r < 95:
		s.membership()
	}
	s.processAll()
	s.collect()
	s.check()
}

// membership adds a spare replica as a learner, promotes a caught-up
// learner, or removes a member other than the leader (keeping three
// voters).
func (s *sim) membership() {
	l := s.leader()
	if l == nil {
		return
	}
	st := l.c.rn.Status()
	for _, id := range s.ids {
		n := s.nodes[id]
		_, member := st.Progress[id]
		switch {
		case !member && n.db == nil:
			p := Peer{ID: id, RaftAddr: fmt.Sprintf("r%d", id), ClientAddr: fmt.Sprintf("c%d", id)}
			if pr, err := l.c.proposeConf(pb.ConfChangeType_ConfChangeAddLearnerNode, p); err == nil {
				s.pending = append(s.pending, simProp{l.id, simCmd{key: confKey}, pr})
				s.start(n, nil, true)
			}
			return
		case member && st.Progress[id].IsLearner && st.Progress[id].Match >= st.GetCommit():
			if pr, err := l.c.proposeConf(pb.ConfChangeType_ConfChangeAddNode, l.c.members[id]); err == nil {
				s.pending = append(s.pending, simProp{l.id, simCmd{key: confKey}, pr})
			}
			return
		}
	}
	if len(st.Config.Voters.IDs()) > 3 {
		for _, id := range s.ids {
			if _, ok := st.Config.Voters.IDs()[id]; ok && id != l.id {
				if pr, err := l.c.proposeConf(pb.ConfChangeType_ConfChangeRemoveNode, l.c.members[id]); err == nil {
					s.pending = append(s.pending, simProp{l.id, simCmd{key: confKey}, pr})
				}
				return
			}
		}
	}
}

// finish heals everything, restarts every replica that is still a member,
// elects a leader and waits for every replica to apply the same log.
func (s *sim) finish() {
	s.net.Heal()
	for _, id := range s.ids {
		if n := s.nodes[id]; n.c == nil && n.db != nil {
			s.start(n, nil, false)
		}
	}
	for attempt := range 20 {
		s.settle(50)
		l := s.leader()
		if l == nil || attempt%5 == 4 {
			up := s.up()
			for _, n := range up {
				_ = n.c.rn.ForgetLeader()
			}
			_ = up[s.rng.IntN(len(up))].c.rn.Campaign()
			continue
		}
		// A write in the leader's term makes everything before it commit.
		if p, err := l.c.propose(encodeCmd(simCmd{0, 1})); err == nil {
			s.pending = append(s.pending, simProp{l.id, simCmd{0, 1}, p})
		}
		s.settle(50)
		st := l.c.rn.Status()
		converged := len(s.pending) == 0
		for _, n := range s.up() {
			if _, member := st.Progress[n.id]; member && n.c.applied != l.c.applied {
				converged = false
			}
		}
		if converged {
			break
		}
	}
	// A replica removed while it was cut off never learns it was (the
	// group no longer sends to it): its proposals stay pending until its
	// caller's context ends, as raft gives it no way to know their fate.
	// Every other proposal must be settled.
	if l := s.leader(); l != nil {
		cfg := l.c.rn.Status().Config
		kept := s.pending[:0]
		for _, sp := range s.pending {
			_, voter := cfg.Voters.IDs()[sp.node]
			_, learner := cfg.Learners[sp.node]
			if voter || learner {
				kept = append(kept, sp)
			}
		}
		s.pending = kept
	}
	if len(s.pending) != 0 {
		for _, sp := range s.pending {
			s.t.Logf("pending on node %d: id %d term %d index %d", sp.node, sp.p.id, sp.p.term, sp.p.index)
		}
		s.t.Fatalf("%d proposals still pending after healing", len(s.pending))
	}
	l := s.leader()
	if l == nil {
		s.t.Fatal("no leader after healing")
	}
	st := l.c.rn.Status()
	for _, n := range s.up() {
		if _, member := st.Progress[n.id]; member && n.c.applied != l.c.applied {
			s.t.Fatalf("node %d applied %d, leader %d applied %d", n.id, n.c.applied, l.id, l.c.applied)
		}
	}
	for _, a := range s.acked {
		if a.index > l.c.applied || s.log[a.index] != a.cmd {
			s.t.Fatalf("acknowledged %v at %d lost", a.cmd, a.index)
		}
	}
	for _, n := range s.nodes {
		if n.db != nil {
			if err := n.db.Check(); err != nil {
				s.t.Errorf("node %d: store check: %v", n.id, err)
			}
			_ = n.db.Close()
		}
	}
}

func simSeeds(t *testing.T) int {
	if v := os.Getenv("TALLY_SIM_SEEDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("TALLY_SIM_SEEDS=%q: %v", v, err)
		}
		return n
	}
	return 24 // 48 runs, a few seconds on 2 cores; thousands opt-in
}

// simFirstSeed is the first seed run: TALLY_SIM_SEED=S (with
// TALLY_SIM_SEEDS=1, that seed alone, as a failure's name gives it).
func simFirstSeed(t *testing.T) uint64 {
	v := os.Getenv("TALLY_SIM_SEED")
	if v == "" {
		return 0
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("TALLY_SIM_SEED=%q: %v", v, err)
	}
	return n
}

// TestSimulation runs seeded simulations. A seed fixes the workload, the
// network's order, drops and partitions, and which node crashes or
// restarts when and how much unsynced data it loses; what Pebble's own
// goroutines (WAL writer, memtable flushes) had written when a crash
// comes is outside the seed, so a failing seed replays the same schedule
// but may need a few runs to fail again.
func TestSimulation(t *testing.T) {
	seeds := uint64(simSeeds(t))
	first := simFirstSeed(t)
	for _, voters := range []int{3, 5} {
		for seed := first; seed < first+seeds; seed++ {
			t.Run(fmt.Sprintf("voters=%d/seed=%d", voters, seed), func(t *testing.T) {
				s := newSim(t, seed, voters, 1)
				for range 1500 {
					s.step()
				}
				s.finish()
				if len(s.acked) == 0 {
					t.Fatal("no write was acknowledged")
				}
				sent, dropped := s.net.Stats()
				t.Logf("acked %d writes, log %d entries, %d messages (%d dropped), %d terms, %d crashes, %d snapshots installed, %d conf changes, %d runs applied in one commit",
					len(s.acked), len(s.log), sent, dropped, len(s.leaders), s.crashes, s.installs, s.confs, s.runs)
			})
		}
	}
}
