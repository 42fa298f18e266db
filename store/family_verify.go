package store

import (
	"bytes"
	"fmt"

	"github.com/tallydb/tally/internal/quote"
)

// verifyFamilies checks, with Verify's scan of its snapshot (which reports
// damaged sstable blocks and goes on), every key outside the counter
// families:
// job records and source marks decode; every key of a declared family has
// the family's layout and a value its decoders accept; a family the caller
// did not declare is checked as far as its persisted record allows (its
// built-in merge operator's decoder); and keys under a prefix that no family
// ever declared, or under store's unused prefixes, are data nobody can
// account for. report returns false to stop.
func (db *DB) verifyFamilies(scan func(lo, hi []byte, fn func(k, v []byte) bool) error, report func(error) bool) error {
	if err := scan([]byte{famJob}, familyEnd(famJob), func(k, v []byte) bool {
		id, ok := decodeJobKey(k)
		if !ok {
			return report(fmt.Errorf("%w: job key %x", ErrCorrupt, head(k)))
		}
		if _, err := decodeJobRecord(id, v); err != nil {
			return report(fmt.Errorf("job %d: %w", id, err))
		}
		return true
	}); err != nil {
		return err
	}
	if err := scan([]byte{famSource}, familyEnd(famSource), func(k, v []byte) bool {
		if validSource(string(k[1:])) != nil {
			return report(fmt.Errorf("%w: source key %x", ErrCorrupt, head(k)))
		}
		if _, err := decodeSourceMark(v); err != nil {
			return report(fmt.Errorf("source %s: %w", quote.Input(string(k[1:])), err))
		}
		return true
	}); err != nil {
		return err
	}
	// store's prefixes that hold nothing today.
	if err := scan([]byte{famSource + 1}, []byte{FirstFamilyPrefix}, func(k, v []byte) bool {
		return report(fmt.Errorf("%w: key %x under store prefix %#02x that holds nothing", ErrCorrupt, head(k), k[0]))
	}); err != nil {
		return err
	}

	r := &db.families
	r.mu.Lock()
	declared, persist := r.declared, r.persist
	r.mu.Unlock()
	for p := FirstFamilyPrefix; p <= 0xff; p++ {
		lo := []byte{byte(p)}
		hi := prefixEnd(lo)
		f, rec := declared[p], persist[p]
		var op *MergeOperator
		if rec != nil && rec.mergeID != 0 {
			op = db.mergers.lookup(rec.mergeID)
		}
		if err := scan(lo, hi, func(k, v []byte) bool {
			switch {
			case f != nil:
				if err := f.checkKey(k); err != nil {
					return report(fmt.Errorf("%w: %v", ErrCorrupt, err))
				}
				if _, _, err := f.resolveStored(k, bytes.Clone(v)); err != nil {
					return report(err)
				}
			case rec == nil:
				return report(fmt.Errorf("%w: key %x under prefix %#02x that no family declared", ErrCorrupt, head(k), p))
			case op != nil && len(v) > 0 && v[0] == deferredID:
				if _, err := decodeDeferred(v); err != nil {
					return report(fmt.Errorf("%w: family %s key %x: %v", ErrCorrupt, rec.name, head(k), err))
				}
			case op != nil:
				if err := op.check(v); err != nil {
					return report(fmt.Errorf("%w: family %s key %x: %v", ErrCorrupt, rec.name, head(k), err))
				}
			}
			return true
		}); err != nil {
			return err
		}
	}
	return nil
}
