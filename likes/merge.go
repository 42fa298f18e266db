package likes

// Exact merges of per-shard parts (shard.go) into the answers one node
// holding everything would give.
//
//   - Top: each shard's top n (by likes descending, ties by item id) holds
//     every item of the global top n that lives on it, since the items
//     ahead of one on its own shard are ahead of it globally too; so the
//     global top n is the first n of the merged lists in that order, and
//     its competition ranks (1, 2, 2, 4) are computed over the merged
//     prefix.
//   - Rank: 1 + the sum over shards of the items scoring strictly more
//     (Above), so ties share a rank as on one node.
//   - A user's likes: a k-way merge of the shards' pages by (like time,
//     item) descending, the order of one node's list; the cursor holds
//     every shard's position (GatherCursor).
//   - Received: the sum of the shards' totals.

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
)

// MergeTop merges the shards' top lists (each shard's Top or TopDay of at
// least n) into the global top n (1 ≤ n): by likes descending, ties by
// item id, tied items sharing a rank. The parts' own ranks are ignored.
func MergeTop(parts [][]Entry, n int) []Entry {
	var all []Entry
	for _, p := range parts {
		all = append(all, p...)
	}
	slices.SortFunc(all, func(a, b Entry) int {
		if c := cmp.Compare(b.Likes, a.Likes); c != 0 {
			return c
		}
		return cmp.Compare(a.Item, b.Item)
	})
	all = all[:min(max(n, 0), len(all))]
	for i := range all {
		all[i].Rank = i + 1
		if i > 0 && all[i].Likes == all[i-1].Likes {
			all[i].Rank = all[i-1].Rank
		}
	}
	return all
}

// ShardPos is one shard's place in a gathered user likes list.
type ShardPos struct {
	// Shard is the shard's id.
	Shard uint32
	// Done: the shard has nothing more to list.
	Done bool
	// After, when not nil, is the last entry of the shard already listed;
	// nil: the shard lists from its newest like.
	After *Position
}

// GatherCursor is the cursor of a gathered user likes list: the list's
// business and user, and the position of every shard of the slot map it
// was made under, in shard id order. Its text form (Encode) is
// base64url without padding of
//
//	field      encoding
//	---------  ------------------------------------------------------
//	version    1 byte, gatherCursorVersion
//	business   uvarint length, then the name's bytes
//	user       uvarint
//	shards     uvarint count, then per shard: uvarint id, 1 byte state
//	           (0 from the newest, 1 after a position, 2 done) and, for
//	           state 1, uvarint like time (ms) and uvarint item
//	checksum   4 bytes, CRC-32C of everything before, big-endian
//
// It is not signed (no secret is shared by the shards): a made-up cursor
// can only name a position in a list the caller may read from its start
// anyway. The checksum catches a mangled one (ErrBadCursor).
type GatherCursor struct {
	Business string
	User     uint64
	Shards   []ShardPos
}

const gatherCursorVersion = 0x67 // 'g'

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Encode returns the cursor's text form.
func (c *GatherCursor) Encode() string {
	b := []byte{gatherCursorVersion}
	b = binary.AppendUvarint(b, uint64(len(c.Business)))
	b = append(b, c.Business...)
	b = binary.AppendUvarint(b, c.User)
	b = binary.AppendUvarint(b, uint64(len(c.Shards)))
	for _, s := range c.Shards {
		b = binary.AppendUvarint(b, uint64(s.Shard))
		switch {
		case s.Done:
			b = append(b, 2)
		case s.After != nil:
			b = append(b, 1)
			b = binary.AppendUvarint(b, uint64(s.After.Ms))
			b = binary.AppendUvarint(b, s.After.Item)
		default:
			b = append(b, 0)
		}
	}
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	return base64.RawURLEncoding.EncodeToString(b)
}

// maxGatherShards bounds the shards a cursor may name.
const maxGatherShards = 4096

