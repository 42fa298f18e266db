package timeline

import (
	"slices"
	"sync"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
)

// storeFollowers reads the follower ordinals of author from the store,
// bypassing the cache.
func storeFollowers(t testing.TB, tl *Timeline, author uint64) []uint32 {
	t.Helper()
	aOrd, err := tl.ordOf(author)
	must(t, err)
	var out []uint32
	if aOrd == 0 {
		return nil
	}
	must(t, tl.followerChunks(aOrd, 0, func(bm *roaring.Bitmap) (bool, error) {
		for _, o := range bm.ToArray() {
			if o&0xffff != 0 {
				out = append(out, o)
			}
		}
		return true, nil
	}))
	return out
}

func cachedFollowers(t testing.TB, tl *Timeline, author uint64) ([]uint32, bool) {
	t.Helper()
	aOrd, err := tl.ordOf(author)
	must(t, err)
	l, hit, _, _ := tl.folCache.get(aOrd)
	return l, hit
}

func ordsOf(t testing.TB, tl *Timeline, users ...uint64) []uint32 {
	t.Helper()
	var out []uint32
	for _, u := range users {
		o, err := tl.ordOf(u)
		must(t, err)
		out = append(out, o)
	}
	slices.Sort(out)
	return out
}

// TestFollowerCacheInline: an inline publish caches its author's
// followers; a follow and an unfollow of the author drop the list, and
// the next publish delivers to the new follower and not to the old one;
// a read that missed the cache before a follow committed does not cache
// what it read (the follow commits between the read and the insert
// here); a reopen clears the cache.
func TestFollowerCacheInline(t *testing.T) {
	e := newEnv(t, Config{})
	e.inline, e.shared = 0, 0 // the defaults: inline and shared fan-outs
	e.reopen()
	tl := e.tl
	for _, u := range []uint64{10, 11} {
		_, err := tl.FollowMany(u, 1)
		must(t, err)
	}
	_, err := tl.MarkActiveMany(t.Context(), []uint64{10, 11, 12, 13})
	must(t, err)
	e.run()
	res, err := tl.Publish(1, 100)
	must(t, err)
	if res.Job != 0 {
		t.Fatalf("a fan-out to 2 ran as job %d", res.Job)
	}
	if l, hit := cachedFollowers(t, tl, 1); !hit || !slices.Equal(l, ordsOf(t, tl, 10, 11)) {
		t.Fatalf("after a publish the cache holds %v (hit %v), want the ordinals of 10 and 11", l, hit)
	}
	_, err = tl.FollowMany(12, 1)
	must(t, err)
	if l, hit := cachedFollowers(t, tl, 1); hit {
		t.Fatalf("a follow left %v cached", l)
	}
	_, err = tl.Publish(1, 101)
	must(t, err)
	if got := inboxPosts(t, tl, 12); !slices.Contains(got, 101) {
		t.Fatalf("the new follower's inbox = %v, want 101 in it", got)
	}
	_, err = tl.UnfollowMany(11, 1)
	must(t, err)
	if l, hit := cachedFollowers(t, tl, 1); hit {
		t.Fatalf("an unfollow left %v cached", l)
	}
	_, err = tl.Publish(1, 102)
	must(t, err)
	if got := inboxPosts(t, tl, 11); slices.Contains(got, 102) {
		t.Fatalf("the old follower's inbox = %v, has 102", got)
	}

	// A miss whose read a follow overtakes.
	aOrd, err := tl.ordOf(1)
	must(t, err)
	tl.folCache.clear() // the publish of 102 cached the list
	followed := false
	tl.testFolCacheMiss = func() {
		if followed {
			return
		}
		followed = true
		if _, err := tl.FollowMany(13, 1); err != nil {
			t.Error(err)
		}
	}
	l, err := tl.followersOf(aOrd)
	must(t, err)
	tl.testFolCacheMiss = nil
	if !followed {
		t.Fatal("the read did not miss the cache")
	}
	if want := ordsOf(t, tl, 10, 12); !slices.Equal(l, want) {
		t.Fatalf("the read before the follow = %v, want %v", l, want)
	}
	if l, hit := cachedFollowers(t, tl, 1); hit {
		t.Fatalf("the read the follow overtook cached %v", l)
	}
	_, err = tl.Publish(1, 103)
	must(t, err)
	if got := inboxPosts(t, tl, 13); !slices.Contains(got, 103) {
		t.Fatalf("inbox of 13 = %v, want 103 in it", got)
	}
	if l, hit := cachedFollowers(t, tl, 1); !hit || !slices.Equal(l, ordsOf(t, tl, 10, 12, 13)) {
		t.Fatalf("cache = %v (hit %v), want 10, 12, 13", l, hit)
	}
	e.reopen()
	tl = e.tl
	if l, hit := cachedFollowers(t, tl, 1); hit {
		t.Fatalf("a reopen kept %v", l)
	}
	e.check()
}

