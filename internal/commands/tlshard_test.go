package commands

import (
	"context"
	"errors"
	"fmt"
	"testing"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/timeline"
)

// runRESP parses, checks and runs a RESP request of the table.
func runRESP(t *testing.T, db *tallydb.DB, argv ...string) (any, error) {
	t.Helper()
	var c *Command
	for _, x := range All() {
		if x.RESP == argv[0] {
			c = x
		}
	}
	if c == nil {
		t.Fatalf("no command %s", argv[0])
	}
	in, err := c.ParseRESP(respArgs(argv[1:]...))
	if err == nil && c.Check != nil {
		err = c.Check(in)
	}
	if err != nil {
		return nil, err
	}
	return c.Run(context.Background(), db, in)
}

// twoShards is a timeline.Remote: users 5, 7 and 9 live on shard 2, the
// others on this shard, 1. Sent messages are recorded, not delivered.
type twoShards struct{ sent [][]string }

func (r *twoShards) Local(u uint64) bool { return r.ShardOf(u) == 1 }
func (r *twoShards) ShardOf(u uint64) uint32 {
	if u == 5 || u == 7 || u == 9 {
		return 2
	}
	return 1
}
func (r *twoShards) Send(_ *store.Batch, shard uint32, argv [][]byte) error {
	m := []string{fmt.Sprint(shard)}
	for _, a := range argv {
		m = append(m, string(a))
	}
	r.sent = append(r.sent, m)
	return nil
}

// TestTLShardMessages: the internal cross-shard messages parse, refuse
// bad arguments with named errors before running, refuse to run on an
// unsharded timeline, and run their timeline methods.
func TestTLShardMessages(t *testing.T) {
	one, err := tallydb.Open(t.TempDir(), &tallydb.Options{Store: &store.Options{Durability: store.NoSync, DisableBackground: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	if _, err := runRESP(t, one, "TL.XPUBLISH", "5", "0", "0", "0", "10"); !errors.Is(err, timeline.ErrUnsharded) {
		t.Fatalf("a message on one shard: %v", err)
	}
	remote := &twoShards{}
	db, err := tallydb.Open(t.TempDir(), &tallydb.Options{Store: &store.Options{Durability: store.NoSync, DisableBackground: true},
		Timeline: &timeline.Options{Remote: remote}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, tc := range []struct {
		argv []string
		want error
	}{
		{[]string{"TL.XFOLLOWER", "1", "2", "0", "1"}, timeline.ErrBadMessage},
		{[]string{"TL.XFOLLOWER", "1", "2", "2", "7"}, timeline.ErrBadMessage},
		{[]string{"TL.XFOLLOWER", "1", "1", "2", "1"}, timeline.ErrSelfFollow},
		{[]string{"TL.XFOLLOWER", "1", "2", "2"}, ErrUsage},
		{[]string{"TL.XBACKFILL", "5", "2", "10", "0", "0"}, ErrUsage},
		{[]string{"TL.XBACKFILL", "5", "1", "10", "0", "0", "0", "20", "0", "0", "0"}, timeline.ErrBadMessage},
		{[]string{"TL.XBACKFILL", "5", "2", "10", "0", "0", "0", "20", "0", "0", "0"}, timeline.ErrBadMessage},
		{[]string{"TL.XBACKFILL", "5", "1", "10", "1", "0", "0"}, timeline.ErrBadID},
		{[]string{"TL.XBACKFILL", "5", "1", "10", "300", "0", "0"}, timeline.ErrBadMessage},
		{[]string{"TL.XPUBLISH", "5", "0", "3", "0", "10"}, timeline.ErrBadMessage},
		{[]string{"TL.XPUBLISH", "5", "1", "30", "6", "10"}, timeline.ErrBadMessage},
		{[]string{"TL.XPUBLISH", "5", "0", "0", "0", "0"}, timeline.ErrBadID},
		{[]string{"TL.XUNPUBLISH", "5"}, ErrUsage},
		{[]string{"TL.XHIDE", "5", "5", "1"}, timeline.ErrSelfMute},
		{[]string{"TL.XHIDE", "5", "6", "2"}, timeline.ErrBadMessage},
		{[]string{"TL.XSUBSCRIBE", "8", "10", "0"}, timeline.ErrBadMessage},
		{[]string{"TL.XSUBSCRIBE", "8", "0", "2"}, timeline.ErrBadID},
		{[]string{"TL.XGONE", "5", "0"}, timeline.ErrBadID},
		{[]string{"TL.XGONE", "5"}, ErrUsage},
	} {
		if _, err := runRESP(t, db, tc.argv...); !errors.Is(err, tc.want) {
			t.Errorf("%v: %v, want %v", tc.argv, err, tc.want)
		}
	}
	tl := db.Timeline()
	if info, err := tl.User(5); err != nil || info.Posts != 0 {
		t.Fatalf("after refusals: %+v %v", info, err)
	}
	for _, tc := range []struct {
		argv []string
		want int64
	}{
		{[]string{"TL.XBACKFILL", "5", "3", "20", "0", "0", "0", "10", "0", "0", "0"}, 2},
		{[]string{"TL.XPUBLISH", "5", "1", "10", "5", "30"}, 1},
		{[]string{"TL.XPUBLISH", "5", "1", "10", "5", "30"}, 0},
		{[]string{"TL.XUNPUBLISH", "5", "20"}, 1},
		// No repeat: TL.XFOLLOWER applies the change without looking the
		// edge up (the stream sends each change once; see
		// timeline.RemoteFollower).
		{[]string{"TL.XFOLLOWER", "8", "9", "2", "1"}, 1},
		{[]string{"TL.XHIDE", "5", "6", "1"}, 1},
		{[]string{"TL.XBACKFILL", "7", "0"}, 0},
		{[]string{"TL.XSUBSCRIBE", "8", "40", "2"}, 0}, // not published: TL.XGONE to 2 at once
		{[]string{"TL.XGONE", "9", "50"}, 1},
		{[]string{"TL.XGONE", "9", "50"}, 0},
	} {
		got, err := runRESP(t, db, tc.argv...)
		if err != nil || got.(int64) != tc.want {
			t.Errorf("%v: %v %v, want %d", tc.argv, got, err, tc.want)
		}
	}
	// Count 3 installed, one published, one unpublished.
	if info, err := tl.User(5); err != nil || info.Posts != 3 {
		t.Fatalf("author 5: %+v %v", info, err)
	}
	if info, err := tl.User(8); err != nil || info.Followers != 1 {
		t.Fatalf("author 8: %+v %v", info, err)
	}
	// Shard 2 gained its first follower of 8: a backfill of 8's (no)
	// posts; post 40 of 8 is not published.
	if fmt.Sprint(remote.sent) != "[[2 TL.XBACKFILL 8 0] [2 TL.XGONE 8 40]]" {
		t.Errorf("sent %v", remote.sent)
	}
	if _, published, err := tl.Owner(50); err != nil || published {
		t.Errorf("post 50: published %v %v", published, err)
	}
	if tl.IsVisible(6, 5) {
		t.Error("hide not applied")
	}
	if err := tl.Check(); err != nil {
		t.Fatal(err)
	}
}
