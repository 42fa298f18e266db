package timeline

import (
	"errors"
	"slices"
	"testing"
)

// PostsPage lists an author's own posts newest first, by cursor, without
// unpublished ones, and refuses a cursor issued for another list.
func TestPostsPage(t *testing.T) {
	e := newEnv(t, Config{})
	for _, p := range []uint64{101, 105, 103, 110, 120} {
		if _, err := e.tl.Publish(7, p); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := e.tl.Unpublish(7, 105); err != nil {
		t.Fatal(err)
	}
	var got []uint64
	cursor := ""
	pages := 0
	for {
		pg, err := e.tl.PostsPage(7, cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, pg.IDs...)
		pages++
		if pg.NoMore {
			break
		}
		cursor = pg.Cursor
	}
	if want := []uint64{120, 110, 103, 101}; !slices.Equal(got, want) {
		t.Fatalf("posts %v, want %v", got, want)
	}
	if pages != 2 {
		t.Fatalf("%d pages of 2 for 4 posts", pages)
	}
	pg, err := e.tl.PostsPage(8, "", 10)
	if err != nil || len(pg.IDs) != 0 || !pg.NoMore {
		t.Fatalf("an author without posts: %+v %v", pg, err)
	}
	first, _ := e.tl.PostsPage(7, "", 1)
	if _, err := e.tl.PostsPage(8, first.Cursor, 1); !errors.Is(err, ErrBadCursor) {
		t.Fatalf("another author's cursor: %v", err)
	}
	if _, err := e.tl.FolloweesPage(7, first.Cursor, 1); !errors.Is(err, ErrBadCursor) {
		t.Fatalf("a posts cursor for followees: %v", err)
	}
	if _, err := e.tl.PostsPage(0, "", 1); !errors.Is(err, ErrBadID) {
		t.Fatalf("author 0: %v", err)
	}
}