// TestFollowerCacheBounds: the cache holds at most its budget of
// ordinals (a list of 3 per shard here), a longer list is read and not
// cached, an author with more than maxCachedFollowers followers is never
// cached, and a disabled cache caches nothing; the lists read are the
// store's in every case.
func TestFollowerCacheBounds(t *testing.T) {
	for _, size := range []int{-1, 3 * fcacheShards} {
		e := newEnv(t, Config{})
		tl := e.tl
		tl.folCache.init(size)
		var edges []Edge
		for a := uint64(1); a <= 600; a++ {
			for k := range 1 + int(a%4) { // 1..4 followers: lists of 4 do not fit
				edges = append(edges, Edge{Follower: 10_000 + uint64(k), Followee: a})
			}
		}
		for u := uint64(20_000); u < 20_000+maxCachedFollowers+1; u++ {
			edges = append(edges, Edge{Follower: u, Followee: 700})
		}
		_, err := tl.LoadFollows(t.Context(), edges, nil)
		must(t, err)
		for round := range 2 {
			for _, a := range append(seq(1, 600), 700) {
				aOrd, err := tl.ordOf(a)
				must(t, err)
				got, err := tl.followersOf(aOrd)
				must(t, err)
				if want := storeFollowers(t, tl, a); !slices.Equal(got, want) {
					t.Fatalf("cache %d round %d: followers of %d = %v, want %v", size, round, a, got, want)
				}
			}
		}
		if n := tl.folCache.size(); size < 0 && n != 0 || size > 0 && n > size {
			t.Fatalf("cache %d holds %d ordinals", size, n)
		}
		for i := range tl.folCache.shards {
			for _, l := range tl.folCache.shards[i].m {
				if len(l) > 3 {
					t.Fatalf("cache %d: a list of %d was cached with a budget of %d", size, len(l), tl.folCache.perShard)
				}
			}
		}
		if size > 0 && tl.folCache.size() == 0 {
			t.Fatal("nothing was cached")
		}
	}
}

func seq(lo, hi uint64) []uint64 {
	var out []uint64
	for u := lo; u <= hi; u++ {
		out = append(out, u)
	}
	return out
}

// TestFollowerCacheConcurrent: followers of a few authors are followed
// and unfollowed by several goroutines while others read the authors'
// followers through the cache and publish; once they stop, every cached
// list equals the store's (a model: the set of edges each writer made),
// and every read returns the store's list.
func TestFollowerCacheConcurrent(t *testing.T) {
	e := newEnv(t, Config{})
	e.inline, e.shared = 0, 0
	e.reopen()
	tl := e.tl
	authors := []uint64{1, 2, 3}
	users := seq(100, 140)
	_, err := tl.MarkActiveMany(t.Context(), users)
	must(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	follows := map[Edge]bool{} // the model
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := newRand(uint64(w))
			for range 200 {
				// Each writer owns its users: the model's order is its own.
				u := users[w+4*rng.IntN(len(users)/4)]
				a := authors[rng.IntN(len(authors))]
				var err error
				follow := rng.IntN(3) != 0
				if follow {
					_, err = tl.FollowMany(u, a)
				} else {
					_, err = tl.UnfollowMany(u, a)
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				follows[Edge{u, a}] = follow
				mu.Unlock()
			}
		}()
	}
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			post := uint64(1_000_000 * (r + 1))
			for range 300 {
				a := authors[int(post)%len(authors)]
				post++
				if _, err := tl.Publish(a, post); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, a := range authors {
		aOrd, err := tl.ordOf(a)
		must(t, err)
		want := storeFollowers(t, tl, a)
		var model []uint64
		for _, u := range users {
			if follows[Edge{u, a}] {
				model = append(model, u)
			}
		}
		if m := ordsOf(t, tl, model...); !slices.Equal(want, m) {
			t.Fatalf("author %d: the store holds %v, the model %v", a, want, m)
		}
		if l, hit, _, _ := tl.folCache.get(aOrd); hit && !slices.Equal(l, want) {
			t.Fatalf("author %d: cached %v, the store holds %v", a, l, want)
		}
		got, err := tl.followersOf(aOrd)
		must(t, err)
		if !slices.Equal(got, want) {
			t.Fatalf("author %d: read %v, the store holds %v", a, got, want)
		}
	}
	e.run()
	e.check()
}
