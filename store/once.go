package store

// Idempotent writes for at-least-once delivery.
//
// A consumer of an at-least-once queue (a Kafka partition, a retried RPC)
// can see one message twice. Batch.Once(source, seq) makes a batch
// idempotent: the store remembers, per source, the highest sequence it
// applied, and a batch whose sequence is not above it commits nothing and
// reports Duplicate. The mark is written in the same Pebble batch as the
// batch's effects (source family 0x07: key = source name, value = the
// sequence), so it survives crashes and checkpoints exactly as the effects
// do, and is read back into memory by Open.
//
// Ordering assumed: each source's sequences increase in delivery order (a
// partition's offsets, a producer's counter). A sequence that arrives after
// a higher one is treated as a redelivery and dropped, so a source whose
// messages can be reordered must be split into sources that cannot be.
//
// Memory: one map entry per source: the name's bytes plus about 40 bytes
// (a Go map entry with a string key and a uint64), so a million sources
// cost roughly 50-100 MB; Pebble holds 14 bytes plus the name per source.
// Sources are never dropped on their own: ForgetSource removes one.

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tallydb/tally/internal/quote"
)

// MaxSourceLen is the longest source name.
const MaxSourceLen = 256

// onceMark is a batch's (source, seq) idempotency token.
type onceMark struct {
	source string
	seq    uint64
}

// sourceVersion is the version byte of a source mark.
const sourceVersion = 1

// appendSourceMark encodes a source's applied sequence, the value under
// the source family key (0x07 | source name).
//
//	field     width  meaning
//	--------  -----  ------------------------------------------------
//	version   1      sourceVersion
//	seq       8      highest sequence applied, big-endian
//	checksum  4      CRC-32C of everything before, big-endian
func appendSourceMark(dst []byte, seq uint64) []byte {
	start := len(dst)
	dst = append(dst, sourceVersion)
	dst = binary.BigEndian.AppendUint64(dst, seq)
	return appendChecksum(dst, start)
}

func decodeSourceMark(b []byte) (uint64, error) {
	body, err := verifyChecksum(b, "source mark")
	if err != nil {
		return 0, err
	}
	d := decoder{b: body, what: "source mark"}
	if v := d.byte(); d.err == nil && v != sourceVersion {
		return 0, fmt.Errorf("%w: source mark version %d", ErrCorrupt, v)
	}
	seq := d.u64()
	return seq, d.finish()
}

func appendSourceKey(dst []byte, source string) []byte {
	dst = append(dst, famSource)
	return append(dst, source...)
}

func validSource(source string) error {
	if len(source) == 0 || len(source) > MaxSourceLen {
		return fmt.Errorf("%w: source name of %d bytes (want 1..%d)", ErrInvalidName, len(source), MaxSourceLen)
	}
	return nil
}

// Once makes the batch idempotent for message seq of source: Commit applies
// it only if seq is above every sequence already applied for source, and
// records seq with the batch's effects. Otherwise Commit changes nothing,
// returns nil, and Duplicate reports true. See once.go for the ordering
// this assumes.
func (b *Batch) Once(source string, seq uint64) error {
	if err := validSource(source); err != nil {
		return b.fail(err)
	}
	if seq == 0 {
		return b.fail(fmt.Errorf("%w: source sequence 0 (sequences start at 1)", ErrValueRange))
	}
	b.once = onceMark{source: source, seq: seq}
	return nil
}

// Duplicate reports whether the last Commit skipped the batch as a
// redelivery (see Once).
func (b *Batch) Duplicate() bool { return b.dup }

// write adds the mark to pb; scratch is reused for the encodings (Pebble
// copies them into the batch).
func (m *onceMark) write(pb *pebble.Batch, scratch []byte) ([]byte, error) {
	scratch = appendSourceKey(scratch[:0], m.source)
	n := len(scratch)
	scratch = appendSourceMark(scratch, m.seq)
	return scratch, pb.Set(scratch[:n], scratch[n:], nil)
}

// isDuplicateLocked reports whether m was applied already. The caller holds
// DB.commit.
func (db *DB) isDuplicateLocked(m *onceMark) bool {
	applied, ok := db.sources[m.source]
	return ok && m.seq <= applied
}

// applyOnceLocked records m in memory once its batch is in Pebble. The
// caller holds DB.commit.
func (db *DB) applyOnceLocked(m *onceMark) { db.sources[m.source] = m.seq }

// SourceSeq returns the highest sequence applied for source, and whether
// the store knows the source.
func (db *DB) SourceSeq(source string) (uint64, bool) {
	db.commit.RLock()
	defer db.commit.RUnlock()
	seq, ok := db.sources[source]
	return seq, ok
}

// NumSources returns the number of sources the store remembers.
func (db *DB) NumSources() int {
	db.commit.RLock()
	defer db.commit.RUnlock()
	return len(db.sources)
}

// ForgetSource drops source's mark, so its next message of any sequence is
// applied. Use it when a source is retired.
func (db *DB) ForgetSource(source string) error {
	if err := validSource(source); err != nil {
		return err
	}
	db.commit.Lock()
	defer db.commit.Unlock()
	if err := db.writable(); err != nil {
		return err
	}
	if err := db.pdb().Delete(appendSourceKey(nil, source), pebble.Sync); err != nil {
		return fmt.Errorf("tally: forget source: %w", err)
	}
	delete(db.sources, source)
	return nil
}

// loadSources reads every source mark (Open).
func (db *DB) loadSources() error {
	return db.scan([]byte{famSource}, familyEnd(famSource), func(k, v []byte) error {
		source := string(k[1:])
		if validSource(source) != nil {
			return fmt.Errorf("%w: source key %x", ErrCorrupt, head(k))
		}
		seq, err := decodeSourceMark(v)
		if err != nil {
			return fmt.Errorf("source %s: %w", quote.Input(source), err)
		}
		if source == applyCmdSource {
			db.applyCmd = seq // not a source of its own (apply.go)
			return nil
		}
		db.sources[source] = seq
		return nil
	})
}

// IncrOnce is Incr made idempotent for message seq of source (see
// Batch.Once). It returns the column's value after the call and whether
// this call applied the increment (false: a redelivery, nothing changed).
func (c *Counter) IncrOnce(id uint64, column string, delta int64, source string, seq uint64) (uint64, bool, error) {
	b := c.db.NewBatch()
	defer b.Close()
	if err := b.incr(c.state(), id, column, delta); err != nil {
		return 0, false, err
	}
	if err := b.Once(source, seq); err != nil {
		return 0, false, err
	}
	if err := b.Commit(); err != nil {
		return 0, false, err
	}
	if b.dup {
		v, err := c.GetColumn(id, column)
		return v, false, err
	}
	return b.results[0], true, nil
}
