package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/tallydb/tally/bench/workload"
	"github.com/tallydb/tally/internal/procmem"
)

// PebbleCacheBytes is the block cache given to the pebble-merge target. It is
// set explicitly, as DESIGN.md's Pebble notes require: with Pebble's 8 MiB
// default the memtable reservation takes all of it.
const PebbleCacheBytes = 128 << 20

// PebbleSpecs returns the pebble-merge target with Sync and NoSync writes.
func PebbleSpecs() []Spec {
	return []Spec{
		{Name: "pebble-merge", Durability: DurAlways, Mode: "Sync per write", Open: func(dir string, w *workload.Workload) (Target, error) {
			return openPebble(dir, w, pebble.Sync)
		}},
		{Name: "pebble-merge", Durability: DurNone, Mode: "NoSync", Open: func(dir string, w *workload.Workload) (Target, error) {
			return openPebble(dir, w, pebble.NoSync)
		}},
	}
}

// pebbleTarget is Pebble used directly the way its documentation suggests
// for counters: one key per counter value, increments as Merge operands
// combined by an int64-add Merger, reads by point Get.
//
//	key:   id (8 bytes, big-endian) | column (1 byte)
//	value: signed varint (encoding/binary AppendVarint)
//
// Absent keys read as 0; all-zero items are not stored. Every level has a
// 10-bit bloom filter (Pebble's recommendation for point lookups), the block
// cache is PebbleCacheBytes, everything else is Pebble's default.
type pebbleTarget struct {
	dir  string
	sync *pebble.WriteOptions
	cols int
	db   *pebble.DB
	base procmem.Mem // before Open
}

// int64AddMerger adds varint-encoded int64 operands.
var int64AddMerger = &pebble.Merger{
	Name: "tally.bench.int64add",
	Merge: func(key, value []byte) (pebble.ValueMerger, error) {
		v, err := decodeVarint(value)
		return &int64Adder{sum: v}, err
	},
}

type int64Adder struct{ sum int64 }

func (a *int64Adder) MergeNewer(value []byte) error { return a.add(value) }
func (a *int64Adder) MergeOlder(value []byte) error { return a.add(value) }
func (a *int64Adder) add(value []byte) error {
	v, err := decodeVarint(value)
	a.sum += v
	return err
}
func (a *int64Adder) Finish(bool) ([]byte, io.Closer, error) {
	return binary.AppendVarint(nil, a.sum), nil, nil
}

func decodeVarint(b []byte) (int64, error) {
	v, n := binary.Varint(b)
	if n <= 0 || n != len(b) {
		return 0, fmt.Errorf("pebble-merge: bad counter value %x", b)
	}
	return v, nil
}

func openPebble(dir string, w *workload.Workload, sync *pebble.WriteOptions) (*pebbleTarget, error) {
	t := &pebbleTarget{dir: dir, sync: sync, cols: w.Columns(), base: procmem.Measure()}
	return t, t.open()
}

func (t *pebbleTarget) open() error {
	cache := pebble.NewCache(PebbleCacheBytes)
	opts := &pebble.Options{Cache: cache, Merger: int64AddMerger, Logger: quietLogger{}}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(t.dir, opts)
	cache.Unref() // the DB holds its own reference
	if err != nil {
		return err
	}
	t.db = db
	return nil
}

func pebbleKey(dst []byte, id uint64, col int) []byte {
	dst = binary.BigEndian.AppendUint64(dst[:0], id)
	return append(dst, byte(col))
}

// Load writes the items in id order through batches of 64k keys, then
// flushes and compacts the whole key space: the same settled LSM (every
// table in the last level) that sstable ingestion gives, so the run does not
// pay for the load's compactions.
func (t *pebbleTarget) Load(w *workload.Workload) error {
	b := t.db.NewBatch()
	var key, val []byte
	var err error
	w.Items(func(id uint64, vals []uint64) bool {
		for col, v := range vals {
			if v == 0 {
				continue
			}
			key = pebbleKey(key, id, col)
			val = binary.AppendVarint(val[:0], int64(v))
			if err = b.Set(key, val, nil); err != nil {
				return false
			}
		}
		if b.Count() >= 64<<10 {
			if err = b.Commit(pebble.NoSync); err != nil {
				return false
			}
			b.Reset()
		}
		return true
	})
	if err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return err
	}
	b.Close()
	if err := t.db.Flush(); err != nil {
		return err
	}
	return t.db.Compact(context.Background(), []byte{0}, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, true)
}

type pebbleClient struct {
	t   *pebbleTarget
	key []byte
	val []byte
}

func (t *pebbleTarget) NewClient() (Client, error) { return &pebbleClient{t: t}, nil }

func (c *pebbleClient) MultiGet(ids []uint64, dst []uint64) ([]uint64, error) {
	dst = dst[:0]
	for _, id := range ids {
		for col := 0; col < c.t.cols; col++ {
			c.key = pebbleKey(c.key, id, col)
			v, closer, err := c.t.db.Get(c.key)
			if errors.Is(err, pebble.ErrNotFound) {
				dst = append(dst, 0)
				continue
			}
			if err != nil {
				return dst, err
			}
			n, err := decodeVarint(v)
			closer.Close()
			if err != nil {
				return dst, err
			}
			dst = append(dst, uint64(n))
		}
	}
	return dst, nil
}

func (c *pebbleClient) Incr(id uint64, col int, delta int64) error {
	c.key = pebbleKey(c.key, id, col)
	c.val = binary.AppendVarint(c.val[:0], delta)
	return c.t.db.Merge(c.key, c.val, c.t.sync)
}

func (c *pebbleClient) Close() error { return nil }

// Memory: Own counts the block cache in use, the memtables and the table
// cache, what Pebble's Metrics say it holds for the data (the cache is
// capped at PebbleCacheBytes); Heap and RSS are the process's growth since
// Open (see Memory).
func (t *pebbleTarget) Memory() (Memory, error) {
	pm := t.db.Metrics()
	manual := pm.BlockCache.Size + int64(pm.MemTable.Size)
	m := Memory{Own: manual + pm.FileCache.Size}
	grown := procmem.Measure().Sub(t.base)
	m.Heap, m.RSS = grown.Heap, grown.RSS
	if procmem.Cgo {
		m.Heap += manual
	}
	return m, nil
}

// DiskBytes is Pebble's own count of its files: tables, WAL, manifest.
func (t *pebbleTarget) DiskBytes() (int64, error) {
	return int64(t.db.Metrics().DiskSpaceUsage()), nil
}

// Reopen closes and opens the DB, replaying whatever WAL it left.
func (t *pebbleTarget) Reopen() (time.Duration, error) {
	if err := t.db.Close(); err != nil {
		return 0, err
	}
	t.db = nil
	start := time.Now()
	err := t.open()
	return time.Since(start), err
}

func (t *pebbleTarget) Close() error {
	if t.db == nil {
		return nil
	}
	err := t.db.Close()
	t.db = nil
	return err
}

// quietLogger drops Pebble's informational lines, which would interleave
// with the report, and keeps its errors.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}
func (quietLogger) Errorf(format string, args ...any) {
	fmt.Printf("pebble: "+format+"\n", args...)
}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}
