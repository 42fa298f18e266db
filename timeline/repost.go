package timeline

// Typed entries and reposts (issue 21).
//
// An entry of a home is a post of one of four types: a post, a repost
// (the reposter's entry pointing at an original post and its author), a
// comment or a reply (pointing at the parent post and its author). The
// type and the reference travel with the entry everywhere it goes: in
// the outbox (the value of the author's tl_outbox key: empty for a post,
// as before issue 21, or an entry record), in every inbox operand (a
// store.TopEntry's Kind, Ref and RefValue; a toplist payload of version 2
// once an entry is typed), so fan-out, backfill, rebuild and pulls at read
// time all deliver the same entry.
//
// De-duplication: a post shows once in a home, at its newest visible
// instance among the page's types: the original itself (when its author
// is a visible followee) or a repost by a visible followee, whichever has
// the highest id (a repost's id is above its original's). So a post
// reposted by five followees shows once, at the newest repost, with that
// reposter as "reposted by"; a followee's post reposted later by another
// followee moves up to the repost (Twitter's order; Mastodon instead
// keeps the first position and drops reblogs of posts still among the
// newest 40). The rule depends only on the follow graph, the pairs and
// the reposts index (tl_reposts, mirrored in memory), never on what a
// page or an inbox happens to hold, so pages by cursor stay exact: no
// post shows twice across pages, none is skipped. A repost whose fan-out
// has not reached the inbox yet can hide an older instance until it
// lands (the same window as any fan-out).
//
// A repost shows only while its original is published (filter on read
// through the removed-post set: unpublishing an original removes its
// reposts from every home at once, with no job; the reposts' inbox
// entries age out) and only if the reader neither mutes the original's
// author nor is hidden from by them. The repost itself stays the
// reposter's post (their count, their outbox, PostsPage) until they
// unpublish it.
//
// Comments and replies are entries where the host wants them: a host
// publishes a comment into its author's followers' homes by publishing it
// with PublishWith and the type (and leaves out the ones it does not
// want in homes); readers filter by type (HomeOptions.Types). They are
// not de-duplicated and show while their parent is unpublished.

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"sync"

	"github.com/RoaringBitmap/roaring/v2/roaring64"

	"github.com/tallydb/tally/internal/checksum"
	"github.com/tallydb/tally/store"
)

// EntryType is the type of a timeline entry.
type EntryType uint8

// Entry types. TypePost is 0, the type of every entry written before
// issue 21.
const (
	// TypePost is an author's own post.
	TypePost EntryType = iota
	// TypeRepost is a repost: Ref is the original post, RefAuthor its
	// author; Post and Author are the repost and the reposter.
	TypeRepost
	// TypeComment is a comment on the post Ref (by RefAuthor).
	TypeComment
	// TypeReply is a reply to the post Ref (by RefAuthor).
	TypeReply
	numTypes
)

var typeNames = [numTypes]string{"post", "repost", "comment", "reply"}

