package bench

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/tallydb/tally/internal/hist"
)

// Table renders results as one markdown table. Each peer's figures carry
// tally's ratio to them in parentheses, "(×r)" with r = tally ÷ peer,
// taken against the tally result of the same Durability: for bytes and
// latencies below 1 means tally is better, for throughput above 1 does.
// Memory has three columns (see Memory): each system's own accounting,
// which counts different things in each system and so carries no ratio;
// heap (live allocations) and RSS growth, measured the same way for every
// system, which do.
//
// The ratios are against the in-process tally target. When the results
// hold tally-serve rows (Spec.Served), a second table follows: those rows
// and the peers, with the peers' ratios taken against tally-serve of the
// same Durability (tally reached over RESP as the peers are).
func Table(results []Result) string {
	return withServedTable(results, func(r Result) (bool, bool, bool) {
		return r.Spec.Tally, r.Spec.Served, r.Spec.Skip != ""
	}, table)
}

// withServedTable renders results with render, whose ratios are taken
// against the rows its base accepts: first against the in-process tally
// rows, then, when tally-serve rows ran, a second table of those rows and
// the peers, the peers' ratios against tally-serve. kind says of a result
// whether it is tally, served, and skipped.
func withServedTable[R any](results []R, kind func(R) (tally, served, skipped bool), render func([]R, func(R) bool) string) string {
	out := render(results, func(r R) bool { t, s, _ := kind(r); return t && !s })
	var like []R
	ran := false
	for _, r := range results {
		t, s, skipped := kind(r)
		if s || !t {
			like = append(like, r)
		}
		ran = ran || s && !skipped
	}
	if ran {
		out += "\nLike for like, tally behind `tally serve` (ratios of the peers: tally-serve ÷ peer):\n\n" +
			render(like, func(r R) bool { _, s, _ := kind(r); return s })
	}
	return out
}

// table renders results with each peer's ratios against the result of the
// same Durability whose Spec base accepts.
func table(results []Result, base func(Result) bool) string {
	tally := map[Durability]*Result{}
	for i := range results {
		r := &results[i]
		if base(*r) && r.Err == nil && r.Spec.Skip == "" {
			tally[r.Spec.Durability] = r
		}
	}
	var b strings.Builder
	b.WriteString("| target | mode | durability | load | own mem B/ctr | heap B/ctr | rss B/ctr | disk B/ctr | reads ids/s | writes/s | read p50 | read p99 | read p999 | write p50 | write p99 | write p999 | write p9999 | recovery |\n")
	b.WriteString("|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for i := range results {
		r := &results[i]
		fmt.Fprintf(&b, "| %s | %s | %s | ", r.Spec.Name, r.Spec.Mode, r.Spec.Durability)
		switch {
		case r.Spec.Skip != "":
			fmt.Fprintf(&b, "%s |%s\n", r.Spec.Skip, strings.Repeat(" |", 14))
			continue
		case r.Err != nil:
			fmt.Fprintf(&b, "error: %s |%s\n", strings.ReplaceAll(r.Err.Error(), "|", "/"), strings.Repeat(" |", 14))
			continue
		}
		var t *Result
		if !r.Spec.Tally {
			t = tally[r.Spec.Durability]
		}
		ratio := func(s string, tv, pv float64) string {
			if t == nil || pv <= 0 || tv < 0 {
				return s
			}
			return fmt.Sprintf("%s (×%s)", s, fmtRatio(tv/pv))
		}
		bpc := func(n int64) float64 {
			if n < 0 {
				return -1
			}
			return float64(n) / float64(r.Counters)
		}
		tbpc := func(n int64) float64 {
			if t == nil || n < 0 {
				return -1
			}
			return float64(n) / float64(t.Counters)
		}
		lat := func(h, th *hist.Histogram, q float64) string {
			v := h.Quantile(q)
			if t == nil {
				return fmtDur(v)
			}
			return ratio(fmtDur(v), float64(th.Quantile(q)), float64(v))
		}
		var tr *Result = r
		if t != nil {
			tr = t
		}
		cells := []string{
			fmtDur(r.Load),
			fmtBytes(bpc(r.Mem.Own)),
			ratio(fmtBytes(bpc(r.Mem.Heap)), tbpc(tr.Mem.Heap), bpc(r.Mem.Heap)),
			ratio(fmtBytes(bpc(r.Mem.RSS)), tbpc(tr.Mem.RSS), bpc(r.Mem.RSS)),
			ratio(fmtBytes(bpc(r.DiskBytes)), tbpc(tr.DiskBytes), bpc(r.DiskBytes)),
			ratio(fmtRate(r.ReadIDsPerSec()), tr.ReadIDsPerSec(), r.ReadIDsPerSec()),
			ratio(fmtRate(r.WritesPerSec()), tr.WritesPerSec(), r.WritesPerSec()),
			lat(&r.ReadLat, &tr.ReadLat, 0.5), lat(&r.ReadLat, &tr.ReadLat, 0.99), lat(&r.ReadLat, &tr.ReadLat, 0.999),
			lat(&r.WriteLat, &tr.WriteLat, 0.5), lat(&r.WriteLat, &tr.WriteLat, 0.99), lat(&r.WriteLat, &tr.WriteLat, 0.999),
			lat(&r.WriteLat, &tr.WriteLat, 0.9999),
		}
		if r.Recovery >= 0 {
			cells = append(cells, ratio(fmtDur(r.Recovery), float64(tr.Recovery), float64(r.Recovery)))
		} else {
			cells = append(cells, "—")
		}
		b.WriteString(strings.Join(cells, " | "))
		b.WriteString(" |\n")
	}
	return b.String()
}

