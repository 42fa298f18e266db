package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// snapState is what a store copy must reproduce: counter values, family
// contents and the apply mark.
type snapState struct {
	counters map[uint64][3]uint64
	family   map[string]string
	applied  uint64
}

func readSnapState(t *testing.T, db *DB) snapState {
	t.Helper()
	c, err := db.Counter("posts")
	must(t, err)
	st := snapState{counters: map[uint64][3]uint64{}, family: map[string]string{}, applied: db.AppliedIndex()}
	for id := uint64(0); id < 300; id++ {
		var row [3]uint64
		for i, col := range []string{"reposts", "comments", "likes"} {
			v, err := c.GetColumn(id, col)
			must(t, err)
			row[i] = v
		}
		if row != [3]uint64{} {
			st.counters[id] = row
		}
	}
	f, err := db.Family("plain")
	must(t, err)
	it, err := f.NewIter(nil)
	must(t, err)
	for it.Next() {
		st.family[string(it.Key())] = string(it.Value())
	}
	must(t, it.Close())
	return st
}

func equalSnapState(a, b snapState) error {
	if a.applied != b.applied {
		return fmt.Errorf("applied %d vs %d", a.applied, b.applied)
	}
	if len(a.counters) != len(b.counters) || len(a.family) != len(b.family) {
		return fmt.Errorf("sizes: %d/%d counters, %d/%d family rows", len(a.counters), len(b.counters), len(a.family), len(b.family))
	}
	for k, v := range a.counters {
		if b.counters[k] != v {
			return fmt.Errorf("counter %d: %v vs %v", k, v, b.counters[k])
		}
	}
	for k, v := range a.family {
		if b.family[k] != v {
			return fmt.Errorf("family %x: %q vs %q", k, v, b.family[k])
		}
	}
	return nil
}

// writeSnapLoad makes writes of every kind: counter increments, family
// puts, apply marks, from index on.
func writeSnapLoad(t *testing.T, db *DB, index uint64, n int) {
	t.Helper()
	c, err := db.Counter("posts")
	must(t, err)
	f, err := db.Family("plain")
	must(t, err)
	for i := range n {
		index++
		id := uint64(i*7) % 300
		must(t, db.ApplyEntry(index, func() error {
			if _, err := c.Incr(id, "likes", int64(i%5+1)); err != nil {
				return err
			}
			b := db.NewBatch()
			defer b.Close()
			if err := f.Put(b, famKey(f, id), fmt.Appendf(nil, "v%d", index)); err != nil {
				return err
			}
			return b.Commit()
		}))
		if _, err := c.Incr(id, "reposts", 1); err != nil {
			t.Fatal(err)
		}
	}
}

func newSnapStore(t *testing.T, fs vfs.FS, dir string) *DB {
	t.Helper()
	db, err := Open(dir, snapOptions(fs))
	must(t, err)
	newPosts(t, db, 0)
	return db
}

func snapOptions(fs vfs.FS) *Options {
	o := testOptions(fs)
	o.Families = []FamilySpec{testPlain}
	return o
}

// TestCheckpointTo: a copy opens to exactly the state at the call (chunks
// of a tally checkpoint plus the log after it), whatever is written after.
func TestCheckpointTo(t *testing.T) {
	fs := vfs.NewMem()
	db := newSnapStore(t, fs, "src")
	defer db.Close()
	writeSnapLoad(t, db, 0, 200)
	must(t, db.Checkpoint()) // chunks, then more log after them
	writeSnapLoad(t, db, 200, 150)
	want := readSnapState(t, db)
	if want.applied != 350 || len(want.counters) == 0 || len(want.family) == 0 {
		t.Fatalf("load made %+v", want)
	}
	must(t, db.CheckpointTo("copy"))
	if err := db.CheckpointTo("copy"); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("second CheckpointTo to the same dir: %v", err)
	}
	writeSnapLoad(t, db, 350, 50) // after the copy: not in it

	cp := openTest(t, fs, "copy", snapOptions(fs))
	if err := equalSnapState(want, readSnapState(t, cp)); err != nil {
		t.Fatal(err)
	}
	if err := cp.Check(); err != nil {
		t.Fatal(err)
	}
	// The copy is a store of its own: it takes writes.
	writeSnapLoad(t, cp, 350, 10)
}

// stageCopy puts a CheckpointTo copy of src at StagedPath(dir) and
// completes it.
func stageCopy(t *testing.T, fs vfs.FS, src *DB, tmp, dir string, complete bool) {
	t.Helper()
	must(t, src.CheckpointTo(tmp))
	must(t, fs.Rename(fs.PathJoin(tmp, pebbleDir), fs.PathJoin(dir, stagedDir)))
	if complete {
		must(t, completeStaged(fs, dir))
	}
}

