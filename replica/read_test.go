package replica

import (
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
)

// TestReadIndexSlowNetwork: every message takes latency ticks to arrive,
// so a heartbeat's round trip (2*latency) outlasts the election timeout
// after which a read index request is asked again; leadership holds (the
// heartbeats arrive, only late: below the election timeout). A read on the leader and one on a
// follower complete: the answer to an earlier asking still serves the
// read. When the loop forgot the earlier asking and waited only for the
// newest, no answer ever matched and every read timed out while the
// round trip stayed that slow (TestShardedCluster: "TRYAGAIN context
// deadline exceeded" until its timeout, at load 8-11 on 2 cores).
func TestReadIndexSlowNetwork(t *testing.T) {
	s := newSim(t, 11, 3, 0)
	for i := 0; s.leader() == nil; i++ { // as newJoinSim
		if i == 10 {
			t.Fatal("no leader elected")
		}
		_ = s.nodes[1].c.rn.Campaign()
		s.settle(20)
	}
	l := s.leader()
	// The sim keeps raft's elections out of the ticks' reach (the
	// leadership holds, as steady heartbeats keep it); the loop asks a
	// read again after its ElectionTicks, the default's 10 here.
	const electionTicks = 10
	for _, n := range s.up() {
		n.c.cfg.ElectionTicks = electionTicks
	}
	latency := electionTicks - 2 // below the election timeout, but the round trip is not
	type delayed struct {
		m   *pb.Message
		due int
	}
	var inFlight []delayed
	round := 0
	run := func() {
		round++
		for s.net.Len() > 0 {
			if m := s.net.Take(0); m != nil {
				inFlight = append(inFlight, delayed{m, round + latency})
			}
		}
		kept := inFlight[:0]
		for _, d := range inFlight {
			if d.due > round {
				kept = append(kept, d)
				continue
			}
			if n := s.nodes[d.m.GetTo()]; n != nil && n.c != nil {
				n.c.step(d.m)
			}
		}
		inFlight = kept
		s.processAll()
		for _, n := range s.up() {
			n.c.tick()
		}
		s.processAll()
	}
	for range 5 * electionTicks { // the slow network's steady state
		run()
	}
	if s.leader() != l {
		t.Fatalf("leadership moved on the slow network (latency %d ticks, election timeout %d)", latency, electionTicks)
	}
	var follower *simNode
	for _, n := range s.up() {
		if n != l {
			follower = n
			break
		}
	}
	for _, n := range []*simNode{l, follower} {
		r := &readReq{done: make(chan struct{})}
		n.c.readIndex(r)
		n.c.process()
		for i := 0; ; i++ {
			select {
			case <-r.done:
			default:
				if i == 20*electionTicks {
					t.Fatalf("replica %d: read not done after %d ticks (round trip %d ticks, election timeout %d)",
						n.id, i, 2*latency, electionTicks)
				}
				run()
				continue
			}
			break
		}
		if r.err != nil {
			t.Fatalf("replica %d: read: %v", n.id, r.err)
		}
		if s.leader() != l {
			t.Fatal("leadership moved on the slow network")
		}
	}
}
