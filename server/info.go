package server

import (
	"fmt"
	"net"
	"os"
	"runtime"
	rtmetrics "runtime/metrics"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/tallydb/tally/store"
)

// INFO in Redis's text format: "# Section" headers, "field:value" lines,
// CRLF line ends, a blank line between sections. Redis's field names are
// kept where tally has the same figure, tally's own figures are added
// under their own names.

// infoSections are INFO's default sections (INFO, INFO default), in
// Redis's order; INFO all and everything add commandstats, as Redis does.
var infoSections = []string{"server", "clients", "memory", "persistence", "stats", "replication", "cpu",
	"errorstats", "cluster", "keyspace", "tally"}

func infoHandler(c *Conn, args [][]byte) {
	want := map[string]bool{}
	for _, a := range args[1:] {
		switch s := strings.ToLower(string(a)); s {
		case "all", "everything":
			want["commandstats"] = true
			fallthrough
		case "default":
			for _, sec := range infoSections {
				want[sec] = true
			}
		default:
			want[s] = true
		}
	}
	if len(args) == 1 {
		for _, sec := range infoSections {
			want[sec] = true
		}
	}
	c.WriteBulkString(c.s.info(want))
}

// info renders the wanted sections.
func (s *Server) info(want map[string]bool) string {
	var st *store.Stats
	stats := func() *store.Stats {
		if st == nil {
			v := s.db.Stats()
			st = &v
		}
		return st
	}
	var b strings.Builder
	line := func(k string, v any) { fmt.Fprintf(&b, "%s:%v\r\n", k, v) }
	section := func(name string) bool {
		if !want[strings.ToLower(name)] {
			return false
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString("# " + name + "\r\n")
		return true
	}
	if section("Server") {
		up := time.Since(s.started)
		line("redis_version", redisCompatVersion)
		line("tally_version", s.version)
		line("redis_mode", map[bool]string{false: "standalone", true: "cluster"}[s.cluster != nil])
		line("os", runtime.GOOS+" "+runtime.GOARCH)
		line("arch_bits", strconv.Itoa(32<<(^uint(0)>>63)))
		line("go_version", runtime.Version())
		line("process_id", os.Getpid())
		line("run_id", s.runID)
		line("tcp_port", s.port())
		line("uptime_in_seconds", int64(up.Seconds()))
		line("uptime_in_days", int64(up.Hours()/24))
	}
	if section("Clients") {
		line("connected_clients", s.stats.clients.Load())
		line("maxclients", s.opts.MaxClients)
		line("blocked_clients", 0)
	}
	if section("Memory") {
		heap := goHeapBytes()
		rss := rssBytes()
		line("used_memory", heap)
		line("used_memory_human", human(heap))
		line("used_memory_rss", rss)
		line("used_memory_rss_human", human(rss))
		var mem int64
		for _, cs := range stats().Counters {
			mem += cs.MemBytes
		}
		line("tally_table_bytes", mem)
		line("tally_block_cache_bytes", stats().BlockCache.Bytes)
		line("pebble_memory_bytes", stats().PebbleMemBytes)
	}
	if section("Persistence") {
		st := stats()
		line("loading", 0)
		line("tally_durability", st.Durability)
		line("aof_enabled", 1)
		line("appendfsync", map[string]string{"sync": "always", "interval": "everysec", "nosync": "no"}[st.Durability.String()])
		line("rdb_changes_since_last_save", st.LogRecords)
		line("last_seq", st.LastSeq)
		line("checkpoint_seq", st.CheckpointSeq)
		line("log_records", st.LogRecords)
		line("log_bytes", st.LogBytes)
		line("disk_bytes", st.DiskBytes)
		line("recovery_duration_ms", st.Recovery.Duration.Milliseconds())
		line("recovery_records_replayed", st.Recovery.RecordsReplayed)
		line("tally_store_reopens", st.Reopens) // failures healed in place (store.Options.ReopenOnFailure)
	}
	if section("Stats") {
		st := stats()
		line("total_connections_received", s.stats.accepted.Load())
		line("total_commands_processed", s.stats.commands.Load())
		line("total_net_input_bytes", s.stats.netIn.Load())
		line("total_net_output_bytes", s.stats.netOut.Load())
		line("rejected_connections", s.stats.rejected.Load())
		line("total_error_replies", s.stats.errorReplies.Load())
		line("instantaneous_ops_per_sec", s.opsRate.rate(time.Now(), s.stats.commands.Load(), s.started))
		line("keyspace_hits", s.stats.keyspaceHits.Load())
		line("keyspace_misses", s.stats.keyspaceMisses.Load())
		line("dropped_clients", s.stats.dropped.Load())
		line("block_cache_hits", st.BlockCache.Hits)
		line("block_cache_misses", st.BlockCache.Misses)
		line("jobs_running", len(st.Jobs))
		line("jobs_finished", st.JobsFinished)
		line("background_errors", len(st.Errors))
	}
	if section("Replication") {
		if s.cluster != nil {
			s.replicationInfo(line)
		} else {
			// One copy on one machine.
			line("role", "master")
			line("connected_slaves", 0)
			line("master_failover_state", "no-failover")
			line("master_replid", s.runID)
			line("master_repl_offset", stats().LastSeq)
		}
	}
	if section("CPU") {
		for _, kv := range cpuTimes() {
			line(kv.k, strconv.FormatFloat(kv.v, 'f', 6, 64))
		}
	}
	if section("Commandstats") {
		for _, c := range s.cmds.sorted {
			s.commandStatLines(c, line)
		}
	}
	if section("Errorstats") {
		for _, l := range s.errorStats.lines() {
			b.WriteString(l + "\r\n")
		}
	}
	if section("Cluster") {
		line("cluster_enabled", b2i(s.cluster != nil))
	}
	if section("Keyspace") {
		// The user's counters only: packages' counters are not keys.
		rows := 0
		for _, cs := range stats().Counters {
			if cs.Owner == "" {
				rows += cs.Rows()
			}
		}
		if rows > 0 {
			line("db0", fmt.Sprintf("keys=%d,expires=0,avg_ttl=0", rows))
		}
	}
	if section("Tally") {
		// Counts never go below 0: DECR, DECRBY and a negative HINCRBY
		// past 0 leave 0 (Redis would go negative).
		line("count_floor", 0)
		var user, owned []store.CounterStats
		for _, cs := range stats().Counters {
			if cs.Owner == "" {
				user = append(user, cs)
			} else {
				owned = append(owned, cs)
			}
		}
		line("counters", len(user))
		// A package's counters under its own name: OWNER_counter_NAME.
		for _, cs := range append(user, owned...) {
			prefix := "counter_"
			if cs.Owner != "" {
				prefix = cs.Owner + "_counter_"
			}
			line(prefix+cs.Name, fmt.Sprintf("columns=%s,rows=%d,hot_rows=%d,cold_rows=%d,delta_rows=%d,ranges_hot=%d,ranges_cold=%d,mem_bytes=%d,cold_payload_bytes=%d",
				strings.Join(cs.Columns, "|"), cs.Rows(), cs.HotRows, cs.ColdRows, cs.DeltaRows, cs.HotRanges, cs.ColdRanges, cs.MemBytes, cs.ColdPayloadBytes))
			if cs.Warning != "" {
				line(prefix+cs.Name+"_warning", cs.Warning)
			}
		}
	}
	return b.String()
}

// redisCompatVersion is the Redis version whose commands and replies the
// server follows; tools that parse INFO's redis_version get it.
const redisCompatVersion = "7.0.0"

// port returns the TCP port of the first listener, or 0.
func (s *Server) port() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ln := range s.mu.listeners {
		if a, ok := ln.Addr().(*net.TCPAddr); ok {
			return a.Port
		}
	}
	return 0
}

