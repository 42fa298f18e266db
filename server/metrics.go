package server

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics live on a registry of the server's own (never the global
// default), so two servers in one process, or tests, do not collide. Each
// command's counters and histogram are resolved once at registration, so
// running a command does no label lookup. Store and Pebble figures are
// read from store.Stats when Prometheus scrapes.

type metrics struct {
	reg          *prometheus.Registry
	commands     *prometheus.CounterVec
	latency      *latencyVec
	unknown      prometheus.Counter
	rejected     *prometheus.CounterVec
	dropped      *prometheus.CounterVec
	authFailures prometheus.Counter
}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.commands = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tally_server_commands_total",
		Help: "Commands run, by command (lower case; container|subcommand) and outcome: ok, or error for an error reply. " +
			"Unknown commands and malformed requests count as command=\"unknown\".",
	}, []string{"command", "outcome"})
	m.latency = newLatencyVec("tally_server_command_duration_seconds",
		"Time to run a command, from its start to its reply being buffered (the store commit, fsync included, "+
			"for writes; a pipelined batch of writes shares one commit and each of its commands observes the batch's time).")
	m.unknown = m.commands.WithLabelValues("unknown", "error")
	m.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tally_server_connections_rejected_total",
		Help: "Connections refused at accept: maxclients, or protected (a remote client without a password).",
	}, []string{"reason"})
	m.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tally_server_clients_dropped_total",
		Help: "Connections the server closed: request_too_large, too_many_args, protocol_error, write_error " +
			"(a client that stopped reading), read_error, idle_timeout, cross_protocol (an HTTP request: " +
			"\"Possible SECURITY ATTACK detected\" is logged).",
	}, []string{"reason"})
	m.authFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tally_server_auth_failures_total",
		Help: "AUTH or HELLO AUTH with a wrong user or password, and metrics requests with a wrong basic-auth password.",
	})
	for _, r := range []string{"maxclients", "protected"} {
		m.rejected.WithLabelValues(r)
	}
	for _, r := range allDropReasons {
		m.dropped.WithLabelValues(string(r))
	}
	m.reg.MustRegister(m.commands, m.latency, m.rejected, m.dropped, m.authFailures,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tally_server_connections", Help: "Connections being served.",
		}, func() float64 { return float64(s.stats.clients.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tally_server_connections_accepted_total", Help: "Connections accepted and served.",
		}, func() float64 { return float64(s.stats.accepted.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tally_server_net_input_bytes_total", Help: "Bytes read from clients.",
		}, func() float64 { return float64(s.stats.netIn.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tally_server_net_output_bytes_total", Help: "Bytes written to clients.",
		}, func() float64 { return float64(s.stats.netOut.Load()) }),
		&storeCollector{s: s},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// forCommand returns a command's metrics; its series are created on its
// first call.
func (m *metrics) forCommand(name string) *commandMetrics {
	return &commandMetrics{m: m, name: name}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// storeCollector reads store.Stats at scrape time.
type storeCollector struct{ s *Server }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	descRows = desc("tally_store_rows",
		"Stored (non-zero) rows by counter and tier: hot (memory tables), cold (blocks), delta (written since their range was aged).",
		"counter", "tier")
	descRanges       = desc("tally_store_ranges", "Id ranges by counter and tier: hot, or cold (sealed or being sealed).", "counter", "tier")
	descMem          = desc("tally_store_memory_bytes", "Memory of a counter's hot tables, cold deltas and cold indexes.", "counter")
	descColdDisk     = desc("tally_store_cold_payload_bytes", "Encoded cold blocks and descriptors of a counter (payload; Pebble file bytes are tally_store_disk_bytes).", "counter")
	descLastSeq      = desc("tally_store_last_seq", "Sequence of the last committed log record.")
	descCkptSeq      = desc("tally_store_checkpoint_seq", "Sequence the newest checkpoint includes.")
	descLogRecords   = desc("tally_store_log_records", "Log records since the newest checkpoint.")
	descLogBytes     = desc("tally_store_log_bytes", "Log bytes since the newest checkpoint.")
	descDisk         = desc("tally_store_disk_bytes", "Bytes of all files of the store's Pebble instance.")
	descPebbleMem    = desc("tally_pebble_memory_bytes", "Memory Pebble holds: block cache, memtables, file cache.")
	descCacheHits    = desc("tally_store_block_cache_hits_total", "Lookups of decompressed cold blocks found in the cache.")
	descCacheMisses  = desc("tally_store_block_cache_misses_total", "Lookups of decompressed cold blocks read from disk.")
	descCacheBytes   = desc("tally_store_block_cache_bytes", "Memory of the decompressed cold block cache.")
	descCacheEntries = desc("tally_store_block_cache_entries", "Blocks in the decompressed cold block cache.")
	descJobs         = desc("tally_store_jobs_running", "Aging and merge jobs running now.")
	descJobsDone     = desc("tally_store_jobs_finished_total", "Aging and merge jobs finished since the store was opened.")
	descBgErrors     = desc("tally_store_background_errors", "Errors of background work since the store was opened.")
	descRecovery     = desc("tally_store_recovery_duration_seconds", "Wall time of the store's Open (checkpoint load and log replay).")
	descReplayed     = desc("tally_store_recovery_records_replayed", "Log records replayed by the store's Open.")
	descReopens      = desc("tally_store_reopens_total", "Failures (a full disk, a failed WAL) the store healed by reopening itself in place.")
	descDurability   = desc("tally_store_durability", "1 for the store's durability mode: sync, interval or nosync.", "mode")
	descQueuePending = desc("tally_queue_jobs_pending", "Jobs of the durable queue (fan-outs, backfills, board prunes) waiting for a worker.")
	descQueueRunning = desc("tally_queue_jobs_running", "Jobs of the durable queue a worker runs now.")
	descQueueDone    = desc("tally_queue_jobs_finished_total", "Jobs of the durable queue finished since the store was opened.")
	descQueueOldest  = desc("tally_queue_oldest_job_age_seconds", "Age of the oldest queued job (0 when the queue is empty).")
)

func (sc *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRows, descRanges, descMem, descColdDisk, descLastSeq, descCkptSeq,
		descLogRecords, descLogBytes, descDisk, descPebbleMem, descCacheHits, descCacheMisses, descCacheBytes,
		descCacheEntries, descJobs, descJobsDone, descBgErrors, descRecovery, descReplayed, descReopens, descDurability,
		descQueuePending, descQueueRunning, descQueueDone, descQueueOldest} {
		ch <- d
	}
}

func (sc *storeCollector) Collect(ch chan<- prometheus.Metric) {
	st := sc.s.db.Stats()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	for _, cs := range st.Counters {
		gauge(descRows, float64(cs.HotRows), cs.Name, "hot")
		gauge(descRows, float64(cs.ColdRows), cs.Name, "cold")
		gauge(descRows, float64(cs.DeltaRows), cs.Name, "delta")
		gauge(descRanges, float64(cs.HotRanges), cs.Name, "hot")
		gauge(descRanges, float64(cs.ColdRanges), cs.Name, "cold")
		gauge(descMem, float64(cs.MemBytes), cs.Name)
		gauge(descColdDisk, float64(cs.ColdPayloadBytes), cs.Name)
	}
	gauge(descLastSeq, float64(st.LastSeq))
	gauge(descCkptSeq, float64(st.CheckpointSeq))
	gauge(descLogRecords, float64(st.LogRecords))
	gauge(descLogBytes, float64(st.LogBytes))
	gauge(descDisk, float64(st.DiskBytes))
	gauge(descPebbleMem, float64(st.PebbleMemBytes))
	counter(descCacheHits, float64(st.BlockCache.Hits))
	counter(descCacheMisses, float64(st.BlockCache.Misses))
	gauge(descCacheBytes, float64(st.BlockCache.Bytes))
	gauge(descCacheEntries, float64(st.BlockCache.Entries))
	gauge(descJobs, float64(len(st.Jobs)))
	counter(descJobsDone, float64(st.JobsFinished))
	counter(descReopens, float64(st.Reopens))
	gauge(descBgErrors, float64(len(st.Errors)))
	gauge(descRecovery, st.Recovery.Duration.Seconds())
	gauge(descReplayed, float64(st.Recovery.RecordsReplayed))
	gauge(descDurability, 1, st.Durability.String())
	gauge(descQueuePending, float64(st.Queue.Pending))
	gauge(descQueueRunning, float64(st.Queue.Running))
	counter(descQueueDone, float64(st.Queue.Finished))
	oldest := 0.0
	if st.Queue.Pending+st.Queue.Running > 0 {
		if jobs := sc.s.db.QueuedJobs(); len(jobs) > 0 {
			oldest = max(0, time.Since(jobs[0].Created).Seconds())
		}
	}
	gauge(descQueueOldest, oldest)
}