// TestInstallStagedCrash interrupts the install after each of its steps
// (and before the first): the next Open finds either the old or the new
// data, and once the copy was marked complete always the new, never
// neither.
func TestInstallStagedCrash(t *testing.T) {
	crash := errors.New("crash")
	for _, at := range []installStep{0, stepRemovedOld, stepMovedAside, stepMovedIn, stepRemovedAside, 99} {
		t.Run(fmt.Sprint(at), func(t *testing.T) {
			fs := vfs.NewMem()
			src := newSnapStore(t, fs, "src")
			writeSnapLoad(t, src, 0, 120)
			newState := readSnapState(t, src)

			old := newSnapStore(t, fs, "node")
			writeSnapLoad(t, old, 0, 30)
			must(t, old.Close())

			stageCopy(t, fs, src, "tmp", "node", true)
			must(t, src.Close())
			if at != 0 {
				err := installStaged(fs, "node", func(s installStep) error {
					if s == at {
						return crash
					}
					return nil
				})
				if at == 99 {
					must(t, err)
				} else if !errors.Is(err, crash) {
					t.Fatalf("install: %v", err)
				}
			}
			db := openTest(t, fs, "node", snapOptions(fs))
			if err := equalSnapState(newState, readSnapState(t, db)); err != nil {
				t.Fatal(err)
			}
			for _, n := range []string{stagedDir, oldDir, fs.PathJoin(pebbleDir, installMarker)} {
				if _, err := fs.Stat(fs.PathJoin("node", n)); err == nil {
					t.Errorf("%s left behind", n)
				}
			}
		})
	}
}

// TestInstallStagedIncomplete: a staged copy without its marker (a fetch in
// progress) is left alone, and the store opens on its old data.
func TestInstallStagedIncomplete(t *testing.T) {
	fs := vfs.NewMem()
	src := newSnapStore(t, fs, "src")
	writeSnapLoad(t, src, 0, 50)
	old := newSnapStore(t, fs, "node")
	writeSnapLoad(t, old, 0, 20)
	oldState := readSnapState(t, old)
	must(t, old.Close())
	stageCopy(t, fs, src, "tmp", "node", false)
	must(t, src.Close())

	db := openTest(t, fs, "node", snapOptions(fs))
	if err := equalSnapState(oldState, readSnapState(t, db)); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(fs.PathJoin("node", stagedDir)); err != nil {
		t.Fatalf("staged copy removed: %v", err)
	}
	if err := completeStaged(fs, "nowhere"); !errors.Is(err, ErrNotStaged) {
		t.Fatalf("CompleteStaged with nothing staged: %v", err)
	}
}

// TestInstallStagedLocked: InstallStaged refuses an open store.
func TestInstallStagedLocked(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, &Options{DisableBackground: true, CacheSize: 1 << 20, MemTableSize: 1 << 20})
	must(t, err)
	defer db.Close()
	if err := InstallStaged(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("InstallStaged on an open store: %v", err)
	}
}

// TestPutStaged: keys put into a staged copy before it is marked complete
// are in the store once it is swapped in; the store's own families and a
// missing copy are refused.
func TestPutStaged(t *testing.T) {
	root := t.TempDir()
	fs := vfs.Default
	src := newSnapStore(t, fs, fs.PathJoin(root, "src"))
	writeSnapLoad(t, src, 0, 20)
	nodeDir := fs.PathJoin(root, "node")
	node := newSnapStore(t, fs, nodeDir)
	must(t, node.Close())
	stageCopy(t, fs, src, fs.PathJoin(root, "tmp"), nodeDir, false)
	must(t, src.Close())
	key := append([]byte{testPlain.Prefix}, "own"...)
	if err := PutStaged(nodeDir, [][2][]byte{{[]byte{famSource, 'x'}, nil}}); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("PutStaged of a store key: %v", err)
	}
	if err := PutStaged(fs.PathJoin(root, "nowhere"), nil); !errors.Is(err, ErrNotStaged) {
		t.Fatalf("PutStaged with nothing staged: %v", err)
	}
	must(t, PutStaged(nodeDir, [][2][]byte{{key, []byte("mine")}}))
	must(t, completeStaged(fs, nodeDir))
	db := openTest(t, fs, nodeDir, snapOptions(fs))
	if got := readSnapState(t, db).family[string(key)]; got != "mine" {
		t.Fatalf("the staged key reads %q after the swap, want %q", got, "mine")
	}
	must(t, db.Check())
}
