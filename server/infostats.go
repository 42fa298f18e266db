package server

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Figures INFO shows that the connection paths collect: error replies by
// their code (Errorstats) and the command rate (instantaneous_ops_per_sec).

// errorStats counts error replies by their code, the first word of the
// reply ("ERR", "WRONGTYPE", "NOAUTH"), as Redis's INFO errorstats does.
type errorStats struct {
	mu sync.Mutex
	m  map[string]int64
}

// maxErrorCodes bounds the codes kept (Redis keeps 128): a code past it
// counts under "OTHER".
const maxErrorCodes = 128

func (e *errorStats) note(msg string) {
	code, _, _ := strings.Cut(msg, " ")
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[string]int64{}
	}
	if _, ok := e.m[code]; !ok && len(e.m) >= maxErrorCodes {
		code = "OTHER"
	}
	e.m[code]++
}

// lines returns "errorstat_CODE:count=N" lines, sorted by code.
func (e *errorStats) lines() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]string, 0, len(e.m))
	for code, n := range e.m {
		out = append(out, fmt.Sprintf("errorstat_%s:count=%d", code, n))
	}
	slices.Sort(out)
	return out
}

// opsRate gives instantaneous_ops_per_sec without a sampling goroutine:
// each INFO records (time, commands processed), and the rate is taken
// against the newest earlier record at least a second old (or the
// server's start): the commands per second over the last second or more.
type opsRate struct {
	mu      sync.Mutex
	samples []opsSample // oldest first, at most maxOpsSamples
}

type opsSample struct {
	at  time.Time
	ops int64
}

const maxOpsSamples = 64

func (r *opsRate) rate(now time.Time, ops int64, started time.Time) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	base := opsSample{at: started}
	for i := len(r.samples) - 1; i >= 0; i-- {
		if now.Sub(r.samples[i].at) >= time.Second {
			base = r.samples[i]
			break
		}
	}
	if len(r.samples) == maxOpsSamples {
		r.samples = slices.Delete(r.samples, 0, 1)
	}
	r.samples = append(r.samples, opsSample{at: now, ops: ops})
	d := now.Sub(base.at).Seconds()
	if d <= 0 {
		return 0
	}
	return int64(float64(ops-base.ops) / d)
}
