package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Test families: a plain one with fixed 8-byte keys, and a merge one.
var (
	testPlain = FamilySpec{Name: "plain", Prefix: 0xe0, MinKeyLen: 8, MaxKeyLen: 8, MaxValueLen: 64}
	testSum   = FamilySpec{Name: "sums", Prefix: 0xe1, MinKeyLen: 8, MaxKeyLen: 8, Merge: MergeAdd}
)

func famKey(f *Family, id uint64) []byte { return AppendUint64([]byte{f.Prefix()}, id) }

// openFamilies opens a store on fs declaring specs.
func openFamilies(t testing.TB, fs vfs.FS, specs ...FamilySpec) *DB {
	t.Helper()
	o := testOptions(fs)
	o.Families = specs
	return openTest(t, fs, "d", o)
}

func family(t testing.TB, db *DB, name string) *Family {
	t.Helper()
	f, err := db.Family(name)
	must(t, err)
	return f
}

func famGet(t testing.TB, f *Family, key []byte) ([]byte, bool) {
	t.Helper()
	v, ok, err := f.Get(key, nil)
	must(t, err)
	return v, ok
}

func TestFamilyDeclare(t *testing.T) {
	fs := vfs.NewMem()
	db := openFamilies(t, fs, testPlain)
	if _, err := db.Family("plain"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Family("nope"); !errors.Is(err, ErrFamilyNotFound) {
		t.Fatalf("unknown family: %v", err)
	}
	for _, tc := range []struct {
		spec FamilySpec
		want error
	}{
		{FamilySpec{Name: "again", Prefix: 0xe0}, ErrFamilyConflict}, // prefix taken
		{FamilySpec{Name: "plain", Prefix: 0xe5}, ErrFamilyConflict}, // name taken
		{FamilySpec{Name: "low", Prefix: 0x0f}, ErrInvalidOption},    // store's prefix
		{FamilySpec{Name: "bad name", Prefix: 0xe6}, ErrInvalidName}, // name
		{FamilySpec{Name: "keys", Prefix: 0xe6, MinKeyLen: 9, MaxKeyLen: 8}, ErrInvalidOption},
		{FamilySpec{Name: "big", Prefix: 0xe6, MaxValueLen: MaxFamilyValueLen + 1}, ErrInvalidOption},
		{FamilySpec{Name: "op", Prefix: 0xe6, Merge: &MergeOperator{ID: 2, Name: "fake", Merge: mergeAdd, Check: checkAdd}}, ErrInvalidOption},
	} {
		if _, err := db.RegisterFamily(tc.spec); !errors.Is(err, tc.want) {
			t.Errorf("RegisterFamily(%+v) = %v, want %v", tc.spec, err, tc.want)
		}
	}
	if _, err := db.RegisterFamily(testSum); err != nil {
		t.Fatal(err)
	}
	must(t, db.Close())

	// The declarations are persisted: another name on a used prefix, or
	// another operator, is refused; the store is left as it was.
	for _, spec := range []FamilySpec{
		{Name: "other", Prefix: 0xe0},
		{Name: "sums", Prefix: 0xe1, Merge: MergeTopList},
		{Name: "plain", Prefix: 0xe7},
	} {
		o := testOptions(fs)
		o.Families = []FamilySpec{spec}
		if _, err := Open("d", o); !errors.Is(err, ErrFamilyConflict) {
			t.Errorf("open declaring %+v: %v", spec, err)
		}
	}
	// Declaring nothing is fine: the families' data is left alone.
	db = openTest(t, fs, "d", nil)
	if got := db.Families(); len(got) != 0 {
		t.Fatalf("families declared by nobody: %v", got)
	}
	must(t, db.Verify(context.Background()))
}

// A custom merge operator's values survive a process that does not know
// the operator: it opens, flushes and compacts them as deferred lists, and
// the next process that declares the family reads the right value.
func TestFamilyCustomMergeUndeclared(t *testing.T) {
	fs := vfs.NewMem()
	custom := &MergeOperator{ID: 200, Name: "max", Check: checkAdd,
		Merge: func(a, b []byte) ([]byte, error) {
			if binary.BigEndian.Uint64(a) > binary.BigEndian.Uint64(b) {
				return slices.Clone(a), nil
			}
			return slices.Clone(b), nil
		}}
	spec := FamilySpec{Name: "maxes", Prefix: 0xe2, Merge: custom}
	db := openFamilies(t, fs, spec)
	f := family(t, db, "maxes")
	b := db.NewBatch()
	for _, v := range []uint64{3, 9, 4} {
		must(t, f.Merge(b, famKey(f, 1), custom.Frame(nil, binary.BigEndian.AppendUint64(nil, v))))
	}
	must(t, b.Commit())
	b.Close()
	v, _ := famGet(t, f, famKey(f, 1))
	if binary.BigEndian.Uint64(v[1:]) != 9 {
		t.Fatalf("max = %x", v)
	}
	// More operands that stay in the memtable and the WAL.
	b = db.NewBatch()
	must(t, f.Merge(b, famKey(f, 1), custom.Frame(nil, binary.BigEndian.AppendUint64(nil, 11))))
	must(t, f.Merge(b, famKey(f, 2), custom.Frame(nil, binary.BigEndian.AppendUint64(nil, 1))))
	must(t, b.Commit())
	b.Close()
	must(t, db.Close())

	// A process that does not know the operator opens, flushes and
	// compacts everything.
	db, err := Open("d", testOptions(fs))
	must(t, err)
	must(t, db.pdb().Flush())
	must(t, db.pdb().Compact(context.Background(), []byte{0xe2}, []byte{0xe3}, true))
	must(t, db.Verify(context.Background()))
	must(t, db.Close())

	db = openFamilies(t, fs, spec)
	f = family(t, db, "maxes")
	for id, want := range map[uint64]uint64{1: 11, 2: 1} {
		v, _ = famGet(t, f, famKey(f, id))
		if binary.BigEndian.Uint64(v[1:]) != want {
			t.Fatalf("max of %d after an undeclared compaction = %x, want %d", id, v, want)
		}
	}
	must(t, db.Verify(context.Background()))
}

func TestFamilyWritesAndReads(t *testing.T) {
	fs := vfs.NewMem()
	db := openFamilies(t, fs, testPlain, testSum)
	posts := newPosts(t, db, 16)
	pf, sf := family(t, db, "plain"), family(t, db, "sums")

	// A mixed batch: one counter op and three family writes.
	b := db.NewBatch()
	must(t, b.Incr("posts", 7, "likes", 2))
	must(t, pf.Put(b, famKey(pf, 1), []byte("one")))
	must(t, pf.Put(b, famKey(pf, 2), []byte("two")))
	must(t, sf.Merge(b, famKey(sf, 1), AddOperand(nil, 5)))
	must(t, b.Commit())
	b.Close()
	if v, ok := famGet(t, pf, famKey(pf, 1)); !ok || string(v) != "one" {
		t.Fatalf("get = %q %v", v, ok)
	}
	if got := get(t, posts, 7); got[2] != 2 {
		t.Fatalf("likes = %v", got)
	}

	// A batch of family writes only is legal.
	b = db.NewBatch()
	must(t, sf.Merge(b, famKey(sf, 1), AddOperand(nil, -2)))
	must(t, pf.Delete(b, famKey(pf, 2)))
	must(t, b.Commit())
	b.Close()
	v, _ := famGet(t, sf, famKey(sf, 1))
	if n, err := DecodeAdd(v); err != nil || n != 3 {
		t.Fatalf("sum = %d %v", n, err)
	}
	if _, ok := famGet(t, pf, famKey(pf, 2)); ok {
		t.Fatal("deleted key still there")
	}
	// A sum that reaches 0 is deleted.
	b = db.NewBatch()
	must(t, sf.Merge(b, famKey(sf, 1), AddOperand(nil, -3)))
	must(t, b.Commit())
	b.Close()
	if _, ok := famGet(t, sf, famKey(sf, 1)); ok {
		t.Fatal("zero sum still there")
	}

	// DeleteRange and iteration both ways with bounds.
	b = db.NewBatch()
	for i := uint64(10); i < 20; i++ {
		must(t, pf.Put(b, famKey(pf, i), []byte{byte(i)}))
	}
	must(t, pf.DeleteRange(b, famKey(pf, 12), famKey(pf, 14)))
	must(t, b.Commit())
	b.Close()
	collect := func(o *IterOptions) []uint64 {
		it, err := pf.NewIter(o)
		must(t, err)
		var ids []uint64
		for it.Next() {
			ids = append(ids, binary.BigEndian.Uint64(it.Key()[1:]))
			if v := it.Value(); len(v) == 0 {
				t.Fatal("empty value")
			}
		}
		must(t, it.Close())
		return ids
	}
	if got := collect(&IterOptions{Lower: famKey(pf, 10)}); !slices.Equal(got, []uint64{10, 11, 14, 15, 16, 17, 18, 19}) {
		t.Fatalf("forward = %v", got)
	}
	if got := collect(&IterOptions{Lower: famKey(pf, 11), Upper: famKey(pf, 16), Reverse: true}); !slices.Equal(got, []uint64{15, 14, 11}) {
		t.Fatalf("reverse = %v", got)
	}
	if got := collect(&IterOptions{Prefix: famKey(pf, 1)}); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("prefix = %v", got)
	}
	if got := collect(&IterOptions{Prefix: famKey(pf, 1)[:8], Reverse: true}); !slices.Equal(got, []uint64{19, 18, 17, 16, 15, 14, 11, 10, 1}) {
		t.Fatalf("prefix of ids 0-255 = %v", got)
	}

	// Everything survives a reopen.
	must(t, db.Close())
	db = openFamilies(t, fs, testPlain, testSum)
	pf = family(t, db, "plain")
	if v, ok := famGet(t, pf, famKey(pf, 1)); !ok || string(v) != "one" {
		t.Fatalf("after reopen = %q %v", v, ok)
	}
	must(t, db.Verify(context.Background()))
	must(t, db.Check())
}

