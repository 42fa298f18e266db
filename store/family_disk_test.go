package store

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// DiskUsage counts a family's files and not another's: after writing a
// megabyte into one family and flushing, that family reports about a
// megabyte (values are incompressible) and the other about nothing.
func TestFamilyDiskUsage(t *testing.T) {
	db := openFamilies(t, vfs.NewMem(), testPlain, testSum)
	plain, sums := family(t, db, "plain"), family(t, db, "sums")
	b := db.NewBatch()
	v := make([]byte, 64)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 16 << 10 {
		for j := range v {
			v[j] = byte(rng.Uint32())
		}
		must(t, plain.Put(b, famKey(plain, uint64(i)), v))
	}
	must(t, sums.Merge(b, famKey(sums, 1), AddOperand(nil, 5)))
	must(t, b.Commit())
	b.Close()
	must(t, db.Flush())
	n, err := plain.DiskUsage()
	must(t, err)
	if n < 900<<10 || n > 2<<20 {
		t.Fatalf("plain: %d bytes for 1 MiB of values", n)
	}
	m, err := sums.DiskUsage()
	must(t, err)
	if m > 64<<10 {
		t.Fatalf("sums: %d bytes for one key", m)
	}
	must(t, db.Close())
	if _, err := plain.DiskUsage(); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}
