package likes

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/tallydb/tally/internal/checksum"
)

// Value formats.
//
// The per-like and per-item values (state, item, ordinal records) are a
// few bytes each and there are billions of them, so, like store's merge
// payloads (see store.MergeTopList), they carry a version but no checksum
// of their own: they live inside Pebble's checksummed blocks and WAL, and
// their decoders reject every malformed shape. The meta records (config,
// business, secret, load intent) are few and end with a CRC-32C.

var (
	errChunkRange = errors.New("roaring chunk holds members of another chunk")
	errChunkEmpty = errors.New("empty roaring chunk")
	errCorrupt    = errors.New("malformed record")
)

// State is a user's state on an item.
type State uint8

const (
	// None: the user neither likes nor dislikes the item.
	None State = iota
	// Liked: the user likes the item.
	Liked
	// Disliked: the user dislikes the item.
	Disliked
)

// String returns "none", "like" or "dislike", the words of the CLI.
func (s State) String() string {
	switch s {
	case None:
		return "none"
	case Liked:
		return "like"
	case Disliked:
		return "dislike"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// stateRec is a decoded state record: the state and when it was set.
type stateRec struct {
	state State
	ms    int64 // Unix milliseconds of the like or dislike
}

// stateVersion is the version of a state record (the high nibble of its
// first byte).
const stateVersion = 1

// appendState encodes a state record, the value of a likes-state key.
//
//	field    width    meaning
//	-------  -------  ------------------------------------------------
//	head     1        stateVersion << 4 | state (1 like, 2 dislike)
//	time     uvarint  Unix milliseconds when the state was set
func appendState(dst []byte, s stateRec) []byte {
	dst = append(dst, stateVersion<<4|byte(s.state))
	return binary.AppendUvarint(dst, uint64(s.ms))
}

func decodeState(v []byte) (stateRec, error) {
	if len(v) < 2 || v[0]>>4 != stateVersion {
		return stateRec{}, fmt.Errorf("%w: state record %x", errCorrupt, v)
	}
	s := State(v[0] & 0xf)
	if s != Liked && s != Disliked {
		return stateRec{}, fmt.Errorf("%w: state %d", errCorrupt, s)
	}
	ms, n := uvarint(v[1:])
	if n <= 0 || 1+n != len(v) || ms > maxTimeMs {
		return stateRec{}, fmt.Errorf("%w: state record time %x", errCorrupt, v)
	}
	return stateRec{state: s, ms: int64(ms)}, nil
}

// maxTimeMs bounds like times (year 10,000): a time fits the user-list key
// and its day fits 32 bits.
const maxTimeMs = 253402300800000

// itemRec is a decoded item record. An item without an owner whose set is
// a list has no record.
type itemRec struct {
	owner   uint64 // 0: none named
	roaring bool   // its sets are roaring bitmaps of ordinals
}

const itemVersion = 1

// itemFlagRoaring marks an item whose sets are roaring bitmaps.
const itemFlagRoaring = 1

// appendItem encodes an item record, the value of a likes-item key.
//
//	field    width    meaning
//	-------  -------  ------------------------------------------------
//	version  1        itemVersion
//	flags    1        bit 0: the item's sets are roaring bitmaps
//	owner    uvarint  the owner credited with its likes, 0 for none
func appendItem(dst []byte, r itemRec) []byte {
	var flags byte
	if r.roaring {
		flags |= itemFlagRoaring
	}
	dst = append(dst, itemVersion, flags)
	return binary.AppendUvarint(dst, r.owner)
}

func decodeItem(v []byte) (itemRec, error) {
	if len(v) < 3 || v[0] != itemVersion || v[1]&^itemFlagRoaring != 0 {
		return itemRec{}, fmt.Errorf("%w: item record %x", errCorrupt, v)
	}
	owner, n := uvarint(v[2:])
	if n <= 0 || 2+n != len(v) {
		return itemRec{}, fmt.Errorf("%w: item record %x", errCorrupt, v)
	}
	return itemRec{owner: owner, roaring: v[1]&itemFlagRoaring != 0}, nil
}

const ordVersion = 1

// appendOrd encodes a user's ordinal, the value of a likes-ord key.
//
//	field    width  meaning
//	-------  -----  --------------------------------------------------
//	version  1      ordVersion
//	ord      4      the user's dense ordinal, big-endian
func appendOrd(dst []byte, ord uint32) []byte {
	return be32(append(dst, ordVersion), ord)
}

func decodeOrd(v []byte) (uint32, error) {
	if len(v) != 5 || v[0] != ordVersion {
		return 0, fmt.Errorf("%w: ordinal record %x", errCorrupt, v)
	}
	return binary.BigEndian.Uint32(v[1:]), nil
}

// appendOrdUser encodes the user of an ordinal, the value of a
// likes-ordrev key.
//
//	field    width  meaning
//	-------  -----  --------------------------------------------------
//	version  1      ordVersion
//	user     8      the user id, big-endian
func appendOrdUser(dst []byte, user uint64) []byte {
	return be64(append(dst, ordVersion), user)
}

func decodeOrdUser(v []byte) (uint64, error) {
	if len(v) != 9 || v[0] != ordVersion {
		return 0, fmt.Errorf("%w: ordinal user record %x", errCorrupt, v)
	}
	return binary.BigEndian.Uint64(v[1:]), nil
}

// checkEmpty accepts only empty values (key-only families).
func checkEmpty(_, v []byte) error {
	if len(v) != 0 {
		return fmt.Errorf("%w: %d value bytes in a key-only family", errCorrupt, len(v))
	}
	return nil
}

// Meta records: keys of the likes-meta family.
const (
	metaConfig   = "config"
	metaSecret   = "secret"
	metaBizPre   = "biz/"  // + business name
	metaLoadPre  = "load/" // + business id, 4 bytes big-endian
	metaVersion  = 1
	secretLen    = 32
	maxBizRecord = 4096
)

func appendMetaKey(dst []byte, name string) []byte {
	return append(append(dst, prefixMeta), name...)
}

func appendLoadIntentKey(dst []byte, biz uint32) []byte {
	return be32(appendMetaKey(dst, metaLoadPre), biz)
}

// checkCRC verifies and strips a trailing CRC-32C and the version byte
// (checksum.CutRecord), marking a failure as corruption.
func checkCRC(v []byte, what string) ([]byte, error) {
	body, err := checksum.CutRecord(v, metaVersion)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", errCorrupt, what, err)
	}
	return body, nil
}

// config is the persisted part of Options, and the store's likes format.
type config struct {
	boardDays        int
	roaringThreshold int
	// format is the likes format of the store, the config record's
	// version byte: 1 before issue 18's in-memory histograms (the store
	// may hold likes-hist keys: a writable New deletes them and moves it
	// to 2), 2 since (no likes-hist key is ever written).
	format byte
}

// Likes formats (config.format).
const (
	formatHistKeys = 1 // board histograms in the likes-hist family
	formatHistMem  = 2 // board histograms in memory (hist.go)
)

// appendConfig encodes the config record (meta "config").
//
//	field              width    meaning
//	-----------------  -------  ----------------------------------------
//	version            1        the likes format: 1 (likes-hist keys may
//	                            exist) or 2 (histograms in memory)
//	board days         uvarint  daily boards kept (0: none)
//	roaring threshold  uvarint  set size at which a list becomes roaring
//	checksum           4        CRC-32C of everything before, big-endian
//
// NB: the version byte is the format so that a build from before format 2
// refuses a store of format 2 (its decoder wants version 1: ErrCorrupt,
// "version 2 (want 1)") instead of answering Rank from a likes-hist family
// that no longer counts the board moves.
func appendConfig(dst []byte, c config) []byte {
	start := len(dst)
	dst = append(dst, c.format)
	dst = binary.AppendUvarint(dst, uint64(c.boardDays))
	dst = binary.AppendUvarint(dst, uint64(c.roaringThreshold))
	return checksum.AppendTrailer(dst, start)
}

func decodeConfig(v []byte) (config, error) {
	var format byte = formatHistMem
	body, err := checksum.CutRecord(v, format)
	if errors.Is(err, checksum.ErrVersion) {
		format = formatHistKeys
		body, err = checksum.CutRecord(v, format)
	}
	if err != nil {
		return config{}, fmt.Errorf("%w: config record: %v", errCorrupt, err)
	}
	days, n := uvarint(body)
	if n <= 0 {
		return config{}, fmt.Errorf("%w: config record", errCorrupt)
	}
	thr, m := uvarint(body[n:])
	if m <= 0 || n+m != len(body) || days > MaxBoardDays || thr < MinRoaringThreshold || thr > MaxRoaringThreshold {
		return config{}, fmt.Errorf("%w: config record", errCorrupt)
	}
	return config{boardDays: int(days), roaringThreshold: int(thr), format: format}, nil
}

// bizRec is a business record (meta "biz/" + name).
type bizRec struct {
	id      uint32
	created int64 // Unix ms
}

// appendBiz encodes a business record.
//
//	field     width    meaning
//	--------  -------  ---------------------------------------------------
//	version   1        metaVersion
//	id        4        the business id used in keys, big-endian, ≥ 1
//	created   uvarint  Unix milliseconds of its creation
//	checksum  4        CRC-32C of everything before, big-endian
func appendBiz(dst []byte, r bizRec) []byte {
	start := len(dst)
	dst = be32(append(dst, metaVersion), r.id)
	dst = binary.AppendUvarint(dst, uint64(r.created))
	return checksum.AppendTrailer(dst, start)
}

func decodeBiz(v []byte) (bizRec, error) {
	body, err := checkCRC(v, "business record")
	if err != nil {
		return bizRec{}, err
	}
	if len(body) < 5 {
		return bizRec{}, fmt.Errorf("%w: business record", errCorrupt)
	}
	id := binary.BigEndian.Uint32(body)
	created, n := uvarint(body[4:])
	if id == 0 || n <= 0 || 4+n != len(body) || created > maxTimeMs {
		return bizRec{}, fmt.Errorf("%w: business record", errCorrupt)
	}
	return bizRec{id: id, created: int64(created)}, nil
}

// appendSecret encodes the cursor secret (meta "secret").
//
//	field     width  meaning
//	--------  -----  ----------------------------------------------------
//	version   1      metaVersion
//	key       32     random HMAC-SHA256 key that signs cursors
//	checksum  4      CRC-32C of everything before, big-endian
func appendSecret(dst []byte, key []byte) []byte {
	start := len(dst)
	dst = append(append(dst, metaVersion), key...)
	return checksum.AppendTrailer(dst, start)
}

func decodeSecret(v []byte) ([]byte, error) {
	body, err := checkCRC(v, "cursor secret")
	if err != nil {
		return nil, err
	}
	if len(body) != secretLen {
		return nil, fmt.Errorf("%w: cursor secret of %d bytes", errCorrupt, len(body))
	}
	return body, nil
}

// appendLoadIntent encodes a load intent (meta "load/" + business id): a
// bulk load of the business began and has not finished, so the next New
// rebuilds the business's counts and boards from its sets.
//
//	field     width    meaning
//	--------  -------  ---------------------------------------------------
//	version   1        metaVersion
//	started   uvarint  Unix milliseconds when the load began
//	checksum  4        CRC-32C of everything before, big-endian
func appendLoadIntent(dst []byte, started int64) []byte {
	start := len(dst)
	dst = binary.AppendUvarint(append(dst, metaVersion), uint64(started))
	return checksum.AppendTrailer(dst, start)
}

func decodeLoadIntent(v []byte) (int64, error) {
	body, err := checkCRC(v, "load intent")
	if err != nil {
		return 0, err
	}
	t, n := uvarint(body)
	if n <= 0 || n != len(body) || t > maxTimeMs {
		return 0, fmt.Errorf("%w: load intent", errCorrupt)
	}
	return int64(t), nil
}

// checkMeta decodes a meta value by its key.
func checkMeta(k, v []byte) error {
	name := string(k[1:])
	var err error
	switch {
	case name == metaConfig:
		_, err = decodeConfig(v)
	case name == metaSecret:
		_, err = decodeSecret(v)
	case strings.HasPrefix(name, metaBizPre):
		if verr := validBusiness(name[len(metaBizPre):]); verr != nil {
			return fmt.Errorf("%w: business record under a bad name", errCorrupt)
		}
		_, err = decodeBiz(v)
	case strings.HasPrefix(name, metaLoadPre) && len(name) == len(metaLoadPre)+4:
		_, err = decodeLoadIntent(v)
	default:
		err = fmt.Errorf("%w: unknown meta key %q", errCorrupt, name)
	}
	return err
}

// uvarint is binary.Uvarint that refuses a non-minimal encoding (a
// trailing 0x80 group or a zero last byte after the first), so every value
// has one encoding and a decoded record encodes back to its bytes.
func uvarint(b []byte) (uint64, int) {
	v, n := binary.Uvarint(b)
	if n > 1 && b[n-1] == 0 {
		return 0, 0
	}
	return v, n
}