// Bad input gets a named error and the whole batch, counter ops included,
// commits nothing.
func TestFamilyBadInput(t *testing.T) {
	db := openFamilies(t, vfs.NewMem(), testPlain, testSum)
	posts := newPosts(t, db, 16)
	pf, sf := family(t, db, "plain"), family(t, db, "sums")
	for _, tc := range []struct {
		name string
		add  func(b *Batch) error
		want error
	}{
		{"wrong prefix", func(b *Batch) error { return pf.Put(b, famKey(sf, 1), []byte("x")) }, ErrFamilyKey},
		{"short key", func(b *Batch) error { return pf.Put(b, []byte{0xe0, 1}, []byte("x")) }, ErrFamilyKey},
		{"empty key", func(b *Batch) error { return pf.Delete(b, nil) }, ErrFamilyKey},
		{"too large", func(b *Batch) error { return pf.Put(b, famKey(pf, 1), make([]byte, 65)) }, ErrValueTooLarge},
		{"no operator", func(b *Batch) error { return pf.Merge(b, famKey(pf, 1), AddOperand(nil, 1)) }, ErrBadOperand},
		{"bad operand", func(b *Batch) error { return sf.Merge(b, famKey(sf, 1), []byte{1, 2, 3}) }, ErrBadOperand},
		{"foreign operand", func(b *Batch) error {
			op, _ := TopListOperand(nil, 3, []TopEntry{{Key: 1}})
			return sf.Merge(b, famKey(sf, 1), op)
		}, ErrBadOperand},
		{"bad put in merge family", func(b *Batch) error { return sf.Put(b, famKey(sf, 1), []byte("x")) }, ErrBadOperand},
		{"range leaves family", func(b *Batch) error { return pf.DeleteRange(b, famKey(pf, 1), []byte{0xe2}) }, ErrFamilyKey},
		{"empty range", func(b *Batch) error { return pf.DeleteRange(b, famKey(pf, 2), famKey(pf, 1)) }, ErrFamilyKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := db.NewBatch()
			defer b.Close()
			must(t, b.Incr("posts", 1, "likes", 1))
			must(t, pf.Put(b, famKey(pf, 99), []byte("kept out")))
			if err := tc.add(b); !errors.Is(err, tc.want) {
				t.Fatalf("op: %v, want %v", err, tc.want)
			}
			if err := b.Commit(); !errors.Is(err, tc.want) {
				t.Fatalf("commit: %v, want %v", err, tc.want)
			}
			if got := get(t, posts, 1); got[2] != 0 {
				t.Fatalf("counter op committed: %v", got)
			}
			if _, ok := famGet(t, pf, famKey(pf, 99)); ok {
				t.Fatal("family write committed")
			}
		})
	}
	if _, _, err := pf.Get(famKey(sf, 1), nil); !errors.Is(err, ErrFamilyKey) {
		t.Fatalf("get with a foreign key: %v", err)
	}
	if _, err := pf.NewIter(&IterOptions{Lower: []byte{0x01}}); !errors.Is(err, ErrFamilyKey) {
		t.Fatalf("iter bound outside the family: %v", err)
	}
}

