package server

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Command latency histograms.
//
// tally_server_command_duration_seconds has one histogram per command. A
// pipelined batch of writes shares one commit, and each of its commands
// observes the batch's time; with client_golang's histogram that was one
// Observe per command (4.3% of tally serve's CPU per HINCRBY in the issue
// 18 profile). latencyHist takes n observations of one value in one call
// (observeN: an atomic add to one bucket, the count and the sum), so a
// batch of 16 HINCRBYs costs one observation's work and every command is
// still counted, in the same bucket as before: the exported series are
// exactly what 16 Observe calls made.
//
// A scrape reads the buckets one by one while commands run, so a scrape
// may see a batch in its bucket and not yet in the sum (or the reverse);
// the count is the sum of the buckets read, so _count and the +Inf bucket
// always agree. client_golang's histogram avoids even that with a hot and a
// cold copy, at the cost of more atomics per observation.

// latencyBounds are the buckets' upper bounds: 1 µs × 4^i, 1 µs .. 4.2 s
// (prometheus.ExponentialBuckets(1e-6, 4, 12)).
var latencyBounds = prometheus.ExponentialBuckets(1e-6, 4, 12)

// latencyBoundsNs are latencyBounds in nanoseconds.
var latencyBoundsNs = func() (b [12]int64) {
	for i := range b {
		b[i] = int64(1000) << (2 * i)
	}
	return b
}()

// latencyHist is the histogram of one command.
type latencyHist struct {
	name   string
	counts [len(latencyBoundsNs) + 1]atomic.Uint64 // the last: above every bound
	sumNs  atomic.Uint64
}

// observeN records n observations of d.
func (h *latencyHist) observeN(d time.Duration, n int) {
	if n <= 0 {
		return
	}
	ns := max(int64(d), 0)
	i := 0
	for i < len(latencyBoundsNs) && ns > latencyBoundsNs[i] {
		i++
	}
	h.counts[i].Add(uint64(n))
	h.sumNs.Add(uint64(ns) * uint64(n))
}

// snapshot returns the observation count and the sum in seconds.
func (h *latencyHist) snapshot() (count uint64, sum float64) {
	for i := range h.counts {
		count += h.counts[i].Load()
	}
	return count, float64(h.sumNs.Load()) / 1e9
}

// latencyVec is the collector of every command's histogram.
type latencyVec struct {
	desc   *prometheus.Desc
	mu     sync.Mutex
	series map[string]*latencyHist
}

func newLatencyVec(name, help string) *latencyVec {
	return &latencyVec{
		desc:   prometheus.NewDesc(name, help, []string{"command"}, nil),
		series: map[string]*latencyHist{},
	}
}

// forCommand returns the histogram of command name, creating it.
func (v *latencyVec) forCommand(name string) *latencyHist {
	v.mu.Lock()
	defer v.mu.Unlock()
	h := v.series[name]
	if h == nil {
		h = &latencyHist{name: name}
		v.series[name] = h
	}
	return h
}

func (v *latencyVec) Describe(ch chan<- *prometheus.Desc) { ch <- v.desc }

func (v *latencyVec) Collect(ch chan<- prometheus.Metric) {
	v.mu.Lock()
	hs := make([]*latencyHist, 0, len(v.series))
	for _, h := range v.series {
		hs = append(hs, h)
	}
	v.mu.Unlock()
	slices.SortFunc(hs, func(a, b *latencyHist) int { return cmp.Compare(a.name, b.name) })
	for _, h := range hs {
		buckets := make(map[float64]uint64, len(latencyBounds))
		var cum uint64
		for i, le := range latencyBounds {
			cum += h.counts[i].Load()
			buckets[le] = cum
		}
		count := cum + h.counts[len(latencyBounds)].Load()
		ch <- prometheus.MustNewConstHistogram(v.desc, count, float64(h.sumNs.Load())/1e9, buckets, h.name)
	}
}
