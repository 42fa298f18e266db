package compaction

import (
	"context"
	"fmt"

	"github.com/tallydb/tally/cold"
	"github.com/tallydb/tally/hot"
	"github.com/tallydb/tally/internal/radix"
)

// Rows is a set of rows sorted by key: Keys[i]'s values are
// Vals[i*NCols : (i+1)*NCols].
type Rows struct {
	NCols int
	Keys  []uint64
	Vals  []uint64
}

// Len returns the number of rows.
func (r *Rows) Len() int { return len(r.Keys) }

// Row returns the values of row i.
func (r *Rows) Row(i int) []uint64 { return r.Vals[i*r.NCols : (i+1)*r.NCols] }

// SortedRows copies every row of t out, sorted by key. The table may be
// read concurrently; it must not be written (the store freezes it first).
func SortedRows(t *hot.Table) *Rows {
	return sortedRows(t)
}

// SortedDelta copies a delta table's rows out sorted by key, keeping the
// marker column first: Row(i)[0] == 1 means the key was deleted (see
// store/tier.go).
func SortedDelta(t *hot.Table) *Rows {
	return sortedRows(t)
}

func sortedRows(t *hot.Table) *Rows {
	n := t.NumColumns()
	count := t.Len()
	keys := make([]uint64, 0, count)
	vals := make([]uint64, 0, count*n)
	t.Range(func(key uint64, v []uint64) bool {
		keys = append(keys, key)
		for i := 0; i < n; i++ {
			var x uint64
			if i < len(v) {
				x = v[i]
			}
			vals = append(vals, x)
		}
		return true
	})
	idx := make([]uint32, len(keys))
	for i := range idx {
		idx[i] = uint32(i)
	}
	radix.Sort(keys, idx)
	out := &Rows{NCols: n, Keys: keys, Vals: make([]uint64, len(vals))}
	for i, j := range idx {
		copy(out.Vals[i*n:(i+1)*n], vals[int(j)*n:(int(j)+1)*n])
	}
	return out
}

// Encode writes rows (sorted, none all-zero) as cold blocks through emit and
// returns the encoded range descriptor. It pays lim for every block and
// reports progress to job (either may be nil).
func Encode(ctx context.Context, rows *Rows, opts cold.BuildOptions, lim *Limiter, job *Job,
	emit func(blockNo uint32, block []byte) error) ([]byte, error) {
	b, err := cold.NewBuilder(rows.NCols, opts, func(no uint32, block []byte) error {
		if err := lim.Wait(ctx, len(block)); err != nil {
			return err
		}
		return emit(no, block)
	})
	if err != nil {
		return nil, err
	}
	for i := range rows.Keys {
		if err := b.Add(rows.Keys[i], rows.Row(i)); err != nil {
			return nil, fmt.Errorf("compaction: row %d (key %d): %w", i, rows.Keys[i], err)
		}
		if i&4095 == 4095 {
			if job != nil {
				job.Add(4096)
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	}
	if job != nil {
		job.Add(int64(len(rows.Keys) & 4095))
	}
	return b.Finish()
}

// Merge writes the cold range that results from applying delta (from
// SortedDelta: first column 1 = deleted, then the counter's values) to the
// range read by r, rewriting only the blocks the delta touches; see
// cold.Merge for which blocks those are and the emit contract (reuse >= 0:
// keep old block reuse as block blockNo, block == nil; reuse == -1: write
// block). ncols is the counter's current column count: delta rows with
// fewer values are padded with zeros, and if it exceeds r's column count
// every block is rewritten. A live delta row whose values are all zero is
// treated as a delete (the store never writes one; a zero row is absent).
//
// It pays lim for the bytes of every written block (a reused block costs
// nothing, but still checks ctx), and reports each emitted block's rows to
// job (lim and job may be nil). It returns the new encoded descriptor.
func Merge(ctx context.Context, r *cold.Reader, delta *Rows, ncols int, opts cold.BuildOptions, lim *Limiter, job *Job,
	emit func(blockNo uint32, reuse int, block []byte) error) ([]byte, error) {
	changes, err := deltaChanges(delta, ncols)
	if err != nil {
		return nil, err
	}
	d := r.Desc()
	return cold.Merge(r, ncols, changes, opts, func(no uint32, reuse int, block []byte) error {
		if err := lim.Wait(ctx, len(block)); err != nil {
			return err
		}
		if err := emit(no, reuse, block); err != nil {
			return err
		}
		if job != nil {
			if reuse >= 0 {
				job.Add(int64(d.BlockRows(uint32(reuse))))
			} else {
				job.Add(int64(cold.BlockLen(block)))
			}
		}
		return nil
	})
}

// deltaChanges converts SortedDelta rows into cold.Changes over ncols
// columns. The values share one backing array.
func deltaChanges(delta *Rows, ncols int) ([]cold.Change, error) {
	if delta.NCols < 1 || delta.NCols-1 > ncols {
		return nil, fmt.Errorf("compaction: delta has %d columns for a counter of %d", delta.NCols, ncols)
	}
	changes := make([]cold.Change, delta.Len())
	vals := make([]uint64, delta.Len()*ncols)
	for i, key := range delta.Keys {
		row := delta.Row(i)
		v := vals[i*ncols : (i+1)*ncols : (i+1)*ncols]
		copy(v, row[1:])
		var any uint64
		for _, x := range v {
			any |= x
		}
		changes[i] = cold.Change{Key: key, Deleted: row[0] == 1 || any == 0}
		if !changes[i].Deleted {
			changes[i].Vals = v
		}
	}
	return changes, nil
}
