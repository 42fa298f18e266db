package meta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/tallydb/tally/shard"
	"github.com/tallydb/tally/store"
)

// Prefix is the key family of the group's state in its store.
const Prefix = 0x60

// familySpec declares the state's family.
var familySpec = store.FamilySpec{Name: "shard-meta", Prefix: Prefix, MinKeyLen: 1, MaxKeyLen: 16, MaxValueLen: store.MaxFamilyValueLen}

var keyState = []byte{Prefix, 's', 't', 'a', 't', 'e'}

// recentKept is how many request ids the state remembers.
const recentKept = 1024

const (
	stateVersion   = 1
	commandVersion = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt: the group's stored state or a command is damaged.
var ErrCorrupt = errors.New("meta: corrupt state")

// reqID identifies a proposal across its retries.
type reqID struct{ node, seq uint64 }

// result is what a request's apply gave: the map's epoch after it, or a
// refusal (code, message).
type result struct {
	code  uint8 // 0: applied
	epoch uint64
	msg   string
}

// state is the state machine: the map and the recent requests.
type state struct {
	index  uint64     // last entry applied
	m      *shard.Map // nil before Create
	recent []reqEntry // oldest first
	byID   map[reqID]result
}

type reqEntry struct {
	id reqID
	r  result
}

func newState() *state { return &state{byID: map[reqID]result{}} }

// appendState encodes the state:
//
//	field     width      meaning
//	--------  ---------  ---------------------------------------------
//	version   1          stateVersion
//	index     8          last entry applied, big-endian
//	map       uvarint+n  shard.Map.Encode, empty before Create
//	recent    uvarint    number of remembered requests, oldest first:
//	  node    8          proposing member, big-endian
//	  seq     8          its request sequence, big-endian
//	  code    1          0 applied, else the refusal's code (errCodes)
//	  epoch   uvarint    the map's epoch after the request
//	  msg     uvarint+n  the refusal's message
//	crc       4          CRC-32C of everything before, big-endian
func appendState(dst []byte, s *state) []byte {
	start := len(dst)
	dst = append(dst, stateVersion)
	dst = binary.BigEndian.AppendUint64(dst, s.index)
	var mb []byte
	if s.m != nil {
		mb = s.m.Encode()
	}
	dst = binary.AppendUvarint(dst, uint64(len(mb)))
	dst = append(dst, mb...)
	dst = binary.AppendUvarint(dst, uint64(len(s.recent)))
	for _, e := range s.recent {
		dst = binary.BigEndian.AppendUint64(dst, e.id.node)
		dst = binary.BigEndian.AppendUint64(dst, e.id.seq)
		dst = append(dst, e.r.code)
		dst = binary.AppendUvarint(dst, e.r.epoch)
		dst = binary.AppendUvarint(dst, uint64(len(e.r.msg)))
		dst = append(dst, e.r.msg...)
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

func decodeState(b []byte) (*state, error) {
	bad := func(what string) (*state, error) { return nil, fmt.Errorf("%w: %s", ErrCorrupt, what) }
	if len(b) < 1+8+4 {
		return bad("short")
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return bad("checksum mismatch")
	}
	if body[0] != stateVersion {
		return bad(fmt.Sprintf("version %d", body[0]))
	}
	s := newState()
	s.index = binary.BigEndian.Uint64(body[1:])
	r := body[9:]
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(r)
		if n <= 0 {
			return 0, false
		}
		r = r[n:]
		return v, true
	}
	n, ok := uv()
	if !ok || n > uint64(len(r)) {
		return bad("map")
	}
	if n > 0 {
		m, err := shard.Decode(r[:n])
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		s.m = m
	}
	r = r[n:]
	cnt, ok := uv()
	if !ok || cnt > uint64(len(r)/18) {
		return bad("request count")
	}
	for range cnt {
		if len(r) < 17 {
			return bad("request")
		}
		e := reqEntry{id: reqID{binary.BigEndian.Uint64(r), binary.BigEndian.Uint64(r[8:])}, r: result{code: r[16]}}
		r = r[17:]
		var ok1, ok2 bool
		e.r.epoch, ok1 = uv()
		ml, ok2 := uv()
		if !ok1 || !ok2 || ml > uint64(len(r)) {
			return bad("request result")
		}
		e.r.msg = string(r[:ml])
		r = r[ml:]
		s.remember(e)
	}
	if len(r) != 0 {
		return bad("trailing bytes")
	}
	return s, nil
}

// remember records a request's result, forgetting the oldest beyond
// recentKept.
func (s *state) remember(e reqEntry) {
	s.recent = append(s.recent, e)
	s.byID[e.id] = e.r
	if len(s.recent) > recentKept {
		delete(s.byID, s.recent[0].id)
		s.recent = append(s.recent[:0], s.recent[1:]...)
	}
}

// clone copies the state (the map is immutable and shared).
func (s *state) clone() *state {
	c := &state{index: s.index, m: s.m, recent: append([]reqEntry(nil), s.recent...), byID: make(map[reqID]result, len(s.byID))}
	for k, v := range s.byID {
		c.byID[k] = v
	}
	return c
}

// appendCommand encodes a proposal (an entry's command):
//
//	field     width  meaning
//	--------  -----  ----------------------------------
//	version   1      commandVersion
//	node      8      proposing member, big-endian
//	seq       8      request sequence, big-endian
//	op        rest   shard.Op.Encode
func appendCommand(dst []byte, id reqID, op shard.Op) []byte {
	dst = append(dst, commandVersion)
	dst = binary.BigEndian.AppendUint64(dst, id.node)
	dst = binary.BigEndian.AppendUint64(dst, id.seq)
	return append(dst, op.Encode()...)
}

func decodeCommand(b []byte) (reqID, shard.Op, error) {
	if len(b) < 17 || b[0] != commandVersion {
		return reqID{}, shard.Op{}, fmt.Errorf("%w: command of %d bytes", ErrCorrupt, len(b))
	}
	id := reqID{binary.BigEndian.Uint64(b[1:]), binary.BigEndian.Uint64(b[9:])}
	op, err := shard.DecodeOp(b[17:])
	return id, op, err
}

// errCodes are the refusals a reply carries, by code (index+1).
var errCodes = []error{
	shard.ErrInvalidMap, shard.ErrInvalidOp, shard.ErrStaleTerm, shard.ErrUnchanged,
	shard.ErrUnknownShard, shard.ErrShardExists, shard.ErrMapExists, shard.ErrNoMap, shard.ErrCorrupt,
	// Appended: a code's meaning never changes (it is stored in the
	// remembered results).
	shard.ErrNodeExists, shard.ErrAddrInUse, shard.ErrBadAddr,
}

// codeOf returns err's code (ErrCorrupt's for an unnamed error, which
// shard never returns).
func codeOf(err error) uint8 {
	for i, e := range errCodes {
		if errors.Is(err, e) {
			return uint8(i + 1)
		}
	}
	return codeOf(shard.ErrCorrupt) // in the list: no recursion past this
}

// errOf rebuilds the error of a code and message.
func errOf(code uint8, msg string) error {
	if code == 0 || int(code) > len(errCodes) {
		return fmt.Errorf("%w: refusal code %d: %s", ErrCorrupt, code, msg)
	}
	return fmt.Errorf("%w (%s)", errCodes[code-1], msg)
}

// Replies of Apply to the proposing member:
//
//	field   width      meaning
//	------  ---------  -------------------------------------------------
//	kind    1          replyApplied, replyRefused or replyRepeated
//	then    ...        applied: the new map (shard.Map.Encode);
//	                   refused: code 1, message rest;
//	                   repeated: the first apply's result (code 1, epoch
//	                   uvarint, message rest)
const (
	replyApplied  = 1
	replyRefused  = 2
	replyRepeated = 3
)

// apply applies one command to s (a copy: the caller keeps it only once
// it is stored) and returns its reply.
func (s *state) apply(index uint64, data []byte) []byte {
	s.index = index
	id, op, err := decodeCommand(data)
	if err != nil {
		// A damaged command cannot come from Propose; refuse it the same
		// way everywhere, remembering nothing.
		return append([]byte{replyRefused, codeOf(shard.ErrCorrupt)}, err.Error()...)
	}
	if r, ok := s.byID[id]; ok {
		out := []byte{replyRepeated, r.code}
		out = binary.AppendUvarint(out, r.epoch)
		return append(out, r.msg...)
	}
	n, err := s.m.Apply(op)
	if err != nil {
		r := result{code: codeOf(err), epoch: epochOf(s.m), msg: err.Error()}
		s.remember(reqEntry{id: id, r: r})
		return append([]byte{replyRefused, r.code}, r.msg...)
	}
	s.m = n
	s.remember(reqEntry{id: id, r: result{epoch: n.Epoch}})
	return n.AppendEncoded([]byte{replyApplied})
}

func epochOf(m *shard.Map) uint64 {
	if m == nil {
		return 0
	}
	return m.Epoch
}
