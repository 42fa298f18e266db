package timeline

// Required observers.
//
// unread keeps per-user snapshots that must change in the same batch as
// every follow and unfollow (its FollowObserver). A host that opened
// timeline without unread on a store that holds unread data would change
// the follow graph behind those snapshots, and unread's counts would be
// silently wrong from then on. So an observer added by name is recorded
// in the store (tl_config key 'o'), and from then on every Timeline on the
// store refuses follow-graph changes (ErrObserverMissing, nothing written)
// until an observer of each recorded name is added again. tally.Open adds
// unread's; a host that opens the packages itself must do the same.
//
// The refusal is an observer that fails: every path that changes the
// graph calls its observers before it commits, and an observer's error
// aborts the whole change.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tallydb/tally/internal/checksum"
	"github.com/tallydb/tally/store"
)

// ErrObserverMissing is returned by follow-graph changes (Follow, Unfollow,
// Load) on a store whose follow graph has an observer recorded (unread's)
// that this Timeline was not given: open the store with tally.Open, or add
// the observer (unread.New does) before writing.
var ErrObserverMissing = errors.New("timeline: a follow observer this store requires is not attached")

// observersKey is tl_config's key of the required observer names.
var observersKey = []byte{pfxConfig, 'o'}

const observersVersion = 1

// appendObservers encodes the names of the required observers (tl_config
// key 'o'), sorted.
//
//	field      width     meaning
//	---------  --------  ------------------------------------------------
//	version    1         observersVersion
//	count      uvarint   number of names
//	names      ...       per name: uvarint length, then the name's bytes
//	checksum   4         CRC-32C of everything before, big-endian
func appendObservers(dst []byte, names []string) []byte {
	start := len(dst)
	dst = append(dst, observersVersion)
	dst = binary.AppendUvarint(dst, uint64(len(names)))
	for _, n := range names {
		dst = binary.AppendUvarint(dst, uint64(len(n)))
		dst = append(dst, n...)
	}
	return checksum.AppendTrailer(dst, start)
}

func decodeObservers(b []byte) ([]string, error) {
	p, err := body(b, observersVersion, "observers")
	if err != nil {
		return nil, err
	}
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(len(p)) {
		return nil, errors.New("observers: bad count")
	}
	p = p[k:]
	names := make([]string, 0, n)
	for range n {
		l, k := binary.Uvarint(p)
		if k <= 0 || l == 0 || l > uint64(len(p)-k) {
			return nil, errors.New("observers: bad name length")
		}
		name := string(p[k : k+int(l)])
		if err := store.ValidateName(name); err != nil {
			return nil, fmt.Errorf("observers: %v", err)
		}
		if len(names) > 0 && names[len(names)-1] >= name {
			return nil, errors.New("observers: names not sorted")
		}
		names = append(names, name)
		p = p[k+int(l):]
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("observers: %d bytes after the names", len(p))
	}
	return names, nil
}

// checkConfigFamilyValue checks a tl_config value by its key: the
// configuration or the required observers.
func checkConfigFamilyValue(key, v []byte) error {
	if len(key) == 2 && key[1] == observersKey[1] {
		_, err := decodeObservers(v)
		return err
	}
	return checkConfigValue(key, v)
}

// loadRequired reads the names of the required observers.
func (t *Timeline) loadRequired() error {
	v, ok, err := t.fam.config.Get(observersKey, nil)
	if err != nil || !ok {
		return err
	}
	names, err := decodeObservers(v)
	if err != nil {
		return fmt.Errorf("%w: timeline observers: %v", store.ErrCorrupt, err)
	}
	t.obsMu.Lock()
	t.required = names
	t.obsMu.Unlock()
	return nil
}

// AddNamedObserver registers o like AddObserver and records name (a store
// name: letters, digits, '_' and '-') in the store as required: from then
// on a Timeline on this store refuses follow-graph changes with
// ErrObserverMissing until an observer of that name is added, so the
// observer can never miss a change. unread.New calls it with "unread". On a
// read-only store the name is not recorded (nothing can change the graph
// there).
func (t *Timeline) AddNamedObserver(name string, o FollowObserver) error {
	if err := store.ValidateName(name); err != nil {
		return fmt.Errorf("%w: observer name: %v", ErrInvalidOption, err)
	}
	t.obsMu.Lock()
	defer t.obsMu.Unlock()
	if !slices.Contains(t.required, name) && !t.db.ReadOnly() {
		names := slices.Clone(t.required)
		names = append(names, name)
		slices.Sort(names)
		b := t.db.NewBatch()
		defer b.Close()
		if err := t.fam.config.Put(b, observersKey, appendObservers(nil, names)); err != nil {
			return err
		}
		if err := b.Commit(); err != nil {
			return err
		}
		t.required = names
	}
	t.observers = append(t.observers, o)
	t.named = append(t.named, name)
	return nil
}

// checkRequired checks the stored required names against memory.
func (t *Timeline) checkRequired() error {
	v, ok, err := t.fam.config.Get(observersKey, nil)
	if err != nil {
		return err
	}
	var names []string
	if ok {
		if names, err = decodeObservers(v); err != nil {
			return err
		}
	}
	if got := t.RequiredObservers(); !slices.Equal(names, got) {
		return fmt.Errorf("required observers %v stored, %v in memory", names, got)
	}
	return nil
}

// RequiredObservers returns the names of the observers this store's
// follow graph requires (recorded by AddNamedObserver), sorted.
func (t *Timeline) RequiredObservers() []string {
	t.obsMu.RLock()
	defer t.obsMu.RUnlock()
	return slices.Clone(t.required)
}

// missingObservers returns the required names not added, or nil. The
// caller holds obsMu.
func (t *Timeline) missingObserversLocked() []string {
	var missing []string
	for _, n := range t.required {
		if !slices.Contains(t.named, n) {
			missing = append(missing, n)
		}
	}
	return missing
}

// refusingObserver stands in for required observers that were not added:
// it fails every change, so nothing is committed.
type refusingObserver struct{ missing []string }

func (r refusingObserver) err() error {
	return fmt.Errorf("%w (%s); open the store with tally.Open", ErrObserverMissing, strings.Join(r.missing, ", "))
}

func (r refusingObserver) Followed(*store.Batch, uint64, uint64, uint64) error { return r.err() }
func (r refusingObserver) Unfollowed(*store.Batch, uint64, uint64) error       { return r.err() }