// DecodeGatherCursor parses a cursor made by Encode: ErrBadCursor for
// anything else.
func DecodeGatherCursor(s string) (GatherCursor, error) {
	bad := func(why string) (GatherCursor, error) {
		return GatherCursor{}, fmt.Errorf("%w: %s", ErrBadCursor, why)
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return bad("not base64url")
	}
	if len(raw) < 5 {
		return bad("too short")
	}
	body, sum := raw[:len(raw)-4], raw[len(raw)-4:]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(sum) {
		return bad("checksum mismatch (not a cursor of a gathered list)")
	}
	if body[0] != gatherCursorVersion {
		return bad(fmt.Sprintf("version %d", body[0]))
	}
	r := bytes.NewReader(body[1:])
	uv := func() (uint64, bool) {
		v, err := binary.ReadUvarint(r)
		return v, err == nil
	}
	var c GatherCursor
	n, ok := uv()
	if !ok || n == 0 || n > MaxBusinessLen || int(n) > r.Len() {
		return bad("business")
	}
	name := make([]byte, n)
	_, _ = r.Read(name)
	c.Business = string(name)
	if c.User, ok = uv(); !ok {
		return bad("user")
	}
	count, ok := uv()
	if !ok || count == 0 || count > maxGatherShards {
		return bad("shard count")
	}
	for range count {
		id, ok := uv()
		if !ok || id == 0 || id > 1<<32-1 {
			return bad("shard id")
		}
		if k := len(c.Shards); k > 0 && uint64(c.Shards[k-1].Shard) >= id {
			return bad("shards out of order")
		}
		state, err := r.ReadByte()
		if err != nil {
			return bad("shard state")
		}
		p := ShardPos{Shard: uint32(id)}
		switch state {
		case 0:
		case 1:
			ms, ok1 := uv()
			item, ok2 := uv()
			if !ok1 || !ok2 || ms > maxTimeMs {
				return bad("shard position")
			}
			p.After = &Position{Ms: int64(ms), Item: item}
		case 2:
			p.Done = true
		default:
			return bad("shard state")
		}
		c.Shards = append(c.Shards, p)
	}
	if r.Len() != 0 {
		return bad("trailing bytes")
	}
	return c, nil
}

// Check reports whether the cursor belongs to the list of user in
// business (ErrBadCursor if not) under a slot map of shards (ids
// ascending): a cursor made under another set of shards is
// ErrCursorShards (the list must be started again).
func (c *GatherCursor) Check(business string, user uint64, shards []uint32) error {
	if c.Business != business || c.User != user {
		return fmt.Errorf("%w: issued for another list", ErrBadCursor)
	}
	if len(c.Shards) != len(shards) {
		return fmt.Errorf("%w: made for %d shards, the cluster has %d", ErrCursorShards, len(c.Shards), len(shards))
	}
	for i, s := range c.Shards {
		if s.Shard != shards[i] {
			return fmt.Errorf("%w: made for shard %d, the cluster has shard %d in its place", ErrCursorShards, s.Shard, shards[i])
		}
	}
	return nil
}

// ShardLikes is one shard's part of a gathered user likes page:
// UserLikesBefore's page (IDs and Times) and whether more follow.
type ShardLikes struct {
	Page Page
	More bool
}

// MergeUserLikes merges the shards' parts into one page of at most limit
// items, newest first (ties in time by item id, descending, as one node
// lists them). from is the cursor the parts were read after (from.Shards
// in the order of parts; a done shard's part is empty). The returned
// page's Next is the cursor of the following page, "" when every shard is
// done.
func MergeUserLikes(from GatherCursor, parts []ShardLikes, limit int) (Page, error) {
	if len(parts) != len(from.Shards) {
		return Page{}, fmt.Errorf("%w: %d parts for %d shards", ErrBadCursor, len(parts), len(from.Shards))
	}
	for i, p := range parts {
		if len(p.Page.IDs) != len(p.Page.Times) {
			return Page{}, fmt.Errorf("likes: shard %d's part has %d ids and %d times", from.Shards[i].Shard, len(p.Page.IDs), len(p.Page.Times))
		}
	}
	used := make([]int, len(parts))
	var pg Page
	for len(pg.IDs) < limit {
		best := -1
		for i, p := range parts {
			if used[i] == len(p.Page.IDs) {
				continue
			}
			if best < 0 || later(p.Page, used[i], parts[best].Page, used[best]) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		k := used[best]
		pg.IDs = append(pg.IDs, parts[best].Page.IDs[k])
		pg.Times = append(pg.Times, parts[best].Page.Times[k])
		used[best]++
	}
	next := GatherCursor{Business: from.Business, User: from.User, Shards: make([]ShardPos, len(parts))}
	done := true
	for i, p := range parts {
		s := from.Shards[i]
		switch {
		case s.Done:
		case used[i] == len(p.Page.IDs) && !p.More:
			s = ShardPos{Shard: s.Shard, Done: true}
		case used[i] > 0:
			k := used[i] - 1
			s = ShardPos{Shard: s.Shard, After: &Position{Ms: p.Page.Times[k], Item: p.Page.IDs[k]}}
		}
		next.Shards[i] = s
		done = done && s.Done
	}
	if !done {
		pg.Next = next.Encode()
	}
	return pg, nil
}

// later reports whether entry i of a comes before entry j of b in a user
// likes list: a later like time, or the same time and a greater item.
func later(a Page, i int, b Page, j int) bool {
	if a.Times[i] != b.Times[j] {
		return a.Times[i] > b.Times[j]
	}
	return a.IDs[i] > b.IDs[j]
}
