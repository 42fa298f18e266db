package unread

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tallydb/tally/store"
)

func (e *env) rows(counter string) int {
	for _, c := range e.db.Stats().Counters {
		if c.Name == counter {
			return c.Rows()
		}
	}
	e.t.Fatalf("no counter %s", counter)
	return 0
}

func (e *env) wantCounts(user uint64, want ...uint64) {
	e.t.Helper()
	got, err := e.x.Get(user, nil)
	must(e.t, err)
	if !slices.Equal(got, want) {
		e.t.Fatalf("counts of %d = %v, want %v", user, got, want)
	}
}

func TestAddKind(t *testing.T) {
	e := newEnv(t, nil, nil)
	for _, tc := range []struct {
		kind string
		opts store.ColumnOptions
		err  error
	}{
		{"mention", store.ColumnOptions{}, nil},
		{"comment", store.ColumnOptions{HintBits: 8}, nil},
		{"like", store.ColumnOptions{HintBits: 32, MaxBits: 64}, nil},
		{"mention", store.ColumnOptions{}, store.ErrExists},
		{"", store.ColumnOptions{}, store.ErrInvalidName},
		{"a.b", store.ColumnOptions{}, store.ErrInvalidName},
		{"-x", store.ColumnOptions{}, store.ErrInvalidName},
		{"wide", store.ColumnOptions{HintBits: 12}, store.ErrInvalidOption},
		{"wide", store.ColumnOptions{MaxBits: 16}, store.ErrInvalidOption},
	} {
		err := e.x.AddKind(tc.kind, tc.opts)
		if tc.err == nil && err != nil || tc.err != nil && !errors.Is(err, tc.err) {
			t.Errorf("AddKind(%q, %+v) = %v, want %v", tc.kind, tc.opts, err, tc.err)
		}
	}
	if got := e.x.Kinds(); !slices.Equal(got, []string{"mention", "comment", "like"}) {
		t.Fatalf("kinds %v", got)
	}
	info := e.x.KindInfo()
	if info[0].HintBits != 16 || info[0].MaxBits != 32 || info[2].MaxBits != 64 {
		t.Fatalf("kind info %+v", info)
	}
	for i := len(e.x.Kinds()); i < store.MaxColumns; i++ {
		must(t, e.x.AddKind("k"+string(rune('a'+i)), store.ColumnOptions{}))
	}
	if err := e.x.AddKind("onemore", store.ColumnOptions{}); !errors.Is(err, store.ErrTooManyColumns) {
		t.Fatalf("kind %d: %v", store.MaxColumns+1, err)
	}
	e.reopen()
	if n := len(e.x.Kinds()); n != store.MaxColumns {
		t.Fatalf("%d kinds after reopen", n)
	}
}

func TestCounts(t *testing.T) {
	e := newEnv(t, nil, nil)
	must(t, e.x.AddKind("mention", store.ColumnOptions{}))
	must(t, e.x.AddKind("comment", store.ColumnOptions{HintBits: 8}))
	e.wantCounts(1, 0, 0) // never written: zeros
	for _, tc := range []struct {
		user uint64
		kind string
		n    int64
		want uint64
		err  error
	}{
		{1, "mention", 1, 1, nil},
		{1, "mention", 4, 5, nil},
		{1, "comment", 300, 300, nil}, // past the 8-bit hint: exact
		{1, "mention", -2, 3, nil},
		{1, "mention", -10, 0, nil}, // saturates at 0
		{1, "comment", 0, 300, nil},
		{2, "like", 1, 0, ErrUnknownKind},
		{2, "like", 1, 0, store.ErrColumnNotFound}, // both are named
		{2, "", 1, 0, ErrUnknownKind},
		{1, "comment", 1 << 32, 0, store.ErrValueRange}, // above the 32-bit maximum
		{^uint64(0), "mention", 7, 7, nil},
	} {
		got, err := e.x.Incr(tc.user, tc.kind, tc.n)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("Incr(%d, %q, %d) = %v, want %v", tc.user, tc.kind, tc.n, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Incr(%d, %q, %d) = %d, %v, want %d", tc.user, tc.kind, tc.n, got, err, tc.want)
		}
	}
	e.wantCounts(1, 0, 300) // refused increments changed nothing
	e.wantCounts(2, 0, 0)
	// The error speaks the user's words: the kind and the kinds there are,
	// not the internal counter.
	_, err := e.x.Incr(1, "mentions", 1)
	if want := `unread: unknown kind "mentions" (kinds: mention, comment)`; err == nil || err.Error() != want {
		t.Errorf("unknown kind: %v, want %q", err, want)
	}
	if err := e.x.Reset(1, "mentions"); err == nil || strings.Contains(err.Error(), KindsCounter) {
		t.Errorf("Reset of an unknown kind: %v", err)
	}

	// A kind added live reads 0 for existing rows.
	must(t, e.x.AddKind("like", store.ColumnOptions{}))
	e.wantCounts(1, 0, 300, 0)
	_, err = e.x.Incr(1, "like", 2)
	must(t, err)
	_, err = e.x.Incr(1, "mention", 3)
	must(t, err)
	e.wantCounts(1, 3, 300, 2)

	// Reset: named kinds, an unknown kind (nothing changes), all.
	must(t, e.x.Reset(1, "comment"))
	e.wantCounts(1, 3, 0, 2)
	if err := e.x.Reset(1, "mention", "nope"); !errors.Is(err, ErrUnknownKind) {
		t.Fatalf("Reset with an unknown kind: %v", err)
	}
	e.wantCounts(1, 3, 0, 2)
	got, err := e.x.GetMany([]uint64{1, 2, ^uint64(0)}, nil)
	must(t, err)
	if !slices.Equal(got, []uint64{3, 0, 2, 0, 0, 0, 7, 0, 0}) {
		t.Fatalf("GetMany %v", got)
	}
	must(t, e.x.Reset(1))
	must(t, e.x.Reset(^uint64(0), "mention"))
	e.wantCounts(1, 0, 0, 0)
	// Users whose counts are all zero cost nothing.
	if n := e.rows(KindsCounter); n != 0 {
		t.Fatalf("%d rows left after every count went to zero", n)
	}
	must(t, e.x.Reset(5)) // nobody: fine
	e.crash(0, nil)
	e.wantCounts(1, 0, 0, 0)
}

// TestCountsAllocs: Get of every kind does not allocate with a buffer.
func TestCountsAllocs(t *testing.T) {
	e := newEnv(t, nil, nil)
	must(t, e.x.AddKind("mention", store.ColumnOptions{}))
	must(t, e.x.AddKind("comment", store.ColumnOptions{}))
	_, err := e.x.Incr(7, "comment", 2)
	must(t, err)
	buf := make([]uint64, 0, 2)
	if n := testing.AllocsPerRun(100, func() { buf, _ = e.x.Get(7, buf) }); n != 0 {
		t.Fatalf("Get allocates %.1f times", n)
	}
}
