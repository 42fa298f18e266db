// Package bench compares tally with the systems users would run instead, on
// one workload, in one run, on one machine (issue 4).
//
// # What it owns
//
// Package bench/workload generates the data set and operation mix from a
// seed; it is shared by tests, these benchmarks and `tally demo`. This
// package defines the Target interface every system is driven through, the
// targets themselves, the runner that drives them (Run), and the
// markdown report (Table, Machine). The command
// bench/cmd/tallybench puts them together.
//
// RunServe (serve.go, command bench/cmd/servebench) is the server
// comparison: redis-benchmark, unchanged, against "tally serve" and
// redis-server in one run with the same commands and flags (-c 50 -P 16 -r
// 1000000 by default), and each server's RSS growth per item after loading
// the same items through RESP.
//
// RunCluster (cluster.go, command bench/cmd/clusterbench, script
// clusterbench.sh) is the replication comparison of issue 22: a 3-replica
// group started with "tally cluster local start" against one "tally
// serve" and a redis-server primary with one replica (with and without
// WAIT 1 0): pipelined and one-at-a-time HINCRBY, failover time after
// kill -9 of the leader (with a check that no acknowledged write was
// lost), follower reads after READONLY, and the catch-up time of a
// replica added to a loaded group.
//
// RunShard (shard.go, command bench/cmd/shardbench, script shardbench.sh)
// is the sharding comparison of issue 23: tally clusters of 1, 2 and 4
// shards × 3 replicas ("tally cluster local start --shards S") against
// Redis Clusters of the same shape, HINCRBY and HMGET through go-redis's
// ClusterClient with every server process's CPU per command, and replica
// moves ("cluster local add-node", "cluster move") of a loaded shard under
// 0, 1 and 4 writers whose every write is checked afterwards.
//
// # Targets
//
//   - tally: one counter "posts" with the workload's columns (16-bit width
//     hint, 32-bit maximum), 48 range bits, ranges older than TallyMaxAge
//     aged into the cold tier; SyncAlways, SyncInterval (1s) and NoSync.
//   - tally-serve: the same counter in a "tally serve" process the runner
//     starts on a free loopback port (the binary of tallybench's --tally,
//     or one built by BuildTally), reached over RESP exactly as the Redis
//     targets are, with their client code (resp.go): "posts:ID" keys, the
//     columns as hash fields, HINCRBY to write, one HMGET per id of a
//     batch, pipelined, to read. Its age policy adds the time since the
//     workload's end to TallyMaxAge (the server's clock is the wall clock,
//     the in-process store's the workload's end), so the same ranges are
//     cold. It is loaded by "tally load" from a CSV file, run inside the
//     server (TALLY.EXEC: DB.Load, the in-process target's bulk path);
//     memory is the server's INFO used_memory and used_memory_rss growth
//     since it started empty, Own its store's accounting; disk INFO
//     disk_bytes; recovery a SIGTERM (clean shutdown, untimed) and the
//     time of a start until PING answers. serve --durability sync,
//     interval and nosync. Peers are compared with it in a second table
//     (Table), tally in process and tally-serve being both tally. The
//     likes comparison has a tally-serve target too (likes_serve.go).
//   - pebble-merge: Pebble v2 with one key per (item, column), big-endian
//     id then column byte, a signed-varint value, increments through an
//     int64-add Merger, reads by point Get, a 128 MiB block cache and
//     10-bit bloom filters on every level; writes with pebble.Sync or
//     pebble.NoSync. Loaded through batches, then flushed and compacted
//     (the settled LSM an sstable ingestion gives).
//   - redis-strings and redis-hash: a redis-server the runner starts on a
//     free loopback port and a temporary directory, with AOF off (RDB
//     snapshot for the disk figure and the restart) and with appendfsync
//     everysec; strings with MGET/INCRBY, small listpack hashes with
//     HMGET/HINCRBY as Redis's memory-optimization guide recommends. They
//     are skipped with a message when redis-server is not on PATH.
//
// Each peer is compared with the tally mode that makes the same promise
// (Durability): Sync per write and SyncAlways; appendfsync everysec and
// SyncInterval; NoSync, Redis without AOF, and NoSync.
//
// # What a run measures
//
// Run loads every non-zero item (zero items are stored by no target but are
// read), checks a sample of counts against the workload, runs the mix on
// RunConfig.Clients goroutines for RunConfig.Duration, then measures memory
// and disk, reopens the target (a clean shutdown and a timed start until it
// answers with all data loaded) and checks that the sample reads the same.
// Clients are closed-loop: each waits for its operation before the next, so
// under a per-write fsync the reads of the same client wait too and the
// reads/s figure falls with the write latency. That is the same for every
// target. A faster target is therefore measured under more load: with
// RunConfig.Rate (tallybench --rate) the clients run open loop instead, at
// the same total rate for every target, each on a fixed schedule, with
// every latency counted from the operation's scheduled send time so that
// a stall counts against every operation queued behind it (coordinated
// omission does not hide it). The latency then includes the client's own
// lateness in waking for its slot (timer and scheduling delay), the same
// for every target.
//
// Bytes per counter divide by every (item, column) value, zero ones
// included. Memory is reported three ways (Memory):
//
//   - own: each system's accounting of its structures: tally's Stats (hot
//     tables, deltas, descriptors, the decoded block cache, its Pebble's
//     block cache, memtables and file cache), Pebble's Metrics (block
//     cache, memtables, file cache; the cache is capped, so this stops
//     growing while tally's and Redis's do not), Redis's used_memory less
//     the empty server's. These count different things, so the table gives
//     no ratio for them.
//   - heap: live allocations grown since just before the target was
//     opened: the Go heap after a full collection plus what Pebble
//     allocates with C's allocator (block cache, memtables, in cgo builds)
//     for tally and Pebble; used_memory growth for Redis (its allocator's
//     count of live bytes). Like with like: ratios are given.
//   - rss: resident set growth over the same span: the benchmark process's
//     for tally and Pebble (after returning freed pages to the OS),
//     redis-server's used_memory_rss for Redis. Ratios are given.
//
// Own is below heap because an accounting counts arrays and maps by what
// they hold, while an allocator rounds every allocation up to its size
// class, keeps the runtime's and library's own structures, and (Go) holds
// what the accounting leaves out (iterators, batches, Pebble's Go-side
// tables). RSS is above heap by the pages an allocator keeps for reuse and
// fragmentation; for an in-process target that follows another one in the
// same run it can also read low, because memory C's allocator freed for
// the previous target may stay resident and be reused. Disk is every file
// of the target.
//
// # Caveats
//
//   - The clients and the Redis server share the machine's cores; tally and
//     Pebble run in the client process. On 2 cores this favours the embedded
//     targets, which is the deployment they are built for, but it is not
//     Redis's best case (a dedicated server with pipelining across users).
//   - Recovery is measured after a clean shutdown for every target (tally's
//     Close checkpoints; Pebble's Close leaves its WAL; Redis's SHUTDOWN
//     saves the RDB or fsyncs the AOF). Crash recovery with a long log to
//     replay is not measured here.
//   - The quick mode's data set is small: per-range fixed costs dominate
//     tally's memory figure there; use the full mode for bytes per counter.
package bench
