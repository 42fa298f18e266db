package store

import "encoding/binary"

// Family prefixes; the layouts are declared in the package doc.
const (
	famMeta       byte = 0x01
	famLog        byte = 0x02
	famCheckpoint byte = 0x03
	famColdBlock  byte = 0x04
	famColdRange  byte = 0x05
	famJob        byte = 0x06 // durable job queue (queue.go)
	famSource     byte = 0x07 // idempotent-write sources (once.go)
)

// Meta key names.
const (
	metaFormat     = "format"
	metaCheckpoint = "ckpt"
	metaCounter    = "counter/"
	metaFamily     = "family/"    // + prefix byte: a declared family (family.go)
	metaIntent     = "intent/"    // + u64 id: see lifetime.go
	metaRangeBits  = "rangebits/" // + u32 counter id: a widened range width (widen.go)
)

// formatVersion is the store-wide format version kept under meta "format"
// and in the TALLY marker file. Format 2 added key families and merges
// (its Pebble instance has tally's Merger); a format 1 store is upgraded on
// its first successful Open by this build, after which older builds refuse
// it (ErrIncompatible) instead of compacting merge operands they cannot
// read. Format 3 added widening ranges (schema version 2, chunk version 2,
// meta "rangebits/"); older builds would misread a widened counter's
// chunks, so they refuse it too; format 3 also added counter owners
// (schema flag, see owner.go), which packages claim on their first
// writable open. Formats 1 and 2 need no rewrite: their schemas and
// chunks read as fixed-width and unowned.
const (
	formatVersion    = 3
	minFormatVersion = 1 // oldest format this build opens (and upgrades)
)

func appendMetaKey(dst []byte, name string) []byte {
	dst = append(dst, famMeta)
	return append(dst, name...)
}

func appendCounterMetaKey(dst []byte, counterID uint32) []byte {
	dst = appendMetaKey(dst, metaCounter)
	return binary.BigEndian.AppendUint32(dst, counterID)
}

func appendLogKey(dst []byte, seq uint64) []byte {
	dst = append(dst, famLog)
	return binary.BigEndian.AppendUint64(dst, seq)
}

// decodeLogKey returns the sequence of a log key.
func decodeLogKey(k []byte) (uint64, bool) {
	if len(k) != 9 || k[0] != famLog {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[1:]), true
}

func appendCheckpointPrefix(dst []byte, ckptSeq uint64) []byte {
	dst = append(dst, famCheckpoint)
	return binary.BigEndian.AppendUint64(dst, ckptSeq)
}

func appendCheckpointKey(dst []byte, ckptSeq uint64, counterID uint32, rangeID uint64, chunk uint32) []byte {
	dst = appendCheckpointPrefix(dst, ckptSeq)
	dst = binary.BigEndian.AppendUint32(dst, counterID)
	dst = binary.BigEndian.AppendUint64(dst, rangeID)
	return binary.BigEndian.AppendUint32(dst, chunk)
}

// familyEnd returns the smallest key greater than every key of the family.
func familyEnd(fam byte) []byte { return []byte{fam + 1} }

func appendColdRangeKey(dst []byte, counterID uint32, rangeID uint64) []byte {
	dst = append(dst, famColdRange)
	dst = binary.BigEndian.AppendUint32(dst, counterID)
	return binary.BigEndian.AppendUint64(dst, rangeID)
}

func decodeColdRangeKey(k []byte) (counterID uint32, rangeID uint64, ok bool) {
	if len(k) != 13 || k[0] != famColdRange {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(k[1:]), binary.BigEndian.Uint64(k[5:]), true
}

// appendColdBlockPrefix is the prefix of every block of one cold range.
func appendColdBlockPrefix(dst []byte, counterID uint32, rangeID uint64) []byte {
	dst = append(dst, famColdBlock)
	dst = binary.BigEndian.AppendUint32(dst, counterID)
	return binary.BigEndian.AppendUint64(dst, rangeID)
}

func appendColdBlockKey(dst []byte, counterID uint32, rangeID uint64, blockID uint32) []byte {
	dst = appendColdBlockPrefix(dst, counterID, rangeID)
	return binary.BigEndian.AppendUint32(dst, blockID)
}
