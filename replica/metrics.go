package replica

import (
	"sync/atomic"
	"time"
)

// Metrics are a replica's running counts since Start, for a host's
// monitoring (package cluster exports them to Prometheus). Read them with
// Node.Metrics.
type Metrics struct {
	// Proposals counts proposals this replica made as leader (each a
	// log entry: a client command or a batch of them).
	Proposals int64
	// ProposalsDropped counts proposals that can never apply (refused by
	// raft, or another entry took their index): their clients were told
	// to retry.
	ProposalsDropped int64
	// Applied counts entries applied here; ApplySeconds is the time spent
	// applying them.
	Applied      int64
	ApplySeconds float64
	// LeaderChanges counts the times the leader this replica knows
	// changed (to another replica or to none).
	LeaderChanges int64
	// SnapshotsInstalled counts snapshots this replica installed.
	SnapshotsInstalled int64
	// SnapshotsSent counts snapshots this replica sent as leader;
	// SnapshotsFailed those of them it gave up on (timed out, or refused
	// by their receiver) before the receiver installed them.
	SnapshotsSent, SnapshotsFailed int64
}

// metrics are the counters behind Metrics, updated by the node's loop.
type metrics struct {
	proposals, dropped, applied, applyNanos, leaderChanges, installs atomic.Int64
	snapshotsSent, snapshotsFailed                                   atomic.Int64
	// observe, if set (Config.ObserveApply), is told each apply's time.
	observe func(time.Duration)
}

// runDone counts n entries applied as one run in d, each observed as
// taking its share of d.
func (m *metrics) runDone(n int, d time.Duration) {
	m.applied.Add(int64(n))
	m.applyNanos.Add(int64(d))
	if m.observe != nil {
		for range n {
			m.observe(d / time.Duration(n))
		}
	}
}

func (m *metrics) applyDone(d time.Duration) {
	m.applied.Add(1)
	m.applyNanos.Add(int64(d))
	if m.observe != nil {
		m.observe(d)
	}
}

// Metrics returns the replica's counts since Start.
func (n *Node) Metrics() Metrics {
	m := n.c.m // set by newCore, never changed
	return Metrics{
		Proposals:          m.proposals.Load(),
		ProposalsDropped:   m.dropped.Load(),
		Applied:            m.applied.Load(),
		ApplySeconds:       time.Duration(m.applyNanos.Load()).Seconds(),
		LeaderChanges:      m.leaderChanges.Load(),
		SnapshotsInstalled: m.installs.Load(),
		SnapshotsSent:      m.snapshotsSent.Load(),
		SnapshotsFailed:    m.snapshotsFailed.Load(),
	}
}
