package timeline

// Encodings of the values the package writes (those of merge families,
// tl_followers, tl_active and tl_inbox, are store's), of job payloads and
// cursors, and of the cursor handed to clients. Every one starts with a
// version byte and ends with a CRC-32C (internal/checksum) of everything
// before it, big-endian; decoders reject every malformed shape and are
// fuzzed (records_test.go), and golden tests pin the bytes.

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/tallydb/tally/internal/checksum"
)

var errShort = errors.New("truncated")

// reader decodes the fields of a record; the first error sticks.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) byte() byte {
	if r.err != nil || r.off >= len(r.b) {
		r.err = errShort
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *reader) u64() uint64 {
	if r.err != nil || r.off+8 > len(r.b) {
		r.err = errShort
		return 0
	}
	v := binary.BigEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.err = errors.New("bad varint")
		return 0
	}
	r.off += n
	return v
}

// done reports an error, or trailing bytes.
func (r *reader) done() error {
	if r.err != nil {
		return r.err
	}
	if r.off != len(r.b) {
		return fmt.Errorf("%d trailing bytes", len(r.b)-r.off)
	}
	return nil
}

// body checks b's trailing checksum and version byte and returns what lies
// between them (checksum.CutRecord), naming the record in an error.
func body(b []byte, version byte, what string) ([]byte, error) {
	p, err := checksum.CutRecord(b, version)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return p, nil
}

// --- tl_config ---

const configVersion = 1

// appendConfig encodes the persisted configuration (tl_config key "c").
//
//	field           width     meaning
//	--------------  --------  --------------------------------------------
//	version         1         configVersion
//	inbox cap       uvarint   Config.InboxCap
//	active window   uvarint   Config.ActiveWindow in seconds
//	pull threshold  uvarint   Config.PullThreshold
//	chunk size      uvarint   Config.ChunkSize
//	checksum        4         CRC-32C of everything before, big-endian
func appendConfig(dst []byte, c Config) []byte {
	start := len(dst)
	dst = append(dst, configVersion)
	dst = binary.AppendUvarint(dst, uint64(c.InboxCap))
	dst = binary.AppendUvarint(dst, uint64(c.ActiveWindow/time.Second))
	dst = binary.AppendUvarint(dst, c.PullThreshold)
	dst = binary.AppendUvarint(dst, uint64(c.ChunkSize))
	return checksum.AppendTrailer(dst, start)
}

