package commands

import (
	"context"
	"fmt"
	"io"
	"strings"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/store"
)

func statsCommand() *Command {
	return &Command{
		// NB: stats opens read-only in the CLI (it works on a full disk and
		// changes nothing), so it cannot flush: table_bytes counts the
		// sstables, not writes still only in the WAL.
		CLI: "stats", RESP: "TALLY.STATS", Group: adminGroup, Mode: Read, Local: true, Open: OpenReadOnly,
		Summary:    "print per-tier ranges, rows, bytes per row, cache and jobs",
		Complexity: "O(N) where N is the number of counters and ranges",
		Help: `Prints "key value" lines, store-wide first, then per counter with keys
"counter.NAME.KEY". Keys are stable; new ones may be added. Bytes per row
are two decimals. Against a running server (and over RESP, where the
reply is the same lines, one bulk string) they are the server's figures.
  durability           sync, interval or nosync (of this invocation)
  counters             number of counters
  ranges_hot           id ranges held in memory
  ranges_cold          id ranges in the cold tier (or being sealed)
  rows                 stored (non-zero) rows: hot + cold + delta (a delta
                       row may shadow a cold one and count twice)
  hot_rows             rows in hot tables
  cold_rows            rows in cold blocks
  delta_rows           rows written to cold ranges since they were sealed
  mem_bytes            memory of hot tables, cold deltas and cold indexes
  bytes_per_row        mem_bytes / rows
  hot_bytes_per_row    hot-table memory / hot_rows
  cold_payload_bytes   encoded cold blocks and descriptors (payload; the
                       files Pebble keeps for them are in table_bytes)
  cold_payload_bytes_per_row  cold_payload_bytes / cold_rows
  last_seq             sequence of the last log record
  checkpoint_seq       sequence the newest checkpoint includes
  log_records          log records since that checkpoint
  log_bytes            log bytes since that checkpoint
  disk_bytes           bytes of the store's files
  table_bytes          bytes of Pebble's live data files (sstables; writes
                       still only in the WAL are not counted)
  block_cache_hits     lookups of decompressed cold blocks found in cache
  block_cache_misses   ... and not found (read from disk and decompressed)
  block_cache_hit_rate hits / (hits + misses), four decimals
  block_cache_bytes    memory the block cache holds
  memory_budget        bytes for caches and write buffers beside the hot
                       tables (store.Options.MemoryBudget), split into:
  pebble_memtable_size   one of Pebble's (up to two) memtables
  pebble_cache_size      Pebble's block cache
  block_cache_size       the decoded cold block cache's bound
  jobs_running         aging and merge jobs running now (in this process)
  jobs_finished        jobs finished since this invocation opened the store
  job.I                KIND COUNTER range ID PHASE DONE/TOTAL, per running job
                       (a queued job shows "job ID key ..." as its COUNTER)
  queue_pending        queued jobs waiting to run (see "tally jobs")
  queue_running        queued jobs running in this process
  queue_finished       queued jobs finished by this invocation
  sources              idempotent-write sources remembered (incr --source)
  pebble_flushes, pebble_compactions, pebble_read_amp, pebble_l0_files,
    pebble_compaction_debt   Pebble's own figures
  families             key families declared or on disk
  family.NAME          prefix=P merge=OPERATOR|- declared=true|false
  background_errors    errors of background work since Open
  counter.NAME.columns                     column names, comma-separated
  counter.NAME.ranges_hot, .ranges_cold, .rows, .hot_rows, .cold_rows,
    .delta_rows, .mem_bytes, .bytes_per_row, .hot_bytes_per_row,
    .cold_payload_bytes, .cold_payload_bytes_per_row  as above, for one
    counter
  counter.NAME.range_bits   the counter's range width now (wider than
                       created once the store widened its ranges)
  counter.NAME.target_hot_bytes_per_row   what a hot row should cost at
                       that width and the counter's columns
  counter.NAME.warning      only when hot rows cost more than twice the
                       target (and 4 MiB in all): why, and the remedy
  timeline.KEY         if the store holds timelines: the options
                       (inbox_cap, active_window, pull_threshold,
                       chunk_size), users, pulled_authors,
                       pending_backfills, removed_posts, jobs_queued
  unread.KEY           if the store holds unread data: kinds, channels,
                       notices, feed (complete or lazy), the snapshot
                       cache's limit, bytes and entries
  likes.KEY            if the store holds likes: board_days,
                       roaring_threshold, businesses, ordinals (users in
                       roaring sets), stripes, interrupted_loads (bulk
                       loads a crash interrupted, finished by the next
                       writable open; see verify), ordinal_cache_bytes
                       (0 on a read-only open)

Against a running tally serve (the CLI sends stats to it), the figures
the packages count since the server opened the store follow:
timeline.deliveries, rebuilds, rebuild_mean, expired, pages, pulls
(pages that read outboxes) and inbox_entries_read;
unread.snapshot_cache_hits and misses; likes.transitions, groups,
max_group, waited, conversions, board_moves and ordinal_cache_hits
and misses. A CLI that opens the
store for the command leaves them out (they would read 0); TALLY.STATS
over RESP and the server's Prometheus metrics
(tally_timeline_deliveries_total, ...) show them too.

Example:
  $ tally -d /var/lib/tally stats | grep -E '^(rows|bytes_per_row) '
  rows 180000
  bytes_per_row 8.71
`,
		Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
			var b strings.Builder
			writeStats(&b, db.Store().Stats())
			for _, p := range db.PackageStats() {
				for _, s := range p.Stats {
					if since, _ := SinceOpen(p.Name + "." + s.Key); since && in.OwnOpen() {
						continue // zero in a process that opened the store for this command
					}
					fmt.Fprintf(&b, "%s.%s %s\n", p.Name, s.Key, s.Value)
				}
			}
			return lines(b.String()), nil
		},
		Text: textLines, Reply: replyLines,
	}
}

