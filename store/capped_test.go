package store

import (
	"errors"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// IncrCapped refuses, at commit and for the whole batch, an increment that
// would pass its cap (or the column's maximum, if lower); within the cap
// it is Incr.
func TestIncrCapped(t *testing.T) {
	db := openTest(t, vfs.NewMem(), "d", nil)
	posts := newPosts(t, db, 16) // likes: a 64-bit column
	const limit = 1<<63 - 1
	must(t, posts.SetColumn(1, "likes", limit-2))

	b := db.NewBatch()
	defer b.Close()
	must(t, b.IncrCapped("posts", 1, "likes", 2, limit))
	must(t, b.Incr("posts", 2, "reposts", 1))
	must(t, b.Commit())
	if got := b.Result(0); got != limit {
		t.Fatalf("result %d, want %d", got, limit)
	}

	b.Reset()
	must(t, b.Incr("posts", 2, "reposts", 1))
	must(t, b.IncrCapped("posts", 1, "likes", 1, limit))
	if err := b.Commit(); !errors.Is(err, ErrValueRange) {
		t.Fatalf("past the cap: %v, want ErrValueRange", err)
	}
	// The refused batch changed nothing, its other op included.
	if got := get(t, posts, 1); got[2] != limit {
		t.Fatalf("row 1 = %v", got)
	}
	if got := get(t, posts, 2); !slices.Equal(got, []uint64{1, 0, 0}) {
		t.Fatalf("row 2 = %v", got)
	}
	// A cap above the column's maximum is the maximum; 0 means none.
	b.Reset()
	must(t, b.IncrCapped("posts", 3, "reposts", 1<<32, 1<<40))
	if err := b.Commit(); !errors.Is(err, ErrValueRange) {
		t.Fatalf("past a 32-bit column's maximum under a higher cap: %v", err)
	}
	b.Reset()
	must(t, b.IncrCapped("posts", 3, "reposts", 5, 0))
	must(t, b.Commit())
	if err := b.IncrCapped("posts", 3, "nope", 1, 0); !errors.Is(err, ErrColumnNotFound) {
		t.Fatalf("unknown column: %v", err)
	}
}

// IncrColumn is IncrCapped by handle and column position: same results,
// same cap, and a position past the columns is ErrColumnNotFound, failing
// the batch.
func TestIncrColumn(t *testing.T) {
	db := openTest(t, vfs.NewMem(), "d", nil)
	posts := newPosts(t, db, 16) // reposts, comments, likes (64-bit)
	const limit = 1<<63 - 1
	must(t, posts.SetColumn(1, "likes", limit-2))

	b := db.NewBatch()
	defer b.Close()
	must(t, b.IncrColumn(posts, 1, 2, 2, limit))
	must(t, b.IncrColumn(posts, 2, 0, 3, 0))
	must(t, b.IncrColumn(posts, 2, 1, 4, 0))
	must(t, b.IncrColumn(posts, 2, 0, -1, 0))
	must(t, b.Commit())
	if got := []uint64{b.Result(0), b.Result(1), b.Result(2), b.Result(3)}; !slices.Equal(got, []uint64{limit, 3, 4, 2}) {
		t.Fatalf("results %v", got)
	}
	if got := get(t, posts, 2); !slices.Equal(got, []uint64{2, 4, 0}) {
		t.Fatalf("row 2 = %v", got)
	}

	b.Reset()
	must(t, b.IncrColumn(posts, 2, 0, 1, 0))
	must(t, b.IncrColumn(posts, 1, 2, 1, limit))
	if err := b.Commit(); !errors.Is(err, ErrValueRange) {
		t.Fatalf("past the cap: %v, want ErrValueRange", err)
	}
	if got := get(t, posts, 2); !slices.Equal(got, []uint64{2, 4, 0}) {
		t.Fatalf("refused batch changed row 2: %v", got)
	}

	for _, col := range []int{-1, 3} {
		b.Reset()
		if err := b.IncrColumn(posts, 2, col, 1, 0); !errors.Is(err, ErrColumnNotFound) {
			t.Fatalf("column %d: %v, want ErrColumnNotFound", col, err)
		}
		if err := b.Commit(); !errors.Is(err, ErrColumnNotFound) {
			t.Fatalf("commit after column %d: %v, want ErrColumnNotFound", col, err)
		}
	}
}
