package server

import (
	"slices"
	"testing"
)

// TestRowKeys: a row command's keys are COUNTER:ID, an ID.COLUMN argument
// keyed by its row (the shard of HINCRBY COUNTER:ID), so TALLY.INCR posts
// 5.likes and HINCRBY posts:5 likes reach the same shard.
func TestRowKeys(t *testing.T) {
	args := [][]byte{[]byte("TALLY.GET"), []byte("posts"), []byte("5.likes"), []byte("6"), []byte("7.x.y")}
	var got []string
	rowKeys(1, 2, true)(args, func(k []byte) { got = append(got, string(k)) })
	if want := []string{"posts:5", "posts:6", "posts:7"}; !slices.Equal(got, want) {
		t.Fatalf("keys %q, want %q", got, want)
	}
	got = nil
	rowKeys(1, 2, false)(args, func(k []byte) { got = append(got, string(k)) })
	if want := []string{"posts:5"}; !slices.Equal(got, want) {
		t.Fatalf("keys %q, want %q", got, want)
	}
	if Slot([]byte("posts:5")) == Slot([]byte("posts:5.likes")) {
		t.Fatal("the test needs slots that differ")
	}
}
