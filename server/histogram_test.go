package server

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestLatencyHistMatchesPrometheus pins observeN against client_golang's
// histogram with the same buckets: n observations of d in one call export
// the buckets, count and sum of n Observe calls.
func TestLatencyHistMatchesPrometheus(t *testing.T) {
	ref := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ref", Buckets: latencyBounds})
	v := newLatencyVec("tally_test_seconds", "test")
	h := v.forCommand("hincrby")
	r := rand.New(rand.NewPCG(3, 4))
	ds := []time.Duration{0, -time.Microsecond, time.Microsecond, time.Microsecond + 1, 4 * time.Microsecond,
		time.Millisecond, 4194304 * time.Microsecond, 4194304*time.Microsecond + 1, time.Hour}
	for range 2000 {
		ds = append(ds, time.Duration(r.Int64N(int64(10*time.Second))>>r.IntN(40)))
	}
	for _, d := range ds {
		n := 1 + r.IntN(20)
		h.observeN(d, n)
		for range n {
			ref.Observe(d.Seconds())
		}
	}
	h.observeN(time.Second, 0) // nothing

	var want dto.Metric
	if err := ref.Write(&want); err != nil {
		t.Fatal(err)
	}
	ch := make(chan prometheus.Metric, 1)
	v.Collect(ch)
	var got dto.Metric
	if err := (<-ch).Write(&got); err != nil {
		t.Fatal(err)
	}
	wh, gh := want.GetHistogram(), got.GetHistogram()
	if gh.GetSampleCount() != wh.GetSampleCount() {
		t.Fatalf("count %d, want %d", gh.GetSampleCount(), wh.GetSampleCount())
	}
	if math.Abs(gh.GetSampleSum()-wh.GetSampleSum()) > 1e-9*wh.GetSampleSum() {
		t.Fatalf("sum %v, want %v", gh.GetSampleSum(), wh.GetSampleSum())
	}
	if len(gh.Bucket) != len(wh.Bucket) {
		t.Fatalf("%d buckets, want %d", len(gh.Bucket), len(wh.Bucket))
	}
	for i := range wh.Bucket {
		if gh.Bucket[i].GetUpperBound() != wh.Bucket[i].GetUpperBound() ||
			gh.Bucket[i].GetCumulativeCount() != wh.Bucket[i].GetCumulativeCount() {
			t.Fatalf("bucket %d: le=%v %d, want le=%v %d", i, gh.Bucket[i].GetUpperBound(), gh.Bucket[i].GetCumulativeCount(),
				wh.Bucket[i].GetUpperBound(), wh.Bucket[i].GetCumulativeCount())
		}
	}
	if c, s := h.snapshot(); c != wh.GetSampleCount() || math.Abs(s-wh.GetSampleSum()) > 1e-9*s {
		t.Fatalf("snapshot %d %v, want %d %v", c, s, wh.GetSampleCount(), wh.GetSampleSum())
	}
	if got.GetLabel()[0].GetValue() != "hincrby" {
		t.Fatalf("label %v", got.GetLabel())
	}
}
