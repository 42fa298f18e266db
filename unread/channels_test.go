package unread

import (
	"errors"
	"github.com/tallydb/tally/store"
	"strings"
	"testing"
)

func (e *env) has(user uint64, ch string) bool {
	e.t.Helper()
	v, err := e.x.Has(user, ch)
	must(e.t, err)
	return v
}

func (e *env) notices(user uint64, ch string) uint64 {
	e.t.Helper()
	v, err := e.x.Unread(user, ch)
	must(e.t, err)
	return v
}

func TestDots(t *testing.T) {
	e := newEnv(t, nil, nil)
	// A channel nobody declared reads as no dot (a missing key), and
	// declares nothing; clearing it is a named error.
	for _, name := range []string{"activity", "x"} {
		if has, err := e.x.Has(1, name); err != nil || has {
			t.Fatalf("Has on undeclared %q: %v %v", name, has, err)
		}
		if err := e.x.Clear(1, name); !errors.Is(err, ErrUnknownChannel) {
			t.Fatalf("Clear on unknown %q: %v", name, err)
		}
	}
	for _, bad := range []string{"", "a b", "-x", strings.Repeat("c", 65), "dot.com"} {
		if _, err := e.x.Mark(bad); !errors.Is(err, ErrInvalidChannel) {
			t.Fatalf("Mark(%q): %v", bad, err)
		}
		if _, err := e.x.Has(1, bad); !errors.Is(err, ErrInvalidChannel) {
			t.Fatalf("Has(%q): %v", bad, err)
		}
	}
	if n := len(e.x.Channels()); n != 0 {
		t.Fatalf("bad names declared %d channels", n)
	}
	tag, err := e.x.Mark("activity")
	must(t, err)
	if tag != 1 {
		t.Fatalf("first mark's tag %d", tag)
	}
	// A user who never cleared has a tag older than every mark: the first
	// mark shows, and reading it changes nothing (reads never write).
	if !e.has(1, "activity") || !e.has(1, "activity") {
		t.Fatal("a user who never cleared has no dot after the first mark")
	}
	must(t, e.x.Clear(1, "activity"))
	if e.has(1, "activity") {
		t.Fatal("dot after clear")
	}
	_, err = e.x.Mark("activity")
	must(t, err)
	if !e.has(1, "activity") || !e.has(2, "activity") {
		t.Fatal("a mark shows for every user who has not cleared since")
	}
	must(t, e.x.Clear(1, "activity"))
	// Channels are independent.
	_, err = e.x.Mark("promo")
	must(t, err)
	if e.has(1, "activity") || !e.has(1, "promo") {
		t.Fatal("activity cleared; promo never cleared")
	}
	e.reopen()
	if e.has(1, "activity") || !e.has(2, "activity") {
		t.Fatal("dots after reopen")
	}
	if got := e.x.Channels(); len(got) != 2 || got[0].Name != "activity" || got[0].Tag != 2 || got[1].Tag != 1 {
		t.Fatalf("channels %+v", got)
	}
	if n := len(e.x.Channels()); n != 2 {
		t.Fatalf("reads declared channels: %d", n)
	}
	// ForgetTags: the user reads as one who never cleared: the dot shows.
	must(t, e.x.ForgetTags(1))
	if !e.has(1, "activity") {
		t.Fatal("a forgotten user has no dot")
	}
	must(t, e.x.Clear(2, "activity"))
	must(t, e.x.ForgetTags(^uint64(0)))
	e.crash(0, nil)
	if !e.has(1, "activity") || e.has(2, "activity") {
		t.Fatal("dots after crash")
	}
}

