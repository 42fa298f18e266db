// Package cold stores the aged id ranges of a counter as immutable,
// compressed blocks, and reads them back.
//
// # What it owns
//
// The encoding of a sealed range (blocks and a range descriptor), the
// in-memory presence set that answers "is this key stored?" without I/O, a
// byte-bounded cache of decoded blocks shared by all ranges, and a Reader
// that serves Get, MultiGet, Iter and Verify for one range. It knows nothing
// of Pebble, the mutation log or scheduling: the store hands Build its rows
// in key order and writes whatever Build emits under keys of its choosing,
// and a Reader asks the store's BlockSource for block n when it needs it.
//
// # Keys live once
//
// A range's keys are stored exactly once, in its descriptor, as Rice-coded
// gaps (see encodeDesc and rice.go). Blocks hold column values only; row i
// of a range is the key of rank i. This is what makes the 3 bytes/row budget
// reachable: for 2M random keys in a 32-bit range the keys alone have an
// entropy of about 1.56 bytes each, so storing them in the blocks (delta
// varints) and again in a serialized roaring bitmap (2 bytes a key for
// sparse containers) would cost ~3.6 bytes a row before any value. Measured
// (BenchmarkBytesPerRow, 2M rows, defaults): 1.58 B/row of descriptor plus
// 0.91 B/row of blocks. These are encoded bytes, the payload the store
// hands Pebble, not the bytes of Pebble's files (which add keys and index
// blocks and compress again): the store's BenchmarkColdMultiGet10 reports
// both (disk-B/row, payload-B/row).
//
// On decode the key stream becomes a presence set (presence.go): a
// two-level structure like roaring (array or bitmap per 65536 keys) that
// also keeps the rank of each chunk's first key, so Rank(key) = row number
// is O(log) rather than roaring's walk over every earlier container. A set
// whose chunks hold under 4 keys on average (snowflake ids in wide ranges)
// is a sorted key array instead: 8 bytes per key rather than the 24-byte
// per-chunk overhead for each key.
//
// # Merging a delta
//
// Merge applies a sorted change set (updates, inserts, deletes) to a range
// and writes the new range by rewriting only the blocks the changes touch:
// an untouched block keeps its bytes, its keys and so its header, and the
// caller files it under the new block number (issue 3: rewrite only the
// affected blocks, then switch index and blocks atomically, which the store
// does). The descriptor is always re-encoded in full from the old presence
// set and the changes; that is most of a merge's CPU (BenchmarkMerge1000:
// 1,000 changes into 2M rows take ~85 ms CPU, re-encoding 872 of 1,932
// blocks and writing 0.78 MB, against ~145 ms and 1.83 MB to rebuild).
// Rewritten blocks that outgrow the target split into equal halves (B-tree
// style, so the next insert does not split again); one that shrinks below
// half is carried into the next block only if that one is rewritten too.
//
// # Invariants
//
//   - Rows are strictly increasing by key and never all zero; Build rejects
//     anything else (ErrUnsorted, ErrBadRow) and Verify reports a stored
//     all-zero row as corruption.
//   - Block b holds rows [start(b), start(b+1)) of the range; its header
//     repeats its first key, last key, row count and column count, and a
//     crc32c of its keys. A Reader checks the first four against the
//     descriptor on every load; Verify also checks the key checksum.
//   - Every block and descriptor ends in a crc32c (Castagnoli) of all its
//     preceding bytes and starts with a version byte. Every decode or verify
//     failure wraps ErrCorrupt and names the block (or "desc") and offset.
//     A block the source cannot find is ErrMissingBlock. No read returns a
//     value it could not check.
//   - Decoders never panic and never allocate more than the input can
//     justify (a block decodes to at most 64 MiB; a descriptor's row and
//     block counts are bounded by its length). They are fuzzed.
//
// # Format overview
//
//	descriptor: version | ncols | rows | nblocks | per block (rows, riceK) | Rice key stream | crc32c
//	block:      version | ncols | rows | firstKey | lastKey | keysCRC | widths | zstd(byte planes) | crc32c
//
// The field tables are in the doc comments of encodeDesc and
// blockEncoder.encode. A block's values are packed per column at the
// smallest byte width that holds the block's largest value, written as byte
// planes (all low bytes, then all second bytes, ...) and compressed with
// zstd. The golden test (testdata/golden.txt) pins the encoding.
//
// # Defaults and measurements
//
// TargetBlockSize 4 KiB (decoded) and zstd level 1 (klauspost "fastest").
// Realistic set (random keys in a 32-bit range, two power-law columns; see
// bench_test.go), measured on a shared 2-core machine:
//
//	rows  payload B/row        build      cached MultiGet(10)  absent Get  uncached MultiGet(10) p50/p99
//	      (desc+blocks)
//	2M    2.49 (1.58+0.91)     10M rows/s ~4.1 µs CPU          ~70 ns CPU  ~105 / ~200 µs
//	20M   2.07 (1.15+0.91)     14M rows/s ~8 µs CPU            ~130 ns CPU 143 / 232 µs
//
// 16 KiB blocks save 2% (2.44 / 2.02 B/row) but make a miss 2.5x slower
// (~25 µs per block decode instead of ~10); zstd levels 3-9 compress these
// planes slightly worse than level 1, and level 11 (2.36 B/row at 2M) seals
// at under 5M rows/s. At 20M rows the cached path is memory-bound (~6 DRAM
// misses a key: presence chunk, low bits, cache map, entry, block, row).
//
// # Caveats
//
//   - The presence set is in memory for every open range: ~2 bytes per key
//     for chunks of many keys (8 KiB per 65536-key chunk once a chunk holds
//     more than 4096 keys), plus 16+8 bytes per non-empty chunk; 8 bytes
//     per key for sets of thin chunks (a sorted key array). Desc.MemBytes
//     reports it. Decoding a
//     descriptor runs at roughly 50M keys/s, so opening a 20M-row range
//     costs ~0.4 s and ~45 MB; the store should keep decoded Descs.
//   - A block is bound to its descriptor by first/last key, row count and
//     column count on every read; a descriptor that differs from the
//     block's only inside the block (same ends and count) is caught by
//     Verify, not by Get. Descriptors are checksummed, so this needs a
//     descriptor from another build paired with these blocks.
//   - Cache entries are keyed by (range id, block). The store must not reuse
//     a range id for different contents without Cache.Evict.
//   - Merge never coalesces untouched blocks, so a range that sees many
//     deletes spread thinly over merges keeps its block count while blocks
//     shrink; a full Build (re-seal) compacts it.
//   - Builder.Add buffers one block; emit's slice is reused after it
//     returns. Builder keeps the descriptor's key stream (~1.6 bytes a key)
//     until Finish.
package cold
