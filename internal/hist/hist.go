// Package hist is the latency histogram shared by the benchmarks, the demo
// and the server's reports: log-linear buckets, a few instructions per
// Record, no allocation.
package hist

import (
	"math/bits"
	"time"
)

// histSub is the number of linear sub-buckets per power of two: values are
// kept with a relative error under 1/histSub (HDR-histogram style).
const (
	histSubBits = 6
	histSub     = 1 << histSubBits
	histBuckets = (64 - histSubBits + 1) * histSub
)

// Histogram records durations in log-linear buckets: exact below 64ns, then
// 64 buckets per power of two, so a quantile is within 1/64 (1.6%) of the
// recorded value. Recording is a few instructions and never allocates. It is
// not safe for concurrent use: give each client its own and Merge them.
type Histogram struct {
	counts [histBuckets]uint64
	n      uint64
	max    uint64
}

func histIndex(v uint64) int {
	if v < histSub {
		return int(v)
	}
	e := bits.Len64(v) - histSubBits - 1 // v>>e is in [histSub, 2*histSub)
	return (e+1)*histSub + int(v>>uint(e)) - histSub
}

// histLow returns the smallest value of bucket i.
func histLow(i int) uint64 {
	if i < histSub {
		return uint64(i)
	}
	e := i/histSub - 1
	return uint64(histSub+i%histSub) << uint(e)
}

// Record adds one duration. Negative durations count as 0.
func (h *Histogram) Record(d time.Duration) {
	v := uint64(0)
	if d > 0 {
		v = uint64(d)
	}
	h.counts[histIndex(v)]++
	h.n++
	if v > h.max {
		h.max = v
	}
}

// Merge adds every value recorded in o.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	if o.max > h.max {
		h.max = o.max
	}
}

// Count returns the number of recorded values.
func (h *Histogram) Count() uint64 { return h.n }

// Max returns the largest recorded value.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Quantile returns the value below which a fraction q of the recorded values
// lie (q in [0, 1]), as the middle of its bucket; 0 if nothing was recorded.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	if rank < 1 {
		rank = 1
	}
	if rank > h.n {
		rank = h.n
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := histLow(i), histLow(i+1)
			v := lo + (hi-lo)/2
			if v > h.max {
				v = h.max
			}
			return time.Duration(v)
		}
	}
	return time.Duration(h.max)
}
