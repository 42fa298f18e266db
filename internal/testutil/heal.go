package testutil

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
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

// FailFirstReload returns a package's test reload hook (the testReload
// fields of timeline, unread and likes) that fails the first reload after
// a reopen with err, and turns fault on as it does, so the disk (and the
// healer's probe) fails again and the store stays failed until the test
// turns fault off. Later reloads proceed.
func FailFirstReload(fault *errorfs.Toggle, err error) func() error {
	var calls atomic.Int32
	return func() error {
		if calls.Add(1) == 1 {
			fault.On()
			return err
		}
		return nil
	}
}

// UntilRefused waits until writable (store.DB.Writable) returns an error
// that wraps cause: the store failed again after a reopen whose reload
// failed with cause.
func UntilRefused(t testing.TB, writable func() error, cause error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := writable()
		if errors.Is(err, cause) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store does not refuse writes with %v: Writable is %v", cause, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
