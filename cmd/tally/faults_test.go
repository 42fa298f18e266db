package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tallydb/tally/store"
)

// damagedStore builds a store whose data sits in sstables and in the WAL
// (every Open flushes the WAL it replays), then damages it.
func damagedStore(t *testing.T, damage func(t *testing.T, db string)) string {
	t.Helper()
	dir := newStore(t)
	for round := 0; round < 3; round++ {
		db, err := store.Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := db.Counter("posts")
		if err != nil {
			t.Fatal(err)
		}
		for i := uint64(10 + 130*round); i < uint64(10+130*(round+1)); i++ {
			if err := c.Set(i, i, 7); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	mustTally(t, "-d="+dir, "set", "posts", "399", "399", "7") // a record in the newest WAL
	damage(t, filepath.Join(dir, "db"))
	return dir
}

// files returns the names in dir matching suffix, largest first.
func files(t *testing.T, dir, suffix string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	size := map[string]int64{}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), suffix) || strings.HasPrefix(e.Name(), suffix) {
			fi, _ := e.Info()
			size[e.Name()] = fi.Size()
			out = append(out, e.Name())
		}
	}
	slices.SortFunc(out, func(a, b string) int { return int(size[b] - size[a]) })
	return out
}

func flip(t *testing.T, path string, off func(size int64) int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off(int64(len(b)))] ^= 0x10
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// dirSnapshot returns every file of dir with its contents.
func dirSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			out[p] = string(b)
		}
		return nil
	})
	return out
}

// TestDamagedStoreCommands runs the read commands on damaged stores: each
// must exit 1 with a "tally: " line that names the damaged file (or, for
// get, print the right values when the damage is elsewhere), never panic
// (exit 2), and verify must always report the damage.
func TestDamagedStoreCommands(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, db string) string // returns the file named
	}{
		{"sstable", func(t *testing.T, db string) string {
			f := files(t, db, ".sst")[0]
			flip(t, filepath.Join(db, f), func(n int64) int64 { return n / 3 })
			return f
		}},
		{"wal", func(t *testing.T, db string) string {
			f := files(t, db, ".log")[0]
			flip(t, filepath.Join(db, f), func(n int64) int64 { return 30 })
			return f
		}},
		{"manifest", func(t *testing.T, db string) string {
			f := files(t, db, "MANIFEST-")[0]
			flip(t, filepath.Join(db, f), func(n int64) int64 { return 20 })
			return f
		}},
		{"manifest marker", func(t *testing.T, db string) string {
			f := files(t, db, "marker.manifest.")[0]
			if err := os.Remove(filepath.Join(db, f)); err != nil {
				t.Fatal(err)
			}
			return "marker.manifest"
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var named string
			dir := damagedStore(t, func(t *testing.T, db string) { named = tc.damage(t, db) })
			d := "-d=" + dir
			before := dirSnapshot(t, dir)
			for _, cmd := range [][]string{{"verify"}, {"get", "posts", "5", "250"}, {"replay"}, {"stats"}, {"counter", "list"}} {
				out, errOut, code := tally(t, append([]string{d}, cmd...)...)
				if testing.Verbose() {
					t.Logf("%s: exit %d: %s", cmd, code, firstLineOf(errOut+out))
				}
				switch {
				case code == 1 && strings.HasPrefix(errOut, "tally: ") && strings.Contains(errOut, named) &&
					strings.Contains(errOut, "corrupt"):
				case code == 0 && cmd[0] == "get" && out == "5 reposts=3 likes=300\n250 reposts=250 likes=7\n":
				case code == 0 && cmd[0] != "get" && cmd[0] != "verify":
					// replay, stats and counter list read no damaged byte
				default:
					t.Errorf("%s: exit %d, stdout %q, stderr %q (want exit 1 naming %s)", cmd, code, out, errOut, named)
				}
			}
			// The read commands open read-only: the damaged store is left
			// exactly as it was.
			after := dirSnapshot(t, dir)
			for p, b := range before {
				if after[p] != b && !strings.HasSuffix(p, "LOCK") {
					t.Errorf("%s changed", p)
				}
			}
			for p := range after {
				if _, ok := before[p]; !ok {
					t.Errorf("%s appeared", p)
				}
			}
		})
	}
}

func firstLineOf(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
