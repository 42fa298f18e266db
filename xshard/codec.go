package xshard

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Key layouts (after the family prefix byte), big-endian so Pebble's order
// is numeric order:
//
//	family        key                       value
//	------------  ------------------------  ---------------------------
//	xshard-out    target u32 | seq u64      message record (appendMessage)
//	xshard-state  'h' | target u32          outbox head (appendHead)
//	xshard-state  'i' | source u32          inbox record (appendInboxRecord)
//	xshard-state  'p'                       probe: the constant probeValue

const (
	headTag  = 'h'
	inboxTag = 'i'
	probeTag = 'p'

	recordVersion = 1
)

var probeValue = []byte{recordVersion}

func appendOutKey(dst []byte, prefix byte, target uint32, seq uint64) []byte {
	dst = append(dst, prefix)
	dst = binary.BigEndian.AppendUint32(dst, target)
	return binary.BigEndian.AppendUint64(dst, seq)
}

func appendStateKey(dst []byte, prefix byte, tag byte, id uint32) []byte {
	dst = append(dst, prefix, tag)
	return binary.BigEndian.AppendUint32(dst, id)
}

// appendChecksum appends the CRC-32C of dst[start:].
func appendChecksum(dst []byte, start int) []byte {
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// verifyChecksum returns b without its CRC-32C trailer, or ErrCorrupt.
func verifyChecksum(b []byte, what string) ([]byte, error) {
	if len(b) < 5 {
		return nil, fmt.Errorf("%w: %s of %d bytes", ErrCorrupt, what, len(b))
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: %s checksum mismatch", ErrCorrupt, what)
	}
	if body[0] != recordVersion {
		return nil, fmt.Errorf("%w: %s version %d", ErrCorrupt, what, body[0])
	}
	return body[1:], nil
}

// head is a target's outbox state: every message up to last was appended,
// every one up to acked was acknowledged by the target (and deleted).
// acked <= last always; pending = last - acked.
type head struct {
	last, acked uint64
}

// appendHead encodes an outbox head.
//
//	field     width  meaning
//	--------  -----  --------------------------------------
//	version   1      recordVersion
//	last      8      last sequence appended, big-endian
//	acked     8      last sequence acknowledged, big-endian
//	checksum  4      CRC-32C of everything before
func appendHead(dst []byte, h head) []byte {
	start := len(dst)
	dst = append(dst, recordVersion)
	dst = binary.BigEndian.AppendUint64(dst, h.last)
	dst = binary.BigEndian.AppendUint64(dst, h.acked)
	return appendChecksum(dst, start)
}

func decodeHead(b []byte) (head, error) {
	body, err := verifyChecksum(b, "outbox head")
	if err != nil {
		return head{}, err
	}
	if len(body) != 16 {
		return head{}, fmt.Errorf("%w: outbox head of %d bytes", ErrCorrupt, len(b))
	}
	h := head{last: binary.BigEndian.Uint64(body), acked: binary.BigEndian.Uint64(body[8:])}
	if h.acked > h.last {
		return head{}, fmt.Errorf("%w: outbox head acked %d past last %d", ErrCorrupt, h.acked, h.last)
	}
	return h, nil
}

// inboxRecord is what a shard knows of one source: the last sequence it
// applied, and for the entry that last changed it, the value before.
type inboxRecord struct {
	last  uint64 // last sequence applied from the source
	entry uint64 // the Raft entry index of the XRECV that set last
	prev  uint64 // last before that entry
}

// appendInboxRecord encodes an inbox record.
//
//	field     width  meaning
//	--------  -----  ----------------------------------------------
//	version   1      recordVersion
//	last      8      last sequence applied from the source
//	entry     8      entry index of the apply that set last
//	prev      8      last before that entry (what a re-apply decides on)
//	checksum  4      CRC-32C of everything before
func appendInboxRecord(dst []byte, r inboxRecord) []byte {
	start := len(dst)
	dst = append(dst, recordVersion)
	dst = binary.BigEndian.AppendUint64(dst, r.last)
	dst = binary.BigEndian.AppendUint64(dst, r.entry)
	dst = binary.BigEndian.AppendUint64(dst, r.prev)
	return appendChecksum(dst, start)
}

func decodeInboxRecord(b []byte) (inboxRecord, error) {
	body, err := verifyChecksum(b, "inbox record")
	if err != nil {
		return inboxRecord{}, err
	}
	if len(body) != 24 {
		return inboxRecord{}, fmt.Errorf("%w: inbox record of %d bytes", ErrCorrupt, len(b))
	}
	r := inboxRecord{last: binary.BigEndian.Uint64(body), entry: binary.BigEndian.Uint64(body[8:]), prev: binary.BigEndian.Uint64(body[16:])}
	if r.prev > r.last {
		return inboxRecord{}, fmt.Errorf("%w: inbox record prev %d past last %d", ErrCorrupt, r.prev, r.last)
	}
	return r, nil
}

// appendArgv appends one message's argv: argc, then each argument's length
// and bytes (uvarints).
func appendArgv(dst []byte, argv [][]byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(argv)))
	for _, a := range argv {
		dst = binary.AppendUvarint(dst, uint64(len(a)))
		dst = append(dst, a...)
	}
	return dst
}

