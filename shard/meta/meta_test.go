package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tallydb/tally/replica"
	"github.com/tallydb/tally/replica/memtransport"
	"github.com/tallydb/tally/shard"
	"github.com/tallydb/tally/store"
)

// harness runs members of one metadata group in this process over the
// in-memory network, each with its store in its own directory.
type harness struct {
	t      *testing.T
	net    *memtransport.Network
	voters []replica.Peer
	root   string
	maxLog uint64 // the replicas' MaxLogEntries
	mu     sync.Mutex
	groups map[uint64]*Group
	stop   chan struct{}
	done   chan struct{}
}

func newHarness(t *testing.T, voters int, maxLog uint64) *harness {
	h := &harness{t: t, maxLog: maxLog, net: memtransport.New(), root: t.TempDir(), groups: map[uint64]*Group{},
		stop: make(chan struct{}), done: make(chan struct{})}
	for id := uint64(1); id <= uint64(voters); id++ {
		h.voters = append(h.voters, peer(id))
	}
	go h.pump()
	t.Cleanup(func() {
		close(h.stop)
		<-h.done
		h.mu.Lock()
		gs := h.groups
		h.groups = nil
		h.mu.Unlock()
		for _, g := range gs {
			if err := g.halt(); err != nil {
				t.Error(err)
			}
		}
	})
	return h
}

func peer(id uint64) replica.Peer {
	return replica.Peer{ID: id, RaftAddr: fmt.Sprintf("meta-%d", id), ClientAddr: fmt.Sprintf("127.0.0.1:%d", 7000+id)}
}

func (h *harness) pump() {
	defer close(h.done)
	for {
		select {
		case <-h.stop:
			return
		default:
		}
		if h.net.Len() == 0 {
			time.Sleep(100 * time.Microsecond)
			continue
		}
		m := h.net.Take(0)
		if m == nil {
			continue
		}
		h.mu.Lock()
		g := h.groups[m.GetTo()]
		h.mu.Unlock()
		if g != nil {
			_ = g.Replica().Step(context.Background(), m)
		}
	}
}

// start starts member id (a voter of the first group, or a joining
// member) on its directory.
func (h *harness) start(id uint64, join bool) *Group {
	h.t.Helper()
	g, err := Start(Config{
		ID: id, Dir: filepath.Join(h.root, fmt.Sprint(id)), Peers: h.voters, Join: join,
		Transport: h.net.Endpoint(id), Durability: store.SyncAlways,
		TickInterval: 10 * time.Millisecond, MaxLogEntries: h.maxLog,
	})
	if err != nil {
		h.t.Fatalf("start %d: %v", id, err)
	}
	h.mu.Lock()
	h.groups[id] = g
	h.mu.Unlock()
	h.net.SetDown(id, false)
	return g
}

// kill stops member id at once, without handing over leadership.
func (h *harness) kill(id uint64) {
	h.t.Helper()
	h.mu.Lock()
	g := h.groups[id]
	delete(h.groups, id)
	h.mu.Unlock()
	h.net.SetDown(id, true)
	if err := g.halt(); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) group(id uint64) *Group {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.groups[id]
}

func (h *harness) all() []*Group {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*Group
	for _, g := range h.groups {
		out = append(out, g)
	}
	return out
}