func decodeConfig(b []byte) (Config, error) {
	p, err := body(b, configVersion, "config")
	if err != nil {
		return Config{}, err
	}
	r := reader{b: p}
	capacity, window, pull, chunk := r.uvarint(), r.uvarint(), r.uvarint(), r.uvarint()
	if err := r.done(); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	if capacity == 0 || window == 0 || pull == 0 || chunk == 0 || window > uint64(maxActiveWindow/time.Second) ||
		capacity > 1<<30 || chunk > 1<<30 {
		return Config{}, errors.New("config: field out of range")
	}
	c := Config{InboxCap: int(capacity), ActiveWindow: time.Duration(window) * time.Second, PullThreshold: pull, ChunkSize: int(chunk)}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

func checkConfigValue(_, v []byte) error {
	_, err := decodeConfig(v)
	return err
}

// --- tl_posts ---

const postVersion = 1

// postRecord is the value of a tl_posts key: who published the post and,
// once its fan-out finished, how many inboxes it was delivered to.
type postRecord struct {
	author    uint64
	delivered uint64
	fanned    bool // the fan-out finished (delivered is final)
}

// appendPost encodes a post record.
//
//	field      width     meaning
//	---------  --------  -----------------------------------------------
//	version    1         postVersion
//	author     8         author's user id, big-endian
//	flags      1         bit 0: the fan-out finished
//	delivered  uvarint   inboxes the fan-out wrote (0 until it finished)
//	checksum   4         CRC-32C of everything before, big-endian
func appendPost(dst []byte, p postRecord) []byte {
	start := len(dst)
	dst = append(dst, postVersion)
	dst = binary.BigEndian.AppendUint64(dst, p.author)
	var flags byte
	if p.fanned {
		flags = 1
	}
	dst = append(dst, flags)
	dst = binary.AppendUvarint(dst, p.delivered)
	return checksum.AppendTrailer(dst, start)
}

func decodePost(b []byte) (postRecord, error) {
	p, err := body(b, postVersion, "post record")
	if err != nil {
		return postRecord{}, err
	}
	r := reader{b: p}
	rec := postRecord{author: r.u64()}
	flags := r.byte()
	rec.delivered = r.uvarint()
	if err := r.done(); err != nil {
		return postRecord{}, fmt.Errorf("post record: %w", err)
	}
	if rec.author == 0 || rec.author > MaxID || flags > 1 || flags == 0 && rec.delivered != 0 {
		return postRecord{}, errors.New("post record: field out of range")
	}
	rec.fanned = flags == 1
	return rec, nil
}

func checkPostValue(_, v []byte) error {
	_, err := decodePost(v)
	return err
}

// --- tl_followees ---

const followeesVersion = 1

// appendFollowees encodes a user's followee list: ids strictly ascending.
//
//	field      width     meaning
//	---------  --------  -----------------------------------------------
//	version    1         followeesVersion
//	n          uvarint   ids that follow
//	first      uvarint   the smallest id
//	gaps       uvarint   n-1 times: id − previous id (≥ 1)
//	checksum   4         CRC-32C of everything before, big-endian
//
// Delta varints make an edge 1-3 bytes for ids of a dense space.
func appendFollowees(dst []byte, ids []uint64) []byte {
	start := len(dst)
	dst = append(dst, followeesVersion)
	dst = binary.AppendUvarint(dst, uint64(len(ids)))
	var prev uint64
	for i, id := range ids {
		if i == 0 {
			dst = binary.AppendUvarint(dst, id)
		} else {
			dst = binary.AppendUvarint(dst, id-prev)
		}
		prev = id
	}
	return checksum.AppendTrailer(dst, start)
}

// decodeFollowees appends the ids of an encoded list to dst[:0].
func decodeFollowees(b []byte, dst []uint64) ([]uint64, error) {
	dst = dst[:0]
	p, err := body(b, followeesVersion, "followee list")
	if err != nil {
		return dst, err
	}
	r := reader{b: p}
	n := r.uvarint()
	if r.err == nil && n > uint64(len(p)) {
		return dst, fmt.Errorf("followee list claims %d ids in %d bytes", n, len(p))
	}
	var prev uint64
	for i := uint64(0); i < n && r.err == nil; i++ {
		v := r.uvarint()
		if i == 0 {
			prev = v
		} else {
			if v == 0 || v > MaxID-prev {
				return dst, errors.New("followee list: ids not strictly ascending")
			}
			prev += v
		}
		if prev == 0 || prev > MaxID {
			return dst, errors.New("followee list: id out of range")
		}
		dst = append(dst, prev)
	}
	if err := r.done(); err != nil {
		return dst, fmt.Errorf("followee list: %w", err)
	}
	return dst, nil
}

func checkFolloweesValue(_, v []byte) error {
	_, err := decodeFollowees(v, nil)
	return err
}

// --- job payloads and cursors ---

const payloadVersion = 1

// Operations of a fan-out and a pair job.
const (
	opAdd    = 1 // fan-out: deliver; pair: backfill after a follow
	opRemove = 2 // fan-out: remove; pair: clean up after an unfollow
)

// appendPayload encodes the payload of a fan-out job (a = author, b = post)
// or a pair job (a = user, b = followee).
//
//	field      width  meaning
//	---------  -----  -----------------------------------------------
//	version    1      payloadVersion
//	op         1      opAdd or opRemove
//	a          8      big-endian
//	b          8      big-endian
//	checksum   4      CRC-32C of everything before, big-endian
func appendPayload(dst []byte, op byte, a, b uint64) []byte {
	start := len(dst)
	dst = append(dst, payloadVersion, op)
	dst = binary.BigEndian.AppendUint64(dst, a)
	dst = binary.BigEndian.AppendUint64(dst, b)
	return checksum.AppendTrailer(dst, start)
}

func decodePayload(p []byte) (op byte, a, b uint64, err error) {
	q, err := body(p, payloadVersion, "job payload")
	if err != nil {
		return 0, 0, 0, err
	}
	r := reader{b: q}
	op, a, b = r.byte(), r.u64(), r.u64()
	if err := r.done(); err != nil {
		return 0, 0, 0, fmt.Errorf("job payload: %w", err)
	}
	if op != opAdd && op != opRemove || a == 0 || a > MaxID || b == 0 || b > MaxID {
		return 0, 0, 0, errors.New("job payload: field out of range")
	}
	return op, a, b, nil
}

// jobCursor is the progress of a fan-out or expiry job: where the next
// chunk starts, and what the job did so far.
type jobCursor struct {
	phase byte   // expiry: 0 push set, 1 inboxes; fan-out: 0
	next  uint64 // next ordinal to visit
	count uint64 // fan-out: inboxes written; expiry: users expired
}

// appendJobCursor encodes a job cursor.
//
//	field      width    meaning
//	---------  -------  -----------------------------------------------
//	version    1        payloadVersion
//	phase      1        job-defined
//	next       uvarint  the next ordinal to visit
//	count      uvarint  what the job did so far
//	checksum   4        CRC-32C of everything before, big-endian
func appendJobCursor(dst []byte, c jobCursor) []byte {
	start := len(dst)
	dst = append(dst, payloadVersion, c.phase)
	dst = binary.AppendUvarint(dst, c.next)
	dst = binary.AppendUvarint(dst, c.count)
	return checksum.AppendTrailer(dst, start)
}

func decodeJobCursor(p []byte) (jobCursor, error) {
	if p == nil {
		return jobCursor{}, nil // before the first chunk
	}
	q, err := body(p, payloadVersion, "job cursor")
	if err != nil {
		return jobCursor{}, err
	}
	r := reader{b: q}
	c := jobCursor{phase: r.byte(), next: r.uvarint(), count: r.uvarint()}
	if err := r.done(); err != nil {
		return jobCursor{}, fmt.Errorf("job cursor: %w", err)
	}
	if c.phase > 1 || c.next > 1<<32 {
		return jobCursor{}, errors.New("job cursor: field out of range")
	}
	return c, nil
}

// Kinds of page cursors.
const (
	cursorHome      = 'h'
	cursorFollowers = 'r'
	cursorFollowees = 'e'
	cursorPosts     = 'p'
	cursorMuted     = 'm'
	cursorHidden    = 'd'
)

const cursorVersion = 1

// cursorLen is the length of a decoded cursor.
const cursorLen = 1 + 1 + 8 + 8 + 4

// encodeCursor returns the opaque cursor of a page of kind for owner (the
// reader, or the account whose list is paged), continuing after pos (a post
// id, a follower ordinal, or a followee id).
//
//	field      width  meaning
//	---------  -----  -----------------------------------------------
//	version    1      cursorVersion
//	kind       1      cursorHome, cursorFollowers or cursorFollowees
//	owner      8      user id the page belongs to, big-endian
//	pos        8      the last position returned, big-endian
//	checksum   4      CRC-32C of everything before, big-endian
//
// The bytes are then base64url-encoded without padding (30 characters).
// The checksum is not a secret: it tells tally's cursors from anything
// else (a typo, a cursor of another page), not from a forgery, which can
// only ask for a page the caller could ask for anyway.
func encodeCursor(kind byte, owner, pos uint64) string {
	b := make([]byte, 0, cursorLen)
	b = append(b, cursorVersion, kind)
	b = binary.BigEndian.AppendUint64(b, owner)
	b = binary.BigEndian.AppendUint64(b, pos)
	b = checksum.AppendTrailer(b, 0)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor returns the position of cursor s, issued for a page of kind
// for owner. The empty cursor is the first page (ok false).
func decodeCursor(s string, kind byte, owner uint64) (pos uint64, ok bool, err error) {
	if s == "" {
		return 0, false, nil
	}
	if len(s) > 64 {
		return 0, false, fmt.Errorf("%w: %d characters", ErrBadCursor, len(s))
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != cursorLen {
		return 0, false, fmt.Errorf("%w: not a tally cursor", ErrBadCursor)
	}
	p, err := body(b, cursorVersion, "cursor")
	if err != nil {
		return 0, false, fmt.Errorf("%w: %v", ErrBadCursor, err)
	}
	if p[0] != kind {
		return 0, false, fmt.Errorf("%w: a cursor of another kind of page", ErrBadCursor)
	}
	if o := binary.BigEndian.Uint64(p[1:]); o != owner {
		return 0, false, fmt.Errorf("%w: issued for user %d, not %d", ErrBadCursor, o, owner)
	}
	return binary.BigEndian.Uint64(p[9:]), true, nil
}