// String returns the type's name: post, repost, comment or reply.
func (t EntryType) String() string {
	if t < numTypes {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Types is a set of entry types, a bit per EntryType. The zero value
// means every type.
type Types uint8

// AllTypes is every entry type.
const AllTypes Types = 1<<numTypes - 1

// TypesOf returns the set of ts.
func TypesOf(ts ...EntryType) Types {
	var s Types
	for _, t := range ts {
		s |= 1 << t
	}
	return s
}

// Has reports whether the set holds t (the empty set holds every type).
func (s Types) Has(t EntryType) bool { return s == 0 || s&(1<<t) != 0 }

// String lists the set's types, comma-separated, in type order.
func (s Types) String() string {
	if s == 0 {
		s = AllTypes
	}
	var names []string
	for t := range numTypes {
		if s&(1<<t) != 0 {
			names = append(names, t.String())
		}
	}
	return strings.Join(names, ",")
}

// ParseTypes parses a comma-separated list of type names ("post,repost").
// Errors: ErrInvalidOption for an empty list or an unknown name.
func ParseTypes(list string) (Types, error) {
	var s Types
	for _, name := range strings.Split(list, ",") {
		i := slices.Index(typeNames[:], strings.ToLower(strings.TrimSpace(name)))
		if i < 0 {
			return 0, fmt.Errorf("%w: entry type %q (want a comma-separated list of %s)", ErrInvalidOption, name, strings.Join(typeNames[:], ", "))
		}
		s |= 1 << i
	}
	return s, nil
}

// ErrBadRef is returned for a repost, comment or reply whose reference is
// not acceptable: the referenced post is not published, a repost names
// the wrong author or reposts a repost, or a repost's id is not above its
// original's (ids are time-ordered).
var ErrBadRef = errors.New("timeline: bad reference")

// PublishOptions types the posts of a PublishWith command.
type PublishOptions struct {
	// Type of the posts (TypePost, the default, needs no reference).
	Type EntryType
	// Ref is the referenced post: the original of a repost, the parent of
	// a comment or reply. It must be published.
	Ref uint64
	// RefAuthor is Ref's author; 0 takes whoever published Ref, another
	// value must be that author (ErrBadRef).
	RefAuthor uint64
}

// entryMeta is the type and reference of a post (its outbox value).
type entryMeta struct {
	kind           EntryType
	ref, refAuthor uint64
}

func (m entryMeta) entry(post, author uint64) store.TopEntry {
	return store.TopEntry{Key: post, Value: author, Kind: uint8(m.kind), Ref: m.ref, RefValue: m.refAuthor}
}

func metaOf(e store.TopEntry) entryMeta {
	return entryMeta{kind: EntryType(e.Kind), ref: e.Ref, refAuthor: e.RefValue}
}

// entryVersion is the version byte of an outbox entry record.
const entryVersion = 1

// appendEntryMeta encodes a typed post's outbox value; a post of type
// TypePost has the empty value (as every post before issue 21).
//
//	field       width  meaning
//	----------  -----  ------------------------------------------------
//	version     1      entryVersion
//	type        1      EntryType (1..3)
//	ref         8      the referenced post, big-endian
//	ref author  8      its author, big-endian
//	checksum    4      CRC-32C of everything before, big-endian
func appendEntryMeta(dst []byte, m entryMeta) []byte {
	if m.kind == TypePost {
		return dst
	}
	start := len(dst)
	dst = append(dst, entryVersion, byte(m.kind))
	dst = binary.BigEndian.AppendUint64(dst, m.ref)
	dst = binary.BigEndian.AppendUint64(dst, m.refAuthor)
	return checksum.AppendTrailer(dst, start)
}

func decodeEntryMeta(b []byte) (entryMeta, error) {
	if len(b) == 0 {
		return entryMeta{}, nil
	}
	p, err := body(b, entryVersion, "outbox entry")
	if err != nil {
		return entryMeta{}, err
	}
	r := reader{b: p}
	m := entryMeta{kind: EntryType(r.byte()), ref: r.u64(), refAuthor: r.u64()}
	if err := r.done(); err != nil {
		return entryMeta{}, fmt.Errorf("outbox entry: %w", err)
	}
	if m.kind == TypePost || m.kind >= numTypes || CheckID("", m.ref, m.refAuthor) != nil {
		return entryMeta{}, errors.New("outbox entry: field out of range")
	}
	return m, nil
}

func checkOutboxValue(_, v []byte) error {
	_, err := decodeEntryMeta(v)
	return err
}

// checkEntry reports whether an inbox entry's type and reference are in
// range (Check).
func checkEntry(e store.TopEntry) bool {
	if e.Kind == 0 {
		return e.Ref == 0 && e.RefValue == 0
	}
	return EntryType(e.Kind) < numTypes && CheckID("", e.Ref, e.RefValue) == nil
}

// --- tl_reposts ---

// repostKey is a key of tl_reposts: prefix, original post u64, repost id
// u64; the value is the reposter's id (u64).
func repostKey(dst []byte, original, repost uint64) []byte {
	dst = binary.BigEndian.AppendUint64(append(dst, pfxReposts), original)
	return binary.BigEndian.AppendUint64(dst, repost)
}

// repostRef is one repost of an original.
type repostRef struct {
	id, by uint64
}

// repostIndex mirrors tl_reposts: original post → its reposts, by id.
//
// A page asks, for nearly every entry it reads, whether the entry's post
// has been reposted (de-duplication); most posts never are. filter
// answers that without the map lookup (12% of a page's CPU in the
// timelinebench profile of 2026-11-24, with 90,000 reposted originals): a
// bit per hash of every original in m, at least 16 bits per original, so
// a clear bit (about 94% of the unreposted posts) proves there is no
// repost. A set bit may be a collision or an original whose reposts were
// all taken back (bits are cleared only when the filter is rebuilt), and
// the map decides.
type repostIndex struct {
	sync.RWMutex
	m      map[uint64][]repostRef
	filter []uint64 // nil when m is empty
	shift  uint     // 64 − log2(bits of filter)
	stale  int      // originals deleted from m since the filter was built
}

// repostFilterMinBits is the smallest filter (bits).
const repostFilterMinBits = 1 << 12

func (x *repostIndex) slot(original uint64) uint64 {
	return (original * 0x9e3779b97f4a7c15) >> x.shift // Fibonacci hashing
}

// mayHave reports whether original may have reposts; false is exact.
func (x *repostIndex) mayHave(original uint64) bool {
	if x.filter == nil {
		return false
	}
	i := x.slot(original)
	return x.filter[i/64]&(1<<(i%64)) != 0
}

func (x *repostIndex) mark(original uint64) {
	i := x.slot(original)
	x.filter[i/64] |= 1 << (i % 64)
}

// set replaces the index's contents by m (a load).
func (x *repostIndex) set(m map[uint64][]repostRef) {
	x.m = m
	x.rebuildFilter()
}

// rebuildFilter sizes the filter at 32 bits per original (at least
// repostFilterMinBits) and marks every original of m.
func (x *repostIndex) rebuildFilter() {
	x.stale = 0
	if len(x.m) == 0 {
		x.filter, x.shift = nil, 0
		return
	}
	n := uint64(repostFilterMinBits)
	for n < 32*uint64(len(x.m)) {
		n *= 2
	}
	x.filter = make([]uint64, n/64)
	x.shift = uint(64 - bits.TrailingZeros64(n))
	for o := range x.m {
		x.mark(o)
	}
}

func (x *repostIndex) add(original uint64, r repostRef) {
	rs := x.m[original]
	i, found := slices.BinarySearchFunc(rs, r.id, func(a repostRef, id uint64) int { return cmp.Compare(a.id, id) })
	if found {
		rs[i] = r
		return
	}
	x.m[original] = slices.Insert(rs, i, r)
	if len(rs) > 0 {
		return // the original was marked
	}
	if x.filter == nil || uint64(len(x.m))*16 > uint64(len(x.filter))*64 {
		x.rebuildFilter() // fewer than 16 bits per original: grow
		return
	}
	x.mark(original)
}

func (x *repostIndex) remove(original, id uint64) {
	rs := x.m[original]
	i, found := slices.BinarySearchFunc(rs, id, func(a repostRef, id uint64) int { return cmp.Compare(a.id, id) })
	if !found {
		return
	}
	if rs = slices.Delete(rs, i, i+1); len(rs) > 0 {
		x.m[original] = rs
		return
	}
	delete(x.m, original)
	// Its bit stays set until a rebuild; rebuild once the stale bits
	// could outnumber the live ones.
	if x.stale++; x.stale > len(x.m)+repostFilterMinBits/32 {
		x.rebuildFilter()
	}
}

// newerVisible reports whether original has a repost with an id above
// above by one of followees (sorted). Called under x's read lock.
func (x *repostIndex) newerVisible(original, above uint64, followees []uint64) bool {
	if !x.mayHave(original) {
		return false
	}
	rs := x.m[original]
	if len(rs) == 0 {
		return false
	}
	i, _ := slices.BinarySearchFunc(rs, above+1, func(a repostRef, id uint64) int { return cmp.Compare(a.id, id) })
	for _, r := range rs[i:] {
		if contains(followees, r.by) {
			return true
		}
	}
	return false
}

// loadReposts reads tl_reposts.
func (t *Timeline) loadReposts() (map[uint64][]repostRef, error) {
	m := map[uint64][]repostRef{}
	if t.fam.reposts == nil {
		return m, nil // a read-only store from before tl_reposts: no reposts
	}
	err := t.scan(t.fam.reposts, nil, func(k, v []byte) bool {
		o := binary.BigEndian.Uint64(k[1:])
		m[o] = append(m[o], repostRef{id: binary.BigEndian.Uint64(k[9:]), by: binary.BigEndian.Uint64(v)})
		return true
	})
	return m, err // keys come in (original, repost) order: each list is sorted
}

// Repost publishes repost, user's repost of author's post, and returns
// the repost's id: repost if non-zero, else a new id (a snowflake of the
// current time, above every id this Timeline has seen). The repost is a
// post of user's (their outbox, count and fan-out, like Publish) of type
// TypeRepost, shown in homes once per original (see the package doc,
// "Typed entries and reposts"). Reposting again with the same repost id
// is a Duplicate. Errors: ErrBadID; ErrBadRef (post is not published, is
// not author's, is itself a repost, or repost is not above post);
// ErrPostTaken (repost is another author's id).
func (t *Timeline) Repost(user, author, post, repost uint64) (PublishResult, uint64, error) {
	opts := PublishOptions{Type: TypeRepost, Ref: post, RefAuthor: author}
	if repost != 0 {
		res, err := t.PublishWith(user, opts, repost)
		if err != nil {
			return PublishResult{}, 0, err
		}
		return res[0], repost, nil
	}
	if err := CheckID("user", user); err != nil {
		return PublishResult{}, 0, err
	}
	if err := CheckID("post", post); err != nil {
		return PublishResult{}, 0, err
	}
	for range 64 {
		id := t.newPostID(post)
		res, err := t.PublishWith(user, opts, id)
		if errors.Is(err, ErrPostTaken) || err == nil && res[0].Duplicate {
			continue // a generated id someone holds: take the next
		}
		if err != nil {
			return PublishResult{}, 0, err
		}
		return res[0], id, nil
	}
	return PublishResult{}, 0, fmt.Errorf("timeline: repost of %d by %d: no free post id", post, user)
}

// twitterEpochMs is the epoch of generated post ids (Twitter's snowflake
// epoch, as the CLI's --id-epoch-ms default).
const twitterEpochMs = 1288834974657

// newPostID returns a post id above above and every id generated before:
// the snowflake (milliseconds since twitterEpochMs << 22) of now.
func (t *Timeline) newPostID(above uint64) uint64 {
	ms := t.now().UnixMilli() - twitterEpochMs
	id := uint64(max(ms, 1)) << 22
	for {
		last := t.lastGenID.Load()
		next := max(id, last+1, above+1)
		if next > MaxID {
			next = MaxID
		}
		if t.lastGenID.CompareAndSwap(last, next) {
			return next
		}
	}
}

// checkRef validates a typed publish's reference under the post locks'
// holder's view and returns the meta its posts carry.
func (t *Timeline) checkRef(opts PublishOptions, posts []uint64) (entryMeta, error) {
	if opts.Type == TypePost {
		if opts.Ref != 0 || opts.RefAuthor != 0 {
			return entryMeta{}, fmt.Errorf("%w: a post carries no reference", ErrBadRef)
		}
		return entryMeta{}, nil
	}
	if opts.Type >= numTypes {
		return entryMeta{}, fmt.Errorf("%w: entry type %d", ErrInvalidOption, opts.Type)
	}
	if err := CheckID("referenced post", opts.Ref); err != nil {
		return entryMeta{}, err
	}
	if opts.RefAuthor != 0 {
		if err := CheckID("referenced author", opts.RefAuthor); err != nil {
			return entryMeta{}, err
		}
	}
	if t.remote != nil && opts.RefAuthor != 0 && !t.remote.Local(opts.RefAuthor) {
		// The reference lives on its author's shard: this shard cannot
		// check that it is published or not itself a repost (remote.go;
		// the client's word is taken, as the id order is checked).
		if opts.Type == TypeRepost {
			for _, p := range posts {
				if p <= opts.Ref {
					return entryMeta{}, fmt.Errorf("%w: repost id %d is not above the original %d (ids are time-ordered)", ErrBadRef, p, opts.Ref)
				}
			}
		}
		return entryMeta{kind: opts.Type, ref: opts.Ref, refAuthor: opts.RefAuthor}, nil
	}
	owner, published, err := t.owner(opts.Ref)
	if err != nil {
		return entryMeta{}, err
	}
	if !published {
		return entryMeta{}, fmt.Errorf("%w: post %d is not published", ErrBadRef, opts.Ref)
	}
	if opts.RefAuthor != 0 && opts.RefAuthor != owner {
		return entryMeta{}, fmt.Errorf("%w: post %d is author %d's, not %d's", ErrBadRef, opts.Ref, owner, opts.RefAuthor)
	}
	if opts.Type == TypeRepost {
		m, _, err := t.outboxMeta(owner, opts.Ref)
		if err != nil {
			return entryMeta{}, err
		}
		if m.kind == TypeRepost {
			return entryMeta{}, fmt.Errorf("%w: post %d is a repost of %d by %d; repost the original", ErrBadRef, opts.Ref, m.ref, m.refAuthor)
		}
		for _, p := range posts {
			if p <= opts.Ref {
				return entryMeta{}, fmt.Errorf("%w: repost id %d is not above the original %d (ids are time-ordered)", ErrBadRef, p, opts.Ref)
			}
		}
	}
	return entryMeta{kind: opts.Type, ref: opts.Ref, refAuthor: owner}, nil
}

// outboxMeta reads the type and reference of author's post; ok is false
// when the outbox does not hold it.
func (t *Timeline) outboxMeta(author, post uint64) (entryMeta, bool, error) {
	var k [17]byte
	v, ok, err := t.fam.outbox.Get(outboxKey(k[:0], author, post), nil)
	if err != nil || !ok {
		return entryMeta{}, ok, err
	}
	m, err := decodeEntryMeta(v)
	if err != nil {
		return entryMeta{}, false, fmt.Errorf("%w: post %d of %d: %v", store.ErrCorrupt, post, author, err)
	}
	return m, true, nil
}

// PostEntry returns post as a home shows it (its type and reference);
// ok is false if it is not published.
func (t *Timeline) PostEntry(post uint64) (Entry, bool, error) {
	info, ok, err := t.Post(post)
	if err != nil || !ok {
		return Entry{}, ok, err
	}
	m, ok, err := t.outboxMeta(info.Author, post)
	if err != nil || !ok {
		return Entry{}, ok, err
	}
	return Entry{Post: post, Author: info.Author, Type: m.kind, Ref: m.ref, RefAuthor: m.refAuthor}, true, nil
}

// pageFilter decides which entries a page of user's home shows beyond the
// follow graph: types, removed originals, mutes and hides of originals'
// authors, and de-duplication (newest visible instance).
type pageFilter struct {
	types     Types
	followees []uint64 // visible followees, sorted
	invisible []uint64 // accounts the reader mutes or is hidden from, sorted
	reposts   *repostIndex
	removed   *roaring64.Bitmap // nil when empty
}

// shows reports whether e (from a visible followee) shows. Called under
// the reposts' and removed set's read locks.
func (f *pageFilter) shows(e store.TopEntry) bool {
	kind := EntryType(e.Kind)
	if !f.types.Has(kind) {
		return false
	}
	dedup := f.types.Has(TypeRepost) && len(f.reposts.m) > 0
	if kind != TypeRepost {
		return !dedup || !f.reposts.newerVisible(e.Key, e.Key, f.followees)
	}
	if f.removed != nil && f.removed.Contains(e.Ref) {
		return false // the original is unpublished
	}
	if contains(f.invisible, e.RefValue) {
		return false // the reader mutes the original's author, or is hidden from
	}
	return !dedup || !f.reposts.newerVisible(e.Ref, e.Key, f.followees)
}

// repostsStat is a figure of Stats: the reposts the index holds.
func (t *Timeline) repostsStat() int64 {
	t.reposts.RLock()
	defer t.reposts.RUnlock()
	n := 0
	for _, rs := range t.reposts.m {
		n += len(rs)
	}
	return int64(n)
}
