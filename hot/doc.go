// Package hot is the fixed-width in-memory table of one id range of a
// counter: packed rows in open-addressing segments, plus an overflow side
// table for the rare value that does not fit its column. It does no I/O,
// starts no goroutines and knows nothing of Pebble; the store owns logging,
// checkpoints and routing of ids to ranges.
//
// # Keys and segments
//
// The store splits a counter id into rangeID = id >> keyBits and
// key = id & (1<<keyBits - 1); a Table holds the rows of one range, keyed by
// key (8 <= keyBits <= 64). The key is first mapped through a bijection on
// the keyBits-bit integers (multiply by an odd constant, xor-shift by half
// the width, multiply again; each step is invertible, so Range can return
// the original key). The top segBits of the mixed key choose a segment, the
// low storedBits = keyBits - segBits are stored in the slot. segBits is
// chosen so storedBits is whole bytes:
//
//	keyBits   segBits        segments      stored key bytes
//	8..15     keyBits-8      1..128        1
//	16..23    8+keyBits%8    256..32768    1
//	24..31    8+keyBits%8    256..32768    2
//	32..39    8+keyBits%8    256..32768    3
//	40..47    8+keyBits%8    256..32768    4
//	48..55    8+keyBits%8    256..32768    5
//	56..63    8+keyBits%8    256..32768    6
//	64        8              256           7
//
// Ranges whose keyBits is not a multiple of 8 get many small segments; each
// segment header costs 80 bytes, so a keyBits=23 table costs 2.5 MiB
// before its first row. Prefer keyBits that are multiples of 8. Even then a
// table costs about 22 KiB before its first row (256 headers, rounded up to
// the allocator's size class): the store keeps ranges wide enough to hold
// many rows each (store/widen.go). keyBits=64 is a whole id: one table for
// every id, whose rows store 7 key bytes.
//
// # Slot layout
//
// A segment is one []byte of nslots rows of rowBytes each, followed by 8 zero
// bytes so that any 8-byte load at a row start stays in bounds. A row, for
// keyBits=32 and two 2-byte columns:
//
//	offset  width  field
//	0       3      stored key: low storedBits of the mixed key, little-endian
//	3       2      column 0, little-endian; 0xffff = look in the overflow map
//	5       2      column 1, likewise
//	                (7 bytes; in general keyBytes + sum of column widths)
//
// A slot is empty iff its value bytes are all zero, and an empty slot is
// entirely zero (key bytes too). That needs no extra flag because an
// all-zero row is never stored (Put of zeros deletes) and an overflowed cell
// is all ones.
//
// # Probing
//
// The home slot of stored key s is floor(s * homes / 2^storedBits), which is
// monotone in s. Rows are placed by linear probing at or after their home,
// with no empty slot between home and row, in ascending key order (Robin
// Hood ordering by home, ties broken by key: with a monotone home the two
// coincide). So the rows of a segment are a sorted array with gaps, and:
//
//   - a lookup scans from the home slot to the first key >= s and compares
//     keys only (an empty slot reads as key 0 and is passed over; it cannot
//     hide s, see findLocked), so misses stop as early as hits;
//   - insert shifts the run from s's place up to the next empty slot right
//     by one row; delete shifts the displaced rows after it left by one
//     (backward-shift deletion, no tombstones);
//   - a rebuild visits rows in key order and puts each at
//     max(home, previous+1): linear, no probing.
//
// There is no wrap-around: the last padSlots slots are nobody's home and
// take the overflow of the last cluster; if they run out the segment grows.
//
// # Growth
//
// Each segment grows on its own, under its own write lock, when an insert
// would push it past maxLoad (0.9) of its slots, to the next of its capacity
// steps minSlots*growth^(k+phase) (growth 1.125). The phase is different
// for every segment (segment index / segment count), so segments that fill
// at the same rate (random keys) do not all grow at the same row count, and
// bytes/row does not swing between 7/0.9 and 7/0.8 with the table size;
// averaged over the steps a 7-byte row costs 7*(growth-1)/ln(growth)/maxLoad
// ≈ 8.25 bytes. Measured with two 2-byte columns and keyBits=32 at 2M and
// 20M random keys: 8.26 B/row with growth 1.125, 8.73 with 1.25 (which
// rebuilds half as often: 46 vs 79 B/op of garbage per insert, the same
// insert and Get times within this machine's noise). A segment whose last
// row is deleted frees its slots.
//
// # Columns
//
// A table has up to MaxColumns (limits.MaxTableColumns: a counter's 16 plus
// a cold delta's marker) columns of 1, 2 or 4 bytes. AddColumn only changes
// the table's target layout; each segment records its own column count and
// is rewritten with wider rows on its next growth or on the first Put into
// it. Until then reads of the new column in that segment return 0. A
// segment's columns are always a prefix of the table's.
//
// # Overflow
//
// A value >= all-ones of its column width is written as all-ones in the row
// and exactly in the segment's overflow map, keyed by stored key<<4 |
// column. Invariant: a map entry exists iff the cell is all ones, and its
// value is >= all-ones. Put, Delete and rebuilds keep it so; rebuilds do not
// change stored keys, so the map survives them untouched. An empty map is
// dropped (Go maps never shrink).
//
// # Concurrency
//
// Each segment has a sync.RWMutex guarding its slots, overflow map and
// counters (segment.mu). Get, GetColumn and Range take one segment's read
// lock at a time; Put and Delete take one segment's write lock, so writers
// to different segments run in parallel and a growth blocks only its own
// segment. GetMany read-locks the (deduplicated) segments of up to 16 keys
// at once, always in ascending segment order; since every other path holds
// at most one segment lock, no cycle can form. The table's column layout is
// published by an atomic column count; entries below it never change.
// AddColumn is serialized by its own mutex and takes no segment lock.
//
// NB: Range's callback runs under a segment's read lock and must not call
// the table at all: a write would deadlock, and a read would take the same
// read lock recursively, which deadlocks if a writer is queued.
//
// # Batched reads
//
// A lock and an unlock are locked instructions, which on x86 wait for the
// loads before them; so a loop of Get calls takes its cache misses one at a
// time (about 4-6M ids/s at 5-20M rows here). GetMany locks first, then
// touches every key's home slot (independent loads whose misses overlap),
// then probes in cache: about 2x the loop. The store's MultiGet should use
// it.
//
// A seqlock variant (readers load a sequence number, read the slots with
// atomic 64-bit loads, and retry under the lock if it changed; commit
// 7d5eb07) was race-detector-clean but measured about 20% slower than the
// RWMutex for a loop of Gets at 5M rows (4.3-5.0M vs 5.9-6.3M ids/s,
// interleaved runs): the word-packed slots need two loads and shifts per
// unaligned field and an extra pointer hop to the published array. It was
// reverted.
//
// # Memory accounting
//
// MemBytes counts slot arrays and the segment header array by the size the
// allocator gave them (they are allocated with slices.Grow, which asks for
// the rounded size class, so cap is the allocation; a slot array uses the
// rounding as extra slots rather than wasting it), the Table itself, and
// overflow maps estimated at 24 bytes per entry plus 168 per map (a
// one-entry map measured 192 bytes). TestMemBytesMatchesHeap checks the
// heap grows by MemBytes within 3% for one large table and for 2,000 small
// ones.
//
// # Caveats
//
//   - Segments never shrink while they hold a row: after mass deletes a
//     segment keeps its peak capacity until it is emptied (then it frees its
//     slots) or grows again.
//   - A segment holds fewer than 2^32 slots (nslots is a uint32): about 4
//     billion rows per segment, 1 trillion per 256-segment table.
//   - keyBits that are not a multiple of 8 give up to 32768 segment headers
//     (see Keys and segments).
//   - A loop of Get calls is bound by one cache and TLB miss after another;
//     batched reads should use GetMany. At 20M rows the table is ~165 MB
//     in 4 KiB pages (THP is madvise-only on the benchmark machine and the
//     Go heap does not madvise), so most lookups also miss the TLB.
//
// # Measurements
//
// keyBits=32, two 2-byte columns, 20M random keys (TALLY_BENCH_ROWS=20000000
// go test -run=NONE -bench=. -cpu=1,2 -benchtime=2s ./hot/), on a shared
// 2-core Xeon VM whose load average from other work was 4-11 during the run,
// so wall-clock rates are unreliable; ids/cpu-s divides by the benchmark
// thread's (or, for parallel runs, the process's) CPU time.
//
//	benchmark (20M rows)               ids/cpu-s    ids/s (wall)   allocs
//	Get10 hit, loop of Get              4.7M        2.3-3.8M       0
//	Get10 hit, GetMany                  7.9-8.6M    4.9-6.0M       0
//	Get10 half absent, loop of Get      5.1-5.4M    4.1-4.3M       0
//	Get10 half absent, GetMany          8.0M        5.5-6.1M       0
//	Get10 hit, GetMany, 2 goroutines    7.7-8.1M    3.8-6.2M       0
//	Get10 hit, Get, 2 goroutines        4.6-4.9M    3.9-5.9M       0
//	GetColumn                           350-370 ns/op wall         0
//	Put update (no growth)              460-500 ns/op wall         0
//	Put insert from empty (growth)      645-660 ns/op wall, 78 B/op garbage
//	memory, no size hint                8.26 B/row (MemBytes/Len)
//	memory, exact size hint             8.27 B/row
//
// The memory rows are the table's own accounting (see Memory accounting).
// What the process's heap and RSS grow by per row is measured by the
// store's BenchmarkMultiGet10 (heap-B/row, rss-B/row beside store-B/row).
//
// The design target of 10M lookups/s on one core is not met on this
// machine: the best single-thread figure is GetMany at ~8.6M ids per CPU
// second. With a cache-resident table (20K rows) the same code does
// 14-18M ids/cpu-s, so the remainder is DRAM and page-walk latency.
package hot
