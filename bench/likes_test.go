package bench

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tallydb/tally/bench/workload"
	"github.com/tallydb/tally/store"
)

// TestRunLikes runs the likes comparison at test size against tally (NoSync)
// and, when redis-server is installed, Redis without AOF, and checks that
// both stored the same history and every phase measured something.
func TestRunLikes(t *testing.T) {
	w, err := workload.NewLikes(workload.LikesConfig{Seed: 1, Items: 2000, Users: 500, End: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := LikesRunConfig{Workload: w, History: 3000, Clients: 2, Duration: 100 * time.Millisecond, Dir: t.TempDir()}
	var results []LikesResult
	for _, s := range LikesSpecs() {
		if s.Durability != DurNone || s.Skip != "" {
			continue
		}
		r := RunLikes(cfg, s)
		if r.Err != nil {
			t.Fatalf("%s: %v", s.Label(), r.Err)
		}
		if r.Stored <= 0 || r.Stored > cfg.History || r.Transitions == 0 || r.Pages == 0 ||
			r.Top100.Count() == 0 || r.Likers.Count() == 0 || r.Disk <= 0 || r.Mem.Own <= 0 {
			t.Errorf("%s: %+v", s.Label(), r)
		}
		results = append(results, r)
	}
	if len(results) == 2 && results[0].Stored != results[1].Stored {
		t.Errorf("tally stored %d likes, Redis %d", results[0].Stored, results[1].Stored)
	}
	table := LikesTable(results)
	if !strings.Contains(table, "| tally | NoSync |") {
		t.Fatalf("table:\n%s", table)
	}
}

// TestTallyLikesOwnCountsCaches: the tally target's own accounting adds
// likes' caches (the user ordinal cache, 1 MiB allocated at open by
// default) to the store's figures.
func TestTallyLikesOwnCountsCaches(t *testing.T) {
	tl, err := openTallyLikes(t.TempDir(), store.NoSync)
	if err != nil {
		t.Fatal(err)
	}
	defer tl.all.Close()
	caches, err := likesCacheBytes(tl.l)
	if err != nil {
		t.Fatal(err)
	}
	var ord int64
	for _, s := range tl.l.Stats() {
		if s.Key == "ordinal_cache_bytes" {
			if ord, err = strconv.ParseInt(s.Value, 10, 64); err != nil {
				t.Fatal(err)
			}
		}
	}
	if ord <= 0 || caches != ord {
		t.Fatalf("likes' caches %d B, the ordinal cache %d B: want them equal and positive", caches, ord)
	}
	m, err := tl.Memory()
	if err != nil {
		t.Fatal(err)
	}
	if m.Own < caches {
		t.Errorf("own %d B leaves out likes' caches (%d B)", m.Own, caches)
	}
}
