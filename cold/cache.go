package cold

import (
	"sync"
	"sync/atomic"
)

// Cache holds decoded blocks of all ranges, bounded in bytes. It is split
// into shards, each with its own lock, so concurrent readers rarely contend.
// Eviction is CLOCK (second chance): a hit only sets the entry's referenced
// bit under a read lock, where LRU would relink list nodes under a write
// lock, touching two more random cache lines on every hit. Entries are keyed
// by (range id, block number); the range id is chosen by the store and must
// not be reused for different contents (give a re-sealed range a new id, or
// call Evict).
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
	key  cacheKey
	blk  *Block
	size int64
	ref  atomic.Bool // referenced since the clock hand last passed
}

type cacheShard struct {
	max int64
	mu  struct {
		sync.RWMutex
		m     map[cacheKey]*cacheEntry
		ring  []*cacheEntry // clock order
		hand  int
		bytes int64
	}
	_ [64]byte // keep shards' locks on separate cache lines
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
	s.mu.RLock()
	e := s.mu.m[k]
	s.mu.RUnlock()
	if e == nil {
		c.misses.Add(1)
		return nil
	}
	if !e.ref.Load() {
		e.ref.Store(true)
	}
	c.hits.Add(1)
	return e.blk
}

// peek returns a cached block without counting or marking it.
func (c *Cache) peek(id uint64, block uint32) *Block {
	if c == nil {
		return nil
	}
	k := cacheKey{id, block}
	s := c.shard(k)
	s.mu.RLock()
	defer s.mu.RUnlock()
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
	if s.mu.m[k] != nil {
		return // a concurrent miss loaded it first; keep theirs
	}
	for s.mu.bytes+size > s.max {
		if s.mu.hand >= len(s.mu.ring) {
			s.mu.hand = 0
		}
		e := s.mu.ring[s.mu.hand]
		if e.ref.Load() {
			e.ref.Store(false)
			s.mu.hand++
			continue
		}
		s.removeLocked(s.mu.hand)
		c.evictions.Add(1)
	}
	e := &cacheEntry{key: k, blk: blk, size: size}
	s.mu.m[k] = e
	s.mu.ring = append(s.mu.ring, e)
	s.mu.bytes += size
}

// removeLocked drops ring[i], moving the last entry into its slot.
func (s *cacheShard) removeLocked(i int) {
	e := s.mu.ring[i]
	last := len(s.mu.ring) - 1
	s.mu.ring[i] = s.mu.ring[last]
	s.mu.ring[last] = nil
	s.mu.ring = s.mu.ring[:last]
	delete(s.mu.m, e.key)
	s.mu.bytes -= e.size
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
		for j := 0; j < len(s.mu.ring); {
			if s.mu.ring[j].key.id == id {
				s.removeLocked(j)
			} else {
				j++
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
		s.mu.RLock()
		st.Bytes += s.mu.bytes
		st.Entries += len(s.mu.m)
		s.mu.RUnlock()
	}
	return st
}
