package unread

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/tallydb/tally/store"
)

// Following a store reopen (store.Options.ReopenOnFailure).
//
// A reopen heals a failed store in place and replaces its state by what
// recovery finds on disk: a write that failed may turn out durable, and one
// that was visible but never acknowledged may be gone. What unread keeps in
// memory, and how each follows:
//
//   - channels: a channel whose declaration failed may exist on disk after
//     all, and declaring the next one with the same id would make two
//     channels share it; a Mark or Post that failed may have left its tag
//     or notice on disk. The ReopenHook's Before takes chans.mu and every
//     channel's mu (the locks of declaration, Mark and Post), After
//     reloads every channel's tag and notices in place (handles stay
//     valid) and adds the channels found on disk, and Release lets the
//     locks go. When a reload fails After returns the error: the store fails again before Release, so no declaration,
//     Mark or Post commits from the channels of before the reopen, and
//     the healer's next reopen reloads them (TestReloadErrorFailsStore).
//   - the snapshot cache: an entry is keyed by the user's operation count,
//     which after a reopen may count again through values a discarded
//     write had reached; entries carry the store generation they were read
//     in and are used only in that generation (cacheEntry.sgen).
//   - a feed reset decides its operation on a View and commits after it:
//     its batch is pinned to the generation of that View
//     (store.Batch.SetGeneration).
//   - counters (kinds, feed generations) are store.Counter handles, which
//     follow a reopen by themselves.

// followReopen registers the hook (New calls it).
func (x *Unread) followReopen() {
	x.db.OnReopen(store.ReopenHook{Before: x.lockChannels, After: x.reloadChannels, Release: x.unlockChannels})
}

// lockChannels takes the locks of every channel write.
func (x *Unread) lockChannels() {
	x.chans.mu.Lock()
	x.chans.locked = x.chans.byID
	for _, ch := range x.chans.locked {
		ch.mu.Lock()
	}
}

// unlockChannels releases what lockChannels took (the channels a reload
// added were never locked).
func (x *Unread) unlockChannels() {
	for _, ch := range x.chans.locked {
		ch.mu.Unlock()
	}
	x.chans.locked = nil
	x.chans.mu.Unlock()
}

// reloadChannels brings the channels in line with the store; the locks of
// lockChannels are held. A reload that fails (a read error) returns the
// error, and the store fails again until a reopen reloads them all.
func (x *Unread) reloadChannels(bool) error {
	var err error
	if f := x.testReload; f != nil {
		err = f()
	}
	if err == nil {
		err = x.reloadChannelsLocked()
	}
	if err != nil {
		return fmt.Errorf("unread: reload after a store reopen: %w", err)
	}
	return nil
}

func (x *Unread) reloadChannelsLocked() error {
	it, err := x.chanFam.NewIter(nil)
	if err != nil {
		return err
	}
	byName := make(map[string]*channel, len(x.chans.byID))
	for _, ch := range x.chans.byID {
		byName[ch.name] = ch
	}
	byID := x.chans.byID
	for it.Next() {
		id := binary.BigEndian.Uint32(it.Key()[1:])
		name, tag, err := decodeChannel(it.Value())
		if err != nil {
			it.Close()
			return fmt.Errorf("%w: unread channel %d: %v", store.ErrCorrupt, id, err)
		}
		switch {
		case id >= 1 && int(id) <= len(byID) && byID[id-1].name == name:
			byID[id-1].tag.Store(tag)
		case int(id) == len(byID)+1 && byName[name] == nil:
			ch := &channel{id: id, name: name}
			ch.tag.Store(tag)
			byID = append(byID, ch)
			byName[name] = ch
		default:
			it.Close()
			return fmt.Errorf("%w: unread channel %d %q out of sequence", store.ErrCorrupt, id, name)
		}
	}
	if err := errors.Join(it.Err(), it.Close()); err != nil {
		return fmt.Errorf("unread: channels: %w", err)
	}
	notices := make([][]uint64, len(byID))
	it, err = x.noticeFam.NewIter(nil)
	if err != nil {
		return err
	}
	for it.Next() {
		k := it.Key()
		cid, id := binary.BigEndian.Uint32(k[1:]), binary.BigEndian.Uint64(k[5:])
		if cid == 0 || int(cid) > len(byID) {
			it.Close()
			return fmt.Errorf("%w: unread notice %d of unknown channel %d", store.ErrCorrupt, id, cid)
		}
		notices[cid-1] = append(notices[cid-1], id) // keys come in ascending order
	}
	if err := errors.Join(it.Err(), it.Close()); err != nil {
		return fmt.Errorf("unread: notices: %w", err)
	}
	for i, ch := range byID {
		ch.nmu.Lock()
		ch.notices = notices[i]
		ch.nmu.Unlock()
	}
	x.chans.byID = byID
	x.chans.byName.Store(&byName)
	return nil
}
