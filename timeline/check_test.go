package timeline

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/tallydb/tally/store"
)

// TestCheckFindsDamage damages, one case at a time, what each phase of
// Check reads (the config, ordinals, both sides of the follow graph,
// posts and outboxes, the push set, inboxes, pending marks, pulled
// authors, removed posts, fan-outs waiting for a job) with values that decode but break an invariant,
// and expects Check to name the damage. Undamaged, the same world checks
// clean.
func TestCheckFindsDamage(t *testing.T) {
	const author, reader, other, post = 1, 2, 3, 100
	cases := []struct {
		name   string
		damage func(e *env, b *store.Batch, ord func(uint64) uint32)
		want   string
	}{
		{"none", nil, ""},
		{"config", func(e *env, b *store.Batch, _ func(uint64) uint32) {
			c := e.tl.Config()
			c.InboxCap++
			must(t, e.tl.fam.config.Put(b, configKey, appendConfig(nil, c)))
		}, "config"},
		{"ordinal", func(e *env, b *store.Batch, ord func(uint64) uint32) {
			must(t, e.tl.fam.ords.Put(b, ordKey(nil, ord(reader)), binary.BigEndian.AppendUint64(nil, 99)))
		}, "maps to user 99"},
		{"followees", func(e *env, b *store.Batch, ord func(uint64) uint32) {
			must(t, e.tl.fam.followees.Put(b, followeesKey(nil, ord(reader)), appendFollowees(nil, []uint64{reader})))
		}, "follows themselves"},
		{"followers", func(e *env, b *store.Batch, ord func(uint64) uint32) {
			must(t, e.tl.fam.followers.Delete(b, followersKey(nil, ord(author), chunkOf(ord(reader)))))
		}, "followers of 1"},
		{"posts", func(e *env, b *store.Batch, _ func(uint64) uint32) {
			must(t, e.tl.fam.posts.Delete(b, postKey(nil, post)))
		}, "0 post records for 1 outbox entries"},
		{"push set", func(e *env, b *store.Batch, ord func(uint64) uint32) {
			must(t, e.tl.fam.active.Delete(b, activeKey(nil, chunkOf(ord(reader)))))
		}, "push set differs"},
		{"inbox", func(e *env, b *store.Batch, ord func(uint64) uint32) {
			v, ok, err := e.tl.fam.inbox.Get(inboxKey(nil, ord(reader)), nil)
			must(t, err)
			if !ok {
				t.Fatal("the reader has no inbox")
			}
			must(t, e.tl.fam.inbox.Put(b, inboxKey(nil, ord(reader)+1000), v))
		}, "inbox of unknown ordinal"},
		{"pending", func(e *env, b *store.Batch, ord func(uint64) uint32) {
			must(t, e.tl.fam.pending.Put(b, pendingKey(nil, ord(reader), other), nil))
		}, "not followed"},
		{"pulled", func(e *env, b *store.Batch, _ func(uint64) uint32) {
			must(t, e.tl.fam.pulled.Put(b, pulledKey(nil, author), nil))
		}, "pulled authors"},
		{"removed", func(e *env, b *store.Batch, _ func(uint64) uint32) {
			must(t, e.tl.fam.removed.Put(b, removedKey(nil, post), binary.BigEndian.AppendUint64(nil, author)))
		}, "both published and removed"},
		{"shared marker of a fanned post", func(e *env, b *store.Batch, _ func(uint64) uint32) {
			must(t, e.tl.fam.fanq.Put(b, fanqKey(nil, post), binary.BigEndian.AppendUint64(nil, author)))
		}, "whose fan-out finished"},
		{"unfanned post without a job", func(e *env, b *store.Batch, _ func(uint64) uint32) {
			must(t, e.tl.fam.posts.Put(b, postKey(nil, post), appendPost(nil, postRecord{author: author})))
		}, "no job of its own nor the shared job"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			_, err := e.tl.MarkActive(reader)
			must(t, err)
			_, err = e.tl.Follow(reader, author)
			must(t, err)
			_, err = e.tl.Follow(other, reader)
			must(t, err)
			_, err = e.tl.Publish(author, post)
			must(t, err)
			e.run()
			e.check()
			if c.damage == nil {
				return
			}
			ord := func(id uint64) uint32 {
				o, err := e.tl.ordOf(id)
				must(t, err)
				if o == 0 {
					t.Fatalf("user %d has no ordinal", id)
				}
				return o
			}
			b := e.db.NewBatch()
			c.damage(e, b, ord)
			must(t, b.Commit())
			b.Close()
			err = e.tl.Check()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Check after damage: %v; want an error saying %q", err, c.want)
			}
			e.close() // not checked again at cleanup
		})
	}
}

// TestCheckIDAndEdge pins the exported rules hosts use to refuse input
// before calling the package: ids 1..MaxID, no self-follow.
func TestCheckIDAndEdge(t *testing.T) {
	if err := CheckID("user", 1, MaxID); err != nil {
		t.Fatalf("valid ids: %v", err)
	}
	for _, ids := range [][]uint64{{0}, {MaxID + 1}, {5, 0}} {
		if err := CheckID("user", ids...); !errors.Is(err, ErrBadID) || !strings.Contains(err.Error(), "user id") {
			t.Fatalf("CheckID(%v) = %v, want ErrBadID naming the user", ids, err)
		}
	}
	for _, c := range []struct {
		e    Edge
		want error
	}{
		{Edge{1, 2}, nil},
		{Edge{0, 2}, ErrBadID},
		{Edge{1, MaxID + 1}, ErrBadID},
		{Edge{3, 3}, ErrSelfFollow},
	} {
		if err := c.e.Check(); !errors.Is(err, c.want) || (err == nil) != (c.want == nil) {
			t.Fatalf("%+v.Check() = %v, want %v", c.e, err, c.want)
		}
	}
}
