// Package memtransport is an in-memory network of Raft replicas with fault
// injection, for tests: messages sent by any replica wait in one queue
// until the test delivers, drops, duplicates or reorders them, and
// partitions cut pairs of replicas apart.
//
// The network has no goroutines and no timers: a deterministic simulation
// drives it from its own seeded loop (Take a message at an index it picks,
// then hand it to the receiver), so a seed replays the same run.
package memtransport

import (
	"sync"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Network is the queue of messages in flight and the partitions. It is
// safe for concurrent use.
type Network struct {
	mu      sync.Mutex
	queue   []*pb.Message
	cut     map[[2]uint64]bool // directed pairs that cannot talk
	down    map[uint64]bool    // replicas whose messages are dropped both ways
	sent    int64
	dropped int64
}

// New returns an empty network.
func New() *Network {
	return &Network{cut: map[[2]uint64]bool{}, down: map[uint64]bool{}}
}

// Endpoint returns replica id's transport.
func (n *Network) Endpoint(id uint64) *Endpoint { return &Endpoint{n: n, id: id} }

// Endpoint is one replica's replica.Transport on the network.
type Endpoint struct {
	n  *Network
	id uint64
}

// Send queues copies of msgs (a receiver may keep what it is given).
func (e *Endpoint) Send(msgs []*pb.Message) {
	e.n.mu.Lock()
	defer e.n.mu.Unlock()
	for _, m := range msgs {
		e.n.sent++
		if e.n.down[e.id] {
			e.n.dropped++
			continue
		}
		e.n.queue = append(e.n.queue, proto.Clone(m).(*pb.Message))
	}
}

// Close implements replica.Transport; the network stays usable.
func (e *Endpoint) Close() error { return nil }

// Len returns the number of messages in flight.
func (n *Network) Len() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.queue)
}

// Take removes the i-th message in flight and returns it, or nil if a
// partition or a down replica swallows it.
func (n *Network) Take(i int) *pb.Message {
	n.mu.Lock()
	defer n.mu.Unlock()
	m := n.queue[i]
	n.queue = append(n.queue[:i], n.queue[i+1:]...)
	if n.cut[[2]uint64{m.GetFrom(), m.GetTo()}] || n.down[m.GetTo()] || n.down[m.GetFrom()] {
		n.dropped++
		return nil
	}
	return m
}

// Drop discards the i-th message in flight.
func (n *Network) Drop(i int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.queue = append(n.queue[:i], n.queue[i+1:]...)
	n.dropped++
}

// Duplicate queues a second copy of the i-th message in flight.
func (n *Network) Duplicate(i int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.queue = append(n.queue, proto.Clone(n.queue[i]).(*pb.Message))
}

// Partition cuts a and b apart, both ways.
func (n *Network) Partition(a, b uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut[[2]uint64{a, b}] = true
	n.cut[[2]uint64{b, a}] = true
}

// Heal removes every partition.
func (n *Network) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.cut)
}

// SetDown marks replica id down (crashed) or up: a down replica's messages
// are dropped, sent or received.
func (n *Network) SetDown(id uint64, down bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down[id] = down
}

// Stats returns the messages sent and dropped so far.
func (n *Network) Stats() (sent, dropped int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.sent, n.dropped
}
