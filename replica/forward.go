package replica

// Forwarded proposals (Config.ForwardProposals).
//
// A replica that is not the leader hands its proposal to raft, which sends
// it to the leader it knows (etcd raft forwards MsgProp unless
// DisableProposalForwarding) or refuses it when it knows none: then the
// proposal fails at once with ErrProposalDropped (nothing was sent, so it
// can never apply; retry). The entry carries the proposer's id and
// proposal id in its header like any other, so when the leader appends it
// and the entry reaches the proposer's log, located finds the waiter, and
// the entry's apply there answers it with Apply's reply.
//
// What settles a forwarded proposal differs in one way. The term rule of
// core.go (an applied entry of a later term drops the older terms'
// proposals) holds for an entry whose term is known, and a forwarded
// proposal's term is its entry's, which the proposer learns only when the
// entry shows up in its log (located sets it): a proposal forwarded in
// term T may be appended by the leader of T+1 (a deposed leader forwards
// it on). Until then the proposal is unlocated and the term rule skips it.
// Once located it is settled like any proposal of its entry's term. A
// snapshot install does not settle it either: its entry may come after
// the snapshot's index.
//
// An unlocated proposal can be lost with no sign: the message or the
// leader died, or the leader refused it (a leadership transfer). After
// forwardTicks election timeouts without its entry, it fails with
// ErrResultUnknown (a late message may still append it), and the caller's
// context bounds the wait anyway. A duplicating transport (memtransport's
// fault injection; TCP does not duplicate) may have the leader append one
// forwarded command twice: a state machine fed by forwarded proposals
// must tolerate a repeated command (package shard/meta deduplicates by
// request id).

import (
	"fmt"
	"slices"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// forwardTicks is how many election timeouts an unlocated forwarded
// proposal waits for its entry before it fails as ErrResultUnknown.
const forwardTicks = 3

// forwarding reports whether a proposal may go to raft on this replica
// although it may not be the leader: Config.ForwardProposals is set and
// raft knows a leader, or is one.
func (c *core) forwarding() bool {
	if !c.cfg.ForwardProposals {
		return false
	}
	st := c.rn.BasicStatus()
	return st.RaftState == raft.StateLeader || st.RaftState == raft.StateFollower && st.Lead != raft.None
}

// cannotForward is the error of a proposal on a replica that is not the
// leader and cannot forward it: a *NotLeaderError, which with
// ForwardProposals (no leader known) is also ErrProposalDropped: nothing
// was sent, retry.
func (c *core) cannotForward() error {
	if !c.cfg.ForwardProposals {
		return c.notLeader()
	}
	return fmt.Errorf("%w: no leader to forward to: %w", ErrProposalDropped, c.notLeader())
}

// expireForwarded fails the unlocated forwarded proposals that waited too
// long (tick).
func (c *core) expireForwarded() {
	if !c.cfg.ForwardProposals || len(c.pending) == 0 {
		return
	}
	limit := forwardTicks * c.cfg.ElectionTicks
	for _, id := range sortedKeys(c.pending) {
		p := c.pending[id]
		if !p.unlocated {
			continue
		}
		if p.waited++; p.waited > limit {
			delete(c.pending, id)
			p.finish(nil, fmt.Errorf("%w: forwarded proposal not in the log after %d ticks", ErrResultUnknown, limit))
		}
	}
}

// inConf reports whether id is a voter or learner of cs. A replica that
// was not in the configuration before a conf change is not removed by it:
// a new member replaying the group's first conf changes (which name only
// the first voters) still has its forwarded proposals waiting.
func inConf(cs *pb.ConfState, id uint64) bool {
	return slices.Contains(cs.GetVoters(), id) || slices.Contains(cs.GetLearners(), id)
}