// A value the family's decoder rejects is ErrCorrupt naming the family
// and key, from reads and from Verify.
func TestFamilyCorruptValue(t *testing.T) {
	spec := testPlain
	spec.CheckValue = func(_, v []byte) error {
		if !bytes.HasPrefix(v, []byte("ok")) {
			return errors.New("no ok prefix")
		}
		return nil
	}
	db := openFamilies(t, vfs.NewMem(), spec)
	f := family(t, db, "plain")
	b := db.NewBatch()
	must(t, f.Put(b, famKey(f, 1), []byte("ok1")))
	must(t, f.Put(b, famKey(f, 2), []byte("bad")))
	must(t, b.Commit())
	b.Close()
	if _, _, err := f.Get(famKey(f, 2), nil); !errors.Is(err, ErrCorrupt) || !bytes.Contains([]byte(err.Error()), []byte("family plain key e00000000000000002")) {
		t.Fatalf("get = %v", err)
	}
	it, err := f.NewIter(nil)
	must(t, err)
	for it.Next() {
		it.Value()
	}
	if err := it.Close(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("iter = %v", err)
	}
	if err := db.Verify(context.Background()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("verify = %v", err)
	}
}

// Data under a prefix nobody ever declared cannot be accounted for.
func TestVerifyUndeclaredPrefix(t *testing.T) {
	db := openTest(t, vfs.NewMem(), "d", nil)
	must(t, db.pdb().Set([]byte{0x99, 1}, []byte("?"), pebble.Sync))
	must(t, db.pdb().Set([]byte{0x09, 1}, []byte("?"), pebble.Sync))
	err := db.Verify(context.Background())
	if !errors.Is(err, ErrCorrupt) || !bytes.Contains([]byte(err.Error()), []byte("0x99")) || !bytes.Contains([]byte(err.Error()), []byte("0x09")) {
		t.Fatalf("verify = %v", err)
	}
}

