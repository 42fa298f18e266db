package store

import (
	"fmt"
	"testing"
)

// sortForLoad sorts by id and keeps the last row of a repeated id, as a
// load file's rule says; sorted input (the common export order) is taken
// as it is, without the radix pass.
func TestSortForLoad(t *testing.T) {
	ids := []uint64{9, 1 << 40, 3, 9, 1<<63 + 5, 3, 0}
	vals := []uint64{1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7}
	got := sortForLoad(LoadRows{IDs: ids, Vals: vals}, 2)
	wantIDs := []uint64{0, 3, 9, 1 << 40, 1<<63 + 5}
	wantVals := []uint64{7, 7, 6, 6, 4, 4, 2, 2, 5, 5}
	if fmt.Sprint(got.Keys, got.Vals) != fmt.Sprint(wantIDs, wantVals) {
		t.Fatalf("sortForLoad = %v %v, want %v %v", got.Keys, got.Vals, wantIDs, wantVals)
	}
	got = sortForLoad(LoadRows{IDs: wantIDs, Vals: wantVals}, 2)
	if fmt.Sprint(got.Keys, got.Vals) != fmt.Sprint(wantIDs, wantVals) {
		t.Fatalf("sorted input came back as %v %v", got.Keys, got.Vals)
	}
	// Sorted input is copied (Load compacts its rows in place; the
	// caller's slices stay as they were).
	got.Vals[0] = 99
	if wantVals[0] != 7 {
		t.Fatal("sortForLoad returned the caller's slice")
	}
}
