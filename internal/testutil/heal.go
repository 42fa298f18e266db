package testutil

import (
	"errors"
	"testing"
	"time"
)

// UntilHealed retries op, a write made after a store failed and while it
// heals itself in place (store.Options.ReopenOnFailure), until op
// succeeds. Every error before then must be failed (the store's
// ErrFailed, passed in to keep this package free of store); another
// error, or 30 s without success, fails the test, as does, when
// generation is not nil, a generation of 0 afterwards (the store healed
// without a reopen).
func UntilHealed(t testing.TB, what string, failed error, generation func() uint64, op func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := op()
		if err == nil {
			break
		}
		if !errors.Is(err, failed) || time.Now().After(deadline) {
			t.Fatalf("%s after the disk has room: %v", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if generation != nil && generation() == 0 {
		t.Fatal("the store healed without a reopen")
	}
}
