package hist

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestHistogramBuckets(t *testing.T) {
	prev := -1
	for v := uint64(0); v < 1<<20; v++ {
		i := histIndex(v)
		if i < prev || i > prev+1 {
			t.Fatalf("index(%d)=%d after %d: not monotone and dense", v, i, prev)
		}
		prev = i
		if lo, hi := histLow(i), histLow(i+1); v < lo || v >= hi {
			t.Fatalf("value %d in bucket %d = [%d, %d)", v, i, lo, hi)
		}
	}
	if i := histIndex(1<<63 + 12345); i >= histBuckets {
		t.Fatalf("largest value maps past the table: %d", i)
	}
}

// TestHistogramQuantiles compares against the exact quantiles of a sorted
// sample of a long-tailed distribution.
func TestHistogramQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var a, b Histogram
	sample := make([]time.Duration, 0, 100_000)
	for k := 0; k < 100_000; k++ {
		d := time.Duration(rng.ExpFloat64() * rng.ExpFloat64() * float64(50*time.Microsecond))
		sample = append(sample, d)
		if k%2 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	a.Merge(&b)
	slices.Sort(sample)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		exact := sample[int(q*float64(len(sample)))-1]
		got := a.Quantile(q)
		if diff := float64(got-exact) / float64(exact); diff > 0.02 || diff < -0.02 {
			t.Errorf("q%.3f: %v, exact %v (%.2f%% off)", q, got, exact, diff*100)
		}
	}
	if a.Count() != 100_000 || a.Max() != sample[len(sample)-1] {
		t.Errorf("count %d max %v, want 100000 and %v", a.Count(), a.Max(), sample[len(sample)-1])
	}
	var empty Histogram
	if empty.Quantile(0.99) != 0 {
		t.Error("empty histogram: want 0")
	}
}