func TestFamilyGetAllocs(t *testing.T) {
	db := openFamilies(t, vfs.NewMem(), testPlain)
	f := family(t, db, "plain")
	b := db.NewBatch()
	must(t, f.Put(b, famKey(f, 1), []byte("value")))
	must(t, b.Commit())
	b.Close()
	// NB: while a read crosses a range deletion (a checkpoint's log
	// truncation) in the memtable or in an sstable not yet compacted,
	// Pebble allocates an iterator for it; tally itself allocates nothing.
	// A checkpoint starts a flush after its range deletions and
	// compactions drop them; a new store (as here) has none.
	key := famKey(f, 1)
	buf := make([]byte, 0, 64)
	n := testing.AllocsPerRun(200, func() {
		v, ok, err := f.Get(key, buf)
		if err != nil || !ok || len(v) != 5 {
			t.Fatal(v, ok, err)
		}
	})
	if n != 0 && !raceEnabled {
		t.Fatalf("Get allocates %.1f per call", n)
	}
}

// A snapshot sees the families as of when it was taken.
func TestFamilySnapshot(t *testing.T) {
	db := openFamilies(t, vfs.NewMem(), testPlain)
	f := family(t, db, "plain")
	put := func(id uint64, v string) {
		b := db.NewBatch()
		must(t, f.Put(b, famKey(f, id), []byte(v)))
		must(t, b.Commit())
		b.Close()
	}
	put(1, "a")
	snap, err := db.NewSnapshot()
	must(t, err)
	defer snap.Close()
	put(1, "b")
	put(2, "c")
	if v, ok, err := snap.Get(f, famKey(f, 1), nil); err != nil || !ok || string(v) != "a" {
		t.Fatalf("snapshot get = %q %v %v", v, ok, err)
	}
	it, err := snap.NewIter(f, nil)
	must(t, err)
	n := 0
	for it.Next() {
		n++
	}
	must(t, it.Close())
	if n != 1 {
		t.Fatalf("snapshot iter saw %d keys", n)
	}
}

