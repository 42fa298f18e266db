package server

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tallydb/tally"
	"github.com/tallydb/tally/likes"
	"github.com/tallydb/tally/store"
)

// TestPackageCountersReserved: the counters timeline, unread and likes
// own are their private data. Before, a plain HINCRBY on users:34 made
// TL.USER report 1001 followers, HINCRBY users:34 ord 1 emptied
// TL.FOLLOWERS, DEL users:34 zeroed the post count, HINCRBY
// likes_video:2 likes 500 made LIKE.COUNTS disagree with LIKE.TOP, and
// TALLY.COUNTER LIST and INFO showed these counters as the user's. Now
// every counter command refuses them ("ERR tally: reserved ...") and
// changes nothing, and the lists show the user's counters only.
func TestPackageCountersReserved(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db, err := tally.Open(dir, &tally.Options{Store: &store.Options{Durability: store.NoSync, DisableBackground: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Timeline().Follow(1, 34); err != nil {
		t.Fatal(err)
	}
	if err := db.Likes().AddBusiness("video", likes.BusinessOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Likes().Like("video", 2, 1, 0); err != nil {
		t.Fatal(err)
	}
	if err := db.Unread().AddKind("mention", store.ColumnOptions{}); err != nil {
		t.Fatal(err)
	}
	mustSchema(t, db.Store())
	ts := startServerWith(t, db.Store(), dir, nil,
		DBCommands(db))
	t.Cleanup(func() { // runs before the server's cleanup closes the store (LIFO)
		if err := db.Check(); err != nil {
			t.Errorf("Check: %v", err)
		}
		for _, p := range db.Packages() {
			p.Close()
		}
	})
	rc := ts.client(t, nil)
	ctx := context.Background()

	before := db.Store().Stats()
	for _, args := range [][]any{
		{"HINCRBY", "users:34", "followers", 1000},
		{"HINCRBY", "users:34", "ord", 1},
		{"DEL", "users:34"},
		{"HSET", "users:34", "posts", 0},
		{"INCR", "users:34"},
		{"HGETALL", "users:34"},
		{"HINCRBY", "likes_video:2", "likes", 500},
		{"HINCRBY", "likes_received:1", "received", 5},
		{"HINCRBY", "unread_kinds:1", "mention", 5},
		{"HINCRBY", "unread_feed:1", "gen", 1},
		{"TALLY.MGET", "users", 34},
		{"TALLY.COLUMN", "ADD", "users", "extra"},
		{"TALLY.COUNTER", "ADD", "likes_photo"},
		{"TALLY.COUNTER", "ADD", "unread_kinds"},
		{"TALLY.INCR", "users", 34, "followers", 1000},
		{"TALLY.INCR", "likes_video", "2.likes", 500, "SOURCE", "q", "SEQ", 1},
		{"TALLY.SET", "users", 34, 0, 0},
		{"TALLY.GET", "users", 34},
		{"TALLY.DELETE", "users", 34},
		{"TALLY.COLUMN", "ADD", "likes_nosuch", "x"},
	} {
		err := rc.Do(ctx, args...).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "ERR tally: reserved: counter") {
			t.Errorf("%v: %v, want ERR tally: reserved", args, err)
		}
	}
	if after := db.Store().Stats(); after.LastSeq != before.LastSeq {
		t.Errorf("refused commands wrote: last_seq %d -> %d", before.LastSeq, after.LastSeq)
	}
	followers, err := rc.Do(ctx, "TL.USER", 34).Result()
	if err != nil || !strings.Contains(fmt.Sprint(followers), "followers 1 ") {
		t.Errorf("TL.USER 34: %v %v", followers, err)
	}
	list, err := rc.Do(ctx, "TALLY.COUNTER", "LIST").StringSlice()
	if err != nil || len(list) != 3 || strings.Contains(strings.Join(list, " "), "users") {
		t.Errorf("TALLY.COUNTER LIST = %q, %v; want the user's 3 counters only", list, err)
	}
	info, err := rc.Info(ctx, "tally").Result()
	if err != nil || !strings.Contains(info, "counters:3\r\n") || !strings.Contains(info, "timeline_counter_users:") ||
		!strings.Contains(info, "likes_counter_likes_video:") {
		t.Errorf("INFO tally:\n%s %v", info, err)
	}
	// The user's own counter still works.
	if n, err := rc.HIncrBy(ctx, "posts:1", "likes", 2).Result(); err != nil || n != 2 {
		t.Errorf("HINCRBY posts:1: %d %v", n, err)
	}
}
