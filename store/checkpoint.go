package store

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tallydb/tally/hot"
	"github.com/tallydb/tally/internal/limits"
)

// Checkpoints.
//
// A checkpoint is fuzzy: it notes S, the sequence of the last committed
// record, then copies each hot table segment by segment while writers go on.
// A chunk may therefore hold effects of records after S. That is harmless
// because log records are after-images: recovery replays every record after S
// over the chunks, and each row ends at its last after-image.
//
// The chunks of checkpoint S are written with unsynced batches; the final
// batch points meta "ckpt" at S, range-deletes the log up to S and older
// checkpoints' chunks, and is synced. Pebble's WAL is sequential, so the
// synced final batch makes every earlier chunk (and every record applied to
// memory before it) durable too. A crash before the final batch leaves "ckpt"
// at the previous checkpoint, whose chunks and log are intact, and the
// checkpoint's intent (written before its first chunk, removed by the final
// batch), by which Open knows the chunks of S are garbage (lifetime.go).

// chunkVersion is the version byte of a checkpoint chunk. Version 2 added
// the range width (a counter's ranges can widen, widen.go); version 1
// chunks, cut at the width of the counter's schema, are still read.
const chunkVersion = 2

// Chunk kinds: which table of the range the rows come from.
const (
	chunkHot   byte = 0 // the hot table (live or frozen)
	chunkDelta byte = 1 // a cold delta: first column is the deletion marker
)

// ckptPointerVersion is the version byte of the meta "ckpt" value.
// Version 1 had no chunk count; it is still read.
const ckptPointerVersion = 2

// chunkHeader is the decoded header of a checkpoint chunk.
type chunkHeader struct {
	counterID uint32
	rangeID   uint64
	kind      byte // chunkHot or chunkDelta
	bits      uint // range width the range id and keys are of; 0 in a version 1 chunk (the schema's)
	ncols     int
	rangeRows int // rows in the whole range when the chunk was cut (a size hint)
	nrows     int
}

// appendChunk encodes a checkpoint chunk: some rows of one hot range.
//
//	field        width      meaning
//	-----------  ---------  -----------------------------------------------
//	version      1          chunkVersion
//	counter      4          counter id, big-endian
//	range        8          range id, big-endian
//	kind         1          chunkHot or chunkDelta (rows carry a leading
//	                        deletion marker column)
//	range bits   1          width the range id and keys are of, 8..64
//	                        (version 2; absent in version 1)
//	ncols        uvarint    values per row
//	range rows   uvarint    rows in the whole range (size hint for loading)
//	nrows        uvarint    rows in this chunk
//	per row:     uvarint    key (low id bits)
//	             uvarint×n  values
//	checksum     4          CRC-32C of everything before, big-endian
//
// rows holds nrows × (1 + ncols) words: key, then values.
func appendChunk(dst []byte, h chunkHeader, rows []uint64) []byte {
	start := len(dst)
	dst = append(dst, chunkVersion)
	dst = binary.BigEndian.AppendUint32(dst, h.counterID)
	dst = binary.BigEndian.AppendUint64(dst, h.rangeID)
	dst = append(dst, h.kind, byte(h.bits))
	dst = binary.AppendUvarint(dst, uint64(h.ncols))
	dst = binary.AppendUvarint(dst, uint64(h.rangeRows))
	dst = binary.AppendUvarint(dst, uint64(h.nrows))
	for _, w := range rows {
		dst = binary.AppendUvarint(dst, w)
	}
	return appendChecksum(dst, start)
}

