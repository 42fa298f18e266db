package timeline

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/tallydb/tally/store"
)

// Family prefixes (the timeline's range is 0x20-0x2F). The key layouts and
// values are in the package doc and in store's family table.
const (
	pfxConfig    = 0x20
	pfxOrds      = 0x21
	pfxFollowees = 0x22
	pfxFollowers = 0x23
	pfxActive    = 0x24
	pfxPulled    = 0x25
	pfxPosts     = 0x26
	pfxOutbox    = 0x27
	pfxInbox     = 0x28
	pfxPending   = 0x29
	pfxRemoved   = 0x2a
	pfxFanq      = 0x2b
	pfxMute      = 0x2c
	pfxHide      = 0x2d
	pfxReposts   = 0x2e
	pfxXShard    = 0x2f
)

// Job kinds.
const (
	jobFanout = "tl-fanout" // deliver or remove one post: key "p" | post
	jobPair   = "tl-pair"   // backfill or clean up after a follow change: key "f" | user | followee
	jobExpire = "tl-expire" // expire inactive inboxes: key "expire"
	// jobShared ("tl-fanout-shared", shared.go) delivers the posts queued
	// in tl_fanq: no key, no payload.
)

type families struct {
	config, ords, followees, followers, active, pulled, posts, outbox, inbox, pending, removed, fanq, mute, hide, reposts, xshard *store.Family
}

// Families returns the FamilySpecs the package uses, for
// store.Options.Families (a host declares them at Open); New registers any
// not yet declared.
func Families() []store.FamilySpec {
	return []store.FamilySpec{
		{Name: "tl_config", Prefix: pfxConfig, MinKeyLen: 1, MaxKeyLen: 1, MaxValueLen: 256, CheckValue: checkConfigFamilyValue},
		{Name: "tl_ords", Prefix: pfxOrds, MinKeyLen: 4, MaxKeyLen: 4, MaxValueLen: 8, CheckValue: checkOrdValue},
		{Name: "tl_followees", Prefix: pfxFollowees, MinKeyLen: 4, MaxKeyLen: 4, MaxValueLen: 16 + MaxFollowees*10, CheckValue: checkFolloweesValue},
		{Name: "tl_followers", Prefix: pfxFollowers, MinKeyLen: 6, MaxKeyLen: 6, MaxValueLen: 64 << 10, Merge: store.MergeRoaring},
		{Name: "tl_active", Prefix: pfxActive, MinKeyLen: 2, MaxKeyLen: 2, MaxValueLen: 64 << 10, Merge: store.MergeRoaring},
		{Name: "tl_pulled", Prefix: pfxPulled, MinKeyLen: 8, MaxKeyLen: 8, MaxValueLen: 1, CheckValue: checkEmptyValue},
		{Name: "tl_posts", Prefix: pfxPosts, MinKeyLen: 8, MaxKeyLen: 8, MaxValueLen: 32, CheckValue: checkPostValue},
		{Name: "tl_outbox", Prefix: pfxOutbox, MinKeyLen: 16, MaxKeyLen: 16, MaxValueLen: 32, CheckValue: checkOutboxValue},
		{Name: "tl_inbox", Prefix: pfxInbox, MinKeyLen: 4, MaxKeyLen: 4, MaxValueLen: 4 << 20, Merge: store.MergeTopList},
		{Name: "tl_pending", Prefix: pfxPending, MinKeyLen: 12, MaxKeyLen: 12, MaxValueLen: 1, CheckValue: checkEmptyValue},
		{Name: "tl_removed", Prefix: pfxRemoved, MinKeyLen: 8, MaxKeyLen: 8, MaxValueLen: 8, CheckValue: checkOrdValue},
		{Name: "tl_fanq", Prefix: pfxFanq, MinKeyLen: 8, MaxKeyLen: 8, MaxValueLen: 8, CheckValue: checkOrdValue},
		{Name: "tl_mute", Prefix: pfxMute, MinKeyLen: 16, MaxKeyLen: 16, MaxValueLen: 1, CheckValue: checkEmptyValue},
		{Name: "tl_hide", Prefix: pfxHide, MinKeyLen: 16, MaxKeyLen: 16, MaxValueLen: 1, CheckValue: checkEmptyValue},
		{Name: "tl_reposts", Prefix: pfxReposts, MinKeyLen: 16, MaxKeyLen: 16, MaxValueLen: 8, CheckValue: checkOrdValue},
		{Name: "tl_xshard", Prefix: pfxXShard, MinKeyLen: 13, MaxKeyLen: 13, MaxValueLen: 8, CheckValue: checkOrdValue},
	}
}

