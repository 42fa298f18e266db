package timeline

// The followee-list cache of page reads.
//
// A page needs the reader's followee list (to drop unfollowed authors'
// entries and to know whom to pull), and reading it from tl_followees was
// a Pebble Get and a decode per page: 23% of a page's CPU in the
// timelinebench profile of 2026-11-24 (300,000 users). Page readers keep
// the decoded lists of the users they served here instead, bounded in
// ids; writers of tl_followees invalidate.
//
// Staleness. Every writer of a followee list holds the list's shard
// (hold) from before its commit until after it (release). While a shard
// is held, readers bypass the cache and read the store, exactly as with
// no cache. release drops the cached list and bumps the shard's
// generation, so a read that started before (and may have read the old
// list from the store) cannot insert it afterwards: an insert needs the
// generation it saw at its miss, and no hold. A reader therefore sees
// the list the store held at some point during its call, as without the
// cache. A store reopen clears the cache (loadState).

import (
	"slices"
	"sync"
)

// DefaultFolloweeCache is the default of Options.FolloweeCache: 4M ids,
// 32 MiB of lists (the followee lists of 200,000 readers following 20
// accounts each).
const DefaultFolloweeCache = 4 << 20

// fcacheShards is the number of shards of the cache (a power of two).
const fcacheShards = 256

// listCache keeps sorted lists keyed by user ordinal, bounded in
// elements: the followee lists of page readers (followeeCache) and the
// follower ordinals of small authors (followerCache, follower_cache.go).
type listCache[T uint32 | uint64] struct {
	perShard int // ids a shard holds at most; 0: the cache is off
	shards   [fcacheShards]fcacheShard[T]
}

type followeeCache = listCache[uint64]

type fcacheShard[T uint32 | uint64] struct {
	mu      sync.Mutex
	m       map[uint32][]T
	ids     int    // ids held
	gen     uint64 // bumped by every release and clear
	holding int    // writers between hold and release
	_       [24]byte
}

func (c *listCache[T]) init(maxIDs int) {
	if maxIDs <= 0 {
		c.perShard = 0
		return
	}
	c.perShard = max(maxIDs/fcacheShards, 1)
	for i := range c.shards {
		c.shards[i].m = map[uint32][]T{}
	}
}

func (c *listCache[T]) shard(ord uint32) *fcacheShard[T] {
	return &c.shards[ord%fcacheShards]
}

// hold starts a rewrite of ord's list (before its commit).
func (c *listCache[T]) hold(ord uint32) {
	if c.perShard == 0 {
		return
	}
	s := c.shard(ord)
	s.mu.Lock()
	s.holding++
	s.mu.Unlock()
}

// release ends a rewrite of ord's list (after its commit, failed or not):
// the cached list goes, and reads begun before cannot insert theirs.
func (c *listCache[T]) release(ord uint32) {
	if c.perShard == 0 {
		return
	}
	s := c.shard(ord)
	s.mu.Lock()
	s.holding--
	s.gen++
	if l, ok := s.m[ord]; ok {
		s.ids -= len(l)
		delete(s.m, ord)
	}
	s.mu.Unlock()
}

// holdMany holds the lists of ords (each once) and returns the function
// that releases them.
func (c *listCache[T]) holdMany(ords []uint32) func() {
	if c.perShard == 0 || len(ords) == 0 {
		return func() {}
	}
	os := slices.Clone(ords)
	slices.Sort(os)
	os = slices.Compact(os)
	for _, o := range os {
		c.hold(o)
	}
	return func() {
		for _, o := range os {
			c.release(o)
		}
	}
}

// clear drops every cached list; reads begun before cannot insert theirs.
func (c *listCache[T]) clear() {
	if c.perShard == 0 {
		return
	}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		clear(s.m)
		s.ids = 0
		s.gen++
		s.mu.Unlock()
	}
}

// len returns the number of cached lists (tests, stats).
func (c *listCache[T]) len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// get returns ord's cached list, which nobody modifies (lists are
// replaced, never changed), or, on a miss, the shard's generation and
// whether a list read now may be put (no writer holds the shard).
func (c *listCache[T]) get(ord uint32) (l []T, hit bool, gen uint64, puttable bool) {
	s := c.shard(ord)
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.m[ord]; ok {
		return l, true, 0, false
	}
	return nil, false, s.gen, s.holding == 0
}

// put caches a copy of l, read from the store after a miss that returned
// gen, if no writer released or holds the shard since, evicting lists at
// random until it fits; a list longer than a shard holds is not cached.
func (c *listCache[T]) put(ord uint32, gen uint64, l []T) {
	if len(l) > c.perShard {
		return
	}
	s := c.shard(ord)
	s.mu.Lock()
	if _, ok := s.m[ord]; !ok && s.gen == gen && s.holding == 0 {
		for k, l2 := range s.m { // evict at random until the list fits
			if s.ids+len(l) <= c.perShard {
				break
			}
			s.ids -= len(l2)
			delete(s.m, k)
		}
		s.m[ord] = slices.Clone(l)
		s.ids += len(l)
	}
	s.mu.Unlock()
}

// size returns the elements the cache holds (tests).
func (c *listCache[T]) size() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += s.ids
		s.mu.Unlock()
	}
	return n
}

// cachedFolloweesOf is followeesOf through the cache. On a hit list is the
// cache's own list, which nobody modifies (lists are replaced, never
// changed): the caller must not modify it either. On a miss it is dst
// (reused), read from the store with buf (reused).
func (t *Timeline) cachedFolloweesOf(ord uint32, dst []uint64, buf []byte) (list, dstOut []uint64, bufOut []byte, err error) {
	c := &t.fcache
	if c.perShard == 0 || ord == 0 {
		dst, buf, err = t.followeesOf(ord, dst, buf)
		return dst, dst, buf, err
	}
	l, hit, gen, puttable := c.get(ord)
	if hit {
		return l, dst, buf, nil
	}
	dst, buf, err = t.followeesOf(ord, dst, buf)
	if err != nil || !puttable || len(dst) > c.perShard {
		return dst, dst, buf, err
	}
	if t.testFcacheMiss != nil {
		t.testFcacheMiss()
	}
	c.put(ord, gen, dst)
	return dst, dst, buf, nil
}
