package store

import "fmt"

// DiskUsage estimates the bytes of Pebble's data files that hold the
// family's keys: Pebble's EstimateDiskUsage over the family's key range,
// which counts the sstables inside it whole and prorates those that
// straddle its ends. Data still in a memtable is not in any file: Flush
// (or CompactDisk) first for a settled figure. For benchmarks and tools
// that report bytes per entry of one family.
func (f *Family) DiskUsage() (uint64, error) {
	db := f.db
	db.pebbleMu.RLock()
	defer db.pebbleMu.RUnlock()
	if db.pebbleClosed || db.closed.Load() {
		return 0, ErrClosed
	}
	// Pebble's bounds are inclusive: the family's last possible key is
	// below its end, and no key equals the end itself (one byte, the next
	// prefix, which is not a key of any family with keys after the prefix).
	in := db.acquire()
	defer in.unref()
	n, err := in.pdb.EstimateDiskUsage([]byte{f.spec.Prefix}, f.end())
	if err != nil {
		return 0, fmt.Errorf("tally: disk usage of family %s: %w", f.spec.Name, err)
	}
	return n, nil
}