// registerFamilies gets the handles of the package's families, declaring
// those the host did not.
func (t *Timeline) registerFamilies() error {
	handles := map[string]**store.Family{
		"tl_config": &t.fam.config, "tl_ords": &t.fam.ords, "tl_followees": &t.fam.followees,
		"tl_followers": &t.fam.followers, "tl_active": &t.fam.active, "tl_pulled": &t.fam.pulled,
		"tl_posts": &t.fam.posts, "tl_outbox": &t.fam.outbox, "tl_inbox": &t.fam.inbox,
		"tl_pending": &t.fam.pending, "tl_removed": &t.fam.removed, "tl_fanq": &t.fam.fanq,
		"tl_mute": &t.fam.mute, "tl_hide": &t.fam.hide, "tl_reposts": &t.fam.reposts, "tl_xshard": &t.fam.xshard,
	}
	for _, spec := range Families() {
		f, err := t.db.Family(spec.Name)
		if errors.Is(err, store.ErrFamilyNotFound) {
			f, err = t.db.RegisterFamily(spec)
		}
		if (spec.Prefix == pfxFanq || spec.Prefix == pfxMute || spec.Prefix == pfxHide || spec.Prefix == pfxReposts || spec.Prefix == pfxXShard) && errors.Is(err, store.ErrReadOnly) {
			// NB: a store from before issue 18 opened read-only: it has no
			// tl_fanq, so no post waits for the shared job (fam.fanq stays
			// nil and reads as empty; nothing writes it read-only).
			continue
		}
		if err != nil {
			return err
		}
		if got := f.Spec(); got.Prefix != spec.Prefix || got.Merge != spec.Merge {
			return fmt.Errorf("%w: family %s declared with prefix %#02x, timeline uses %#02x", store.ErrFamilyConflict, spec.Name, got.Prefix, spec.Prefix)
		}
		*handles[spec.Name] = f
	}
	return nil
}

// Key encoders append to dst. Every key is its family's prefix byte, then
// fixed-width big-endian fields, so Pebble's order is numeric order.

func ordKey(dst []byte, ord uint32) []byte {
	return binary.BigEndian.AppendUint32(append(dst, pfxOrds), ord)
}

func followeesKey(dst []byte, ord uint32) []byte {
	return binary.BigEndian.AppendUint32(append(dst, pfxFollowees), ord)
}

// followersKey is the key of the chunk of author's followers whose
// ordinals share the high 16 bits chunk.
func followersKey(dst []byte, author uint32, chunk uint16) []byte {
	dst = binary.BigEndian.AppendUint32(append(dst, pfxFollowers), author)
	return binary.BigEndian.AppendUint16(dst, chunk)
}

func activeKey(dst []byte, chunk uint16) []byte {
	return binary.BigEndian.AppendUint16(append(dst, pfxActive), chunk)
}

func pulledKey(dst []byte, author uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, pfxPulled), author)
}

func postKey(dst []byte, post uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, pfxPosts), post)
}

// outboxKey is the key of author's post: the post id is stored inverted
// (2^64-1 − post), so an author's posts iterate newest first going
// forward. Pulls seek one author after another in ascending id order,
// and Pebble's forward seeks to increasing keys reuse the iterator's
// position (its try-seek-using-next), where reverse seeks do not: this
// halved the cost of a 500-followee rebuild (BenchmarkRebuild).
func outboxKey(dst []byte, author, post uint64) []byte {
	dst = binary.BigEndian.AppendUint64(append(dst, pfxOutbox), author)
	return binary.BigEndian.AppendUint64(dst, ^post)
}

func postOfOutboxKey(k []byte) uint64 { return ^binary.BigEndian.Uint64(k[9:17]) }

func inboxKey(dst []byte, ord uint32) []byte {
	return binary.BigEndian.AppendUint32(append(dst, pfxInbox), ord)
}

func pendingKey(dst []byte, ord uint32, author uint64) []byte {
	dst = binary.BigEndian.AppendUint32(append(dst, pfxPending), ord)
	return binary.BigEndian.AppendUint64(dst, author)
}

func removedKey(dst []byte, post uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, pfxRemoved), post)
}

// configKey is the one key of tl_config.
var configKey = []byte{pfxConfig, 'c'}

// chunkOf returns the 2^16-ordinal chunk of ord, and its sentinel: the
// chunk's first ordinal, never given to a user, kept in every roaring set
// of the chunk so that no merge ever finishes to an empty set (see the
// package doc, "Sentinels").
func chunkOf(ord uint32) uint16 { return uint16(ord >> 16) }

func sentinel(chunk uint16) uint32 { return uint32(chunk) << 16 }

func checkEmptyValue(_, v []byte) error {
	if len(v) != 0 {
		return fmt.Errorf("value of %d bytes (want none)", len(v))
	}
	return nil
}

func checkOrdValue(_, v []byte) error {
	if len(v) != 8 {
		return fmt.Errorf("ordinal value of %d bytes (want 8)", len(v))
	}
	if id := binary.BigEndian.Uint64(v); id == 0 || id > MaxID {
		return fmt.Errorf("ordinal maps to user id %d", id)
	}
	return nil
}
