package workload

import (
	"math"
	"testing"
	"time"
)

func TestIDsIncreaseAndMatchTime(t *testing.T) {
	for _, n := range []uint64{1, 7, 1000, 100_000} {
		w := MustNew(Config{Seed: 1, Items: n, Span: time.Hour})
		cfg := w.Config()
		start := cfg.End.Add(-cfg.Span)
		prev := uint64(0)
		for i := uint64(0); i < n; i++ {
			id := w.ID(i)
			if i > 0 && id <= prev {
				t.Fatalf("n=%d: id(%d)=%d not above id(%d)=%d", n, i, id, i-1, prev)
			}
			prev = id
			at := cfg.Layout.TimeOf(id)
			if at.Before(start) || !at.Before(cfg.End) {
				t.Fatalf("n=%d: id %d at %v outside [%v, %v)", n, id, at, start, cfg.End)
			}
		}
		if got := cfg.Layout.TimeOf(w.ID(0)); !got.Equal(start) {
			t.Fatalf("first item at %v, want %v", got, start)
		}
	}
}

func TestDenseIDsUseSequence(t *testing.T) {
	// 10 items per millisecond: sequences 0..9 under each timestamp.
	w := MustNew(Config{Items: 10_000, Span: time.Second})
	l := w.Config().Layout
	for i := uint64(0); i < w.Len(); i++ {
		id := w.ID(i)
		if seq := id & l.MaxSeq(); seq != i%10 {
			t.Fatalf("item %d: seq %d, want %d", i, seq, i%10)
		}
	}
	if _, err := New(Config{Items: 1 << 23, Span: time.Millisecond}); err == nil {
		t.Fatal("2^23 items in 1ms with 22 sequence bits: want an error")
	}
}

func TestLayoutFirstID(t *testing.T) {
	l := DefaultLayout()
	at := time.Date(2024, 7, 1, 12, 0, 0, 0, time.UTC)
	id := l.FirstID(at)
	if !l.TimeOf(id).Equal(at) || !l.TimeOf(id-1).Before(at) {
		t.Fatalf("FirstID(%v)=%d: TimeOf=%v, TimeOf(id-1)=%v", at, id, l.TimeOf(id), l.TimeOf(id-1))
	}
	// Items older than a cutoff are exactly those with id < FirstID(cutoff).
	w := MustNew(Config{Items: 50_000})
	cutoff := w.Config().End.Add(-30 * 24 * time.Hour)
	b := w.Config().Layout.FirstID(cutoff)
	for i := uint64(0); i < w.Len(); i += 97 {
		old := w.Config().Layout.TimeOf(w.ID(i)).Before(cutoff)
		if old != (w.ID(i) < b) {
			t.Fatalf("item %d: old=%v but id<FirstID=%v", i, old, w.ID(i) < b)
		}
	}
}

func TestDeterministic(t *testing.T) {
	a := MustNew(Config{Seed: 42, Items: 10_000})
	b := MustNew(Config{Seed: 42, Items: 10_000})
	c := MustNew(Config{Seed: 43, Items: 10_000})
	var va, vb, vc []uint64
	differ := false
	for i := uint64(0); i < a.Len(); i++ {
		va, vb, vc = a.Values(i, va), b.Values(i, vb), c.Values(i, vc)
		for j := range va {
			if va[j] != vb[j] {
				t.Fatalf("item %d col %d: %d vs %d with the same seed", i, j, va[j], vb[j])
			}
			differ = differ || va[j] != vc[j]
		}
	}
	if !differ {
		t.Fatal("seeds 42 and 43 give the same data")
	}
	sa, sb := a.Ops(3), b.Ops(3)
	var oa, ob Op
	for k := 0; k < 1000; k++ {
		sa.Next(&oa)
		sb.Next(&ob)
		if oa.Kind != ob.Kind || oa.ID != ob.ID || oa.Col != ob.Col || len(oa.IDs) != len(ob.IDs) {
			t.Fatalf("op %d differs: %+v vs %+v", k, oa, ob)
		}
		for j := range oa.IDs {
			if oa.IDs[j] != ob.IDs[j] {
				t.Fatalf("op %d id %d differs", k, j)
			}
		}
	}
}