// decodeChunk verifies and decodes a chunk, calling fn for each row (vals is
// reused). Decode errors wrap ErrCorrupt; fn's errors are returned as is.
func decodeChunk(b []byte, fn func(h *chunkHeader, key uint64, vals []uint64) error) (chunkHeader, error) {
	var h chunkHeader
	body, err := verifyChecksum(b, "checkpoint chunk")
	if err != nil {
		return h, err
	}
	d := decoder{b: body, what: "checkpoint chunk"}
	version := d.byte()
	if d.err == nil && version != 1 && version != chunkVersion {
		return h, fmt.Errorf("%w: checkpoint chunk version %d", ErrCorrupt, version)
	}
	h.counterID = d.u32()
	h.rangeID = d.u64()
	h.kind = d.byte()
	if d.err == nil && h.kind > chunkDelta {
		return h, fmt.Errorf("%w: checkpoint chunk kind %d", ErrCorrupt, h.kind)
	}
	if version >= 2 {
		h.bits = uint(d.byte())
		if d.err == nil && (h.bits < limits.MinRangeBits || h.bits > maxAutoBits) {
			return h, fmt.Errorf("%w: checkpoint chunk range bits %d", ErrCorrupt, h.bits)
		}
	}
	ncols, rangeRows, nrows := d.uvarint(), d.uvarint(), d.uvarint()
	if d.err != nil {
		return h, d.err
	}
	if ncols > limits.MaxTableColumns || nrows > uint64(len(body)) || rangeRows > 1<<limits.MaxRangeBits {
		return h, fmt.Errorf("%w: checkpoint chunk header (ncols %d, rows %d)", ErrCorrupt, ncols, nrows)
	}
	h.ncols, h.rangeRows, h.nrows = int(ncols), int(rangeRows), int(nrows)
	var buf [limits.MaxTableColumns]uint64
	vals := buf[:h.ncols]
	for i := 0; i < h.nrows; i++ {
		key := d.uvarint()
		for j := range vals {
			vals[j] = d.uvarint()
		}
		if d.err != nil {
			return h, d.err
		}
		if err := fn(&h, key, vals); err != nil {
			return h, err
		}
	}
	return h, d.finish()
}

// ckptPointer is the decoded meta "ckpt" value.
type ckptPointer struct {
	seq       uint64 // log sequence the checkpoint includes
	chunks    uint64 // chunk keys the checkpoint wrote
	hasChunks bool   // false for a version 1 pointer
}

// appendCkptPointer encodes the meta "ckpt" value, which names the
// checkpoint recovery loads.
//
//	field     width    meaning
//	--------  -------  ------------------------------------------------
//	version   1        ckptPointerVersion (1: no chunks field)
//	seq       8        log sequence the checkpoint includes, big-endian
//	chunks    uvarint  chunk keys the checkpoint wrote (version 2), so
//	                   recovery sees a chunk that is gone
//	checksum  4        CRC-32C of everything before, big-endian
//
// A pointer without hasChunks is encoded as version 1 (tests of old stores).
func appendCkptPointer(dst []byte, p ckptPointer) []byte {
	start := len(dst)
	if !p.hasChunks {
		dst = append(dst, 1)
		dst = binary.BigEndian.AppendUint64(dst, p.seq)
		return appendChecksum(dst, start)
	}
	dst = append(dst, ckptPointerVersion)
	dst = binary.BigEndian.AppendUint64(dst, p.seq)
	dst = binary.AppendUvarint(dst, p.chunks)
	return appendChecksum(dst, start)
}

func decodeCkptPointer(b []byte) (ckptPointer, error) {
	var p ckptPointer
	body, err := verifyChecksum(b, "checkpoint pointer")
	if err != nil {
		return p, err
	}
	d := decoder{b: body, what: "checkpoint pointer"}
	v := d.byte()
	if d.err == nil && v != 1 && v != ckptPointerVersion {
		return p, fmt.Errorf("%w: checkpoint pointer version %d", ErrCorrupt, v)
	}
	p.seq = d.u64()
	if v == ckptPointerVersion {
		p.chunks, p.hasChunks = d.uvarint(), true
	}
	return p, d.finish()
}

// checkpointBatchBytes is the size at which checkpoint chunk batches are
// committed, at most a quarter of the memtable (batchLimit).
const checkpointBatchBytes = 8 << 20

// batchLimit caps the size of tally's own large batches (checkpoint chunks,
// job blocks) below Pebble's large-batch threshold (half a memtable): a
// larger batch makes Pebble rotate its WAL at every commit, and a WAL
// rotation on a WAL that has failed panics inside Pebble with its mutex
// released, which no recover can catch (see pebble.go).
func (db *DB) batchLimit(n int) int { return min(n, int(db.opts.MemTableSize/4)) }

type tableRef struct {
	cs   *counterState
	rs   *rangeState
	bits uint // width of the snapshot rs was taken from
}

