package unread

// Broadcast red dots and system notices.
//
// A channel ("activity", "system", ...) has a tag, the number of times it
// was marked, and a sorted list of notice ids; both live in memory (loaded
// by New) and in families unread_chan and unread_notice. A user has, per
// channel, a dot tag (the channel's tag when the user last cleared it) and
// a last-read notice id, in family unread_tag. So Mark and Post write one
// key, whatever the number of users; Has compares two numbers and Unread
// counts the ids above the user's by binary search.
//
// The published design's rules for a user with no tag: a user who never
// cleared a channel has a tag older than every mark, so a broadcast reaches
// them, the first mark included (Has is true once the channel was marked);
// a user who never read a channel's notices is new and has 0 unread (they
// count from their first Read). Reads never write: Has and Unread only
// compare numbers. A channel nobody declared reads as no dot and 0 unread,
// like a missing Redis key; Clear and Read of one are refused
// (ErrUnknownChannel), and Mark and Post declare it. Tags are not dropped
// for idleness: they are small and on disk (not memory), and dropping one
// would lose what its user has read. ForgetTags drops a user's tags on
// request (their dots show again, their notices read 0).
//
// Writes of one (user, channel) tag are serialized (tagLocks). Mark and Post of
// one channel are serialized by the channel's mutex and published to memory
// after their commit, so a reader never sees a tag or notice that is not
// durable.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/tallydb/tally/internal/checksum"
	"github.com/tallydb/tally/internal/quote"
	"github.com/tallydb/tally/store"
)

// channel is one channel's state in memory.
type channel struct {
	id   uint32
	name string

	mu  sync.Mutex    // serializes Mark and Post
	tag atomic.Uint64 // marks so far (committed)

	nmu     sync.RWMutex
	notices []uint64 // committed notice ids, ascending
}

func (ch *channel) noticeCount() int {
	ch.nmu.RLock()
	defer ch.nmu.RUnlock()
	return len(ch.notices)
}

// newest returns the largest notice id (0 if none).
func (ch *channel) newest() uint64 {
	ch.nmu.RLock()
	defer ch.nmu.RUnlock()
	if len(ch.notices) == 0 {
		return 0
	}
	return ch.notices[len(ch.notices)-1]
}

// above returns the number of notices with an id above id.
func (ch *channel) above(id uint64) uint64 {
	ch.nmu.RLock()
	defer ch.nmu.RUnlock()
	i := sort.Search(len(ch.notices), func(i int) bool { return ch.notices[i] > id })
	return uint64(len(ch.notices) - i)
}

func (ch *channel) hasNotice(id uint64) bool {
	ch.nmu.RLock()
	defer ch.nmu.RUnlock()
	_, ok := slices.BinarySearch(ch.notices, id)
	return ok
}

func (ch *channel) addNotice(id uint64) {
	ch.nmu.Lock()
	defer ch.nmu.Unlock()
	if n := len(ch.notices); n == 0 || ch.notices[n-1] < id {
		ch.notices = append(ch.notices, id)
		return
	}
	i, _ := slices.BinarySearch(ch.notices, id)
	ch.notices = slices.Insert(ch.notices, i, id)
}

// Tag kinds: the last byte of a tag key.
const (
	tagDot    byte = 'd'
	tagNotice byte = 'n'
)

func channelKey(id uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte{prefixChannel}, id)
}

func noticeKey(dst []byte, ch uint32, id uint64) []byte {
	dst = append(dst, prefixNotice)
	dst = binary.BigEndian.AppendUint32(dst, ch)
	return binary.BigEndian.AppendUint64(dst, id)
}

func tagKey(dst []byte, user uint64, ch uint32, kind byte) []byte {
	dst = append(dst, prefixTag)
	dst = binary.BigEndian.AppendUint64(dst, user)
	dst = binary.BigEndian.AppendUint32(dst, ch)
	return append(dst, kind)
}

// appendChannel encodes a channel record (family unread_chan, key: the
// channel id).
//
//	field     width     meaning
//	--------  --------  ------------------------------------------------------
//	version   1         1
//	tag       uvarint   marks so far
//	namelen   uvarint   bytes of the name (1-64)
//	name      namelen   the channel's name
//	crc       4         CRC-32C, big-endian, of the bytes before it
func appendChannel(dst []byte, name string, tag uint64) []byte {
	start := len(dst)
	dst = append(dst, 1)
	dst = binary.AppendUvarint(dst, tag)
	dst = binary.AppendUvarint(dst, uint64(len(name)))
	dst = append(dst, name...)
	return checksum.AppendTrailer(dst, start)
}

