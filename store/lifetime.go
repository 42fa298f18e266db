package store

// Lifetimes of cold blocks and checkpoint chunks, and the intents that make
// every deletion provable.
//
// # The rule
//
// A cold block is deleted only when (a) no published cold version refers to
// it and no reader can still hold a version that does, and (b) a durable
// intent names it as garbage. Nothing else on disk is ever deleted for
// being "unknown": data that neither a value (cold range value, checkpoint
// pointer) nor an intent accounts for is left where it is, reported by
// Verify, and, where reading on would give wrong answers, refused by Open.
//
// # Readers: reference counts on the published cold version
//
// Readers take no locks (tier.go, catalog.go): they load a rangeState
// through atomic pointers. A cold range's blocks are described by a
// coldVersion (block map, reader, cache id) shared by every rangeState of
// that range until a merge replaces it. A version's refs count one for
// being current plus one per reader inside a cold read. A reader takes its
// reference after loading the rangeState (ref), and if that fails because
// the version was already released it reloads the rangeState and starts the
// read again: a released version is never current, so the retry reads the
// newer version. This is Pebble's readState/version refcounting
// (read_state.go) without its mutex: a failed ref is detected by a
// sentinel ("dead") the last unref installs with a compare-and-swap, so a
// count that reached zero can never be revived.
//
// Cost: hot ranges take no reference at all (no cold blocks to protect);
// a cold Get or a MultiGet's run of ids in one cold range does one atomic
// add and one atomic add-and-compare, and allocates nothing (TestAllocs).
// BenchmarkColdVersionRef measures the pair (serial and with every
// goroutine on one version); BenchmarkColdMultiGet10 the whole read.
//
// A merge publishes the new rangeState, then retires the old version: the
// old version takes a reference on its successor (so a successor's replaced
// blocks, some of which the old version may share, outlive the old
// version's readers too) and drops its "current" reference. The last
// reference dropped releases it: the release only queues the version (no
// I/O on a reader's goroutine); sweep deletes its replaced blocks and its
// intent in one batch and evicts its blocks from the cache. sweep runs
// after every merge, after every job run (the background scheduler runs
// one every CompactionInterval, with or without jobs), after every
// checkpoint and at Close (after block reads are shut off, when every
// retired version can go).
//
// # Intents: what an interrupted operation provably left
//
// Every operation that writes data that is garbage unless it finishes, or
// that leaves garbage behind when it does, first writes an intent under
// meta "intent/" + id (synced, before any of its data), naming exactly what
// it may leave:
//
//	kind        written before                   names                        removed by
//	----------  -------------------------------  ---------------------------  ------------------------------------
//	seal        a seal writes blocks             blocks of (counter, range)   the seal's switch batch
//	merge       a merge writes blocks            with id ≥ first              the merge's switch batch
//	load        Load builds a range cold         (ids ≥ first were free)      Load's switch batch
//	checkpoint  a checkpoint writes chunks       chunks of checkpoint seq     the checkpoint's final batch
//	obsolete    (in a merge's switch batch)      the block ids it replaced    sweep, after the last reader
//
// A job picks first above every block id its range holds on disk (not only
// above the value's nextBlockID), so an intent never names a block that
// existed before it, whatever is on disk. A failed job deletes what it
// wrote and its intent at once (best effort); whatever remains is resolved
// by the next Open, where no reader exists:
//
//   - seal/merge/load: delete the blocks of the range with id ≥ first that
//     the range's current value does not reference (a stale intent of a
//     failed attempt may overlap a later attempt's committed blocks: those
//     are referenced and stay);
//   - obsolete: delete the named ids the current value does not reference;
//   - checkpoint seq: delete the chunks of seq unless seq is the checkpoint
//     the pointer names (a later attempt at the same seq finished).
//
// Open then has nothing left to guess. It refuses (ErrCorrupt, changing
// nothing) when checkpoint chunks exist but no pointer or intent accounts
// for them, since reading on would silently give zeros; other unaccounted
// data (blocks of a range with no value and no intent, blocks above a
// value's nextBlockID with no intent) is left and listed in
// RecoveryStats.Unaccounted. Verify walks every block and chunk key and
// reports each one no value or intent accounts for.
//
// Stores written before intents existed simply have none: they open, and
// anything an interrupted job of that build left is reported rather than
// deleted.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tallydb/tally/cold"
)