// goHeapBytes returns the bytes of live and not yet swept Go heap objects.
// Pebble's block cache is allocated outside the Go heap and is not in it.
func goHeapBytes() uint64 {
	s := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// rssBytes returns the process's resident set size (Linux; 0 elsewhere).
func rssBytes() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}

// human formats bytes as Redis's *_human fields do.
func human(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2fG", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2fM", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.2fK", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}

// commandStatLines writes the cmdstat_ lines of c and its subcommands, in
// Redis's form: cmdstat_NAME:calls=N,usec=U,usec_per_call=F,
// rejected_calls=R,failed_calls=E (a subcommand as NAME|SUB), for the
// commands called at least once. They are read from the command's
// metrics: the latency histogram observes every call, rejected ones
// included, and the failed counter every error reply.
func (s *Server) commandStatLines(c *Command, line func(string, any)) {
	if cs := c.usedMetrics(); cs != nil {
		var f dto.Metric
		cs.failed.Write(&f)
		rej := uint64(c.metrics.rejected.Load())
		observed, sum := cs.latency.snapshot()
		if observed > 0 {
			calls := observed - min(rej, observed)
			failed := uint64(f.GetCounter().GetValue()) - min(rej, uint64(f.GetCounter().GetValue()))
			usec := uint64(sum * 1e6)
			per := 0.0
			if calls > 0 {
				per = float64(usec) / float64(calls)
			}
			line("cmdstat_"+c.fullName, fmt.Sprintf("calls=%d,usec=%d,usec_per_call=%.2f,rejected_calls=%d,failed_calls=%d",
				calls, usec, per, rej, failed))
		}
	}
	for i := range c.Subcommands {
		s.commandStatLines(&c.Subcommands[i], line)
	}
}

// usedMetrics returns c's series if c has a handler and was called.
func (c *Command) usedMetrics() *commandSeries {
	if c.Handler == nil || c.metrics == nil {
		return nil
	}
	return c.metrics.used()
}

// countLookup counts a read of a row for INFO's keyspace_hits and
// keyspace_misses: a hit when the row exists (some column is non-zero).
func (s *Server) countLookup(exists bool) {
	if exists {
		s.stats.keyspaceHits.Add(1)
	} else {
		s.stats.keyspaceMisses.Add(1)
	}
}