func decodeChannel(v []byte) (name string, tag uint64, err error) {
	if len(v) < 1+1+1+1+4 {
		return "", 0, fmt.Errorf("channel record of %d bytes", len(v))
	}
	body, err := checksum.CutRecord(v, 1)
	if err != nil {
		return "", 0, fmt.Errorf("channel record: %w", err)
	}
	off := 0
	tag, k := binary.Uvarint(body[off:])
	if k <= 0 {
		return "", 0, errors.New("channel record: bad tag")
	}
	off += k
	n, k := binary.Uvarint(body[off:])
	if k <= 0 || n != uint64(len(body)-off-k) {
		return "", 0, errors.New("channel record: bad name length")
	}
	name = string(body[off+k:])
	if err := store.ValidateName(name); err != nil {
		return "", 0, fmt.Errorf("channel record: %v", err)
	}
	return name, tag, nil
}

func checkChannelValue(key, v []byte) error {
	if binary.BigEndian.Uint32(key[1:]) == 0 {
		return errors.New("channel id 0")
	}
	_, _, err := decodeChannel(v)
	return err
}

func checkNoticeValue(key, v []byte) error {
	if len(v) != 0 {
		return fmt.Errorf("notice value of %d bytes, want none", len(v))
	}
	if binary.BigEndian.Uint64(key[5:]) == 0 {
		return errors.New("notice id 0")
	}
	return nil
}

// appendTag encodes a user's tag (family unread_tag, key: user u64,
// channel u32, kind byte 'd' dot or 'n' notice).
//
//	field     width     meaning
//	--------  --------  ------------------------------------------------------
//	version   1         1
//	value     uvarint   dot: the channel's tag at the user's last clear;
//	                    notice: the newest notice id at the user's last read
//	crc       4         CRC-32C, big-endian, of the bytes before it
func appendTag(dst []byte, v uint64) []byte {
	start := len(dst)
	dst = append(dst, 1)
	dst = binary.AppendUvarint(dst, v)
	return checksum.AppendTrailer(dst, start)
}

func decodeTag(v []byte) (uint64, error) {
	if len(v) < 1+1+4 {
		return 0, fmt.Errorf("tag of %d bytes", len(v))
	}
	body, err := checksum.CutRecord(v, 1)
	if err != nil {
		return 0, fmt.Errorf("tag: %w", err)
	}
	t, k := binary.Uvarint(body)
	if k <= 0 || k != len(body) {
		return 0, errors.New("tag: bad value")
	}
	return t, nil
}

func checkTagValue(key, v []byte) error {
	if k := key[len(key)-1]; k != tagDot && k != tagNotice {
		return fmt.Errorf("tag kind %#x", k)
	}
	_, err := decodeTag(v)
	return err
}

// loadChannels reads every channel and notice into memory (New); a store
// reopen reloads them the same way (reopen.go).
func (x *Unread) loadChannels() error {
	x.chans.mu.Lock()
	defer x.chans.mu.Unlock()
	return x.reloadChannelsLocked()
}

// lookupChannel returns the named channel, or ErrUnknownChannel.
func (x *Unread) lookupChannel(name string) (*channel, error) {
	if ch := (*x.chans.byName.Load())[name]; ch != nil {
		return ch, nil
	}
	if err := store.ValidateName(name); err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrInvalidChannel, quote.Input(name), err)
	}
	return nil, fmt.Errorf("%w %s (mark it or post to it first)", ErrUnknownChannel, quote.Input(name))
}