// coldVersion is one published set of blocks of a cold range. Every
// rangeState of the range points at the same version until a merge replaces
// it; see the file comment for the reference protocol.
type coldVersion struct {
	db     *DB
	reader *cold.Reader
	id     uint64          // the reader's id in the block cache
	v      *coldRangeValue // persisted shape: block map, descriptor, seq F
	refs   atomic.Int32    // 1 while current + 1 per reader; versionDead once released

	// Set once by retire, before the "current" reference is dropped.
	next     *coldVersion // the version that replaced this one (referenced)
	obsolete *intent      // the blocks this version alone used; nil if none
	released atomic.Bool
	// hold is the retired instance this version keeps open for its
	// readers after a reopen (reopen.go), nil otherwise.
	hold atomic.Pointer[instance]
}

// versionDead is installed by the last unref; any count ≤ 0 means released.
const versionDead = math.MinInt32 / 2

func (db *DB) newColdVersion(cs *counterState, rid uint64, v *coldRangeValue) (*coldVersion, error) {
	r, id, err := db.openColdReader(cs, rid, v)
	if err != nil {
		return nil, err
	}
	cv := &coldVersion{db: db, reader: r, id: id, v: v}
	cv.refs.Store(1)
	return cv, nil
}

// Desc returns the range descriptor of the version.
func (cv *coldVersion) Desc() *cold.Desc { return cv.reader.Desc() }

// ref takes a reader's reference. It fails only if the version was already
// released, which means it is no longer current: the caller reloads the
// rangeState and reads again.
func (cv *coldVersion) ref() bool {
	if cv.refs.Add(1) > 0 {
		return true
	}
	cv.refs.Add(-1)
	return false
}

// unref drops a reference; the last one releases the version.
func (cv *coldVersion) unref() {
	if cv.refs.Add(-1) == 0 && cv.refs.CompareAndSwap(0, versionDead) {
		cv.release()
	}
}

// release queues a retired version for sweep and lets go of its successor.
// It runs on whichever goroutine dropped the last reference (often a
// reader): no I/O here.
func (cv *coldVersion) release() {
	cv.released.Store(true)
	if in := cv.hold.Swap(nil); in != nil {
		in.unref()
	}
	if cv.next != nil {
		cv.next.unref()
	}
}

// errRetired is returned by a rangeState read whose cold version was
// released between loading the rangeState and referencing the version. It
// never leaves the package: the caller reads again from the current state.
var errRetired = errors.New("tally: cold version retired (internal retry)")

// retire hands an old version over to its successor nv, which is already
// published; obsolete names the blocks only the old version used (nil if
// none). The caller ran the merge's switch batch.
func (db *DB) retire(old, nv *coldVersion, obsolete *intent) {
	nv.ref() // nv is current: cannot fail
	old.next = nv
	old.obsolete = obsolete
	db.life.mu.Lock()
	db.life.retired = append(db.life.retired, old)
	db.life.mu.Unlock()
	old.unref() // the "current" reference
}

// sweep deletes the replaced blocks of every released version (every
// retired version when all is set: only at Close, once no block read can
// start) together with their intents, and evicts their cached blocks.
// Errors are background errors: the intents stay and the next sweep or
// Open finishes the job.
func (db *DB) sweep(all bool) {
	db.life.sweepMu.Lock()
	defer db.life.sweepMu.Unlock()
	db.life.mu.Lock()
	var done, keep []*coldVersion
	for _, cv := range db.life.retired {
		if all || cv.released.Load() {
			done = append(done, cv)
		} else {
			keep = append(keep, cv)
		}
	}
	db.life.retired = keep
	db.life.mu.Unlock()
	if len(done) == 0 {
		return
	}
	b := db.pdb().NewBatch()
	defer b.Close()
	var key []byte
	var gone []*intent
	for _, cv := range done {
		if in := cv.obsolete; in != nil {
			for _, id := range in.ids {
				key = appendColdBlockKey(key[:0], in.counterID, in.rangeID, id)
				b.Delete(key, nil)
			}
			gone = append(gone, in)
		}
	}
	if len(gone) > 0 {
		if err := db.commitIntents(b, pebble.NoSync, nil, gone); err != nil {
			db.life.mu.Lock()
			db.life.retired = append(db.life.retired, done...)
			db.life.mu.Unlock()
			db.bgError(fmt.Errorf("tally: delete replaced blocks: %w", err))
			return
		}
	}
	for _, cv := range done {
		db.blockCache.Evict(cv.id)
	}
}

// lifetimes is the DB's bookkeeping of retired versions and intents.
//
// Lock order: sweepMu, then diskMu, then mu.
type lifetimes struct {
	nextIntent atomic.Uint64
	sweepMu    sync.Mutex // one sweep at a time
	// diskMu is held while a batch that writes or deletes intents commits
	// and intents is updated, so intents equals the intents on disk
	// whenever diskMu is free (Check relies on it).
	diskMu  sync.Mutex
	intents map[uint64]*intent // guarded by diskMu
	mu      sync.Mutex
	retired []*coldVersion // guarded by mu: replaced, blocks not yet deleted
}

