package cluster

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tallydb/tally/replica"
)

// snapshotStats is what a Snapshotter that streams checkpoints reports
// (replica.CheckpointSnapshotter).
type snapshotStats interface {
	Stats() replica.SnapshotStats
}

// raftCollector exports the replica's figures as tally_raft_* metrics:
// counts since start (proposals, drops, applies, leader changes,
// snapshots and their bytes), the apply latency histogram, and the
// group's state as this replica sees it (term, commit and applied
// indexes, leadership, each member's lag as the leader sees it).
type raftCollector struct {
	n     *Node
	apply prometheus.Histogram
	snaps replica.Snapshotter
}

var (
	descProposals   = prometheus.NewDesc("tally_raft_proposals_total", "Entries this replica proposed as leader.", nil, nil)
	descDropped     = prometheus.NewDesc("tally_raft_proposals_dropped_total", "Proposals that can never apply (clients told to retry).", nil, nil)
	descApplied     = prometheus.NewDesc("tally_raft_applied_entries_total", "Entries applied by this replica.", nil, nil)
	descLeaderChg   = prometheus.NewDesc("tally_raft_leader_changes_total", "Changes of the leader this replica knows.", nil, nil)
	descInstalls    = prometheus.NewDesc("tally_raft_snapshots_installed_total", "Snapshots this replica installed.", nil, nil)
	descSnapFetched = prometheus.NewDesc("tally_raft_snapshot_bytes_fetched_total", "Snapshot bytes this replica fetched.", nil, nil)
	descSnapServed  = prometheus.NewDesc("tally_raft_snapshot_bytes_served_total", "Snapshot bytes this replica sent to others.", nil, nil)
	descTerm        = prometheus.NewDesc("tally_raft_term", "Raft term.", nil, nil)
	descCommit      = prometheus.NewDesc("tally_raft_commit_index", "Raft commit index.", nil, nil)
	descAppliedIdx  = prometheus.NewDesc("tally_raft_applied_index", "Index of the last entry applied here.", nil, nil)
	descLeader      = prometheus.NewDesc("tally_raft_is_leader", "1 on the leader.", nil, nil)
	descHasLeader   = prometheus.NewDesc("tally_raft_has_leader", "1 when this replica knows a leader.", nil, nil)
	descLag         = prometheus.NewDesc("tally_raft_member_lag_entries", "Entries a member is behind the leader's log (leader only).", []string{"member"}, nil)
	descContact     = prometheus.NewDesc("tally_raft_leader_contact_seconds", "Time since this follower last heard from the leader.", nil, nil)
)

func newRaftCollector(n *Node) *raftCollector {
	return &raftCollector{n: n, apply: prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "tally_raft_apply_seconds",
		Help:    "Time to apply one entry (its commands against the store).",
		Buckets: prometheus.ExponentialBuckets(10e-6, 4, 10),
	})}
}

func (rc *raftCollector) Describe(ch chan<- *prometheus.Desc) {
	rc.apply.Describe(ch)
	for _, d := range []*prometheus.Desc{descProposals, descDropped, descApplied, descLeaderChg, descInstalls,
		descSnapFetched, descSnapServed, descTerm, descCommit, descAppliedIdx, descLeader, descHasLeader, descLag, descContact} {
		ch <- d
	}
}

func (rc *raftCollector) Collect(ch chan<- prometheus.Metric) {
	r := rc.n.rep
	if r == nil {
		return
	}
	rc.apply.Collect(ch)
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	m := r.Metrics()
	counter(descProposals, float64(m.Proposals))
	counter(descDropped, float64(m.ProposalsDropped))
	counter(descApplied, float64(m.Applied))
	counter(descLeaderChg, float64(m.LeaderChanges))
	counter(descInstalls, float64(m.SnapshotsInstalled))
	if s, ok := rc.snaps.(snapshotStats); ok {
		st := s.Stats()
		counter(descSnapFetched, float64(st.BytesFetched))
		counter(descSnapServed, float64(st.BytesServed))
	}
	st := r.Status()
	gauge(descTerm, float64(st.Term))
	gauge(descCommit, float64(st.Commit))
	gauge(descAppliedIdx, float64(st.Applied))
	gauge(descLeader, b2f(st.Role == "leader"))
	gauge(descHasLeader, b2f(st.Leader.ID != 0))
	if st.Role == "leader" {
		for _, mb := range st.Members {
			var lag uint64
			if mb.ID != st.ID && st.LogLast > mb.Match {
				lag = st.LogLast - mb.Match
			}
			gauge(descLag, float64(lag), strconv.FormatUint(mb.ID, 10))
		}
	} else if st.Leader.ID != 0 {
		gauge(descContact, st.LastLeaderContact.Seconds())
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
