package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/tallydb/tally/replica/memtransport"
	"github.com/tallydb/tally/store"
)

// TestNodeGoroutines runs three Nodes with their own loops over the
// in-memory network (a goroutine pumps it): writes through the leader, a
// follower's refusal naming the leader, ReadIndex on a follower, and a
// leadership transfer after which writes go on.
func TestNodeGoroutines(t *testing.T) {
	net := memtransport.New()
	peers := []Peer{{ID: 1, RaftAddr: "r1", ClientAddr: "c1"}, {ID: 2, RaftAddr: "r2", ClientAddr: "c2"}, {ID: 3, RaftAddr: "r3", ClientAddr: "c3"}}
	nodes := map[uint64]*Node{}
	counters := map[uint64]*store.Counter{}
	for _, p := range peers {
		db, err := store.Open("n", &store.Options{FS: vfs.NewMem(), DisableBackground: true, CacheSize: 1 << 20, MemTableSize: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.CreateCounter("c", store.CounterOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := db.AddColumn("c", "v", store.ColumnOptions{MaxBits: 64}); err != nil {
			t.Fatal(err)
		}
		cnt, _ := db.Counter("c")
		counters[p.ID] = cnt
		n, err := Start(Config{
			ID: p.ID, DB: db, Peers: peers, Transport: net.Endpoint(p.ID), Sync: true,
			TickInterval: 5 * time.Millisecond,
			Apply: func(_ uint64, data []byte) ([]byte, error) {
				v, _ := cnt.Incr(binary.BigEndian.Uint64(data), "v", 1)
				return binary.BigEndian.AppendUint64(nil, v), nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		nodes[p.ID] = n
		t.Cleanup(func() { _ = n.Stop(); _ = db.Close() })
	}
	pumpNetwork(t, net, nodes)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leader := func() *Node {
		for ctx.Err() == nil {
			for _, n := range nodes {
				if n.Status().Role == "leader" {
					return n
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatal("no leader")
		return nil
	}
	write := func(want uint64) {
		t.Helper()
		for {
			l := leader()
			reply, err := l.Propose(ctx, binary.BigEndian.AppendUint64(nil, 7))
			if errors.Is(err, ErrNotLeader) || errors.Is(err, ErrProposalDropped) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := binary.BigEndian.Uint64(reply); got != want {
				t.Fatalf("reply %d, want %d", got, want)
			}
			return
		}
	}
	for i := uint64(1); i <= 20; i++ {
		write(i)
	}
	l := leader()
	var follower *Node
	for id, n := range nodes {
		if n != l {
			follower = n
			_, err := n.Propose(ctx, binary.BigEndian.AppendUint64(nil, 7))
			var nl *NotLeaderError
			if !errors.As(err, &nl) || nl.Leader.ID != l.cfg.ID || nl.Leader.ClientAddr != fmt.Sprintf("c%d", l.cfg.ID) {
				t.Fatalf("follower %d: %v", id, err)
			}
		}
	}
	if err := follower.ReadIndex(ctx); err != nil {
		t.Fatal(err)
	}
	if v, _ := counters[follower.cfg.ID].GetColumn(7, "v"); v != 20 {
		t.Fatalf("follower read after ReadIndex: %d, want 20", v)
	}
	if err := l.TransferLeadership(ctx); err != nil {
		t.Fatal(err)
	}
	if l.Status().Role == "leader" {
		t.Fatal("still the leader after TransferLeadership")
	}
	for i := uint64(21); i <= 30; i++ {
		write(i)
	}
	// A transfer to a named voter: each follower in turn leads; a
	// transfer to itself or to a non-member is refused and changes
	// nothing.
	for _, want := range []uint64{1, 2, 3, 1} {
		l := leader()
		if l.cfg.ID == want {
			continue
		}
		for _, bad := range []uint64{l.cfg.ID, 9} {
			if err := l.TransferLeadershipTo(ctx, bad); !errors.Is(err, ErrUnknownMember) {
				t.Fatalf("transfer to %d: %v", bad, err)
			}
		}
		if err := l.TransferLeadershipTo(ctx, want); err != nil {
			t.Fatal(err)
		}
		// An election may intervene (then the next round retries);
		// with no faults the target leads.
		for leader().cfg.ID != want {
			if err := leader().TransferLeadershipTo(ctx, want); err != nil {
				t.Fatal(err)
			}
		}
	}
	st := leader().Status()
	if len(st.Members) != 3 || st.Leader.ID != st.ID {
		t.Fatalf("status %+v", st)
	}
}

// TestSubmitBatchOneAppend checks that commands proposed together cost
// each follower one append message carrying all of them (one log append
// and one acknowledgement there), and that each proposal is answered by
// its own entry.
func TestSubmitBatchOneAppend(t *testing.T) {
	s := newSim(t, 1, 3, 0)
	// newSim's campaign comes before the bootstrap entries applied, which
	// raft refuses; they are applied now.
	_ = s.nodes[1].c.rn.Campaign()
	s.settle(5)
	l := s.leader()
	if l == nil {
		t.Fatal("no leader")
	}
	const n = 10
	var qs []queuedProposal
	for i := range n {
		cmd := simCmd{key: uint64(i % simKeys), delta: 1}
		q := newQueued(encodeCmd(cmd))
		qs = append(qs, q)
		s.pending = append(s.pending, simProp{l.id, cmd, q.p}) // settle checks each against the log
	}
	l.c.submitBatch(qs)
	l.c.process()
	apps := map[uint64]int{}
	var msgs []*pb.Message
	for s.net.Len() > 0 {
		m := s.net.Take(0)
		msgs = append(msgs, m)
		if m.GetType() == pb.MessageType_MsgApp {
			apps[m.GetTo()]++
			if got := len(m.GetEntries()); got != n {
				t.Errorf("append to %d carries %d entries, want %d", m.GetTo(), got, n)
			}
		}
	}
	if len(apps) != 2 || apps[2] != 1 || apps[3] != 1 {
		t.Fatalf("appends per follower %v, want one to each of 2 and 3", apps)
	}
	for _, m := range msgs {
		s.nodes[m.GetTo()].c.step(m)
	}
	s.processAll()
	s.settle(5)
	seen := map[uint64]bool{}
	for i, q := range qs {
		select {
		case <-q.p.done:
		default:
			t.Fatalf("proposal %d not answered", i)
		}
		if q.p.err != nil {
			t.Fatalf("proposal %d: %v", i, q.p.err)
		}
		if seen[q.p.index] {
			t.Fatalf("proposal %d answered by entry %d twice", i, q.p.index)
		}
		seen[q.p.index] = true
	}
	for k := range uint64(simKeys) {
		want := uint64(n / simKeys)
		if k < n%simKeys {
			want++
		}
		for _, nd := range s.up() {
			if v, _ := nd.cnt.GetColumn(k, "v"); v != want {
				t.Fatalf("key %d is %d on node %d, want %d", k, v, nd.id, want)
			}
		}
	}
}

// TestProposeConcurrent proposes from many goroutines at once through
// Node.Propose (the queue the loop drains in bulk), the replicas applying
// runs of entries in one commit each (Config.ApplyRun): every caller gets
// its own entry's reply and nothing applies twice.
func TestProposeConcurrent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	net := memtransport.New()
	peers := []Peer{{ID: 1, RaftAddr: "r1", ClientAddr: "c1"}, {ID: 2, RaftAddr: "r2", ClientAddr: "c2"}, {ID: 3, RaftAddr: "r3", ClientAddr: "c3"}}
	nodes := map[uint64]*Node{}
	for _, p := range peers {
		db, err := store.Open("n", &store.Options{FS: vfs.NewMem(), DisableBackground: true, CacheSize: 1 << 20, MemTableSize: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.CreateCounter("c", store.CounterOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := db.AddColumn("c", "v", store.ColumnOptions{MaxBits: 64}); err != nil {
			t.Fatal(err)
		}
		cnt, _ := db.Counter("c")
		n, err := Start(Config{
			ID: p.ID, DB: db, Peers: peers, Transport: net.Endpoint(p.ID), Sync: true,
			TickInterval: 5 * time.Millisecond,
			Apply: func(_ uint64, data []byte) ([]byte, error) {
				v, err := cnt.Incr(binary.BigEndian.Uint64(data), "v", 1)
				return binary.BigEndian.AppendUint64(nil, v), err
			},
			// Runs fold into one commit: replies come from the batch.
			ApplyRun: func(first uint64, cmds [][]byte) (int, [][]byte, bool, error) {
				b := db.NewBatch()
				defer b.Close()
				for _, data := range cmds {
					if err := b.Incr("c", binary.BigEndian.Uint64(data), "v", 1); err != nil {
						return 0, nil, false, err
					}
				}
				if err := b.MarkEntries(first, first+uint64(len(cmds))-1); err != nil {
					return 0, nil, false, err
				}
				if err := b.Commit(); err != nil {
					return 0, nil, false, err
				}
				replies := make([][]byte, len(cmds))
				for k := range cmds {
					replies[k] = binary.BigEndian.AppendUint64(nil, b.Result(k))
				}
				return len(cmds), replies, true, nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		nodes[p.ID] = n
		t.Cleanup(func() { _ = n.Stop(); _ = db.Close() })
	}
	pumpNetwork(t, net, nodes)
	// One write first, retried until a leader takes it.
	var l *Node
	for l == nil {
		if ctx.Err() != nil {
			t.Fatal("no leader")
		}
		for _, n := range nodes {
			if n.Status().Role == "leader" {
				if _, err := n.Propose(ctx, binary.BigEndian.AppendUint64(nil, 0)); err == nil {
					l = n
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	const callers, each = 16, 25
	replies := make(chan uint64, callers*each)
	errs := make(chan error, callers)
	for range callers {
		go func() {
			for range each {
				reply, err := l.Propose(ctx, binary.BigEndian.AppendUint64(nil, 1))
				if err != nil {
					errs <- err
					return
				}
				replies <- binary.BigEndian.Uint64(reply)
			}
			errs <- nil
		}()
	}
	for range callers {
		if err := <-errs; err != nil {
			t.Fatal(err) // no leader change is provoked: every proposal applies
		}
	}
	close(replies)
	seen := map[uint64]bool{}
	for v := range replies {
		if seen[v] || v < 1 || v > callers*each {
			t.Fatalf("reply %d twice or out of 1..%d", v, callers*each)
		}
		seen[v] = true
	}
	if len(seen) != callers*each {
		t.Fatalf("%d distinct replies, want %d", len(seen), callers*each)
	}
}

// TestProposeCopiesCommand: a queued proposal holds its own copy of the
// command, so a caller whose Propose returned early (its context ended)
// may reuse its buffer while the loop has yet to propose it.
func TestProposeCopiesCommand(t *testing.T) {
	data := []byte("command")
	q := newQueued(data)
	copy(data, "CHANGED")
	if got := string(q.ent[headerLen:]); got != "command" {
		t.Fatalf("queued command %q after the caller changed its buffer", got)
	}
	if len(q.ent) != headerLen+len(data) {
		t.Fatalf("entry of %d bytes, want %d", len(q.ent), headerLen+len(data))
	}
}

// pumpNetwork delivers net's messages to nodes from a goroutine until the
// test ends.
func pumpNetwork(t *testing.T, net *memtransport.Network, nodes map[uint64]*Node) {
	stop := make(chan struct{})
	pumped := make(chan struct{})
	go func() {
		defer close(pumped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if net.Len() == 0 {
				time.Sleep(100 * time.Microsecond)
				continue
			}
			if m := net.Take(0); m != nil {
				_ = nodes[m.GetTo()].Step(context.Background(), m)
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-pumped })
}

// TestApplyRunHandedBackSeesOwnClock: entries of a run that ApplyRun hands
// back to Apply apply each at its own timestamp (Clock), not at a later
// entry's of the same run, so a replica's clock for an entry does not
// depend on how the entries were grouped into runs.
func TestApplyRunHandedBackSeesOwnClock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db, err := store.Open("n", &store.Options{FS: vfs.NewMem(), DisableBackground: true, CacheSize: 1 << 20, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var ms atomic.Int64 // every entry gets a timestamp 1 ms after the last
	var mu sync.Mutex
	var seen []int64 // Clock as each entry applied
	longest := 0     // the longest run handed back
	clock := NewClock()
	net := memtransport.New()
	n, err := Start(Config{
		ID: 1, DB: db, Peers: []Peer{{ID: 1, RaftAddr: "r1", ClientAddr: "c1"}}, Transport: net.Endpoint(1), Sync: true,
		TickInterval: 5 * time.Millisecond, Clock: clock,
		Now: func() time.Time { return time.UnixMilli(1_000_000 + ms.Add(1)) },
		Apply: func(_ uint64, data []byte) ([]byte, error) {
			mu.Lock()
			seen = append(seen, clock.Now().UnixMilli())
			mu.Unlock()
			return nil, nil
		},
		ApplyRun: func(first uint64, cmds [][]byte) (int, [][]byte, bool, error) {
			mu.Lock()
			longest = max(longest, len(cmds))
			mu.Unlock()
			return len(cmds), nil, false, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Stop(); _ = db.Close() })
	for n.Status().Role != "leader" {
		if ctx.Err() != nil {
			t.Fatal("no leader")
		}
		time.Sleep(5 * time.Millisecond)
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for range 50 {
				if _, err := n.Propose(ctx, []byte("x")); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if longest < 2 {
		t.Skip("no run of two entries formed; nothing to check")
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] <= seen[i-1] {
			t.Fatalf("entries %d and %d applied at clock %d and %d: each has its own, later timestamp", i-1, i, seen[i-1], seen[i])
		}
	}
}

// TestStatusCoversAnsweredProposals: a Status read right after a proposal
// was answered never shows an applied or commit index below that
// proposal's entry, although the loop publishes the rest of its status at
// most every statusEvery (callers such as INFO replication and the
// cluster tests compare offsets with what they were answered).
func TestStatusCoversAnsweredProposals(t *testing.T) {
	db, err := store.Open("n", &store.Options{FS: vfs.NewMem(), DisableBackground: true, CacheSize: 1 << 20, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	net := memtransport.New()
	peers := []Peer{{ID: 1, RaftAddr: "r1", ClientAddr: "c1"}}
	n, err := Start(Config{
		ID: 1, DB: db, Peers: peers, Transport: net.Endpoint(1),
		TickInterval: 5 * time.Millisecond,
		Apply: func(index uint64, _ []byte) ([]byte, error) {
			return binary.BigEndian.AppendUint64(nil, index), nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Stop(); _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for n.Status().Role != "leader" {
		if ctx.Err() != nil {
			t.Fatal("no leader")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for range 500 {
		reply, err := n.Propose(ctx, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		index := binary.BigEndian.Uint64(reply)
		if s := n.Status(); s.Applied < index || s.Commit < index {
			t.Fatalf("entry %d answered, then Status shows applied %d, commit %d", index, s.Applied, s.Commit)
		}
	}
}