// TestCountDistribution checks the properties DESIGN.md asks for on 3M items:
// 55% all-zero, most counts under 100, and a tail above 65,535 in under 1 in
// 100,000 items that is still present.
func TestCountDistribution(t *testing.T) {
	n := uint64(3_000_000)
	if testing.Short() {
		n = 300_000
	}
	w := MustNew(Config{Seed: 7, Items: n})
	var zero, tail, nonZeroVals, under100 uint64
	w.Items(func(id uint64, vals []uint64) bool {
		if IsZero(vals) {
			zero++
			return true
		}
		if vals[0] == 0 {
			t.Fatalf("counted item %d has a zero first column", id)
		}
		big := false
		for _, v := range vals {
			if v > 0 {
				nonZeroVals++
				if v < 100 {
					under100++
				}
			}
			big = big || v > 65535
		}
		if big {
			tail++
		}
		return true
	})
	fz := float64(zero) / float64(n)
	ft := float64(tail) / float64(n)
	fu := float64(under100) / float64(nonZeroVals)
	t.Logf("zero %.4f, tail %.2e (analytic %.2e, %d items), non-zero counts under 100: %.4f", fz, ft, w.TailProbability(65535), tail, fu)
	if math.Abs(fz-0.55) > 0.01 {
		t.Errorf("fraction of all-zero items %.4f, want 0.55±0.01", fz)
	}
	if ft >= 1e-5 {
		t.Errorf("fraction of items above 65535: %.2e, want < 1e-5", ft)
	}
	if !testing.Short() && tail == 0 {
		t.Errorf("no item above 65535 in %d items: the tail is missing", n)
	}
	if fu < 0.99 {
		t.Errorf("only %.4f of non-zero counts are under 100", fu)
	}
}

func TestOpMix(t *testing.T) {
	w := MustNew(Config{Seed: 5, Items: 1_000_000})
	s := w.Ops(0)
	var op Op
	var reads, writes, recent, ids uint64
	recentFrom := w.ID(w.Len() - w.Len()/10) // newest 10% of items
	for k := 0; k < 200_000; k++ {
		s.Next(&op)
		switch op.Kind {
		case OpRead:
			reads++
			if len(op.IDs) != 10 {
				t.Fatalf("read of %d ids, want 10", len(op.IDs))
			}
			for _, id := range op.IDs {
				ids++
				if id >= recentFrom {
					recent++
				}
			}
		case OpWrite:
			writes++
			if op.Col < 0 || op.Col >= w.Columns() || op.Delta != 1 || op.ID < w.ID(0) || op.ID > w.ID(w.Len()-1) {
				t.Fatalf("bad write %+v", op)
			}
		}
	}
	perID := float64(writes) / float64(ids)
	fr := float64(recent) / float64(ids)
	t.Logf("reads %d writes %d, writes per id read %.4f, reads in newest 10%%: %.3f", reads, writes, perID, fr)
	if math.Abs(perID-0.05) > 0.003 {
		t.Errorf("writes per id read %.4f, want 0.05", perID)
	}
	// Exponential ages with mean 5%: P(age < 10%) = 1-e^-2 ≈ 0.86 (less the 1% grave digging).
	if fr < 0.8 || fr > 0.9 {
		t.Errorf("fraction of reads in the newest 10%% of items %.3f, want ≈ 0.86", fr)
	}
}

func TestNextDoesNotAllocate(t *testing.T) {
	s := MustNew(Config{Items: 10_000}).Ops(1)
	var op Op
	if a := testing.AllocsPerRun(1000, func() { s.Next(&op) }); a != 0 {
		t.Fatalf("Next allocates %.1f times per op", a)
	}
}

func TestBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Columns: 300},
		{ZeroFraction: 1.5},
		{Alpha: -1},
		{BatchSize: -1},
		{Layout: Layout{EpochMs: 1, TimeShift: 63}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v): want an error", cfg)
		}
	}
}
