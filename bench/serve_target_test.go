package bench

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tallydb/tally/bench/workload"
	"github.com/tallydb/tally/likes"
	"github.com/tallydb/tally/store"
)

// testTallyBin builds the tally command for a test; it skips only when no
// go command is on PATH to build it with.
func testTallyBin(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("skipped: no go command on PATH to build the tally binary the tally-serve targets run")
	}
	bin := filepath.Join(t.TempDir(), "tally")
	if err := BuildTally(bin, nil); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestServedTallyAgrees runs the same small workload (a load, then 2,000
// operations of one client's stream, writes included) against the
// in-process tally target and the tally-serve one, and checks that every
// item reads the same counts from both, then that the runner measures the
// served target in every durability (load check, mix, memory, disk,
// restart and the sample read again).
func TestServedTallyAgrees(t *testing.T) {
	bin := testTallyBin(t)
	w := workload.MustNew(workload.Config{Seed: 5, Items: 3000, WritesPerRead: 4})
	in, err := openTally(t.TempDir(), w, store.NoSync)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	served, err := openServedTally(ServeOptions{Bin: bin}, t.TempDir(), w, "nosync")
	if err != nil {
		t.Fatal(err)
	}
	defer served.Close()
	all := make([]uint64, w.Len())
	for i := range all {
		all[i] = w.ID(uint64(i))
	}
	var got [2][]uint64
	writes := 0
	for k, tg := range []Target{in, served} {
		if err := tg.Load(w); err != nil {
			t.Fatalf("target %d: load: %v", k, err)
		}
		c, err := tg.NewClient()
		if err != nil {
			t.Fatal(err)
		}
		s := w.Ops(0)
		var op workload.Op
		var dst []uint64
		writes = 0
		for n := 0; n < 2000; n++ {
			s.Next(&op)
			if op.Kind == workload.OpRead {
				dst, err = c.MultiGet(op.IDs, dst)
			} else {
				err = c.Incr(op.ID, op.Col, op.Delta)
				writes++
			}
			if err != nil {
				t.Fatalf("target %d: %v: %v", k, op.Kind, err)
			}
		}
		if got[k], err = readAll(c, all, w.Columns()); err != nil {
			t.Fatalf("target %d: %v", k, err)
		}
		c.Close()
	}
	if writes < 1000 {
		t.Fatalf("only %d writes in the stream", writes)
	}
	var sum [2]uint64
	for k := range got {
		for _, v := range got[k] {
			sum[k] += v
		}
	}
	if !slices.Equal(got[0], got[1]) {
		for i := range got[0] {
			if got[0][i] != got[1][i] {
				t.Fatalf("id %d column %d: in-process %d, served %d (sums %d, %d)", all[i/w.Columns()], i%w.Columns(), got[0][i], got[1][i], sum[0], sum[1])
			}
		}
	}
	if sum[0] == 0 {
		t.Fatal("every count is 0")
	}

	cfg := smokeConfig(t)
	for _, spec := range ServedTallySpecs(ServeOptions{Bin: bin}) {
		r := Run(cfg, spec)
		if r.Err != nil {
			t.Fatalf("%s: %v", spec.Label(), r.Err)
		}
		if ops := r.Reads + r.Writes; ops != uint64(cfg.Clients*cfg.OpsPerClient) || r.Reads == 0 || r.Writes == 0 {
			t.Errorf("%s: %d reads, %d writes", spec.Label(), r.Reads, r.Writes)
		}
		// Heap is the server's used_memory growth, which a collection
		// between the two readings can make negative: not checked.
		if r.Mem.Own <= 0 || r.DiskBytes <= 0 || r.Recovery <= 0 {
			t.Errorf("%s: mem %+v disk %d recovery %v: want all measured", spec.Label(), r.Mem, r.DiskBytes, r.Recovery)
		}
	}
	if s := ServedTallySpecs(ServeOptions{}); s[0].Skip == "" {
		t.Error("ServedTallySpecs without a binary is not skipped")
	}
}

// TestServedLikesAgrees loads the same history into the in-process likes
// target and the tally-serve one, applies the same transitions to both,
// and checks that they stored the same likes and answer the same states,
// top 100 and likers pages; then runs the likes runner on the served
// target.
func TestServedLikesAgrees(t *testing.T) {
	bin := testTallyBin(t)
	w, err := workload.NewLikes(workload.LikesConfig{Seed: 2, Items: 300, Users: 200, End: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	var h []HistLike
	w.History(2000, func(item, user uint64, ms int64) { h = append(h, HistLike{item, user, ms}) })
	in, err := openTallyLikes(t.TempDir(), store.NoSync)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	served, err := openServedLikes(ServeOptions{Bin: bin}, t.TempDir(), "nosync")
	if err != nil {
		t.Fatal(err)
	}
	defer served.Close()
	var stored [2]int
	for k, tg := range []LikesTarget{in, served} {
		if stored[k], err = tg.Load(h); err != nil {
			t.Fatalf("target %d: load: %v", k, err)
		}
		c, err := tg.NewClient()
		if err != nil {
			t.Fatal(err)
		}
		s := w.Stream(7)
		for n := 0; n < 1500; n++ {
			if err := c.Apply(s.Next(), time.Now().UnixMilli()); err != nil {
				t.Fatalf("target %d: apply: %v", k, err)
			}
		}
		c.Close()
	}
	if stored[0] != stored[1] || stored[0] <= 0 {
		t.Fatalf("stored %d likes in process, %d served", stored[0], stored[1])
	}
	ic := &tallyLikesClient{l: in.l}
	sc0, err := served.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer sc0.Close()
	sc := sc0.(*servedLikesClient)

	items := make([]uint64, 20)
	s := w.Stream(9)
	var states int
	for page := 0; page < 50; page++ {
		for i := range items {
			items[i] = w.Item(s.Rank())
		}
		user := w.User(s.UserIndex())
		want, err := in.l.States(LikesBusiness, user, items, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := sc.states(user, items)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if got[i] != want[i].String() {
				t.Fatalf("user %d item %d: served %q, in-process %v", user, items[i], got[i], want[i])
			}
			if want[i] != likes.None {
				states++
			}
		}
	}
	if states == 0 {
		t.Fatal("every state read is none")
	}
	wantTop, err := in.l.Top(LikesBusiness, 100)
	if err != nil {
		t.Fatal(err)
	}
	gotTop, err := sc.top(100)
	if err != nil {
		t.Fatal(err)
	}
	if len(wantTop) == 0 || !slices.Equal(gotTop, wantTop) {
		t.Fatalf("top 100: served %v, in-process %v", gotTop, wantTop)
	}
	for r := uint64(0); r < 5; r++ {
		item := w.Item(r)
		want, err := in.l.Likers(LikesBusiness, item, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		got, err := sc.likers(item, 100)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want.IDs) {
			t.Fatalf("likers of %d: served %v, in-process %v", item, got, want.IDs)
		}
	}
	// The runner's calls on both clients (no values, errors only).
	for _, c := range []LikesClient{ic, sc} {
		if err := c.Top(100); err != nil {
			t.Fatal(err)
		}
		if err := c.Likers(w.Item(0), 100); err != nil {
			t.Fatal(err)
		}
	}

	cfg := LikesRunConfig{Workload: w, History: 2000, Clients: 2, Duration: 100 * time.Millisecond, Dir: t.TempDir()}
	spec := LikesServedSpecs(ServeOptions{Bin: bin})[2]
	r := RunLikes(cfg, spec)
	if r.Err != nil {
		t.Fatalf("%s: %v", spec.Label(), r.Err)
	}
	if r.Stored != stored[1] || r.Transitions == 0 || r.Pages == 0 || r.Top100.Count() == 0 || r.Likers.Count() == 0 ||
		r.Disk <= 0 || r.Mem.Own <= 0 {
		t.Errorf("%s: %+v", spec.Label(), r)
	}
	table := LikesTable([]LikesResult{r})
	if !strings.Contains(table, "| tally-serve | serve --durability nosync |") || !strings.Contains(table, "Like for like") {
		t.Errorf("table:\n%s", table)
	}
}

// TestTallyServeCmd: ServeOptions' flags go on every server's command
// line after the runner's own, and no binary skips the targets.
func TestTallyServeCmd(t *testing.T) {
	o := ServeOptions{Bin: "/bin/tally", Flags: []string{"--metrics-addr", "127.0.0.1:9121", "--pprof"}}
	got := strings.Join(tallyServeCmd(o, "/d/db", "nosync", "127.0.0.1:7000").Args, " ")
	want := "/bin/tally -d /d/db --durability nosync serve --create --addr 127.0.0.1:7000 --metrics-addr 127.0.0.1:9121 --pprof"
	if got != want {
		t.Errorf("command line %q, want %q", got, want)
	}
	if o.skip() != "" || (ServeOptions{}).skip() == "" {
		t.Errorf("skip with a binary %q, without %q", o.skip(), ServeOptions{}.skip())
	}
}