// channelFor returns the channel named name for a write that commits b.
// A channel nobody declared yet is declared in b itself, so the
// declaration and the write that made it are one commit, all or nothing:
// then publish (to call once b committed) makes it visible, and unlock
// (always to call, after publish) lets other declarations proceed.
func (x *Unread) channelFor(name string, b *store.Batch) (ch *channel, publish, unlock func(), err error) {
	if ch := (*x.chans.byName.Load())[name]; ch != nil {
		return ch, nil, func() {}, nil
	}
	if err := store.ValidateName(name); err != nil {
		return nil, nil, nil, fmt.Errorf("%w %s: %v", ErrInvalidChannel, quote.Input(name), err)
	}
	x.chans.mu.Lock()
	old := *x.chans.byName.Load()
	if ch := old[name]; ch != nil {
		x.chans.mu.Unlock()
		return ch, nil, func() {}, nil
	}
	if len(x.chans.byID) >= MaxChannels {
		x.chans.mu.Unlock()
		return nil, nil, nil, fmt.Errorf("%w (%d)", ErrTooManyChannels, MaxChannels)
	}
	ch = &channel{id: uint32(len(x.chans.byID) + 1), name: name}
	if err := x.chanFam.Put(b, channelKey(ch.id), appendChannel(nil, name, 0)); err != nil {
		x.chans.mu.Unlock()
		return nil, nil, nil, err
	}
	publish = func() {
		m := make(map[string]*channel, len(old)+1)
		for k, v := range old {
			m[k] = v
		}
		m[name] = ch
		x.chans.byID = append(x.chans.byID, ch)
		x.chans.byName.Store(&m)
	}
	return ch, publish, x.chans.mu.Unlock, nil
}

// ChannelInfo describes a channel.
type ChannelInfo struct {
	Name    string
	Tag     uint64 // marks so far
	Notices int    // notices posted
	Newest  uint64 // the newest notice id (0: none)
}

// Channels returns every channel, in creation order.
func (x *Unread) Channels() []ChannelInfo {
	var out []ChannelInfo
	for _, ch := range x.channelList() {
		out = append(out, ChannelInfo{Name: ch.name, Tag: ch.tag.Load(), Notices: ch.noticeCount(), Newest: ch.newest()})
	}
	return out
}

func (x *Unread) channelList() []*channel {
	x.chans.mu.Lock()
	defer x.chans.mu.Unlock()
	return slices.Clone(x.chans.byID)
}

// Mark puts a dot on the channel for every user at once: one write,
// whatever the number of users. It declares the channel if new and returns
// the channel's new tag.
func (x *Unread) Mark(channel string) (uint64, error) {
	b := x.db.NewBatch()
	defer b.Close()
	ch, publish, unlock, err := x.channelFor(channel, b)
	if err != nil {
		return 0, err
	}
	defer unlock()
	ch.mu.Lock()
	defer ch.mu.Unlock()
	t := ch.tag.Load() + 1
	if err := x.chanFam.Put(b, channelKey(ch.id), appendChannel(nil, ch.name, t)); err != nil {
		return 0, err
	}
	if err := b.Commit(); err != nil {
		return 0, err
	}
	if b.Duplicate() {
		// A re-apply of a replicated entry (store apply.go) whose mark is
		// in the store already (or what the entry's later commands made
		// of it): it changed nothing, so memory does not change either,
		// neither the tag nor a channel it would have declared
		// (TestReappliedMarkKeepsTag).
		return ch.tag.Load(), nil
	}
	ch.tag.Store(t)
	if publish != nil {
		publish()
	}
	return t, nil
}

func (x *Unread) tagLock(user uint64, ch uint32) *sync.Mutex {
	h := (user ^ uint64(ch)<<32) * 0x9E3779B97F4A7C15
	return &x.tagLocks[h>>56]
}

// readTag returns user's tag of kind for ch and whether there is one.
func (x *Unread) readTag(user uint64, ch *channel, kind byte) (uint64, bool, error) {
	var kb [13]byte
	var vb [16]byte
	v, ok, err := x.tagFam.Get(tagKey(kb[:0], user, ch.id, kind), vb[:0])
	if err != nil || !ok {
		return 0, false, err
	}
	t, err := decodeTag(v)
	if err != nil {
		return 0, false, fmt.Errorf("%w: unread tag of user %d, channel %s: %v", store.ErrCorrupt, user, ch.name, err)
	}
	return t, true, nil
}

// writeTag sets user's tag of kind for ch to the value now() returns; the
// caller holds the tag's lock.
func (x *Unread) writeTag(user uint64, ch *channel, kind byte, now func() uint64) error {
	b := x.db.NewBatch()
	defer b.Close()
	if err := x.tagFam.Put(b, tagKey(nil, user, ch.id, kind), appendTag(nil, now())); err != nil {
		return err
	}
	return b.Commit()
}

// readChannel returns the named channel for a read, or nil if nobody
// declared it (which reads as nothing unread); a name that could never be
// a channel is ErrInvalidChannel.
func (x *Unread) readChannel(name string) (*channel, error) {
	if ch := (*x.chans.byName.Load())[name]; ch != nil {
		return ch, nil
	}
	if err := store.ValidateName(name); err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrInvalidChannel, quote.Input(name), err)
	}
	return nil, nil
}

