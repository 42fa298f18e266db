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

type followeeCache struct {
	perShard int // ids a shard holds at most; 0: the cache is off
	shards   [fcacheShards]fcacheShard
}

type fcacheShard struct {
	mu      sync.Mutex
	m       map[uint32][]uint64
	ids     int    // ids held
	gen     uint64 // bumped by every release and clear
	holding int    // writers between hold and release
	_       [24]byte
}

func (c *followeeCache) init(maxIDs int) {
	if maxIDs <= 0 {
		c.perShard = 0
		return
	}
	c.perShard = max(maxIDs/fcacheShards, 1)
	for i := range c.shards {
		c.shards[i].m = map[uint32][]uint64{}
	}
}

func (c *followeeCache) shard(ord uint32) *fcacheShard {
	return &c.shards[ord%fcacheShards]
}

// hold starts a rewrite of ord's list (before its commit).
func (c *followeeCache) hold(ord uint32) {
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
func (c *followeeCache) release(ord uint32) {
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
func (c *followeeCache) holdMany(ords []uint32) func() {
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
func (c *followeeCache) clear() {
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
func (c *followeeCache) len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += len(s.m)
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
	s := c.shard(ord)
	s.mu.Lock()
	if l, ok := s.m[ord]; ok {
		s.mu.Unlock()
		return l, dst, buf, nil
	}
	gen, holding := s.gen, s.holding
	s.mu.Unlock()
	dst, buf, err = t.followeesOf(ord, dst, buf)
	if err != nil || holding > 0 || len(dst) > c.perShard {
		return dst, dst, buf, err
	}
	if t.testFcacheMiss != nil {
		t.testFcacheMiss()
	}
	s.mu.Lock()
	if _, ok := s.m[ord]; !ok && s.gen == gen && s.holding == 0 {
		for k, l := range s.m { // evict at random until the list fits
			if s.ids+len(dst) <= c.perShard {
				break
			}
			s.ids -= len(l)
			delete(s.m, k)
		}
		s.m[ord] = slices.Clone(dst)
		s.ids += len(dst)
	}
	s.mu.Unlock()
	return dst, dst, buf, nil
}
