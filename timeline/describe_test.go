package timeline

import "testing"

func TestDescribeJob(t *testing.T) {
	e := newEnv(t, Config{})
	if _, err := e.tl.Follow(1, 21); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		kind string
		key  []byte
		want string
	}{
		{jobPair, pairKey(1, 21), "backfill of user 21's posts into user 1's home (follow)"},
		{jobPair, pairKey(1, 22), "removal of user 22's posts from user 1's home (unfollow)"},
		{jobFanout, fanoutKey(9), "removal of unpublished post 9 from homes"},
		{jobExpire, []byte("expire"), "expiry of inactive inboxes"},
	} {
		got, ok := e.tl.DescribeJob(c.kind, c.key)
		if !ok || got != c.want {
			t.Errorf("DescribeJob(%s, %x) = %q %v, want %q", c.kind, c.key, got, ok, c.want)
		}
	}
	if _, ok := e.tl.DescribeJob("likes-prune", nil); ok {
		t.Error("described another package's job")
	}
}
