package server

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestClientListAndKill: CLIENT LIST and INFO show every connection in
// Redis's format; CLIENT KILL closes another one after its batch, by
// address or filter, and SKIPME keeps the caller.
func TestClientListAndKill(t *testing.T) {
	ts := newTestServer(t, nil)
	a := ts.client(t, &redis.Options{PoolSize: 1, ClientName: "alice"})
	b := ts.client(t, &redis.Options{PoolSize: 1, ClientName: "bob"})
	if err := b.HIncrBy(ctx, "posts:1", "likes", 1).Err(); err != nil {
		t.Fatal(err)
	}
	list, err := a.ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	var bobLine string
	for _, l := range strings.Split(strings.TrimSpace(list), "\n") {
		if strings.Contains(l, " name=bob ") {
			bobLine = l
		}
	}
	for _, want := range []string{"id=", " addr=127.0.0.1:", " name=bob ", " cmd=hincrby ", " db=0 ", " resp=2 ", " age="} {
		if !strings.Contains(bobLine, want) {
			t.Errorf("CLIENT LIST line of bob lacks %q: %q (all: %q)", want, bobLine, list)
		}
	}
	info, err := a.Do(ctx, "CLIENT", "INFO").Text()
	if err != nil || !strings.Contains(info, " name=alice ") || !strings.Contains(info, "cmd=client|info") {
		t.Fatalf("CLIENT INFO = %q, %v", info, err)
	}
	bobID, err := b.ClientID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if l, err := a.Do(ctx, "CLIENT", "LIST", "ID", bobID).Text(); err != nil || strings.Count(l, "\n") != 1 || !strings.Contains(l, "name=bob") {
		t.Fatalf("CLIENT LIST ID %d = %q, %v", bobID, l, err)
	}
	// SKIPME yes (the default) spares the caller.
	myID, _ := a.ClientID(ctx).Result()
	if n, err := a.Do(ctx, "CLIENT", "KILL", "ID", myID).Int(); err != nil || n != 0 {
		t.Fatalf("CLIENT KILL ID self = %d, %v", n, err)
	}
	if n, err := a.Do(ctx, "CLIENT", "KILL", "ID", bobID).Int(); err != nil || n != 1 {
		t.Fatalf("CLIENT KILL ID bob = %d, %v", n, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for ts.s.Clients() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d clients after the kill", ts.s.Clients())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := a.Ping(ctx).Err(); err != nil {
		t.Fatalf("the killer's connection: %v", err)
	}
	for _, bad := range [][]any{{"CLIENT", "KILL", "ID", "x"}, {"CLIENT", "KILL", "ID"}, {"CLIENT", "KILL", "SKIPME", "maybe"},
		{"CLIENT", "LIST", "TYPE", "odd"}, {"CLIENT", "LIST", "ID", "0"}} {
		if err := a.Do(ctx, bad...).Err(); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// TestSlowlog: commands over the threshold are logged newest first with
// Redis's six fields; CONFIG SET changes the threshold and the length at
// run time; RESET empties the log.
func TestSlowlog(t *testing.T) {
	ts := newTestServer(t, &Options{SlowlogThreshold: time.Hour})
	rc := ts.client(t, &redis.Options{PoolSize: 1, ClientName: "slow"})
	if n, err := rc.Do(ctx, "SLOWLOG", "LEN").Int(); err != nil || n != 0 {
		t.Fatalf("SLOWLOG LEN = %d, %v", n, err)
	}
	if v, err := rc.ConfigGet(ctx, "slowlog-*").Result(); err != nil ||
		!reflect.DeepEqual(v, map[string]string{"slowlog-log-slower-than": "3600000000", "slowlog-max-len": "128"}) {
		t.Fatalf("CONFIG GET slowlog-* = %v, %v", v, err)
	}
	if err := rc.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.ConfigSet(ctx, "slowlog-max-len", "3").Err(); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 300)
	rc.Do(ctx, "ECHO", long)
	for i := 0; i < 4; i++ {
		rc.HIncrBy(ctx, "posts:1", "likes", 1)
	}
	entries, err := rc.SlowLogGet(ctx, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		t.Fatalf("%d entries with slowlog-max-len 3: %+v", len(entries), entries)
	}
	if e := entries[0]; !reflect.DeepEqual(e.Args, []string{"hincrby", "posts:1", "likes", "1"}) {
		t.Errorf("newest entry %+v", e)
	}
	if entries[0].ID <= entries[1].ID || entries[0].ClientName != "slow" || !strings.HasPrefix(entries[0].ClientAddr, "127.0.0.1:") {
		t.Errorf("entries %+v", entries)
	}
	if err := rc.Do(ctx, "SLOWLOG", "RESET").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.ConfigSet(ctx, "slowlog-max-len", "10").Err(); err != nil {
		t.Fatal(err)
	}
	rc.Do(ctx, "ECHO", long)
	entries, _ = rc.SlowLogGet(ctx, 1).Result()
	if len(entries) != 1 || len(entries[0].Args) != 2 || entries[0].Args[1] != strings.Repeat("x", 128)+"... (172 more bytes)" {
		t.Fatalf("a long argument is cut as Redis cuts it: %+v", entries)
	}
	// Off, and bad values refused without changing anything.
	if err := rc.ConfigSet(ctx, "slowlog-log-slower-than", "-1").Err(); err != nil {
		t.Fatal(err)
	}
	rc.Do(ctx, "SLOWLOG", "RESET")
	rc.Ping(ctx)
	if n, _ := rc.Do(ctx, "SLOWLOG", "LEN").Int(); n != 0 {
		t.Fatalf("%d entries with the log off", n)
	}
	if err := rc.Do(ctx, "CONFIG", "SET", "slowlog-max-len", "5", "slowlog-log-slower-than", "x").Err(); err == nil {
		t.Fatal("a bad value was accepted")
	}
	if v, _ := rc.ConfigGet(ctx, "slowlog-max-len").Result(); v["slowlog-max-len"] != "10" {
		t.Fatalf("a refused CONFIG SET changed slowlog-max-len: %v", v)
	}
}

// TestKeyInspection: TYPE, MEMORY USAGE and INFO's keyspace hits and
// misses, as redis-cli --bigkeys and redis_exporter read them.
func TestKeyInspection(t *testing.T) {
	ts := newTestServer(t, nil)
	rc := ts.client(t, nil)
	if err := rc.HIncrBy(ctx, "posts:7", "likes", 3).Err(); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"posts:7": "hash", "posts:8": "none", "nosuch:1": "none", "garbage": "none"} {
		if got, err := rc.Type(ctx, key).Result(); err != nil || got != want {
			t.Errorf("TYPE %s = %q, %v; want %q", key, got, err, want)
		}
	}
	if n, err := rc.HLen(ctx, "posts:7").Result(); err != nil || n != 3 {
		t.Errorf("HLEN posts:7 = %d, %v; want 3 (reposts, comments, likes)", n, err)
	}
	if n, err := rc.HLen(ctx, "posts:8").Result(); err != nil || n != 0 {
		t.Errorf("HLEN posts:8 = %d, %v", n, err)
	}
	if n, err := rc.MemoryUsage(ctx, "posts:7").Result(); err != nil || n <= 0 || n > 1024 {
		t.Errorf("MEMORY USAGE posts:7 = %d, %v", n, err)
	}
	if n, err := rc.Do(ctx, "MEMORY", "USAGE", "posts:7", "SAMPLES", "5").Int64(); err != nil || n <= 0 {
		t.Errorf("MEMORY USAGE posts:7 SAMPLES 5 = %d, %v", n, err)
	}
	if err := rc.MemoryUsage(ctx, "posts:8").Err(); err != redis.Nil {
		t.Errorf("MEMORY USAGE of a missing row: %v, want nil", err)
	}
	if err := rc.Do(ctx, "MEMORY", "USAGE", "posts:7", "SAMPLES").Err(); err == nil {
		t.Error("MEMORY USAGE with a dangling SAMPLES: no error")
	}
	before, _ := rc.Info(ctx, "stats").Result()
	rc.HGet(ctx, "posts:7", "likes")
	rc.HGet(ctx, "posts:9", "likes")
	rc.MGet(ctx, "posts:7", "posts:10", "nosuch:1")
	after, _ := rc.Info(ctx, "stats").Result()
	field := func(info, name string) string {
		for _, l := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(l, name+":"); ok {
				return v
			}
		}
		return ""
	}
	if h0, h1 := field(before, "keyspace_hits"), field(after, "keyspace_hits"); h0 == "" || atoiT(t, h1)-atoiT(t, h0) != 2 {
		t.Errorf("keyspace_hits %s -> %s, want +2", h0, h1)
	}
	if m0, m1 := field(before, "keyspace_misses"), field(after, "keyspace_misses"); m0 == "" || atoiT(t, m1)-atoiT(t, m0) != 3 {
		t.Errorf("keyspace_misses %s -> %s, want +3", m0, m1)
	}
}