func TestNotices(t *testing.T) {
	e := newEnv(t, nil, nil)
	if n, err := e.x.Unread(1, "system"); err != nil || n != 0 {
		t.Fatalf("Unread on undeclared channel: %d %v", n, err)
	}
	if err := e.x.Read(1, "system"); !errors.Is(err, ErrUnknownChannel) {
		t.Fatalf("Read on unknown channel: %v", err)
	}
	if _, err := e.x.Post("system", 0); !errors.Is(err, ErrInvalidNotice) {
		t.Fatalf("Post id 0: %v", err)
	}
	if _, err := e.x.Post("bad name", 1); !errors.Is(err, ErrInvalidChannel) {
		t.Fatalf("Post bad channel: %v", err)
	}
	if n := len(e.x.Channels()); n != 0 {
		t.Fatalf("refused posts declared %d channels", n)
	}
	for _, id := range []uint64{10, 20} {
		ok, err := e.x.Post("system", id)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	if ok, err := e.x.Post("system", 20); err != nil || ok {
		t.Fatalf("re-post of 20: %v %v", ok, err)
	}
	// Never read: new, 0, and reading the count records nothing: the user
	// counts from their first Read.
	if n := e.notices(1, "system"); n != 0 {
		t.Fatalf("never read: %d", n)
	}
	_, err := e.x.Post("system", 30)
	must(t, err)
	if n := e.notices(1, "system"); n != 0 {
		t.Fatalf("never read, after one post: %d", n)
	}
	must(t, e.x.Read(1, "system"))
	_, err = e.x.Post("system", 15) // older than the user's last read
	must(t, err)
	if n := e.notices(1, "system"); n != 0 {
		t.Fatalf("an older notice counted: %d", n)
	}
	must(t, e.x.Read(2, "system")) // read before any view: nothing unread
	for _, id := range []uint64{40, 50, 35} {
		_, err = e.x.Post("system", id)
		must(t, err)
	}
	if a, b := e.notices(1, "system"), e.notices(2, "system"); a != 3 || b != 3 {
		t.Fatalf("unread %d, %d; want 3, 3", a, b)
	}
	must(t, e.x.Read(1, "system"))
	if n := e.notices(1, "system"); n != 0 {
		t.Fatalf("after read: %d", n)
	}
	// A read on a channel without notices records 0: every later notice
	// counts.
	_, err = e.x.Mark("quiet")
	must(t, err)
	must(t, e.x.Read(3, "quiet"))
	_, err = e.x.Post("quiet", 5)
	must(t, err)
	if n := e.notices(3, "quiet"); n != 1 {
		t.Fatalf("quiet: %d", n)
	}
	e.reopen()
	if a, b := e.notices(1, "system"), e.notices(2, "system"); a != 0 || b != 3 {
		t.Fatalf("after reopen: %d, %d", a, b)
	}
	got := e.x.Channels()
	if got[0].Notices != 7 || got[0].Newest != 50 {
		t.Fatalf("channels %+v", got)
	}
	e.crash(0, nil)
	if n := e.notices(2, "system"); n != 3 {
		t.Fatalf("after crash: %d", n)
	}
}

// TestChannelLimits: the channel and notice caps are named errors that
// change nothing (with the caps lowered through many posts would take too
// long, so the limit check itself is exercised at the boundary).
func TestChannelLimits(t *testing.T) {
	e := newEnv(t, nil, nil)
	_, err := e.x.Mark("c")
	must(t, err)
	ch, err := e.x.lookupChannel("c")
	must(t, err)
	ch.nmu.Lock()
	for i := uint64(1); i <= MaxNotices; i++ {
		ch.notices = append(ch.notices, i)
	}
	ch.nmu.Unlock()
	if _, err := e.x.Post("c", MaxNotices+1); !errors.Is(err, ErrTooManyNotices) {
		t.Fatalf("post past the cap: %v", err)
	}
	if ok, err := e.x.Post("c", 5); ok || err != nil {
		t.Fatalf("re-post at the cap: %v %v", ok, err)
	}
	ch.nmu.Lock()
	// The re-post wrote notice 5 again (Post always commits: store
	// apply.go rule 2), so memory keeps that one.
	ch.notices = []uint64{5}
	ch.nmu.Unlock()
	e.x.chans.mu.Lock()
	real := e.x.chans.byID
	e.x.chans.byID = make([]*channel, MaxChannels)
	e.x.chans.mu.Unlock()
	if _, err := e.x.Mark("another"); !errors.Is(err, ErrTooManyChannels) {
		t.Fatalf("channel past the cap: %v", err)
	}
	e.x.chans.mu.Lock()
	e.x.chans.byID = real
	e.x.chans.mu.Unlock()
	if err := e.x.Clear(1, "another"); !errors.Is(err, ErrUnknownChannel) {
		t.Fatalf("a refused channel exists: %v", err)
	}
}

// A channel record that names id 0 (damage) is refused as corrupt when
// the channels load, never taken for a channel or a panic.
func TestChannelIDZeroCorrupt(t *testing.T) {
	e := newEnv(t, nil, nil)
	_, err := e.x.Mark("activity")
	must(t, err)
	b := e.db.NewBatch()
	defer b.Close()
	must(t, e.x.chanFam.Put(b, channelKey(0), appendChannel(nil, "zero", 1)))
	must(t, b.Commit())
	e.x.chans.mu.Lock()
	err = e.x.reloadChannelsLocked()
	e.x.chans.mu.Unlock()
	if !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("channel id 0: %v, want ErrCorrupt", err)
	}
	// Put it right for the cleanup's Check.
	b.Reset()
	must(t, e.x.chanFam.Delete(b, channelKey(0)))
	must(t, b.Commit())
}
