package timeline

import (
	"context"
	"slices"
	"sync"
	"testing"
)

// homePosts returns the posts of user's first page of 50.
func homePosts(t *testing.T, tl *Timeline, user uint64) []uint64 {
	t.Helper()
	p, err := tl.Home(user, "", 50)
	must(t, err)
	var out []uint64
	for _, e := range p.Entries {
		out = append(out, e.Post)
	}
	return out
}

// TestFolloweeCacheStaleRead: a page that read the followee list from the
// store before a follow committed must not leave that old list in the
// cache: the next page shows the new followee's post (pulled while its
// backfill is pending). Without the generation check the old list stays
// cached and the post never shows.
func TestFolloweeCacheStaleRead(t *testing.T) {
	e := newEnv(t, Config{})
	tl := e.tl
	_, err := tl.FollowMany(1, 10)
	must(t, err)
	_, err = tl.Publish(10, 100)
	must(t, err)
	_, err = tl.Publish(20, 200)
	must(t, err)
	e.run()
	if got := homePosts(t, tl, 1); !slices.Equal(got, []uint64{100}) {
		t.Fatalf("home = %v, want [100]", got)
	}
	ord, err := tl.ordOf(1)
	must(t, err)
	if _, ok := tl.fcache.shard(ord).m[ord]; !ok {
		t.Fatal("the page did not cache the reader's followee list")
	}
	// A write drops the cached list.
	_, err = tl.Unfollow(1, 30) // not followed: no write
	must(t, err)
	_, err = tl.FollowMany(1, 30)
	must(t, err)
	if _, ok := tl.fcache.shard(ord).m[ord]; ok {
		t.Fatal("a follow left the reader's old list cached")
	}
	// Now a page misses, reads [10 30], and a follow of 20 commits
	// before the page inserts what it read.
	followed := false
	tl.testFcacheMiss = func() {
		if followed {
			return
		}
		followed = true
		if _, err := tl.FollowMany(1, 20); err != nil {
			t.Error(err)
		}
	}
	if got := homePosts(t, tl, 1); !slices.Equal(got, []uint64{100}) {
		t.Fatalf("home during the follow = %v, want [100]", got)
	}
	tl.testFcacheMiss = nil
	if !followed {
		t.Fatal("the page did not miss the cache")
	}
	if got := homePosts(t, tl, 1); !slices.Equal(got, []uint64{200, 100}) {
		t.Fatalf("home after the follow = %v, want [200 100] (a stale followee list was cached)", got)
	}
	e.run()
	if got := homePosts(t, tl, 1); !slices.Equal(got, []uint64{200, 100}) {
		t.Fatalf("home after the backfill = %v, want [200 100]", got)
	}
}

// TestFolloweeCacheBounds: the cache holds at most its budget of ids
// (here one list of 3 per shard), a list larger than a shard's budget is
// not cached, and a disabled cache caches nothing; pages are right in
// every case.
func TestFolloweeCacheBounds(t *testing.T) {
	for _, size := range []int{-1, 3 * fcacheShards} {
		e := newEnv(t, Config{})
		tl := e.tl
		tl.fcache.init(size)
		for u := uint64(1); u <= 600; u++ {
			n := 1 + int(u%4) // 1..4 followees: lists of 4 do not fit
			for k := range n {
				_, err := tl.FollowMany(u, 1000+uint64(k))
				must(t, err)
			}
		}
		for k := range 4 {
			_, err := tl.Publish(1000+uint64(k), 5000+uint64(k))
			must(t, err)
		}
		e.run()
		for round := range 2 {
			for u := uint64(1); u <= 600; u++ {
				n := 1 + int(u%4)
				got := homePosts(t, tl, u)
				if len(got) != n {
					t.Fatalf("cache %d round %d: home of %d = %v, want %d posts", size, round, u, got, n)
				}
			}
		}
		held := 0
		for i := range tl.fcache.shards {
			s := &tl.fcache.shards[i]
			ids := 0
			for _, l := range s.m {
				if len(l) == 4 {
					t.Fatalf("cache %d: a list of 4 was cached with a budget of %d", size, tl.fcache.perShard)
				}
				ids += len(l)
			}
			if ids != s.ids || ids > max(tl.fcache.perShard, 0) {
				t.Fatalf("cache %d: shard %d holds %d ids (counted %d), budget %d", size, i, ids, s.ids, tl.fcache.perShard)
			}
			held += len(s.m)
		}
		if (size < 0) != (held == 0) {
			t.Fatalf("cache %d: %d lists cached", size, held)
		}
	}
}

// TestFolloweeCacheConcurrent: readers page while writers follow and
// unfollow; each writer reads its own user's home after each change and
// must see exactly its followees' posts (read your writes through the
// cache), and a final Check passes.
func TestFolloweeCacheConcurrent(t *testing.T) {
	e := newEnv(t, Config{})
	tl := e.tl
	const authors = 8
	for a := uint64(1); a <= authors; a++ {
		_, err := tl.Publish(100+a, 1000+a)
		must(t, err)
	}
	e.run()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := tl.Home(uint64(1+(r+i)%4), "", 20); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	var writers sync.WaitGroup
	for w := range 4 {
		user := uint64(1 + w)
		writers.Add(1)
		go func() {
			defer writers.Done()
			rng := newRand(uint64(w))
			follows := map[uint64]bool{}
			for range 150 {
				a := 101 + rng.Uint64N(authors)
				var err error
				if follows[a] {
					_, err = tl.Unfollow(user, a)
				} else {
					_, err = tl.FollowMany(user, a)
				}
				if err != nil {
					t.Error(err)
					return
				}
				follows[a] = !follows[a]
				var want []uint64
				for x := uint64(101 + authors - 1); x >= 101; x-- {
					if follows[x] {
						want = append(want, 1000+x-100)
					}
				}
				if got := homePosts(t, tl, user); !slices.Equal(got, want) {
					t.Errorf("user %d: home %v, want %v", user, got, want)
					return
				}
			}
		}()
	}
	writers.Wait()
	close(stop)
	wg.Wait()
	if err := tl.db.RunJobs(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	e.check()
}
