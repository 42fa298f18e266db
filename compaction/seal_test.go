package compaction

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/tallydb/tally/cold"
	"github.com/tallydb/tally/hot"
)

type memSource map[uint32][]byte

func (s memSource) ReadBlock(n uint32) ([]byte, error) {
	b, ok := s[n]
	if !ok {
		return nil, fmt.Errorf("block %d: %w", n, cold.ErrMissingBlock)
	}
	return b, nil
}

// coldRange builds a one-column range of keys 0, 2, 4, ... (2n keys), value
// key+1, in 8-row blocks.
func coldRange(t *testing.T, n int) (*cold.Reader, memSource) {
	t.Helper()
	src := memSource{}
	var rows []cold.Row
	for k := range uint64(n) {
		rows = append(rows, cold.Row{Key: 2 * k, Vals: []uint64{2*k + 1}})
	}
	desc, err := cold.Build(rows, 1, cold.BuildOptions{TargetBlockSize: 8}, func(no uint32, b []byte) error {
		src[no] = slices.Clone(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	d, err := cold.DecodeDesc(desc)
	if err != nil {
		t.Fatal(err)
	}
	return cold.NewReader(1, d, src, nil), src
}

// TestMerge merges a delta table (marker column first, as store/tier.go
// writes it) with one more counter column than the blocks and one without,
// and reads the result back.
func TestMerge(t *testing.T) {
	r, src := coldRange(t, 64) // keys 0..126, 8 blocks of 8
	for _, ncols := range []int{1, 2} {
		t.Run(fmt.Sprint(ncols), func(t *testing.T) {
			widths := []int{1, 1}
			if ncols == 2 {
				widths = append(widths, 2)
			}
			delta, err := hot.New(16, widths, 0)
			if err != nil {
				t.Fatal(err)
			}
			put := func(key uint64, row ...uint64) {
				if err := delta.Put(key, row); err != nil {
					t.Fatal(err)
				}
			}
			put(4, 1)      // delete key 4 (block 0)
			put(6, 0, 99)  // update key 6 (block 0)
			put(7, 0, 5)   // insert key 7 (block 0)
			put(41, 1)     // delete an absent key: no-op
			put(500, 0, 7) // insert after the last key (block 7)
			want := map[uint64][]uint64{6: {99}, 7: {5}, 500: {7}}
			if ncols == 2 {
				put(6, 0, 99, 300)
				want[6] = []uint64{99, 300}
			}
			for k := uint64(0); k < 128; k += 2 {
				if _, ok := want[k]; !ok && k != 4 {
					want[k] = []uint64{k + 1}
				}
			}

			newSrc := memSource{}
			var reused, written int
			tr := &Tracker{}
			job := tr.Start("merge", "c", 1, 64+5)
			desc, err := Merge(context.Background(), r, SortedDelta(delta), ncols, cold.BuildOptions{TargetBlockSize: 8},
				NewLimiter(1<<30), job, func(no uint32, reuse int, b []byte) error {
					if reuse >= 0 {
						newSrc[no] = src[uint32(reuse)]
						reused++
					} else {
						newSrc[no] = slices.Clone(b)
						written++
					}
					return nil
				})
			if err != nil {
				t.Fatal(err)
			}
			if ncols == 1 && (reused != 6 || written != 3) { // block 0 rewritten; block 7 gains a row and splits
				t.Errorf("%d blocks reused, %d written; want 6 and 3", reused, written)
			}
			if ncols == 2 && reused != 0 {
				t.Errorf("schema change reused %d blocks", reused)
			}
			if got := tr.Running()[0].Done; got != int64(len(want)) {
				t.Errorf("progress %d rows, want %d", got, len(want))
			}
			job.Finish()

			d, err := cold.DecodeDesc(desc)
			if err != nil {
				t.Fatal(err)
			}
			nr := cold.NewReader(2, d, newSrc, nil)
			if err := nr.Verify(); err != nil {
				t.Fatal(err)
			}
			got := map[uint64][]uint64{}
			if err := nr.Iter(func(k uint64, v []uint64) error {
				got[k] = slices.Clone(v)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d rows, want %d", len(got), len(want))
			}
			for k, w := range want {
				w = append(slices.Clone(w), make([]uint64, ncols-len(w))...)
				if !slices.Equal(got[k], w) {
					t.Errorf("key %d = %v, want %v", k, got[k], w)
				}
			}

			// The old path agrees.
			rows, err := MergeRows(r, SortedDelta(delta), ncols)
			if err != nil {
				t.Fatal(err)
			}
			if rows.Len() != len(want) {
				t.Errorf("MergeRows: %d rows, want %d", rows.Len(), len(want))
			}
		})
	}
}

func TestMergeCancelled(t *testing.T) {
	r, _ := coldRange(t, 64)
	delta := &Rows{NCols: 2, Keys: []uint64{3}, Vals: []uint64{0, 1}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Merge(ctx, r, delta, 1, cold.BuildOptions{TargetBlockSize: 8}, nil, nil,
		func(uint32, int, []byte) error { return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Merge with a cancelled context: %v", err)
	}
	delta = &Rows{NCols: 3, Keys: []uint64{3}, Vals: []uint64{0, 1, 1}}
	if _, err := Merge(context.Background(), r, delta, 1, cold.BuildOptions{}, nil, nil,
		func(uint32, int, []byte) error { return nil }); err == nil {
		t.Fatal("Merge accepted a delta wider than the counter")
	}
}
