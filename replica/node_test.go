package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

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
	stop := make(chan struct{})
	pumped := make(chan struct{})
	go func() { // the network
		defer close(pumped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if net.Len() == 0 {
				time.Sleep(200 * time.Microsecond)
				continue
			}
			if m := net.Take(0); m != nil {
				_ = nodes[m.GetTo()].Step(context.Background(), m)
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-pumped })

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
	st := leader().Status()
	if len(st.Members) != 3 || st.Leader.ID != st.ID {
		t.Fatalf("status %+v", st)
	}
}