// Checkpoint writes every hot table to Pebble so the log before it can be
// dropped. It returns once the checkpoint is durable. It is a no-op when
// nothing was written since the last one.
//
// A store that cannot take writes (closed, read-only, failed, disk full)
// cannot checkpoint either; Checkpoint returns the reason.
func (db *DB) Checkpoint() error { return db.checkpoint(true) }

// checkpoint is Checkpoint; flush starts a flush after the log truncation
// (Close passes false: the process is going away, and the next Open
// replays the little WAL there is).
func (db *DB) checkpoint(flush bool) (err error) {
	defer recoverPebble(&err)
	db.ckpt.Lock()
	defer db.ckpt.Unlock()
	if err := db.writable(); err != nil {
		return err
	}
	db.commit.Lock()
	tierChanges := db.tierChanges.Load()
	if db.commit.lastSeq == db.ckpt.seq && tierChanges != db.ckpt.tierChanges {
		// A seal or merge changed what the chunks must hold (a delta was
		// folded into blocks) without a log record: an empty record gives
		// the new checkpoint its own sequence.
		if err := db.commitEmptyRecordLocked(); err != nil {
			db.commit.Unlock()
			return err
		}
	}
	seq := db.commit.lastSeq
	var tables []tableRef
	cat := db.cat.Load()
	for id := uint32(0); id < cat.nextID; id++ {
		cs := cat.byID[id]
		if cs == nil {
			continue
		}
		set := cs.ranges.Load()
		for _, rs := range set.m {
			tables = append(tables, tableRef{cs, rs, set.bits})
		}
	}
	db.commit.Unlock()
	if seq == db.ckpt.seq {
		db.ckpt.last = time.Now()
		return nil
	}
	// Bytes written from here on count toward the next checkpoint.
	logBytes, logRecords := db.logBytes.Load(), db.logRecords.Load()

	// The intent makes chunks of seq provably garbage until the final
	// batch; chunks of an earlier failed attempt at the same seq go first.
	in := db.newIntent(&intent{kind: intentCheckpoint, seq: seq})
	{
		b := db.pdb().NewBatch()
		err := b.DeleteRange(appendCheckpointPrefix(nil, seq), appendCheckpointPrefix(nil, seq+1), nil)
		if err == nil {
			err = db.commitIntents(b, pebble.Sync, []*intent{in}, nil)
		}
		b.Close()
		if err != nil {
			return fmt.Errorf("tally: checkpoint: %w", err)
		}
	}
	db.step("checkpoint: intent written")
	w := chunkWriter{db: db, seq: seq, maxRows: db.opts.CheckpointChunkRows}
	err = w.writeTables(tables)
	w.close()
	if err != nil {
		db.abandonCheckpoint(in)
		return err
	}
	db.step("checkpoint: chunks written")

	fin := db.pdb().NewBatch()
	defer fin.Close()
	if err := db.writable(); err != nil {
		return err
	}
	ptr := ckptPointer{seq: seq, chunks: w.chunks, hasChunks: true}
	if err := fin.Set(appendMetaKey(nil, metaCheckpoint), appendCkptPointer(nil, ptr), nil); err != nil {
		return err
	}
	if err := fin.DeleteRange(appendLogKey(nil, 0), appendLogKey(nil, seq+1), nil); err != nil {
		return err
	}
	if err := fin.DeleteRange(appendCheckpointPrefix(nil, 0), appendCheckpointPrefix(nil, seq), nil); err != nil {
		return err
	}
	if err := db.commitIntents(fin, pebble.Sync, nil, []*intent{in}); err != nil {
		db.abandonCheckpoint(in)
		return fmt.Errorf("tally: checkpoint: %w", pebbleErr(err))
	}
	db.step("checkpoint: finished")
	if flush {
		db.flushRangeDels()
	}
	db.ckpt.seq = seq
	db.ckpt.tierChanges = tierChanges
	db.ckpt.last = time.Now()
	db.logBytes.Add(-logBytes)
	db.logRecords.Add(-logRecords)
	db.sweep(false)
	return nil
}

