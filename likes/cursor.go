package likes

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
)

// Cursors are opaque to callers: a page's position, signed so that a
// cursor tally did not issue (made up, altered, from another store or for
// another list) is ErrBadCursor rather than a silent wrong page.
//
// cursorVersion is the version byte of a cursor.
const cursorVersion = 1

// Cursor kinds.
const (
	curLikersList    byte = 1 // likers in user id order (list sets)
	curLikersRoaring byte = 2 // likers in ordinal order (roaring sets)
	curUserLikes     byte = 3 // a user's likes, newest first
)

const (
	cursorBodyLen = 1 + 1 + 1 + 4 + 8 + 8 + 8
	cursorMACLen  = 12
	cursorLen     = cursorBodyLen + cursorMACLen
)

// cursor is a decoded cursor: the list it belongs to (kind, set kind,
// business, subject) and the position after the last id returned.
type cursor struct {
	kind    byte
	setKind byte   // kindLike or kindDislike for likers cursors, else 0
	biz     uint32 // business id
	subject uint64 // item (likers) or user (user likes)
	a, b    uint64 // position: user or ordinal in a; time and item (user likes)
}

// appendCursor encodes c and signs it with key, then base64url.
//
//	field     width  meaning
//	--------  -----  ----------------------------------------------------
//	version   1      cursorVersion
//	kind      1      curLikersList, curLikersRoaring or curUserLikes
//	set kind  1      1 like, 2 dislike (likers cursors), 0 otherwise
//	business  4      business id
//	subject   8      the item (likers) or the user (user likes)
//	a         8      last user id / ordinal returned, or last like time (ms)
//	b         8      last item returned (user likes), else 0
//	mac       12     HMAC-SHA256 of everything before under the store's
//	                 secret, truncated
//
// All integers are big-endian. The result is URL-safe base64 without
// padding (58 characters).
func appendCursor(dst []byte, key []byte, c cursor) []byte {
	var raw [cursorLen]byte
	body := raw[:0]
	body = append(body, cursorVersion, c.kind, c.setKind)
	body = binary.BigEndian.AppendUint32(body, c.biz)
	body = binary.BigEndian.AppendUint64(body, c.subject)
	body = binary.BigEndian.AppendUint64(body, c.a)
	body = binary.BigEndian.AppendUint64(body, c.b)
	m := hmac.New(sha256.New, key)
	m.Write(body)
	body = m.Sum(body)[:cursorLen]
	return base64.RawURLEncoding.AppendEncode(dst, body)
}

// decodeCursor checks and decodes s.
func decodeCursor(key []byte, s string) (cursor, error) {
	if base64.RawURLEncoding.DecodedLen(len(s)) != cursorLen {
		return cursor{}, fmt.Errorf("%w: %d characters", ErrBadCursor, len(s))
	}
	var raw [cursorLen + 3]byte
	// Strict: a last character with stray low bits is another string
	// for the same bytes, not a cursor tally issued.
	n, err := base64.RawURLEncoding.Strict().Decode(raw[:], []byte(s))
	if err != nil || n != cursorLen {
		return cursor{}, fmt.Errorf("%w: not base64url", ErrBadCursor)
	}
	body := raw[:cursorBodyLen]
	m := hmac.New(sha256.New, key)
	m.Write(body)
	if !hmac.Equal(m.Sum(nil)[:cursorMACLen], raw[cursorBodyLen:cursorLen]) {
		return cursor{}, fmt.Errorf("%w: not issued by this store", ErrBadCursor)
	}
	if body[0] != cursorVersion {
		return cursor{}, fmt.Errorf("%w: version %d", ErrBadCursor, body[0])
	}
	c := cursor{
		kind: body[1], setKind: body[2],
		biz:     binary.BigEndian.Uint32(body[3:]),
		subject: binary.BigEndian.Uint64(body[7:]),
		a:       binary.BigEndian.Uint64(body[15:]),
		b:       binary.BigEndian.Uint64(body[23:]),
	}
	switch c.kind {
	case curLikersList, curLikersRoaring:
		if c.setKind != kindLike && c.setKind != kindDislike || c.b != 0 || c.kind == curLikersRoaring && c.a > 0xFFFFFFFF {
			return cursor{}, fmt.Errorf("%w: malformed likers cursor", ErrBadCursor)
		}
	case curUserLikes:
		if c.setKind != 0 || c.a > maxTimeMs {
			return cursor{}, fmt.Errorf("%w: malformed user likes cursor", ErrBadCursor)
		}
	default:
		return cursor{}, fmt.Errorf("%w: kind %d", ErrBadCursor, c.kind)
	}
	return c, nil
}