// BytesPerRow is mem over rows, 0 without rows.
func BytesPerRow(mem int64, rows int) float64 {
	if rows == 0 {
		return 0
	}
	return float64(mem) / float64(rows)
}

// TierBytes sums, over counters, hot-table memory (of hot ranges only) and
// the cold tier's encoded payload, for the store-wide bytes-per-row
// figures.
func TierBytes(s store.Stats) (hotMem, coldPayload int64) {
	for _, c := range s.Counters {
		for _, r := range c.Ranges {
			if r.Tier == "hot" {
				hotMem += r.MemBytes
			}
		}
		coldPayload += c.ColdPayloadBytes
	}
	return hotMem, coldPayload
}

// writeStats writes the store's figures as stats prints them.
func writeStats(w io.Writer, s store.Stats) {
	t := SumTiers(s)
	rows := t.HotRows + t.ColdRows + t.DeltaRows
	var mem int64
	for _, c := range s.Counters {
		mem += c.MemBytes
	}
	hotMem, coldPayload := TierBytes(s)
	fmt.Fprintf(w, "durability %v\n", s.Durability)
	fmt.Fprintf(w, "reopens %d\n", s.Reopens)
	users := 0 // the host's counters; packages' appear as PACKAGE.counter.NAME
	for _, c := range s.Counters {
		if c.Owner == "" {
			users++
		}
	}
	fmt.Fprintf(w, "counters %d\n", users)
	fmt.Fprintf(w, "ranges_hot %d\n", t.HotRanges)
	fmt.Fprintf(w, "ranges_cold %d\n", t.ColdRanges)
	fmt.Fprintf(w, "rows %d\n", rows)
	fmt.Fprintf(w, "hot_rows %d\n", t.HotRows)
	fmt.Fprintf(w, "cold_rows %d\n", t.ColdRows)
	fmt.Fprintf(w, "delta_rows %d\n", t.DeltaRows)
	fmt.Fprintf(w, "mem_bytes %d\n", mem)
	fmt.Fprintf(w, "bytes_per_row %.2f\n", BytesPerRow(mem, rows))
	fmt.Fprintf(w, "hot_bytes_per_row %.2f\n", BytesPerRow(hotMem, t.HotRows))
	fmt.Fprintf(w, "cold_payload_bytes %d\n", coldPayload)
	fmt.Fprintf(w, "cold_payload_bytes_per_row %.2f\n", BytesPerRow(coldPayload, t.ColdRows))
	fmt.Fprintf(w, "last_seq %d\n", s.LastSeq)
	fmt.Fprintf(w, "checkpoint_seq %d\n", s.CheckpointSeq)
	fmt.Fprintf(w, "log_records %d\n", s.LogRecords)
	fmt.Fprintf(w, "log_bytes %d\n", s.LogBytes)
	fmt.Fprintf(w, "disk_bytes %d\n", s.DiskBytes)
	fmt.Fprintf(w, "table_bytes %d\n", s.TableBytes)
	fmt.Fprintf(w, "block_cache_hits %d\n", s.BlockCache.Hits)
	fmt.Fprintf(w, "block_cache_misses %d\n", s.BlockCache.Misses)
	fmt.Fprintf(w, "block_cache_hit_rate %.4f\n", s.BlockCache.HitRate())
	fmt.Fprintf(w, "block_cache_bytes %d\n", s.BlockCache.Bytes)
	fmt.Fprintf(w, "memory_budget %d\n", s.Memory.Budget)
	fmt.Fprintf(w, "pebble_memtable_size %d\n", s.Memory.MemTableSize)
	fmt.Fprintf(w, "pebble_cache_size %d\n", s.Memory.PebbleCacheSize)
	fmt.Fprintf(w, "block_cache_size %d\n", s.Memory.BlockCacheSize)
	fmt.Fprintf(w, "jobs_running %d\n", len(s.Jobs))
	fmt.Fprintf(w, "jobs_finished %d\n", s.JobsFinished)
	for i, j := range s.Jobs {
		fmt.Fprintf(w, "job.%d %s %s range %d %s %d/%d\n", i, j.Kind, j.Counter, j.Range, j.Phase, j.Done, j.Total)
	}
	fmt.Fprintf(w, "queue_pending %d\n", s.Queue.Pending)
	fmt.Fprintf(w, "queue_running %d\n", s.Queue.Running)
	fmt.Fprintf(w, "queue_finished %d\n", s.Queue.Finished)
	fmt.Fprintf(w, "sources %d\n", s.Sources)
	fmt.Fprintf(w, "pebble_flushes %d\n", s.Pebble.Flushes)
	fmt.Fprintf(w, "pebble_compactions %d\n", s.Pebble.Compactions)
	fmt.Fprintf(w, "pebble_read_amp %d\n", s.Pebble.ReadAmp)
	fmt.Fprintf(w, "pebble_l0_files %d\n", s.Pebble.L0Files)
	fmt.Fprintf(w, "pebble_compaction_debt %d\n", s.Pebble.CompactionDebt)
	fmt.Fprintf(w, "families %d\n", len(s.Families))
	for _, f := range s.Families {
		merge := f.Merge
		if merge == "" {
			merge = "-"
		}
		fmt.Fprintf(w, "family.%s prefix=%#02x merge=%s declared=%v\n", f.Name, f.Prefix, merge, f.Declared)
	}
	fmt.Fprintf(w, "background_errors %d\n", len(s.Errors))
	for _, c := range s.Counters {
		p := "counter." + c.Name + "."
		if c.Owner != "" { // a package's counter, under the package's name
			p = c.Owner + "." + p
		}
		fmt.Fprintf(w, "%scolumns %s\n", p, strings.Join(c.Columns, ","))
		fmt.Fprintf(w, "%sranges_hot %d\n", p, c.HotRanges)
		fmt.Fprintf(w, "%sranges_cold %d\n", p, c.ColdRanges)
		fmt.Fprintf(w, "%srows %d\n", p, c.Rows())
		fmt.Fprintf(w, "%shot_rows %d\n", p, c.HotRows)
		fmt.Fprintf(w, "%scold_rows %d\n", p, c.ColdRows)
		fmt.Fprintf(w, "%sdelta_rows %d\n", p, c.DeltaRows)
		fmt.Fprintf(w, "%smem_bytes %d\n", p, c.MemBytes)
		fmt.Fprintf(w, "%sbytes_per_row %.2f\n", p, c.BytesPerRow())
		fmt.Fprintf(w, "%shot_bytes_per_row %.2f\n", p, c.BytesPerHotRow())
		fmt.Fprintf(w, "%scold_payload_bytes %d\n", p, c.ColdPayloadBytes)
		fmt.Fprintf(w, "%scold_payload_bytes_per_row %.2f\n", p, c.PayloadBytesPerColdRow())
		fmt.Fprintf(w, "%srange_bits %d\n", p, c.RangeBits)
		fmt.Fprintf(w, "%starget_hot_bytes_per_row %.2f\n", p, c.TargetBytesPerRow)
		if c.Warning != "" {
			fmt.Fprintf(w, "%swarning %s\n", p, c.Warning)
		}
	}
}

// sinceOpen are the package figures taken since the package was opened
// (tally stats shows them against a running tally serve), true for those
// that count events (Prometheus counters), false for a maximum or a mean.
var sinceOpen = map[string]bool{
	"timeline.deliveries": true, "timeline.rebuilds": true, "timeline.rebuild_mean": false,
	"timeline.expired": true, "timeline.pages": true, "timeline.pulls": true, "timeline.inbox_entries_read": true,
	"unread.snapshot_cache_hits": true, "unread.snapshot_cache_misses": true,
	"likes.transitions": true, "likes.groups": true, "likes.max_group": false, "likes.waited": true,
	"likes.conversions": true, "likes.board_moves": true,
	"likes.ordinal_cache_hits": true, "likes.ordinal_cache_misses": true,
	"likes.state_gets": true, "likes.item_gets": true, "likes.dayscore_gets": true,
}

// SinceOpen reports whether the package figure PACKAGE.KEY is taken since
// the package was opened, and whether it counts events.
func SinceOpen(figure string) (since, counts bool) {
	counts, since = sinceOpen[figure]
	return since, counts
}