// Intent kinds.
const (
	intentSeal       byte = 1
	intentMerge      byte = 2
	intentLoad       byte = 3
	intentCheckpoint byte = 4
	intentObsolete   byte = 5
)

var intentNames = [...]string{"", "seal", "merge", "load", "checkpoint", "obsolete"}

// intentVersion is the version byte of an intent value.
const intentVersion = 1

// intent is a durable note of what an operation may leave on disk.
type intent struct {
	id        uint64 // key suffix
	kind      byte
	counterID uint32   // seal, merge, load, obsolete
	rangeID   uint64   // seal, merge, load, obsolete
	first     uint32   // seal, merge, load: the job's blocks have id ≥ first
	seq       uint64   // checkpoint: the checkpoint's sequence
	ids       []uint32 // obsolete: the replaced block ids
}

func (in *intent) blocks() bool {
	return in.kind == intentSeal || in.kind == intentMerge || in.kind == intentLoad
}

func (in *intent) String() string {
	switch {
	case in.kind == intentCheckpoint:
		return fmt.Sprintf("intent %d: checkpoint %d", in.id, in.seq)
	case in.kind == intentObsolete:
		return fmt.Sprintf("intent %d: %d replaced blocks of counter %d range %d", in.id, len(in.ids), in.counterID, in.rangeID)
	}
	return fmt.Sprintf("intent %d: %s of counter %d range %d, blocks from id %d", in.id, intentNames[in.kind], in.counterID, in.rangeID, in.first)
}

func appendIntentKey(dst []byte, id uint64) []byte {
	dst = appendMetaKey(dst, metaIntent)
	return binary.BigEndian.AppendUint64(dst, id)
}

// decodeIntentKey returns the id of an intent key.
func decodeIntentKey(k []byte) (uint64, bool) {
	p := len(metaIntent) + 1
	if len(k) != p+8 || k[0] != famMeta || string(k[1:p]) != metaIntent {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[p:]), true
}

// appendIntent encodes an intent, the value of meta key "intent/" + id u64.
//
//	field     width      meaning
//	--------  ---------  ----------------------------------------------------
//	version   1          intentVersion
//	kind      1          seal 1, merge 2, load 3, checkpoint 4, obsolete 5
//	counter   4          counter id, big-endian (0 for checkpoint)
//	range     8          range id, big-endian (0 for checkpoint)
//	seq       8          checkpoint sequence, big-endian (0 otherwise)
//	first     uvarint    seal/merge/load: first block id written (0 otherwise)
//	nids      uvarint    obsolete: number of block ids (0 otherwise)
//	ids       uvarint×n  obsolete: the replaced block ids
//	checksum  4          CRC-32C of everything before, big-endian
func appendIntent(dst []byte, in *intent) []byte {
	start := len(dst)
	dst = append(dst, intentVersion, in.kind)
	dst = binary.BigEndian.AppendUint32(dst, in.counterID)
	dst = binary.BigEndian.AppendUint64(dst, in.rangeID)
	dst = binary.BigEndian.AppendUint64(dst, in.seq)
	dst = binary.AppendUvarint(dst, uint64(in.first))
	dst = binary.AppendUvarint(dst, uint64(len(in.ids)))
	for _, id := range in.ids {
		dst = binary.AppendUvarint(dst, uint64(id))
	}
	return appendChecksum(dst, start)
}