func fmtRatio(r float64) string {
	switch {
	case r >= 100:
		return fmt.Sprintf("%.0f", r)
	case r >= 10:
		return fmt.Sprintf("%.1f", r)
	case r >= 0.1:
		return fmt.Sprintf("%.2f", r)
	case r >= 0.001:
		return fmt.Sprintf("%.3f", r)
	}
	return fmt.Sprintf("%.1e", r)
}

func fmtBytes(v float64) string {
	if v < 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", v)
}

func fmtRate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func fmtDur(d time.Duration) string {
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", d.Nanoseconds())
	case d < time.Millisecond:
		return fmt.Sprintf("%.1fµs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// AppendSection appends a markdown section to the file at path (created
// if missing): a "## title DATE (full|quick)" heading, body, and Machine's
// description. The bench commands' --out flag writes through it.
func AppendSection(path, title string, quick bool, body string) error {
	mode := "full"
	if quick {
		mode = "quick"
	}
	section := fmt.Sprintf("\n## %s %s (%s)\n\n%s\nMachine:\n\n%s",
		title, time.Now().UTC().Format("2006-01-02 15:04"), mode, body, Machine())
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(section)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Machine describes the machine a run is on, as markdown list lines: date,
// command, CPUs and model, memory, load average, Go version and, when
// installed, the redis-server version.
func Machine() string {
	var b strings.Builder
	fmt.Fprintf(&b, "- date: %s\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "- command: `%s`\n", strings.Join(os.Args, " "))
	fmt.Fprintf(&b, "- nproc: %d (GOMAXPROCS %d)\n", runtime.NumCPU(), runtime.GOMAXPROCS(0))
	fmt.Fprintf(&b, "- cpu: %s\n", procField("/proc/cpuinfo", "model name"))
	fmt.Fprintf(&b, "- memory: %s\n", procField("/proc/meminfo", "MemTotal"))
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		// Other work on the machine skews every figure; say how busy it was.
		fmt.Fprintf(&b, "- load average at the end (1, 5, 15 min): %s\n", strings.Join(strings.Fields(string(la))[:3], " "))
	}
	fmt.Fprintf(&b, "- go: %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if RedisSkip() == "" {
		if out, err := exec.Command("redis-server", "--version").Output(); err == nil {
			fmt.Fprintf(&b, "- redis: %s\n", strings.TrimSpace(string(out)))
		}
	}
	return b.String()
}

// procField returns the value of the first "name: value" line of a /proc
// file, or "unknown".
func procField(path, name string) string {
	f, err := os.Open(path)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// RunAndPrint runs a benchmark (run returns its report as markdown, and
// may return a partial report with its error), prints the run's wall time
// and the load average at its start before the report, and appends both
// to out (a RESULTS.md) under title when out is set. The runners of
// bench/cmd share it.
func RunAndPrint(out, title string, quick bool, run func() (string, error)) error {
	la0, _ := os.ReadFile("/proc/loadavg")
	load := "unknown"
	if f := strings.Fields(string(la0)); len(f) >= 3 {
		load = strings.Join(f[:3], " ")
	}
	start := time.Now()
	body, err := run()
	desc := fmt.Sprintf("Total run %v; load average at the start (1, 5, 15 min): %s.\n\n", time.Since(start).Round(time.Second), load)
	fmt.Print(desc + body)
	if out != "" && body != "" {
		if werr := AppendSection(out, title, quick, desc+body); werr != nil {
			return errors.Join(err, werr)
		}
	}
	return err
}

// SplitList splits a comma-separated flag value, dropping blanks.
func SplitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
