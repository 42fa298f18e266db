package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tallydb/tally/replica/memtransport"
	"github.com/tallydb/tally/store"
)

// forwardGroup starts voters 1-3 and replicas 4 and 5 (joining, not yet
// members) with ForwardProposals, each applying "increment counter row
// 7" and replying with the new value.
func forwardGroup(t *testing.T) (*memtransport.Network, map[uint64]*Node, map[uint64]*store.Counter) {
	t.Helper()
	net := memtransport.New()
	peers := []Peer{{ID: 1, RaftAddr: "r1", ClientAddr: "c1"}, {ID: 2, RaftAddr: "r2", ClientAddr: "c2"}, {ID: 3, RaftAddr: "r3", ClientAddr: "c3"}}
	nodes := map[uint64]*Node{}
	counters := map[uint64]*store.Counter{}
	for id := uint64(1); id <= 5; id++ {
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
		counters[id] = cnt
		n, err := Start(Config{
			ID: id, DB: db, Peers: peers, Join: id > 3, Transport: net.Endpoint(id), Sync: true,
			TickInterval: 5 * time.Millisecond, ForwardProposals: true,
			Apply: func(_ uint64, data []byte) ([]byte, error) {
				v, _ := cnt.Incr(binary.BigEndian.Uint64(data), "v", 1)
				return binary.BigEndian.AppendUint64(nil, v), nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		nodes[id] = n
		t.Cleanup(func() { _ = n.Stop(); _ = db.Close() })
	}
	pumpNetwork(t, net, nodes)
	return net, nodes, counters
}

func waitLeader(ctx context.Context, t *testing.T, nodes map[uint64]*Node, not uint64) *Node {
	t.Helper()
	for ctx.Err() == nil {
		for id, n := range nodes {
			if id != not && n.Status().Role == "leader" {
				return n
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no leader")
	return nil
}

// TestForwardProposals: a follower's and a learner's proposals are
// forwarded to the leader and answered on the proposer with the reply of
// their apply there; a replica that knows no leader fails at once with a
// retryable error.
func TestForwardProposals(t *testing.T) {
	_, nodes, counters := forwardGroup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Replica 5 is not a member: it knows no leader.
	_, err := nodes[5].Propose(ctx, binary.BigEndian.AppendUint64(nil, 7))
	var nl *NotLeaderError
	if !errors.Is(err, ErrProposalDropped) || !errors.As(err, &nl) || nl.Leader.ID != 0 {
		t.Fatalf("proposal with no leader: %v", err)
	}

	l := waitLeader(ctx, t, nodes, 0)
	for {
		err := l.AddLearner(ctx, Peer{ID: 4, RaftAddr: "r4", ClientAddr: "c4"})
		if err == nil {
			break
		}
		if !errors.Is(err, ErrProposalDropped) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for nodes[4].Status().Leader.ID == 0 { // the learner hears from the leader
		if ctx.Err() != nil {
			t.Fatal("the learner never heard from the leader")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if r := nodes[4].Status().Role; r != "learner" {
		t.Fatalf("replica 4 is a %s", r)
	}
	want := uint64(0)
	for round := 0; round < 5; round++ {
		for _, id := range []uint64{1, 2, 3, 4} {
			n := nodes[id]
			reply, err := n.Propose(ctx, binary.BigEndian.AppendUint64(nil, 7))
			if errors.Is(err, ErrProposalDropped) {
				continue // an election in between: nothing applied
			}
			if err != nil {
				t.Fatalf("replica %d (%s): %v", id, n.Status().Role, err)
			}
			want++
			got := binary.BigEndian.Uint64(reply)
			if got != want {
				t.Fatalf("replica %d: reply %d, want %d", id, got, want)
			}
			// Propose returned once the entry applied here.
			if v, _ := counters[id].GetColumn(7, "v"); v < got {
				t.Fatalf("replica %d holds %d after its proposal's reply %d", id, v, got)
			}
		}
	}
	if want < 10 {
		t.Fatalf("only %d proposals succeeded", want)
	}
}

// TestForwardLeaderChange: proposals forwarded while the leader changes
// (a transfer, then the leader cut off from everyone) each end, within
// their context, as applied (once), dropped (never applied) or unknown,
// and the count of applied commands agrees.
func TestForwardLeaderChange(t *testing.T) {
	net, all, counters := forwardGroup(t)
	nodes := map[uint64]*Node{1: all[1], 2: all[2], 3: all[3]} // the pump reads all
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	var ok, unknown int
	seen := map[uint64]bool{}
	propose := func(n *Node, stop <-chan struct{}, wg *sync.WaitGroup) {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
			reply, err := n.Propose(pctx, binary.BigEndian.AppendUint64(nil, 7))
			pcancel()
			mu.Lock()
			switch {
			case err == nil:
				v := binary.BigEndian.Uint64(reply)
				if seen[v] {
					t.Errorf("reply %d twice", v)
				}
				seen[v] = true
				ok++
			case errors.Is(err, ErrResultUnknown):
				unknown++
			case errors.Is(err, ErrProposalDropped):
			default:
				t.Errorf("proposal on %d: %v", n.cfg.ID, err)
			}
			mu.Unlock()
			if err != nil {
				time.Sleep(2 * time.Millisecond)
			}
		}
	}
	run := func(disturb func(l *Node)) {
		l := waitLeader(ctx, t, nodes, 0)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for _, n := range nodes {
			if n != l {
				for range 4 {
					wg.Add(1)
					go propose(n, stop, &wg)
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
		disturb(l)
		time.Sleep(50 * time.Millisecond)
		close(stop)
		wg.Wait()
	}
	run(func(l *Node) {
		if err := l.TransferLeadership(ctx); err != nil {
			t.Fatal(err)
		}
	})
	run(func(l *Node) {
		for id := range nodes {
			if id != l.cfg.ID {
				net.Partition(l.cfg.ID, id)
			}
		}
		waitLeader(ctx, t, nodes, l.cfg.ID)
	})
	net.Heal()
	// Settle: one more write through the new leader, then every replica
	// holds the same count.
	for {
		l := waitLeader(ctx, t, nodes, 0)
		if _, err := l.Propose(ctx, binary.BigEndian.AppendUint64(nil, 7)); err == nil {
			ok++
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	for {
		vals := map[uint64]bool{}
		for id := range nodes {
			v, _ := counters[id].GetColumn(7, "v")
			vals[v] = true
		}
		if len(vals) == 1 {
			var v uint64
			for x := range vals {
				v = x
			}
			if v < uint64(ok) || v > uint64(ok+unknown) {
				t.Fatalf("count %d, %d applied and %d unknown", v, ok, unknown)
			}
			t.Logf("count %d: %d applied, %d unknown", v, ok, unknown)
			break
		}
		if ctx.Err() != nil {
			t.Fatal("replicas did not converge")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