// Clear removes the channel's dot for user.
func (x *Unread) Clear(user uint64, channel string) error {
	ch, err := x.lookupChannel(channel)
	if err != nil {
		return err
	}
	mu := x.tagLock(user, ch.id)
	mu.Lock()
	defer mu.Unlock()
	return x.writeTag(user, ch, tagDot, ch.tag.Load)
}

// Has reports whether user has the channel's dot: the channel was marked
// since the user last cleared it. A user who never cleared the channel has
// a tag older than every mark: the dot once the channel was marked at all.
// A channel nobody declared has no dot. Has never writes.
func (x *Unread) Has(user uint64, channel string) (bool, error) {
	ch, err := x.readChannel(channel)
	if err != nil || ch == nil {
		return false, err
	}
	t, _, err := x.readTag(user, ch, tagDot) // no tag: 0, older than any mark
	if err != nil {
		return false, err
	}
	return t < ch.tag.Load(), nil
}

// Post adds notice id (≥ 1; ids order notices, newest highest) to the
// channel, declaring the channel if new. Posting an id the channel holds is
// a no-op: posted reports false.
func (x *Unread) Post(channel string, id uint64) (posted bool, err error) {
	if id == 0 {
		return false, fmt.Errorf("%w: 0 (notice ids start at 1)", ErrInvalidNotice)
	}
	b := x.db.NewBatch()
	defer b.Close()
	ch, publish, unlock, err := x.channelFor(channel, b)
	if err != nil {
		return false, err
	}
	defer unlock()
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.hasNotice(id) {
		// NB: commit the notice again (it changes nothing): inside a
		// replicated entry every call must make its commit whatever the
		// state, or a re-apply after a crash that kept this notice makes
		// one commit fewer and the entry's next commit is skipped as a
		// duplicate (store/apply.go rule 2; TestReappliedPostEntry).
		if err := x.noticeFam.Put(b, noticeKey(nil, ch.id, id), nil); err != nil {
			return false, err
		}
		return false, b.Commit()
	}
	if ch.noticeCount() >= MaxNotices {
		return false, fmt.Errorf("%w %s (%d)", ErrTooManyNotices, ch.name, MaxNotices)
	}
	if err := x.noticeFam.Put(b, noticeKey(nil, ch.id, id), nil); err != nil {
		return false, err
	}
	if err := b.Commit(); err != nil {
		return false, err
	}
	if b.Duplicate() {
		return false, nil // as Mark's (TestReappliedPostKeepsNotices)
	}
	ch.addNotice(id)
	if publish != nil {
		publish()
	}
	return true, nil
}

// Read marks every notice of the channel read for user.
func (x *Unread) Read(user uint64, channel string) error {
	ch, err := x.lookupChannel(channel)
	if err != nil {
		return err
	}
	mu := x.tagLock(user, ch.id)
	mu.Lock()
	defer mu.Unlock()
	return x.writeTag(user, ch, tagNotice, ch.newest)
}

// Unread returns the number of the channel's notices newer than user's
// last read one. A user who never read the channel is new and has 0 (they
// count from their first Read); so has every user of a channel nobody
// declared. Unread never writes.
func (x *Unread) Unread(user uint64, channel string) (uint64, error) {
	ch, err := x.readChannel(channel)
	if err != nil || ch == nil {
		return 0, err
	}
	t, ok, err := x.readTag(user, ch, tagNotice)
	if err != nil || !ok {
		return 0, err
	}
	return ch.above(t), nil
}

// ForgetTags drops every dot tag and last-read notice of each user (an
// account deleted, or an idle user a host chooses to forget), in one
// batch: all of them or, on an error, none. A forgotten user reads as one
// who never cleared or read: every marked channel's dot shows, and
// notices read 0 until the next Read.
func (x *Unread) ForgetTags(users ...uint64) error {
	b := x.db.NewBatch()
	defer b.Close()
	for _, user := range users {
		start := binary.BigEndian.AppendUint64([]byte{prefixTag}, user)
		var end []byte
		if user == ^uint64(0) {
			end = x.tagFam.FamilyEnd()
		} else {
			end = binary.BigEndian.AppendUint64([]byte{prefixTag}, user+1)
		}
		if err := x.tagFam.DeleteRange(b, start, end); err != nil {
			return err
		}
	}
	return b.Commit()
}
