package replica

import (
	"fmt"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// Stepped is a replica with no goroutine of its own: the caller's loop
// ticks it, hands it messages and runs its Ready handling (Process), as
// Node's loop does. A deterministic simulation that drives many replicas
// from one seeded loop uses it (cluster's TestDeterministicShards; the
// package's own simulation drives the same core directly): with one
// goroutine, a seed replays the same run. A Ready's log write runs after
// its sends and applies, not beside them, for the same reason.
//
// It is not safe for concurrent use. Snapshots that need a
// SnapshotPreparer (a checkpoint fetched from the sender) are not
// prepared: use a Snapshotter whose Install does all the work, or none.
type Stepped struct {
	c *core
}

// NewStepped opens the replica on cfg.DB as Start does, without starting
// a loop.
func NewStepped(cfg Config) (*Stepped, error) {
	cfg.serialPersist = true
	_, c, err := openCore(cfg)
	if err != nil {
		return nil, err
	}
	return &Stepped{c: c}, nil
}

// Tick advances raft's logical clock one tick.
func (s *Stepped) Tick() { s.c.tick() }

// Step hands the replica a message from another replica.
func (s *Stepped) Step(m *pb.Message) { s.c.step(m) }

// Process runs the replica's Ready handling until raft has nothing more
// to do: it persists, sends, applies and settles proposals. It returns
// the error that stopped the replica (a storage failure), if any.
func (s *Stepped) Process() error {
	s.c.process()
	return s.c.err
}

// Pending is a proposal in flight on a Stepped replica.
type Pending struct{ p *proposal }

// Done reports whether the proposal is settled.
func (p *Pending) Done() bool {
	select {
	case <-p.p.done:
		return true
	default:
		return false
	}
}

// Result returns the proposal's reply and error, once Done: the errors
// are Node.Propose's (ErrNotLeader, ErrProposalDropped, ErrResultUnknown,
// ErrStopped).
func (p *Pending) Result() ([]byte, error) { return p.p.reply, p.p.err }

// Index returns the proposal's log index, 0 while it is not known.
func (p *Pending) Index() uint64 { return p.p.index }

// Propose appends a command to the log (on the leader, or forwarded when
// Config.ForwardProposals is set). A refused proposal is returned done,
// with its error.
func (s *Stepped) Propose(data []byte) *Pending {
	q := newQueued(data)
	s.c.submitBatch([]queuedProposal{q})
	return &Pending{q.p}
}

// AddLearner proposes adding p as a learner (on the leader).
func (s *Stepped) AddLearner(p Peer) (*Pending, error) {
	if err := validPeer(p); err != nil {
		return nil, err
	}
	return s.conf(pb.ConfChangeType_ConfChangeAddLearnerNode, p)
}

// Promote proposes making learner id a voter, once its log caught up with
// the commit index (ErrNotCaughtUp otherwise), as Node.Promote.
func (s *Stepped) Promote(id uint64) (*Pending, error) {
	st := s.c.rn.Status()
	pr, ok := st.Progress[id]
	if !ok || !pr.IsLearner {
		return nil, fmt.Errorf("%w: %d is not a learner", ErrUnknownMember, id)
	}
	if pr.Match < st.GetCommit() {
		return nil, fmt.Errorf("%w: learner %d has %d of %d", ErrNotCaughtUp, id, pr.Match, st.GetCommit())
	}
	return s.conf(pb.ConfChangeType_ConfChangeAddNode, s.c.members[id])
}

// Remove proposes removing member id.
func (s *Stepped) Remove(id uint64) (*Pending, error) {
	p, ok := s.c.members[id]
	if !ok {
		return nil, fmt.Errorf("%w: %d", ErrUnknownMember, id)
	}
	return s.conf(pb.ConfChangeType_ConfChangeRemoveNode, p)
}

func (s *Stepped) conf(typ pb.ConfChangeType, p Peer) (*Pending, error) {
	pr, err := s.c.proposeConf(typ, p)
	if err != nil {
		return nil, err
	}
	return &Pending{pr}, nil
}

// Campaign makes the replica start an election now.
func (s *Stepped) Campaign() error { return s.c.rn.Campaign() }

// ForgetLeader makes a follower forget its leader (so that a campaign
// of another replica is not refused for a recent leader contact).
func (s *Stepped) ForgetLeader() error { return s.c.rn.ForgetLeader() }

// TransferLeadership asks a leader to hand leadership to its most
// caught-up voter; it reports whether a transfer started.
func (s *Stepped) TransferLeadership() bool {
	if s.c.state != raft.StateLeader {
		return false
	}
	to := s.c.transferTarget()
	if to == 0 {
		return false
	}
	s.c.rn.TransferLeader(to)
	return true
}

// Transferee returns the voter a leadership transfer this leader started
// goes to, 0 when none is in progress. A leader whose transfer stalls (its
// MsgTimeoutNow lost, the transferee down) drops every proposal until the
// transfer ends: the transferee wins an election, or the leader abandons
// the transfer after an election timeout of ticks (AbortTransfer, for a
// host whose ticks never reach the timeout).
func (s *Stepped) Transferee() uint64 {
	if s.c.state != raft.StateLeader {
		return 0
	}
	return s.c.rn.Status().LeadTransferee
}

// AbortTransfer abandons a leadership transfer in progress (see
// Transferee), as the leader itself does once an election timeout passes
// without the transferee taking over; the leader accepts proposals again.
// It does nothing on a replica that is not leading or not transferring.
func (s *Stepped) AbortTransfer() {
	if s.Transferee() == 0 {
		return
	}
	// A transfer to the leader itself aborts the one in progress and
	// starts none (raft's stepLeader, MsgTransferLeader).
	s.c.rn.TransferLeader(s.c.cfg.ID)
}

// IsLeader reports whether the replica leads now.
func (s *Stepped) IsLeader() bool { return s.c.state == raft.StateLeader && s.c.err == nil }

// Status returns the replica's state.
func (s *Stepped) Status() Status { return s.c.status() }

// Applied returns the index of the last entry applied.
func (s *Stepped) Applied() uint64 { return s.c.applied }

// Stop fails every waiting proposal with ErrStopped (the replica's host
// is going away; the store stays open).
func (s *Stepped) Stop() { s.c.failAll(ErrStopped) }
