package likes

// The ordinal cache: user → ordinal without a Pebble Get.
//
// A transition on an item whose sets are roaring (a popular item: most
// likes under Zipf) needs the user's ordinal, and looking it up in
// likes-ord is a Pebble Get of a present key that, against a store of
// millions of likes and the store's 16 MiB block cache, reads its index
// and data blocks from the file: 6.7 of the 25.6 µs a transition spent in
// submit, the largest single cost (BenchmarkLike nosync, 1M likes;
// bench/RESULTS.md "User ordinals: a cache, not a counter").
//
// An ordinal never changes once it is in the store, so a cache filled from
// what the store holds is coherent: New warms it with the ordinals its
// key filter scan meets (likes-ord is one of the families it reads;
// with more users than entries, a set keeps the last two it met), a bulk
// load adds the ordinals of its users once its batches are durable, and
// entries are added after a lookup found
// the ordinal in likes-ord, and after a group's batch writing a new one
// committed (never for a pending ordinal, a failed commit, or a duplicate
// of a re-applied entry, whose ordinals go back to the allocator). The one
// event that can take a visible ordinal away is a store reopen (a write
// visible before its fsync failed): reloadAfterReopen clears the cache,
// under loadMu, so no group fills it across the reopen. Check verifies
// every entry against likes-ord.
//
// Shape: Options.OrdinalCacheBytes (default 1 MiB) of 12-byte entries
// (user u64, ordinal+1 u32), in 64 shards of 2-way sets, each shard behind
// its own mutex (an uncontended lock and two compares, against the Get's
// microseconds; not measured apart: at 16 MiB ordAlloc.get is 1.0 µs a
// like, misses included). A miss
// replaces the set's older way. It is bounded rather than holding every
// user because every byte of it is heap a like pays for: likebench (2M
// likes, 1M users, 609k of them with ordinals) has 1 byte a like left
// under issue 10's memory aim, and a keep-hot counter of every user's
// ordinal (the first candidate) costs 10.45 bytes a user there, 3.2 a
// like. With users drawn uniformly, as by the benchmarks' workload, the
// hit rate is about the cache's entries over the users with ordinals;
// real traffic, where active users like most, hits more.

import (
	"sync"
	"sync/atomic"
)

// DefaultOrdinalCacheBytes is the default Options.OrdinalCacheBytes.
const DefaultOrdinalCacheBytes = 1 << 20

const (
	ordCacheShards     = 64
	ordCacheEntryBytes = 12 // user u64 + ordinal+1 u32
	ordCacheWays       = 2
)

type ordCache struct {
	shards [ordCacheShards]ordShard
	sets   uint64 // sets per shard
	hits   atomic.Int64
	misses atomic.Int64
}

type ordShard struct {
	mu    sync.Mutex
	users []uint64 // ordCacheWays per set; way 0 the newer
	ords  []uint32 // ordinal+1; 0: empty
	_     [40]byte // keep neighbouring shards' mutexes apart
}

// newOrdCache returns a cache of about bytes, or nil for bytes < 0 or too
// few for one set per shard.
func newOrdCache(bytes int64) *ordCache {
	sets := bytes / (ordCacheShards * ordCacheWays * ordCacheEntryBytes)
	if sets < 1 {
		return nil
	}
	c := &ordCache{sets: uint64(sets)}
	for i := range c.shards {
		c.shards[i].users = make([]uint64, sets*ordCacheWays)
		c.shards[i].ords = make([]uint32, sets*ordCacheWays)
	}
	return c
}

// slot returns user's shard and the index of its set's first way.
func (c *ordCache) slot(user uint64) (*ordShard, uint64) {
	h := user * 0x9E3779B97F4A7C15
	h ^= h >> 31
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 29
	s := &c.shards[h%ordCacheShards]
	set := ((h >> 32) * c.sets) >> 32 // h's high 32 bits scaled to [0, sets)
	return s, set * ordCacheWays
}

// get returns user's ordinal if the cache holds it.
func (c *ordCache) get(user uint64) (uint32, bool) {
	if c == nil {
		return 0, false
	}
	s, i := c.slot(user)
	s.mu.Lock()
	for w := range uint64(ordCacheWays) {
		if o1 := s.ords[i+w]; o1 != 0 && s.users[i+w] == user {
			s.mu.Unlock()
			c.hits.Add(1)
			return o1 - 1, true
		}
	}
	s.mu.Unlock()
	c.misses.Add(1)
	return 0, false
}

// put records that user's ordinal in the store is ord.
func (c *ordCache) put(user uint64, ord uint32) {
	if c == nil {
		return
	}
	s, i := c.slot(user)
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range uint64(ordCacheWays) {
		if s.ords[i+w] != 0 && s.users[i+w] == user {
			return
		}
	}
	// The newer way moves to the older; user takes the newer.
	s.users[i+1], s.ords[i+1] = s.users[i], s.ords[i]
	s.users[i], s.ords[i] = user, ord+1
}

// clear empties the cache (after a store reopen).
func (c *ordCache) clear() {
	if c == nil {
		return
	}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		clear(s.ords)
		s.mu.Unlock()
	}
}

// each calls fn with every entry (Check; no group runs).
func (c *ordCache) each(fn func(user uint64, ord uint32) error) error {
	if c == nil {
		return nil
	}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for j, o1 := range s.ords {
			if o1 == 0 {
				continue
			}
			if err := fn(s.users[j], o1-1); err != nil {
				s.mu.Unlock()
				return err
			}
		}
		s.mu.Unlock()
	}
	return nil
}

// bytes returns the cache's size in bytes.
func (c *ordCache) bytes() int64 {
	if c == nil {
		return 0
	}
	return int64(c.sets) * ordCacheShards * ordCacheWays * ordCacheEntryBytes
}

func (c *ordCache) hitCount() int64 {
	if c == nil {
		return 0
	}
	return c.hits.Load()
}

func (c *ordCache) missCount() int64 {
	if c == nil {
		return 0
	}
	return c.misses.Load()
}