func (h *harness) leader(ctx context.Context) *Group {
	h.t.Helper()
	for ctx.Err() == nil {
		for _, g := range h.all() {
			if g.Replica().Status().Role == "leader" {
				return g
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.t.Fatal("no leader")
	return nil
}

// addLearner adds member id as a learner through the leader.
func (h *harness) addLearner(ctx context.Context, id uint64) {
	h.t.Helper()
	for {
		err := h.leader(ctx).Replica().AddLearner(ctx, peer(id))
		if err == nil {
			return
		}
		if !errors.Is(err, replica.ErrProposalDropped) && !errors.Is(err, replica.ErrNotLeader) {
			h.t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// converge waits until every running member holds epoch and checks that
// they hold the same bytes.
func (h *harness) converge(ctx context.Context, epoch uint64) *shard.Map {
	h.t.Helper()
	var want []byte
	var m *shard.Map
	for _, g := range h.all() {
		got, err := g.WaitEpoch(ctx, epoch)
		if err != nil {
			h.t.Fatalf("member %d at epoch %v: %v", g.cfg.ID, g.Map(), err)
		}
		if got.Epoch != epoch {
			h.t.Fatalf("member %d at epoch %d, want %d", g.cfg.ID, got.Epoch, epoch)
		}
		if want == nil {
			want, m = got.Encode(), got
		} else if !bytes.Equal(want, got.Encode()) {
			h.t.Fatalf("member %d holds\n%v\nnot\n%v", g.cfg.ID, got, m)
		}
	}
	return m
}

func dataShard(id uint32, reps ...uint64) shard.Shard {
	s := shard.Shard{ID: id}
	for _, r := range reps {
		s.Replicas = append(s.Replicas, shard.Replica{ID: r, RaftAddr: fmt.Sprintf("raft-%d", r), ClientAddr: fmt.Sprintf("127.0.0.1:%d", 6000+r)})
	}
	return s
}

// role returns a running member of the given role other than the ones in
// not.
func (h *harness) role(ctx context.Context, role string, not ...uint64) *Group {
	h.t.Helper()
	for ctx.Err() == nil {
		for _, g := range h.all() {
			if g.Replica().Status().Role == role && !slices.Contains(not, g.cfg.ID) {
				return g
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.t.Fatalf("no %s", role)
	return nil
}

// TestGroup: three voters and two learners; the map is created and
// changed from each kind of member, every member converges to the same
// bytes; a voter killed and restarted keeps the map and catches up; a
// learner added after the log was truncated catches up by snapshot.
func TestGroup(t *testing.T) {
	h := newHarness(t, 3, 8) // a short log: the late learner needs a snapshot
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for id := uint64(1); id <= 3; id++ {
		h.start(id, false)
	}
	h.start(4, true)
	h.start(5, true)
	if h.group(4).Map() != nil {
		t.Fatal("a map before Create")
	}
	h.addLearner(ctx, 4)
	h.addLearner(ctx, 5)

	// Create from a learner.
	m, err := h.group(4).Propose(ctx, shard.Create(shard.Even([]shard.Shard{dataShard(1, 11, 12, 13), dataShard(2, 21, 22, 23), dataShard(3, 31, 32, 33)})))
	if err != nil {
		t.Fatal(err)
	}
	if m.Epoch != 1 || m.ShardOf(0).ID != 1 || m.ShardOf(16383).ID != 3 {
		t.Fatalf("created %v", m)
	}
	var changes []uint64
	var chMu sync.Mutex
	h.group(5).OnChange(func(m *shard.Map) {
		chMu.Lock()
		changes = append(changes, m.Epoch)
		chMu.Unlock()
	})
	h.converge(ctx, 1)
	if _, err := h.group(5).Propose(ctx, shard.Create(shard.Even([]shard.Shard{dataShard(9, 99)}))); !errors.Is(err, shard.ErrMapExists) {
		t.Fatalf("second create: %v", err)
	}

	// One op from each kind of member.
	if m, err = h.leader(ctx).Propose(ctx, shard.SetLeader(1, 12, 3)); err != nil || m.Epoch != 2 || m.Shard(1).Leader != 12 {
		t.Fatalf("from the leader: %v %v", m, err)
	}
	if m, err = h.role(ctx, "follower").Propose(ctx, shard.AddShard(dataShard(4, 41, 42, 43))); err != nil || m.Epoch != 3 {
		t.Fatalf("from a follower: %v %v", m, err)
	}
	if m, err = h.group(5).Propose(ctx, shard.AssignSlots([]shard.Range{{From: 0, To: 1000, Shard: 4}})); err != nil || m.Epoch != 4 || m.ShardOf(500).ID != 4 {
		t.Fatalf("from a learner: %v %v", m, err)
	}
	if _, err = h.group(4).Propose(ctx, shard.SetReplicas(9, nil)); !errors.Is(err, shard.ErrUnknownShard) {
		t.Fatalf("refused op from a learner: %v", err)
	}
	want := h.converge(ctx, 4)
	if err := want.Validate(); err != nil {
		t.Fatal(err)
	}

	// A voter killed and restarted keeps the map.
	victim := h.role(ctx, "follower")
	vid := victim.cfg.ID
	h.kill(vid)
	if m, err = h.group(4).Propose(ctx, shard.SetLeader(2, 22, 4)); err != nil || m.Epoch != 5 {
		t.Fatalf("with a voter down: %v %v", m, err)
	}
	back := h.start(vid, false)
	if got := back.Map(); got == nil || got.Epoch < 4 {
		t.Fatalf("restarted voter holds %v", got)
	}
	h.converge(ctx, 5)

	// Enough entries for the log to be truncated, then a new learner
	// catches up by snapshot.
	for term := uint64(5); term < 25; term++ {
		if _, err := h.leader(ctx).Propose(ctx, shard.SetLeader(3, 31+term%3, term)); err != nil {
			t.Fatal(err)
		}
	}
	h.converge(ctx, 25)
	h.start(6, true)
	h.addLearner(ctx, 6)
	h.converge(ctx, 25)
	// The map shows before the install's count: wait for it.
	for h.group(6).Replica().Metrics().SnapshotsInstalled == 0 {
		if ctx.Err() != nil {
			t.Fatalf("the late learner caught up without a snapshot (log from %d)", h.leader(ctx).Replica().Status().LogFirst)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := h.group(6).Propose(ctx, shard.SetLeader(3, 0, 99)); err != nil {
		t.Fatal(err)
	}
	h.converge(ctx, 26)
	// ... and keeps it across a restart.
	h.kill(6)
	if got := h.start(6, true).Map(); got == nil || got.Epoch != 26 {
		t.Fatalf("restarted learner holds %v", got)
	}

	chMu.Lock()
	defer chMu.Unlock()
	if len(changes) == 0 || !slices.IsSorted(changes) || changes[len(changes)-1] < 25 {
		t.Fatalf("OnChange saw epochs %v", changes)
	}
}

// TestConcurrentHints: leader hints of many terms proposed at once from
// every member settle the same on every member: the accepted ones, in
// epoch order, have increasing terms, the others are ErrStaleTerm, and the
// newest term wins. The log is long enough that no member needs a snapshot
// (a proposal covered by one is retried, and a retry that finds its op
// applied returns the current map, whose epoch this test could not check).
func TestConcurrentHints(t *testing.T) {
	h := newHarness(t, 3, 10000)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for id := uint64(1); id <= 3; id++ {
		h.start(id, false)
	}
	h.start(4, true)
	h.addLearner(ctx, 4)
	if _, err := h.group(1).Propose(ctx, shard.Create(shard.Even([]shard.Shard{dataShard(1, 11, 12, 13)}))); err != nil {
		t.Fatal(err)
	}
	const terms = 24
	type res struct {
		term  uint64
		epoch uint64
		err   error
	}
	out := make(chan res, terms)
	members := h.all()
	var wg sync.WaitGroup
	for i := range terms {
		term := uint64((i*7)%terms + 1) // a permutation of 1..terms
		g := members[i%len(members)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := g.Propose(ctx, shard.SetLeader(1, 11+term%3, term))
			r := res{term: term, err: err}
			if m != nil {
				r.epoch = m.Epoch
			}
			out <- r
		}()
	}
	wg.Wait()
	close(out)
	var accepted []res
	for r := range out {
		switch {
		case r.err == nil:
			accepted = append(accepted, r)
		case errors.Is(r.err, shard.ErrStaleTerm):
		default:
			t.Fatalf("term %d: %v", r.term, r.err)
		}
	}
	slices.SortFunc(accepted, func(a, b res) int { return int(a.epoch) - int(b.epoch) })
	for i, r := range accepted {
		if r.epoch != uint64(i+2) || i > 0 && r.term <= accepted[i-1].term {
			t.Fatalf("accepted hints out of order: %+v", accepted)
		}
	}
	m := h.converge(ctx, uint64(len(accepted)+1))
	if s := m.Shard(1); s.LeaderTerm != terms || s.Leader != 11+terms%3 {
		t.Fatalf("final hint %d@%d", s.Leader, s.LeaderTerm)
	}
	t.Logf("%d of %d hints accepted", len(accepted), terms)
}
