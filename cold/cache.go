package cold

import (
	"sync"
	"sync/atomic"
)

// Cache holds decoded blocks of all ranges, bounded in bytes. It is split
// into shards, each with its own mutex and LRU list, so concurrent readers
// rarely contend. Entries are keyed by (range id, block number); the range
// id is chosen by the store and must not be reused for different contents
// (give a re-sealed range a new id, or call Evict).
//
// A nil *Cache is valid and caches nothing.
type Cache struct {
	shards    [cacheShards]cacheShard
	hits      atomic.Uint64
	misses    atomic.Uint64
	evictions atomic.Uint64
}

const cacheShards = 16

type cacheKey struct {
	id    uint64
	block uint32
}

type cacheEntry struct {
	key        cacheKey
	blk        *Block
	size       int64
	prev, next *cacheEntry
}

type cacheShard struct {
	max int64
	mu  struct {
		sync.Mutex
		m     map[cacheKey]*cacheEntry
		lru   cacheEntry // sentinel: lru.next is most recent
		bytes int64
	}
}

// CacheStats is a snapshot of a Cache's counters.
type CacheStats struct {
	Hits, Misses, Evictions uint64
	Bytes                   int64 // charged bytes currently held
	Entries                 int
}

// NewCache returns a cache holding at most maxBytes of decoded blocks
// (block data plus a fixed per-entry overhead). A block larger than a
// shard's share (maxBytes/16) is never cached.
func NewCache(maxBytes int64) *Cache {
	c := &Cache{}
	for i := range c.shards {
		s := &c.shards[i]
		s.max = maxBytes / cacheShards
		s.mu.m = make(map[cacheKey]*cacheEntry)
		s.mu.lru.next, s.mu.lru.prev = &s.mu.lru, &s.mu.lru
	}
	return c
}

func (c *Cache) shard(k cacheKey) *cacheShard {
	h := (k.id*0x9e3779b97f4a7c15 ^ uint64(k.block)*0xc2b2ae3d27d4eb4f)
	return &c.shards[h>>60]
}

func (c *Cache) get(id uint64, block uint32) *Block {
	if c == nil {
		return nil
	}
	k := cacheKey{id, block}
	s := c.shard(k)
	s.mu.Lock()
	e := s.mu.m[k]
	if e == nil {
		s.mu.Unlock()
		c.misses.Add(1)
		return nil
	}
	s.unlinkLocked(e)
	s.pushFrontLocked(e)
	s.mu.Unlock()
	c.hits.Add(1)
	return e.blk
}

// peek returns a cached block without counting or reordering.
func (c *Cache) peek(id uint64, block uint32) *Block {
	if c == nil {
		return nil
	}
	k := cacheKey{id, block}
	s := c.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.mu.m[k]; e != nil {
		return e.blk
	}
	return nil
}

func (c *Cache) put(id uint64, block uint32, blk *Block) {
	if c == nil {
		return
	}
	k := cacheKey{id, block}
	s := c.shard(k)
	size := blk.size()
	if size > s.max {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.mu.m[k]; e != nil {
		// A concurrent miss loaded it first; keep theirs.
		return
	}
	for s.mu.bytes+size > s.max {
		victim := s.mu.lru.prev
		s.unlinkLocked(victim)
		delete(s.mu.m, victim.key)
		s.mu.bytes -= victim.size
		c.evictions.Add(1)
	}
	e := &cacheEntry{key: k, blk: blk, size: size}
	s.mu.m[k] = e
	s.pushFrontLocked(e)
	s.mu.bytes += size
}

// Evict drops every cached block of range id (after the range is dropped
// or re-sealed under the same id).
func (c *Cache) Evict(id uint64) {
	if c == nil {
		return
	}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for k, e := range s.mu.m {
			if k.id == id {
				s.unlinkLocked(e)
				delete(s.mu.m, k)
				s.mu.bytes -= e.size
			}
		}
		s.mu.Unlock()
	}
}

// Stats returns the cache's counters.
func (c *Cache) Stats() CacheStats {
	if c == nil {
		return CacheStats{}
	}
	st := CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load()}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		st.Bytes += s.mu.bytes
		st.Entries += len(s.mu.m)
		s.mu.Unlock()
	}
	return st
}

func (s *cacheShard) unlinkLocked(e *cacheEntry) {
	e.prev.next = e.next
	e.next.prev = e.prev
	e.prev, e.next = nil, nil
}

func (s *cacheShard) pushFrontLocked(e *cacheEntry) {
	e.next = s.mu.lru.next
	e.prev = &s.mu.lru
	e.next.prev = e
	s.mu.lru.next = e
}