// abandonCheckpoint deletes the chunks of a failed checkpoint and its
// intent. Best effort: on failure the intent stays and the next Open (or a
// later checkpoint, whose final batch deletes every older chunk) resolves
// it.
func (db *DB) abandonCheckpoint(in *intent) {
	if db.env().failed.Load() != nil {
		return // the final batch may have reached disk: leave it to Open
	}
	b := db.pdb().NewBatch()
	defer b.Close()
	if err := b.DeleteRange(appendCheckpointPrefix(nil, in.seq), appendCheckpointPrefix(nil, in.seq+1), nil); err != nil {
		return
	}
	db.commitIntents(b, pebble.NoSync, nil, []*intent{in})
}

// writeTables writes every table's chunks.
func (w *chunkWriter) writeTables(tables []tableRef) error {
	for _, t := range tables {
		if err := w.writeRange(t); err != nil {
			return err
		}
	}
	return w.flush()
}

// chunkWriter cuts hot tables into chunks and writes them in batches.
type chunkWriter struct {
	db      *DB
	seq     uint64
	maxRows int
	chunks  uint64 // chunk keys written
	batch   *pebble.Batch
	rows    []uint64
	buf     []byte
	key     []byte
}

func (w *chunkWriter) writeRange(t tableRef) error {
	var chunk uint32
	// NB: the order matters. Chunk numbers order the load: hot rows first,
	// then the frozen delta, then the live delta, newest last.
	for _, tk := range []struct {
		t    *hot.Table
		kind byte
	}{{t.rs.hot, chunkHot}, {t.rs.frozen, chunkDelta}, {t.rs.delta, chunkDelta}} {
		if tk.t == nil {
			continue
		}
		if err := w.writeTable(t, tk.t, tk.kind, &chunk); err != nil {
			return err
		}
	}
	return nil
}

func (w *chunkWriter) writeTable(t tableRef, tbl *hot.Table, kind byte, chunk *uint32) error {
	ncols := tbl.NumColumns()
	h := chunkHeader{counterID: t.cs.id, rangeID: t.rs.id, kind: kind, bits: t.bits, ncols: ncols, rangeRows: tbl.Len()}
	stride := 1 + ncols
	w.rows = w.rows[:0]
	for seg := 0; seg < tbl.NumSegments(); seg++ {
		// Copy segments out first: RangeSegment holds the segment's read
		// lock, and writers (holding DB.commit) must not wait on Pebble.
		tbl.RangeSegment(seg, func(key uint64, vals []uint64) bool {
			w.rows = append(w.rows, key)
			// Columns added after ncols was read only hold values written
			// after seq; the log replays them.
			for i := 0; i < ncols; i++ {
				var v uint64
				if i < len(vals) {
					v = vals[i]
				}
				w.rows = append(w.rows, v)
			}
			return true
		})
		// Cut full chunks; the remainder waits for the next segment.
		last := seg == tbl.NumSegments()-1
		off := 0
		for len(w.rows)-off >= w.maxRows*stride || last && off < len(w.rows) {
			n := min((len(w.rows)-off)/stride, w.maxRows)
			h.nrows = n
			if err := w.emit(&h, *chunk, w.rows[off:off+n*stride]); err != nil {
				return err
			}
			*chunk++
			off += n * stride
		}
		w.rows = append(w.rows[:0], w.rows[off:]...)
	}
	return nil
}

func (w *chunkWriter) emit(h *chunkHeader, chunk uint32, rows []uint64) error {
	if w.batch == nil {
		w.batch = w.db.pdb().NewBatch()
	}
	w.buf = appendChunk(w.buf[:0], *h, rows)
	w.key = appendCheckpointKey(w.key[:0], w.seq, h.counterID, h.rangeID, chunk)
	if err := w.batch.Set(w.key, w.buf, nil); err != nil {
		return err
	}
	w.chunks++
	if w.batch.Len() >= w.db.batchLimit(checkpointBatchBytes) {
		return w.flush()
	}
	return nil
}

func (w *chunkWriter) flush() error {
	if w.batch == nil {
		return nil
	}
	// NB: every commit to Pebble is preceded by this check; see batchLimit.
	err := w.db.writable()
	if err == nil {
		err = w.batch.Commit(pebble.NoSync)
	}
	w.batch.Close()
	w.batch = nil
	if err != nil {
		return fmt.Errorf("tally: checkpoint chunks: %w", pebbleErr(err))
	}
	return nil
}

func (w *chunkWriter) close() {
	if w.batch != nil {
		w.batch.Close()
		w.batch = nil
	}
}
