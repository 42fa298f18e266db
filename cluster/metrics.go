package cluster

import (
	"strconv"
	"time"

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

	// A sharded node's figures (Config.Sharding).
	descShard      = prometheus.NewDesc("tally_shard_info", "1, labelled with this node's shard.", []string{"shard"}, nil)
	descMapEpoch   = prometheus.NewDesc("tally_shard_map_epoch", "Epoch of the slot map this node holds (0: none yet).", nil, nil)
	descOutPending = prometheus.NewDesc("tally_xshard_pending_messages", "Cross-shard messages appended for a target shard and not yet acknowledged.", []string{"target"}, nil)
	descOutAge     = prometheus.NewDesc("tally_xshard_oldest_pending_seconds", "Age of the oldest unacknowledged message for a target shard.", []string{"target"}, nil)
	descInApplied  = prometheus.NewDesc("tally_xshard_applied_seq", "Last sequence applied from a source shard.", []string{"source"}, nil)
	descSent       = prometheus.NewDesc("tally_xshard_sent_messages_total", "Messages this replica delivered and had acknowledged while it led.", nil, nil)
	descSendRetry  = prometheus.NewDesc("tally_xshard_send_retries_total", "Failed cross-shard sends or acknowledgements, retried.", nil, nil)
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
		descSnapFetched, descSnapServed, descTerm, descCommit, descAppliedIdx, descLeader, descHasLeader, descLag, descContact,
		descShard, descMapEpoch, descOutPending, descOutAge, descInApplied, descSent, descSendRetry} {
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
	rc.collectShard(gauge, counter)
}

// collectShard adds a sharded node's figures: its shard, the map's
// epoch, the cross-shard outboxes and inbox records, the sender's counts.
func (rc *raftCollector) collectShard(gauge func(*prometheus.Desc, float64, ...string), counter func(*prometheus.Desc, float64)) {
	n := rc.n
	if n.cfg.Sharding == nil {
		return
	}
	gauge(descShard, 1, strconv.FormatUint(uint64(n.cfg.Sharding.Shard), 10))
	var epoch uint64
	if v := n.topo.View(); v != nil {
		epoch = v.Epoch
	}
	gauge(descMapEpoch, float64(epoch))
	if st := n.streams.Load(); st != nil {
		if xs, err := st.Status(time.Now()); err == nil {
			for _, t := range xs.Targets {
				id := strconv.FormatUint(uint64(t.Target), 10)
				gauge(descOutPending, float64(t.Pending), id)
				gauge(descOutAge, t.OldestAge.Seconds(), id)
			}
			for _, s := range xs.Sources {
				gauge(descInApplied, float64(s.LastApplied), strconv.FormatUint(uint64(s.Source), 10))
			}
		}
	}
	if n.sender != nil {
		ss := n.sender.Stats()
		counter(descSent, float64(ss.Messages))
		counter(descSendRetry, float64(ss.Retries))
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