func atoiT(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// TestScan: a full SCAN returns every stored row of the user's counters
// once, over many calls with server-kept cursors; MATCH and TYPE filter;
// a package's counter and an all-zero row never show.
func TestScan(t *testing.T) {
	ts, db := newDBServer(t)
	rc := ts.client(t, nil)
	for _, cmd := range [][]any{{"TALLY.COUNTER", "ADD", "posts"}, {"TALLY.COLUMN", "ADD", "posts", "likes"},
		{"TALLY.COUNTER", "ADD", "users2"}, {"TALLY.COLUMN", "ADD", "users2", "n"}} {
		if err := rc.Do(ctx, cmd...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]bool{}
	for i := 1; i <= 2500; i++ {
		id := uint64(i) * 7919 << 20 // sparse, snowflake-like
		rc.HIncrBy(ctx, fmt.Sprintf("posts:%d", id), "likes", 1)
		want[fmt.Sprintf("posts:%d", id)] = true
	}
	for i := 1; i <= 30; i++ {
		rc.HIncrBy(ctx, fmt.Sprintf("users2:%d", i), "n", 1)
		want[fmt.Sprintf("users2:%d", i)] = true
	}
	rc.HIncrBy(ctx, "users2:999", "n", 1)
	rc.HIncrBy(ctx, "users2:999", "n", -1)                // all zero: not stored
	if _, err := db.Timeline().Follow(1, 2); err != nil { // package data: never a key
		t.Fatal(err)
	}
	scanAll := func(args ...any) map[string]int {
		got := map[string]int{}
		cur := uint64(0)
		for calls := 0; ; calls++ {
			if calls > 100 {
				t.Fatal("SCAN does not end")
			}
			keys, next, err := rc.Scan(ctx, cur, "", 10).Result()
			if len(args) > 0 {
				v, err2 := rc.Do(ctx, append([]any{"SCAN", cur}, args...)...).Slice()
				if err2 != nil {
					t.Fatal(err2)
				}
				next, _ = strconv.ParseUint(v[0].(string), 10, 64)
				keys = keys[:0]
				for _, k := range v[1].([]any) {
					keys = append(keys, k.(string))
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				got[k]++
			}
			if next == 0 {
				return got
			}
			cur = next
		}
	}
	got := scanAll()
	if len(got) != len(want) {
		t.Errorf("SCAN returned %d keys, want %d", len(got), len(want))
	}
	for k, n := range got {
		if !want[k] || n != 1 {
			t.Errorf("SCAN returned %s %d times (want: %v)", k, n, want[k])
		}
	}
	if got := scanAll("MATCH", "users2:*", "COUNT", 5); len(got) != 30 {
		t.Errorf("MATCH users2:*: %d keys", len(got))
	}
	if got := scanAll("MATCH", "*:1?", "COUNT", 1000); len(got) != 10 {
		t.Errorf("MATCH *:1?: %v", got)
	}
	if got := scanAll("TYPE", "string"); len(got) != 0 {
		t.Errorf("TYPE string: %v", got)
	}
	if got := scanAll("TYPE", "hash"); len(got) != len(want) {
		t.Errorf("TYPE hash: %d keys", len(got))
	}
	for _, bad := range [][]any{{"SCAN", "x"}, {"SCAN", 12345}, {"SCAN", 0, "COUNT", 0}, {"SCAN", 0, "MATCH"}, {"SCAN", 0, "BOGUS", 1},
		{"SCAN", 0, "MATCH", "[x"}} {
		if err := rc.Do(ctx, bad...).Err(); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// TestPackageMetrics: every package's figures are Prometheus series, the
// growing ones as counters.
func TestPackageMetrics(t *testing.T) {
	ts, _ := newDBServer(t)
	rc := ts.client(t, nil)
	if err := rc.Do(ctx, "TL.FOLLOW", 1, 2).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Do(ctx, "TL.POST", 2, 100, "WAIT").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Do(ctx, "TL.HOME", 1).Err(); err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	ts.s.MetricsHandler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	body := w.Body.String()
	for _, want := range []string{"# TYPE tally_timeline_deliveries_total counter", "tally_timeline_pages_total 1",
		"tally_timeline_active_window_seconds 604800", "# TYPE tally_likes_transitions_total counter",
		"tally_unread_snapshot_cache_bytes ", "tally_timeline_users "} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if t.Failed() {
		t.Log(body)
	}
	// TALLY.STATS of a running server shows the figures since its open.
	if st, err := rc.Do(ctx, "TALLY.STATS").Text(); err != nil || !strings.Contains(st, "\ntimeline.pages 1\n") {
		t.Errorf("TALLY.STATS: %v\n%s", err, st)
	}
}

// TestGrafanaDashboard: docs/grafana-tally.json is valid JSON and every
// metric its panels query is one the server exports.
func TestGrafanaDashboard(t *testing.T) {
	raw, err := os.ReadFile("../docs/grafana-tally.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	ts, _ := newDBServer(t)
	rc := ts.client(t, nil)
	rc.Do(ctx, "TL.FOLLOW", 1, 2)
	rc.Do(ctx, "TL.BOGUS")
	rc.Do(ctx, "LIKE.COUNTS", "video", 1)
	w := httptest.NewRecorder()
	ts.s.MetricsHandler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	body := w.Body.String()
	names := regexp.MustCompile(`\btally_[a-z_]+`)
	n := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, m := range names.FindAllString(tg.Expr, -1) {
				n++
				if !strings.Contains(body, "\n"+m+"{") && !strings.Contains(body, "\n"+m+" ") {
					t.Errorf("panel %q queries %s, which the server does not export", p.Title, m)
				}
			}
		}
	}
	if len(dash.Panels) < 10 || n < 20 {
		t.Fatalf("%d panels, %d metric references", len(dash.Panels), n)
	}
}

// TestInfoForRedisExporter checks INFO against what redis_exporter
// (github.com/oliver006/redis_exporter, exporter/info.go and exporter.go,
// read 2026-11-24; its module is not served here, so it cannot run in
// this test) parses: "# Section" headers, "field:value" lines whose
// numeric fields it maps to gauges and counters, cmdstat_NAME lines of
// calls=,usec=,usec_per_call=,rejected_calls=,failed_calls=, errorstat_
// lines of count=, and dbN:keys=N,expires=N,avg_ttl=N.
func TestInfoForRedisExporter(t *testing.T) {
	ts := newTestServer(t, nil)
	rc := ts.client(t, nil)
	rc.HIncrBy(ctx, "posts:1", "likes", 1)
	rc.Do(ctx, "NOSUCH")
	rc.HGet(ctx, "posts:1", "nosuch")
	info, err := rc.Info(ctx, "everything").Result()
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	section := ""
	for _, l := range strings.Split(info, "\r\n") {
		if strings.HasPrefix(l, "# ") {
			section = l[2:]
			continue
		}
		if l == "" {
			continue
		}
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			t.Errorf("line %q in %s is not field:value", l, section)
			continue
		}
		fields[k] = v
	}
	// Fields the exporter maps that a tally server has; each a number.
	for _, k := range []string{"uptime_in_seconds", "process_id", "connected_clients", "blocked_clients", "maxclients",
		"used_memory", "used_memory_rss", "loading", "aof_enabled", "rdb_changes_since_last_save",
		"total_connections_received", "total_commands_processed", "total_net_input_bytes", "total_net_output_bytes",
		"rejected_connections", "instantaneous_ops_per_sec", "keyspace_hits", "keyspace_misses", "total_error_replies",
		"connected_slaves", "master_repl_offset"} {
		v, ok := fields[k]
		if !ok {
			t.Errorf("INFO lacks %s", k)
			continue
		}
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			t.Errorf("INFO %s:%s is not a number", k, v)
		}
	}
	if fields["role"] != "master" || fields["redis_version"] == "" {
		t.Errorf("role %q, redis_version %q", fields["role"], fields["redis_version"])
	}
	cmdstat := regexp.MustCompile(`^calls=\d+,usec=\d+,usec_per_call=\d+\.\d+,rejected_calls=\d+,failed_calls=\d+$`)
	errstat := regexp.MustCompile(`^count=\d+$`)
	keyspace := regexp.MustCompile(`^keys=\d+,expires=\d+,avg_ttl=\d+`)
	var sawCmd, sawErr, sawDB bool
	for k, v := range fields {
		switch {
		case strings.HasPrefix(k, "cmdstat_"):
			sawCmd = true
			if !cmdstat.MatchString(v) {
				t.Errorf("%s:%s is not what the exporter parses", k, v)
			}
		case strings.HasPrefix(k, "errorstat_"):
			sawErr = true
			if !errstat.MatchString(v) {
				t.Errorf("%s:%s", k, v)
			}
		case regexp.MustCompile(`^db\d+$`).MatchString(k):
			sawDB = true
			if !keyspace.MatchString(v) {
				t.Errorf("%s:%s", k, v)
			}
		}
	}
	if !sawCmd || !sawErr || !sawDB {
		t.Errorf("cmdstat %v, errorstat %v, db0 %v in:\n%s", sawCmd, sawErr, sawDB, info)
	}
}

// TestLatencyMonitor: off by default; with a threshold, commands over it
// are events (command, fast-command) that LATEST, HISTORY and RESET read
// as Redis's latency monitor replies.
func TestLatencyMonitor(t *testing.T) {
	ts := newTestServer(t, nil)
	rc := ts.client(t, nil)
	slow := ts.s.cmds.byName["hgetall"]
	fast := ts.s.cmds.byName["ping"]
	ts.s.latency.record(slow, time.Second) // off: nothing kept
	if v, err := rc.Do(ctx, "LATENCY", "LATEST").Slice(); err != nil || len(v) != 0 {
		t.Fatalf("LATENCY LATEST while off = %v, %v", v, err)
	}
	if err := rc.ConfigSet(ctx, "latency-monitor-threshold", "5").Err(); err != nil {
		t.Fatal(err)
	}
	ts.s.latency.record(slow, 2*time.Millisecond) // under the threshold
	ts.s.latency.record(slow, 12*time.Millisecond)
	ts.s.latency.record(slow, 9*time.Millisecond) // same second: the max stays
	ts.s.latency.record(fast, 7*time.Millisecond)
	v, err := rc.Do(ctx, "LATENCY", "LATEST").Slice()
	if err != nil || len(v) != 2 {
		t.Fatalf("LATENCY LATEST = %v, %v", v, err)
	}
	if e := v[0].([]any); e[0] != "command" || e[2] != int64(12) || e[3] != int64(12) {
		t.Errorf("command event %v", e)
	}
	if e := v[1].([]any); e[0] != "fast-command" || e[3] != int64(7) {
		t.Errorf("fast-command event %v", e)
	}
	h, err := rc.Do(ctx, "LATENCY", "HISTORY", "command").Slice()
	if err != nil || len(h) != 1 || h[0].([]any)[1] != int64(12) {
		t.Errorf("LATENCY HISTORY command = %v, %v", h, err)
	}
	if n, err := rc.Do(ctx, "LATENCY", "RESET", "fast-command", "nosuch").Int(); err != nil || n != 1 {
		t.Errorf("LATENCY RESET fast-command = %d, %v", n, err)
	}
	if v, _ := rc.ConfigGet(ctx, "latency-monitor-threshold").Result(); v["latency-monitor-threshold"] != "5" {
		t.Errorf("CONFIG GET latency-monitor-threshold = %v", v)
	}
	if err := rc.ConfigSet(ctx, "latency-monitor-threshold", "-1").Err(); err == nil {
		t.Error("a negative threshold was accepted")
	}
}
