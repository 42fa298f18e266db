package bench

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tallydb/tally/bench/workload"
)

// smokeConfig is the quick workload at test size: a few thousand items and a
// fixed number of operations, so no figure depends on timing.
func smokeConfig(t *testing.T) RunConfig {
	t.Helper()
	w, err := workload.New(workload.Config{Seed: 1, Items: 5000})
	if err != nil {
		t.Fatal(err)
	}
	return RunConfig{Workload: w, Clients: 4, OpsPerClient: 300, Dir: t.TempDir(), Verify: 500}
}

func checkResult(t *testing.T, cfg RunConfig, r Result) {
	t.Helper()
	if r.Err != nil {
		t.Fatalf("%s: %v", r.Spec.Label(), r.Err)
	}
	ops := r.Reads + r.Writes
	if want := uint64(cfg.Clients * cfg.OpsPerClient); ops != want {
		t.Errorf("%s: %d ops, want %d", r.Spec.Label(), ops, want)
	}
	if r.ReadLat.Count() != r.Reads || r.WriteLat.Count() != r.Writes || r.Writes == 0 || r.Reads == 0 {
		t.Errorf("%s: %d reads %d writes, latencies recorded %d and %d", r.Spec.Label(), r.Reads, r.Writes, r.ReadLat.Count(), r.WriteLat.Count())
	}
	if r.ReadIDs != r.Reads*10 {
		t.Errorf("%s: %d ids in %d reads", r.Spec.Label(), r.ReadIDs, r.Reads)
	}
	if r.Mem.Own <= 0 || r.Mem.Heap <= 0 || r.Mem.RSS < 0 || r.DiskBytes < 0 || r.Recovery < 0 {
		t.Errorf("%s: mem %+v disk %d recovery %v: want all measured", r.Spec.Label(), r.Mem, r.DiskBytes, r.Recovery)
	}
}

func TestRunPebble(t *testing.T) {
	cfg := smokeConfig(t)
	for _, spec := range PebbleSpecs() {
		checkResult(t, cfg, Run(cfg, spec))
	}
}

// TestRunCountsWrites checks that writes land: after a run of writes only,
// the sum of every count grew by exactly the number of writes.
func TestRunCountsWrites(t *testing.T) {
	w := workload.MustNew(workload.Config{Seed: 3, Items: 2000, WritesPerRead: 1e6})
	spec := PebbleSpecs()[1]
	tg, err := spec.Open(t.TempDir(), w)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	if err := tg.Load(w); err != nil {
		t.Fatal(err)
	}
	all := make([]uint64, w.Len())
	for i := range all {
		all[i] = w.ID(uint64(i))
	}
	c, _ := tg.NewClient()
	defer c.Close()
	sum := func() (s uint64) {
		vals, err := readAll(c, all, w.Columns())
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			s += v
		}
		return s
	}
	before := sum()
	res := Result{Spec: spec}
	cfg := RunConfig{Workload: w, Clients: 2, OpsPerClient: 500, Duration: time.Minute}
	cfg.fill()
	if err := runMix(&cfg, tg, &res); err != nil {
		t.Fatal(err)
	}
	if got := sum() - before; got != res.Writes || res.Writes < 990 {
		t.Fatalf("counts grew by %d after %d writes", got, res.Writes)
	}
}

func TestRunRedis(t *testing.T) {
	if why := RedisSkip(); why != "" {
		t.Skip(why)
	}
	cfg := smokeConfig(t)
	for _, spec := range RedisSpecs() {
		checkResult(t, cfg, Run(cfg, spec))
	}
}

func TestRunTally(t *testing.T) {
	cfg := smokeConfig(t)
	cfg.HeapProfile = filepath.Join(t.TempDir(), "heap")
	for _, spec := range TallySpecs() {
		checkResult(t, cfg, Run(cfg, spec))
		path := cfg.HeapProfile + "-" + profileName(spec.Label()) + ".pb.gz"
		if st, err := os.Stat(path); err != nil || st.Size() == 0 {
			t.Errorf("%s: heap profile %s: %v", spec.Label(), path, err)
		}
	}
}