// uvarint reads a minimal uvarint from b.
func uvarint(b []byte, what string) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 || n != uvarintLen(v) {
		return 0, nil, fmt.Errorf("%w: %s: bad varint", ErrBadMessage, what)
	}
	return v, b[n:], nil
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// decodeArgv reads one argv and checks it against the limits; the
// arguments alias b.
func decodeArgv(b []byte) ([][]byte, []byte, error) {
	argc, b, err := uvarint(b, "argc")
	if err != nil {
		return nil, nil, err
	}
	if argc == 0 || argc > MaxArgs {
		return nil, nil, fmt.Errorf("%w: %d arguments (want 1..%d)", ErrBadMessage, argc, MaxArgs)
	}
	argv := make([][]byte, argc)
	size := 0
	for i := range argv {
		var n uint64
		if n, b, err = uvarint(b, "argument length"); err != nil {
			return nil, nil, err
		}
		if n > uint64(len(b)) {
			return nil, nil, fmt.Errorf("%w: argument of %d bytes, %d left", ErrBadMessage, n, len(b))
		}
		argv[i], b = b[:n:n], b[n:]
		size += int(n)
	}
	if size > MaxMessageBytes {
		return nil, nil, fmt.Errorf("%w: message of %d bytes (max %d)", ErrBadMessage, size, MaxMessageBytes)
	}
	if len(argv[0]) == 0 {
		return nil, nil, fmt.Errorf("%w: empty command name", ErrBadMessage)
	}
	return argv, b, nil
}

// checkArgv validates a message to append.
func checkArgv(argv [][]byte) error {
	if len(argv) == 0 || len(argv) > MaxArgs {
		return fmt.Errorf("%w: %d arguments (want 1..%d)", ErrBadMessage, len(argv), MaxArgs)
	}
	if len(argv[0]) == 0 {
		return fmt.Errorf("%w: empty command name", ErrBadMessage)
	}
	size := 0
	for _, a := range argv {
		size += len(a)
	}
	if size > MaxMessageBytes {
		return fmt.Errorf("%w: message of %d bytes (max %d)", ErrBadMessage, size, MaxMessageBytes)
	}
	return nil
}

// appendMessage encodes an outbox message record.
//
//	field     width   meaning
//	--------  ------  ---------------------------------------------
//	version   1       recordVersion
//	millis    8       append time (the entry's clock), Unix ms
//	argv      varies  argc uvarint, then per argument len uvarint | bytes
//	checksum  4       CRC-32C of everything before
func appendMessage(dst []byte, millis int64, argv [][]byte) []byte {
	start := len(dst)
	dst = append(dst, recordVersion)
	dst = binary.BigEndian.AppendUint64(dst, uint64(millis))
	dst = appendArgv(dst, argv)
	return appendChecksum(dst, start)
}

func decodeMessage(b []byte) (int64, [][]byte, error) {
	body, err := verifyChecksum(b, "outbox message")
	if err != nil {
		return 0, nil, err
	}
	if len(body) < 8 {
		return 0, nil, fmt.Errorf("%w: outbox message of %d bytes", ErrCorrupt, len(b))
	}
	millis := int64(binary.BigEndian.Uint64(body))
	argv, rest, err := decodeArgv(body[8:])
	if err == nil && len(rest) != 0 {
		err = fmt.Errorf("%d trailing bytes", len(rest))
	}
	if err != nil {
		return 0, nil, fmt.Errorf("%w: outbox message: %v", ErrCorrupt, err)
	}
	return millis, argv, nil
}

// AppendBatch encodes messages as TALLY.XRECV's last argument.
//
//	field     width   meaning
//	--------  ------  ---------------------------------------------
//	version   1       1
//	count     uvarint number of messages (1..MaxBatchMessages)
//	messages  varies  each: argc uvarint, then len uvarint | bytes per argument
//	checksum  4       CRC-32C of everything before
func AppendBatch(dst []byte, msgs [][][]byte) []byte {
	start := len(dst)
	dst = append(dst, recordVersion)
	dst = binary.AppendUvarint(dst, uint64(len(msgs)))
	for _, m := range msgs {
		dst = appendArgv(dst, m)
	}
	return appendChecksum(dst, start)
}

// DecodeBatch decodes AppendBatch's encoding and checks it against the
// limits (ErrBadMessage). The arguments alias b.
func DecodeBatch(b []byte) ([][][]byte, error) {
	if len(b) > MaxBatchBytes {
		return nil, fmt.Errorf("%w: batch of %d bytes (max %d)", ErrBadMessage, len(b), MaxBatchBytes)
	}
	body, err := verifyChecksum(b, "message batch")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadMessage, err)
	}
	n, body, err := uvarint(body, "count")
	if err != nil {
		return nil, err
	}
	if n == 0 || n > MaxBatchMessages {
		return nil, fmt.Errorf("%w: %d messages (want 1..%d)", ErrBadMessage, n, MaxBatchMessages)
	}
	msgs := make([][][]byte, n)
	for i := range msgs {
		if msgs[i], body, err = decodeArgv(body); err != nil {
			return nil, err
		}
	}
	if len(body) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrBadMessage, len(body))
	}
	return msgs, nil
}
