package bench

import (
	"errors"
	"strings"
	"testing"
)

func TestServeTable(t *testing.T) {
	out := "WARNING: something\n" +
		`"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"` + "\n" +
		`"INCR","123456.79","0.5","0.1","0.4","0.9","1.5","3.0"` + "\n"
	if got := lastCSV(out); strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, `"test"`) {
		t.Fatalf("lastCSV = %q", got)
	}
	table := ServeTable([]ServeResult{
		{Target: "tally", Test: "MGET 10 keys", Page: 10, RPS: 100000, P50: 1, P99: 2},
		{Target: "redis", Test: "MGET 10 keys", Page: 10, RPS: 50000, P50: 2, P99: 4},
		{Target: "tally", Test: "TALLY.MGET 10 ids", Page: 10, RPS: 80000},
		{Target: "redis", Test: "HGETALL", Err: errors.New("x")},
	}, []ServeMemory{{Target: "tally", Items: 1000, RSSBefore: 1 << 20, RSS: 2 << 20, TableBytes: 9000}})
	for _, want := range []string{
		"| MGET 10 keys | 100.0k | 50.0k | 2.00 | 1.00M | 500.0k | 1.00 / 2.00 | 2.00 / 4.00 |",
		"| TALLY.MGET 10 ids | 80.0k | — | — | 800.0k | — |",
		"| HGETALL | — | error |",
		"| tally | 1000 | 0.0 | 1.0 MiB | 2.0 MiB | 1048.6 B |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}
