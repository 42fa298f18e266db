package likes

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tallydb/tally/internal/testutil"
	"github.com/tallydb/tally/store"
)

// TestKillChild runs a child process that makes transitions under
// SyncAlways from several goroutines, printing each one before it starts
// ("try") and after it is acknowledged ("ack"), SIGKILLs it mid-stream,
// reopens the store and checks that every acknowledged transition is there
// (a pair's state is its last acknowledged one, or the result of the one
// transition of its writer that was in flight) and that Check passes:
// every count equals its set's size. Repeated on one directory, so
// recovery of a recovered store is exercised too.
func TestKillChild(t *testing.T) {
	if dir := os.Getenv("TALLY_LIKES_KILL_DIR"); dir != "" {
		killChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	dir := t.TempDir()
	acked := map[pair]State{}
	for round := range 3 {
		type try struct {
			p    pair
			kind opKind
		}
		inflight := map[int]try{}
		lines := 0
		env := []string{"TALLY_LIKES_KILL_DIR=" + dir, fmt.Sprint("TALLY_LIKES_KILL_SEED=", round)}
		testutil.RunChild(t, "TestKillChild", env, func(line string) bool {
			f := strings.Fields(line)
			if len(f) != 6 {
				return false
			}
			w, _ := strconv.Atoi(f[1])
			kind, _ := strconv.Atoi(f[2])
			item, _ := strconv.ParseUint(f[3], 10, 64)
			user, _ := strconv.ParseUint(f[4], 10, 64)
			state, _ := strconv.Atoi(f[5])
			switch f[0] {
			case "try":
				inflight[w] = try{pair{item, user}, opKind(kind)}
			case "ack":
				acked[pair{item, user}] = State(state)
				delete(inflight, w)
			}
			lines++
			return lines >= 1500+round*500
		})
		if lines < 1500 {
			t.Fatalf("child stopped early after %d lines", lines)
		}
		db, err := store.Open(dir, &store.Options{DisableBackground: true, Families: Families()})
		if err != nil {
			t.Fatal(err)
		}
		l, err := New(db, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Check(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		maybe := map[pair]State{}
		for _, tr := range inflight {
			maybe[tr.p] = next(acked[tr.p], tr.kind)
		}
		for p, want := range acked {
			got, err := l.State("video", p.user, p.item)
			if err != nil {
				t.Fatal(err)
			}
			if alt, ok := maybe[p]; got != want && !(ok && got == alt) {
				t.Fatalf("round %d: item %d user %d is %s, acknowledged %s (in flight: %v %s)", round, p.item, p.user, got, want, ok, alt)
			}
			acked[p] = got
		}
		for p, alt := range maybe { // in flight on a pair never acknowledged
			if _, ok := acked[p]; !ok {
				got, _ := l.State("video", p.user, p.item)
				if got != None && got != alt {
					t.Fatalf("round %d: unacknowledged item %d user %d is %s", round, p.item, p.user, got)
				}
				acked[p] = got
			}
		}
		t.Logf("round %d: %d lines, %d pairs checked", round, lines, len(acked))
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// next is the state after kind applied to s.
func next(s State, kind opKind) State {
	switch kind {
	case opLike:
		return Liked
	case opDislike:
		return Disliked
	case opUnlike:
		if s == Liked {
			return None
		}
	case opUndislike:
		if s == Disliked {
			return None
		}
	}
	return s
}

// killChild is the child side of TestKillChild: it never returns normally.
func killChild(dir string) {
	db, err := store.Open(dir, &store.Options{Families: Families(), CheckpointLogBytes: 64 << 10})
	if err != nil {
		testutil.ChildFatal("child open", err)
	}
	l, err := New(db, &Options{RoaringThreshold: 32, Stripes: 16, CreateBusinesses: true})
	if err != nil {
		testutil.ChildFatal("child new", err)
	}
	seed, _ := strconv.ParseUint(os.Getenv("TALLY_LIKES_KILL_SEED"), 10, 64)
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for {
				item := uint64(rng.IntN(20))
				user := uint64(w*100 + rng.IntN(60))
				kind := []opKind{opLike, opLike, opUnlike, opDislike, opUndislike}[rng.IntN(5)]
				testutil.ChildPrintf("try %d %d %d %d 0", w, kind, item, user)
				var res Result
				var err error
				switch kind {
				case opLike:
					res, err = l.Like("video", item, user, 1+item%3)
				case opUnlike:
					res, err = l.Unlike("video", item, user)
				case opDislike:
					res, err = l.Dislike("video", item, user)
				case opUndislike:
					res, err = l.Undislike("video", item, user)
				}
				if err != nil {
					testutil.ChildFatal("child transition", err)
				}
				testutil.ChildPrintf("ack %d %d %d %d %d", w, kind, item, user, res.State)
			}
		}()
	}
	wg.Wait()
}
