package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/tallydb/tally/internal/testutil"
	"github.com/tallydb/tally/store"
)

// TestServeHealsFullDisk: a server over a store opened with
// ReopenOnFailure (as tally serve opens it) answers writes with an error
// while the disk is full (here: the WAL and the probe file get ENOSPC),
// keeps answering reads, and once the disk has room answers writes again
// without a restart, through the counter handles it cached before; INFO
// counts the reopen. Every acknowledged increment is there.
func TestServeHealsFullDisk(t *testing.T) {
	full := testutil.FullWAL(true)
	db, err := store.Open("db", &store.Options{FS: errorfs.Wrap(vfs.NewMem(), full), DisableBackground: true, ReopenOnFailure: true})
	if err != nil {
		t.Fatal(err)
	}
	mustSchema(t, db)
	ts := startServer(t, db, "db", nil)
	c := ts.client(t, nil)
	ctx := context.Background()
	acked := int64(0)
	for range 10 {
		if err := c.HIncrBy(ctx, "posts:1", "likes", 1).Err(); err != nil {
			t.Fatal(err)
		}
		acked++
	}
	full.On()
	maybe := int64(0)
	err = c.HIncrBy(ctx, "posts:1", "likes", 1).Err()
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("HINCRBY on a full disk: %v (want a disk full error)", err)
	}
	maybe++
	for range 3 {
		if err := c.HIncrBy(ctx, "posts:1", "likes", 1).Err(); err == nil {
			t.Fatal("HINCRBY succeeded on a full disk")
		}
		v, err := c.HGet(ctx, "posts:1", "likes").Int64()
		if err != nil || v < acked || v > acked+maybe {
			t.Fatalf("HGET on a full disk: %d, %v (acknowledged %d)", v, err, acked)
		}
	}
	full.Off()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := c.HIncrBy(ctx, "posts:1", "likes", 1).Err()
		if err == nil {
			acked++
			break
		}
		if msg := err.Error(); !strings.Contains(msg, "disk full") && !strings.Contains(msg, "store failed") {
			t.Fatalf("HINCRBY while the store heals: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes still refused %v after the disk has room: %v", 30*time.Second, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range 5 {
		if err := c.HIncrBy(ctx, "posts:1", "likes", 1).Err(); err != nil {
			t.Fatal(err)
		}
		acked++
	}
	v, err := c.HGet(ctx, "posts:1", "likes").Int64()
	if err != nil || v < acked || v > acked+maybe {
		t.Fatalf("HGET after the heal: %d, %v (acknowledged %d, one uncertain)", v, err, acked)
	}
	info, err := c.Info(ctx, "persistence").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "tally_store_reopens:1\r\n") {
		t.Fatalf("INFO persistence does not count the reopen:\n%s", info)
	}
}