// Readers in View never see the family half of a batch without its counter
// half: each batch sets a family key to the counter's new value.
func TestViewSeesWholeBatches(t *testing.T) {
	db := openFamilies(t, vfs.NewMem(), testPlain)
	posts := newPosts(t, db, 16)
	f := family(t, db, "plain")
	key := famKey(f, 1)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; !stop.Load() && i < 3000; i++ {
			b := db.NewBatch()
			must(t, b.Set("posts", 5, uint64(i), 0, 0))
			must(t, f.Put(b, key, binary.BigEndian.AppendUint64(nil, uint64(i))))
			must(t, b.Commit())
			b.Close()
		}
		stop.Store(true)
	}()
	var buf []byte
	row := make([]uint64, 3)
	for checks := 0; !stop.Load() || checks == 0; checks++ {
		err := db.View(func() error {
			var ok bool
			var err error
			if buf, ok, err = f.Get(key, buf); err != nil || !ok {
				return err
			}
			if row, err = posts.Get(5, row); err != nil {
				return err
			}
			if got := binary.BigEndian.Uint64(buf); got != row[0] {
				return fmt.Errorf("family %d, counter %d", got, row[0])
			}
			return nil
		})
		if err != nil {
			stop.Store(true)
			wg.Wait()
			t.Fatal(err)
		}
	}
	wg.Wait()
}

// A format 1 store (testdata/format1-store.tar.gz, written before
// families) opens under this build, takes merge families, and is marked
// format 2 so older builds refuse it instead of compacting merges they
// cannot read.
func TestFormat1UpgradedForFamilies(t *testing.T) {
	dir := t.TempDir()
	untar(t, "testdata/format1-store.tar.gz", dir)
	o := &Options{FS: vfs.Default, DisableBackground: true, Families: []FamilySpec{testSum}}
	db := openTest(t, vfs.Default, dir, o)
	marker, err := os.ReadFile(filepath.Join(dir, markerFile))
	must(t, err)
	if string(marker) != markerText(formatVersion) {
		t.Fatalf("marker after open = %q", marker)
	}
	f := family(t, db, "sums")
	b := db.NewBatch()
	must(t, f.Merge(b, famKey(f, 1), AddOperand(nil, 4)))
	must(t, b.Commit())
	b.Close()
	must(t, db.Close())
	db = openTest(t, vfs.Default, dir, o)
	v, _ := famGet(t, family(t, db, "sums"), famKey(f, 1))
	if n, _ := DecodeAdd(v); n != 4 {
		t.Fatalf("sum after reopen = %d", n)
	}
	must(t, db.Verify(context.Background()))
}

