package bench

import (
	"context"
	"math"
	"testing"
	"time"
)

// TestRunUnread runs the unread comparison at toy size: every figure is
// measured (Redis's when redis-server is installed), and RunUnread's own
// cross-check has found tally's and Redis's feeds equal.
func TestRunUnread(t *testing.T) {
	cfg := UnreadConfig{Dir: t.TempDir(), CountUsers: 2000, FeedUsers: 60, Follows: 20, Authors: 500, Duration: 30 * time.Millisecond, Clients: 2}
	rows, err := RunUnread(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	redis := RedisSkip() == ""
	for _, r := range rows {
		if math.IsNaN(r.Tally) || redis && math.IsNaN(r.Redis) {
			t.Errorf("%s: tally %v, redis %v: not measured", r.What, r.Tally, r.Redis)
		}
	}
	if len(rows) < 15 {
		t.Fatalf("%d rows", len(rows))
	}
	t.Log("\n" + UnreadTable(rows))
}