// decodeIntent decodes and checks an intent value; every error wraps
// ErrCorrupt. Fields a kind does not use must be zero.
func decodeIntent(b []byte) (*intent, error) {
	body, err := verifyChecksum(b, "intent")
	if err != nil {
		return nil, err
	}
	d := decoder{b: body, what: "intent"}
	if v := d.byte(); d.err == nil && v != intentVersion {
		return nil, fmt.Errorf("%w: intent version %d", ErrCorrupt, v)
	}
	in := &intent{kind: d.byte()}
	in.counterID = d.u32()
	in.rangeID = d.u64()
	in.seq = d.u64()
	first, n := d.uvarint(), d.uvarint()
	if d.err != nil {
		return nil, d.err
	}
	if in.kind < intentSeal || in.kind > intentObsolete {
		return nil, fmt.Errorf("%w: intent kind %d", ErrCorrupt, in.kind)
	}
	if first > math.MaxUint32 || n > uint64(len(body)) {
		return nil, fmt.Errorf("%w: intent (first %d, %d ids)", ErrCorrupt, first, n)
	}
	in.first = uint32(first)
	for i := uint64(0); i < n && d.err == nil; i++ {
		id := d.uvarint()
		if id > math.MaxUint32 {
			d.fail("block id")
		}
		in.ids = append(in.ids, uint32(id))
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	ok := true
	switch in.kind {
	case intentCheckpoint:
		ok = in.counterID == 0 && in.rangeID == 0 && in.first == 0 && len(in.ids) == 0 && in.seq > 0
	case intentObsolete:
		ok = in.seq == 0 && in.first == 0 && len(in.ids) > 0
	default:
		ok = in.seq == 0 && len(in.ids) == 0
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s intent with fields of another kind", ErrCorrupt, intentNames[in.kind])
	}
	return in, nil
}

// newIntent gives in a fresh id.
func (db *DB) newIntent(in *intent) *intent {
	in.id = db.life.nextIntent.Add(1)
	return in
}

// commitIntents commits b with add written and del deleted as intents, and
// updates the in-memory set to match.
func (db *DB) commitIntents(b *pebble.Batch, opts *pebble.WriteOptions, add, del []*intent) error {
	if err := db.writable(); err != nil {
		return err
	}
	var key, val []byte
	for _, in := range add {
		key, val = appendIntentKey(key[:0], in.id), appendIntent(val[:0], in)
		if err := b.Set(key, val, nil); err != nil {
			return err
		}
	}
	for _, in := range del {
		if err := b.Delete(appendIntentKey(key[:0], in.id), nil); err != nil {
			return err
		}
	}
	db.life.diskMu.Lock()
	defer db.life.diskMu.Unlock()
	if err := b.Commit(opts); err != nil {
		if opts.Sync {
			// Pebble may have applied the batch before its fsync failed:
			// what is on disk is unknown until a reopen, as for a failed
			// commit (commit.go).
			db.setFailed(fmt.Errorf("intent batch: %w", err))
		}
		return err
	}
	for _, in := range add {
		db.life.intents[in.id] = in
	}
	for _, in := range del {
		delete(db.life.intents, in.id)
	}
	return nil
}

// beginBlocks durably notes that a job of kind is about to write blocks of
// (cs, rid), and returns the intent with the first block id to use: above
// every block of the range on disk and at least minID.
func (db *DB) beginBlocks(kind byte, cs *counterState, rid uint64, minID uint32) (*intent, error) {
	first, err := db.firstFreeBlockID(cs.id, rid, minID)
	if err != nil {
		return nil, err
	}
	in := db.newIntent(&intent{kind: kind, counterID: cs.id, rangeID: rid, first: first})
	b := db.pdb().NewBatch()
	defer b.Close()
	if err := db.commitIntents(b, pebble.Sync, []*intent{in}, nil); err != nil {
		return nil, fmt.Errorf("tally: write %s: %w", in, err)
	}
	return in, nil
}

// abandonBlocks deletes what a failed job of intent in wrote, and the
// intent. No version references those blocks (the job never switched: a
// switch batch that failed leaves the store failed, and then nothing is
// deleted here) and no other job runs on the range (DB.jobMu). Best
// effort: on failure the intent stays and the next Open resolves it.
func (db *DB) abandonBlocks(in *intent) {
	if db.env().failed.Load() != nil {
		return // the switch may have reached disk: leave it to Open
	}
	b := db.pdb().NewBatch()
	defer b.Close()
	if err := b.DeleteRange(appendColdBlockKey(nil, in.counterID, in.rangeID, in.first),
		prefixEnd(appendColdBlockPrefix(nil, in.counterID, in.rangeID)), nil); err != nil {
		return
	}
	db.commitIntents(b, pebble.NoSync, nil, []*intent{in})
}

// step runs the test hook at a named step of a job.
func (db *DB) step(name string) {
	if hook := db.opts.testHookStep; hook != nil {
		hook(name)
	}
}

// firstFreeBlockID returns max(minID, 1 + the highest block id of (cid,
// rid) on disk).
func (db *DB) firstFreeBlockID(cid uint32, rid uint64, minID uint32) (uint32, error) {
	prefix := appendColdBlockPrefix(nil, cid, rid)
	it, err := db.pdb().NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	if it.Last() {
		k := it.Key()
		if len(k) != 17 {
			return 0, fmt.Errorf("%w: cold block key %x", ErrCorrupt, k)
		}
		id := binary.BigEndian.Uint32(k[13:])
		if id == math.MaxUint32 {
			return 0, fmt.Errorf("%w: counter %d range %d: block ids exhausted", ErrCorrupt, cid, rid)
		}
		minID = max(minID, id+1)
	}
	return minID, it.Error()
}