func TestSetColumnAndLargeBatch(t *testing.T) {
	db := openTest(t, vfs.NewMem(), "d", nil)
	posts := newPosts(t, db, 16)
	must(t, posts.Set(4, 1, 2, 3))
	must(t, posts.SetColumn(4, "comments", 9))
	if got := get(t, posts, 4); !slices.Equal(got, []uint64{1, 9, 3}) {
		t.Fatalf("after SetColumn = %v", got)
	}
	if err := posts.SetColumn(4, "comments", 1<<32); !errors.Is(err, ErrValueRange) {
		t.Fatalf("SetColumn above max: %v", err)
	}
	if err := posts.SetColumn(4, "nope", 1); !errors.Is(err, ErrColumnNotFound) {
		t.Fatalf("SetColumn of an unknown column: %v", err)
	}
	// A batch of many rows, each touched twice (the row index switches to
	// a map past imageScan rows).
	b := db.NewBatch()
	for round := 0; round < 2; round++ {
		for id := uint64(100); id < 100+3*imageScan; id++ {
			must(t, b.Incr("posts", id, "likes", int64(id)))
		}
	}
	must(t, b.SetColumn("posts", 100, "reposts", 7))
	must(t, b.Commit())
	b.Close()
	for id := uint64(100); id < 100+3*imageScan; id++ {
		want := []uint64{0, 0, 2 * id}
		if id == 100 {
			want[0] = 7
		}
		if got := get(t, posts, id); !slices.Equal(got, want) {
			t.Fatalf("row %d = %v, want %v", id, got, want)
		}
	}
}

// A read-only store declares the families it holds, and refuses new ones.
func TestFamilyReadOnly(t *testing.T) {
	fs := vfs.NewMem()
	db := openFamilies(t, fs, testPlain)
	b := db.NewBatch()
	f := family(t, db, "plain")
	must(t, f.Put(b, famKey(f, 1), []byte("x")))
	must(t, b.Commit())
	b.Close()
	must(t, db.Close())
	o := testOptions(fs)
	o.ReadOnly = true
	db = openTest(t, fs, "d", o)
	f, err := db.RegisterFamily(testPlain)
	must(t, err)
	if v, ok := famGet(t, f, famKey(f, 1)); !ok || string(v) != "x" {
		t.Fatalf("read-only get = %q %v", v, ok)
	}
	if _, err := db.RegisterFamily(testSum); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("new family on a read-only store: %v", err)
	}
}

// TestBatchOnApply: an OnApply function runs once the batch's family
// writes are visible and before any View can run (it sees the key, and a
// View never sees the key without the function's effect), never for a
// redelivery, and a Reset forgets it.
func TestBatchOnApply(t *testing.T) {
	fs := vfs.NewMem()
	db := openFamilies(t, fs, testPlain)
	f := family(t, db, "plain")
	var applied atomic.Int64
	commit := func(id uint64, once uint64) *Batch {
		b := db.NewBatch()
		must(t, f.Put(b, famKey(f, id), []byte("v")))
		if once != 0 {
			must(t, b.Once("src", once))
		}
		b.OnApply(func() {
			if _, ok, err := f.Get(famKey(f, id), nil); err != nil || !ok {
				t.Errorf("OnApply of key %d: the key is not visible (%v)", id, err)
			}
			applied.Add(1)
		})
		must(t, b.Commit())
		return b
	}
	// Readers racing commits: a View that sees key i saw its function run.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			must(t, db.View(func() error {
				n := applied.Load()
				for id := uint64(n + 1); id <= uint64(n+3); id++ {
					if _, ok := famGet(t, f, famKey(f, id)); ok {
						t.Errorf("a View sees key %d, but only %d functions ran", id, n)
					}
				}
				return nil
			}))
		}
	}()
	for id := uint64(1); id <= 200; id++ {
		commit(id, 0).Close()
	}
	close(stop)
	wg.Wait()
	if n := applied.Load(); n != 200 {
		t.Fatalf("%d functions ran, want 200", n)
	}
	b := commit(201, 1)
	b.Close()
	b = commit(201, 1) // a redelivery: nothing written, nothing run
	if !b.Duplicate() {
		t.Fatal("the second batch of source mark 1 is not a duplicate")
	}
	b.Close()
	if n := applied.Load(); n != 201 {
		t.Fatalf("%d functions ran after a redelivery, want 201", n)
	}
	b = db.NewBatch()
	b.OnApply(func() { t.Error("a function registered before Reset ran") })
	b.Reset()
	must(t, f.Put(b, famKey(f, 300), []byte("v")))
	must(t, b.Commit())
	b.Close()
}
