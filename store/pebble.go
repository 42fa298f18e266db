package store

// How tally runs Pebble: its options, its logger and event listener, and
// what happens when Pebble reports a disk that is full, a file that is
// damaged or an error it calls fatal.
//
// # Disk full (issue 12, defect 2)
//
// Pebble retries a failed flush at once and forever (DB.flush:
// BackgroundError, then maybeScheduleFlush), and Open waits for the flush of
// the replayed WAL ("for d.mu.compact.flushing { cond.Wait() }") while each
// retry reschedules itself before it broadcasts, so on a full disk Open
// never returns and each retry creates and removes an sstable. Once memtables
// queue up behind the failing flush, commits block in Pebble's write stall,
// and a failed MANIFEST write, or a failed WAL rotation inside a commit, is
// fatal to Pebble (Logger.Fatalf). tally therefore:
//
//   - sees every write failure at the filesystem (storeFS) and, on ENOSPC or
//     EDQUOT anywhere or any failed sstable write, refuses writes at once
//     (ErrDiskFull, or ErrFailed for other I/O errors) instead of handing
//     them to a commit pipeline that cannot drain; a successful flush or
//     compaction lifts the refusal;
//   - paces Pebble's flush retries (storeFS.Create backs off to 1s);
//   - checks free space before a writable Open (preflight) and bounds the
//     wait for pebble.Open: if Pebble hits ENOSPC (or ends in Fatalf) while
//     opening, Open returns ErrDiskFull within openGrace and abandons the
//     instance (see fence);
//   - lets reads go on: a DB opened with Options.ReadOnly never writes, so
//     get, verify, replay and stats work on a full disk.
//
// # Fatal errors
//
// Pebble calls Logger.Fatalf for errors it cannot unwind (a failed MANIFEST
// write, a commit whose WAL rotation failed, an sstable whose size disagrees
// with the MANIFEST) and does not expect Fatalf to return: the code after it
// assumes the process is gone. pebbleLogger.Fatalf records the error, fails
// the store (every write then returns ErrFailed wrapping the cause) and then:
//
//   - on a goroutine that came from a tally call (a tally frame is on the
//     stack), it panics with *pebbleFatal, which that call's deferred
//     recoverPebble turns into its error;
//   - on Pebble's own goroutines (flushes, compactions), it ends the
//     goroutine (runtime.Goexit). Its deferred calls run, so the locks
//     Pebble holds through defer are released (a failed MANIFEST write
//     during a flush calls Fatalf holding DB.mu; parking there instead
//     would block Metrics, snapshots and Verify), but the work it was doing
//     stays marked as running. The instance is then abandoned: it is never
//     closed (Pebble's Close would wait for that flush forever); DB.Close
//     fences it instead: its filesystem refuses every mutation and its
//     directory lock is released, so the store can be reopened, in this
//     process too, while the instance's memory stays until the process
//     exits. Reads go on until then.
//
// The host process never panics and never loses an acknowledged write this
// way; it may leak one Pebble instance per fatal error.
//
// # Damaged files
//
// Pebble's default DataCorruption handler calls Fatalf. tally's handler only
// records the event: the read that found it gets Pebble's corruption error,
// which pebbleErr turns into ErrCorrupt naming the file. Verify reads every
// block of every live sstable. WAL and MANIFEST damage is caught before
// replay (logcheck.go). A Pebble directory whose markers are gone is never
// opened as a new database (checkPebbleDir).

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// openGrace is how long Open waits for pebble.Open after Pebble hit a full
// disk (space may come back in the meantime) before it gives up.
const openGrace = 2 * time.Second

// preflightMargin is the free space a writable Open needs beyond the WAL it
// replays: the flushed sstable's index, a MANIFEST edit, an OPTIONS file.
const preflightMargin = 1 << 20

// pebbleFormat is the Pebble format tally writes. FormatWALSyncChunks makes
// every WAL chunk carry the offset the log was synced to, which is what
// lets checkRecordLog tell a damaged WAL from a torn one. Its sstables stay
// in the row format (TableFormatPebblev4) because tally does not enable
// columnar blocks. Pebble creates a database, and the WAL of that first
// Open, at its oldest format and upgrades it afterwards; open rotates that
// WAL so the log tally writes to has sync offsets from the start.
const pebbleFormat = pebble.FormatWALSyncChunks

// pebbleEnv is what one Pebble instance reports into, and the health it
// derives: created before pebble.Open so events during Open are seen. All
// fields are safe for concurrent use.
type pebbleEnv struct {
	fs   *storeFS
	errs *errorLog

	opening atomic.Bool // pebble.Open is running: check record logs
	fenced  atomic.Bool // the instance was abandoned (storeFS refuses writes)
	abandon atomic.Bool // a Pebble goroutine ended in Fatalf: fence, never Close
	// retired: a reopen replaced the instance (reopen.go). It is fenced,
	// but its creates wait for its Close and then fail instead of blocking
	// for good, so that Close can finish once its last reader is gone.
	retired atomic.Bool

	// onFail, if set, is called (once) when the instance fails: it wakes
	// the healer of a DB opened with Options.ReopenOnFailure.
	onFail func()
	// holdRemove, if set, is asked before every removal of a file: true
	// means the removal is held back until no retired instance of the DB
	// is left (reopen.go), since one may still read that file.
	holdRemove func(name string) bool

	// failed is why the instance takes no more writes (reopen the store).
	// blocked is why writes are refused until a flush or compaction
	// succeeds: Pebble could not write an sstable (a full disk, an I/O
	// error), and a write handed to it now would queue behind a flush that
	// cannot finish (Pebble's write stall has no timeout).
	failed  atomic.Pointer[error]
	blocked atomic.Pointer[error]

	backoffMu sync.Mutex
	backoffN  int

	// probe: how a refusal of writes is lifted when no flush comes to do
	// it (see maybeLift).
	probeDir  string // the store directory, where the probe file goes
	minFree   uint64 // free bytes a full disk must have again
	probeMu   sync.Mutex
	lastProbe time.Time

	never     chan struct{} // never closed: a fenced instance's creates wait on it
	closing   chan struct{} // closed when the DB closes: cuts backoffs short
	closeOnce sync.Once
	stuck     chan struct{} // closed when Open must stop waiting for Pebble
	stuckOnce sync.Once
	grace     time.Duration // openGrace, or a test's
	probeGap  time.Duration // probeInterval (and the longest backoff), or a test's
}

func newPebbleEnv(fs vfs.FS, errs *errorLog, dir string, memTableSize uint64) *pebbleEnv {
	e := &pebbleEnv{errs: errs, never: make(chan struct{}), closing: make(chan struct{}), stuck: make(chan struct{}),
		probeDir: dir, minFree: 2*memTableSize + preflightMargin, grace: openGrace, probeGap: probeInterval}
	e.fs = &storeFS{FS: fs, env: e}
	return e
}

// pebbleCacheSize is the capacity of the Pebble cache the store creates:
// CacheSize for blocks plus two memtables. Pebble reserves every memtable
// it allocates (the mutable one, one being flushed, and the one it keeps
// to recycle) from its block cache's capacity, so a cache of CacheSize
// alone held no blocks at all once two memtables of MemTableSize had been
// allocated (the default 16 MiB cache and 8 MiB memtables: every read of
// a server that had written 16 MiB went to the files; bench/RESULTS.md,
// issue 18, "tally behind tally serve"). With room for the two memtables
// the budget's shares hold: memtables and blocks together take at most
// CacheSize + 2*MemTableSize.
func pebbleCacheSize(o *Options) int64 {
	return o.CacheSize + 2*int64(o.MemTableSize)
}

// pebbleOptions returns the options of tally's Pebble instance.
func (e *pebbleEnv) pebbleOptions(o *Options, cache *pebble.Cache, mustExist bool) *pebble.Options {
	return &pebble.Options{
		FS:                 e.fs,
		Cache:              cache,
		MemTableSize:       o.MemTableSize,
		FormatMajorVersion: pebbleFormat,
		ReadOnly:           o.ReadOnly,
		ErrorIfNotExists:   mustExist,
		Logger:             pebbleLogger{e},
		EventListener:      e.listener(),
	}
}

// writeErr returns why writes are refused now, or nil.
func (e *pebbleEnv) writeErr() error {
	if err := e.refusal(); err == nil || e.failed.Load() != nil || !e.maybeLift() {
		return err
	}
	return nil
}

// refusal returns the recorded reason writes are refused, or nil.
func (e *pebbleEnv) refusal() error {
	if p := e.failed.Load(); p != nil {
		return fmt.Errorf("%w: %w", ErrFailed, *p)
	}
	if p := e.blocked.Load(); p != nil {
		return *p
	}
	return nil
}

// probeInterval bounds how often a refused write probes the disk.
const probeInterval = time.Second

// maybeLift lifts a refusal of writes when the disk takes writes again and
// no flush came to say so (the failed job was a compaction, or nothing was
// left to flush). At most once per probeInterval it checks the free space
// (where the filesystem reports it: room for two memtables) and writes,
// syncs and removes a small probe file. If Pebble's sstables still fail,
// the next failure refuses writes again.
func (e *pebbleEnv) maybeLift() bool {
	e.probeMu.Lock()
	defer e.probeMu.Unlock()
	if time.Since(e.lastProbe) < e.probeGap {
		return false
	}
	e.lastProbe = time.Now()
	if !e.probeLocked() {
		return false
	}
	e.succeeded()
	return true
}

// probeReopen reports whether the disk takes writes again, for the healer
// of a failed store (reopen.go), which paces it: the free space a
// writable Open needs to replay the WAL (preflight: the WAL, an eighth
// more and 1 MiB, where the filesystem reports usage) and the probe
// file's write, sync and removal. Room for two memtables, which maybeLift
// asks, is not needed to reopen: a flush that finds no room refuses
// writes again, and lifts by itself.
func (e *pebbleEnv) probeReopen() bool {
	if preflight(e.fs.FS, e.fs.FS.PathJoin(e.probeDir, pebbleDir)) != nil {
		return false
	}
	e.probeMu.Lock()
	defer e.probeMu.Unlock()
	return e.probeWrite()
}

// probeLocked checks the free space and writes, syncs and removes the
// probe file. The caller holds probeMu.
func (e *pebbleEnv) probeLocked() bool {
	if u, err := e.fs.FS.GetDiskUsage(e.probeDir); err == nil && u.AvailBytes < e.minFree {
		return false
	}
	return e.probeWrite()
}

// probeWrite writes, syncs and removes the probe file. The caller holds
// probeMu.
func (e *pebbleEnv) probeWrite() bool {
	fs := e.fs.FS
	path := fs.PathJoin(e.probeDir, probeFile)
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return false
	}
	_, err = f.Write(make([]byte, 64<<10))
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	fs.Remove(path)
	return err == nil
}

// fail puts the instance in the failed state (the first cause wins).
func (e *pebbleEnv) fail(err error) {
	if e.failed.CompareAndSwap(nil, &err) {
		e.errs.add(err)
		if e.onFail != nil {
			e.onFail()
		}
	}
}

// block refuses writes until a flush or compaction succeeds. err is the
// cause: it wraps ErrDiskFull for a full disk, else it is wrapped in
// ErrFailed (a failure the caller cannot fix by retrying at once).
func (e *pebbleEnv) block(err error) {
	if !errors.Is(err, ErrDiskFull) {
		err = fmt.Errorf("%w: pebble cannot write sstables: %w", ErrFailed, err)
	}
	if e.blocked.CompareAndSwap(nil, &err) {
		e.errs.add(err)
		e.probeMu.Lock()
		e.lastProbe = time.Now() // no probe within probeInterval of a failure
		e.probeMu.Unlock()
	}
	if e.opening.Load() {
		e.signalStuck()
	}
}

func (e *pebbleEnv) signalStuck() { e.stuckOnce.Do(func() { close(e.stuck) }) }

// writeFailed is called by storeFS for every failed write, sync or create.
func (e *pebbleEnv) writeFailed(name string, err error) {
	if errors.Is(err, errFenced) {
		return
	}
	cause := pebbleErr(err)
	if errors.Is(cause, ErrDiskFull) || isTable(name) {
		e.block(cause)
	}
	if isWAL(name) {
		// Pebble's log writer keeps the error: no later sync succeeds.
		e.fail(fmt.Errorf("wal %s: %w", e.fs.PathBase(name), cause))
	}
}

// succeeded lifts the refusal of writes: an sstable was written and synced
// (storeFS), or the probe succeeded. A finished flush or compaction is not
// proof enough: a compaction that moves a file to another level writes
// nothing.
func (e *pebbleEnv) succeeded() {
	e.blocked.Store(nil)
	e.backoffMu.Lock()
	e.backoffN = 0
	e.backoffMu.Unlock()
}

// backoff delays an sstable create while sstable writes fail.
func (e *pebbleEnv) backoff() {
	if e.blocked.Load() == nil {
		return
	}
	e.backoffMu.Lock()
	d := min(minBackoff<<min(e.backoffN, 10), maxBackoff, e.probeGap)
	e.backoffN++
	e.backoffMu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-e.closing:
	}
}

// closed cuts any backoff short: Pebble's Close waits for the flush.
func (e *pebbleEnv) closed() { e.closeOnce.Do(func() { close(e.closing) }) }

// fence abandons the instance: its filesystem refuses every mutation and
// its directory lock is released.
func (e *pebbleEnv) fence() {
	e.fenced.Store(true)
	e.fs.releaseLocks()
}

// retire fences an instance a reopen replaces: nothing it does reaches the
// disk any more and its directory lock is released, while its readers go
// on; its Close, once they are gone, can finish (see retired).
func (e *pebbleEnv) retire() {
	e.retired.Store(true)
	e.fence()
}

// closePebble closes pdb, or fences it when a Pebble goroutine ended in
// Fatalf (Close would wait for it forever).
func (e *pebbleEnv) closePebble(pdb *pebble.DB) (err error) {
	e.closed()
	if e.abandon.Load() {
		e.fence()
		return nil
	}
	defer recoverPebble(&err)
	err = pdb.Close()
	if e.retired.Load() {
		return nil // its WAL failed for good and it writes nothing: Close reports that
	}
	return err
}

// openPebble runs pebble.Open with a bounded wait: if Pebble cannot write
// an sstable (a full disk, an I/O error) or ends in Fatalf while opening,
// it cannot back out (see the file comment), so after openGrace the
// instance is fenced and Open fails.
func (e *pebbleEnv) openPebble(dir string, popts *pebble.Options) (*pebble.DB, error) {
	type result struct {
		pdb *pebble.DB
		err error
	}
	if err := checkOptionsFile(e.fs.FS, dir, popts); err != nil {
		return nil, err
	}
	ch := make(chan result, 1)
	e.opening.Store(true)
	go func() {
		var r result
		defer func() {
			if p := recover(); p != nil {
				r = result{err: panicError(p)}
			}
			e.opening.Store(false)
			ch <- r
		}()
		r.pdb, r.err = pebble.Open(dir, popts)
	}()
	var r result
	select {
	case r = <-ch:
	case <-e.stuck:
		select {
		case r = <-ch:
		case <-time.After(e.grace):
			e.fence()
			go func() { // in case Pebble ever gets out
				if r := <-ch; r.pdb != nil && !e.abandon.Load() {
					r.pdb.Close()
				}
			}()
			if err := e.refusal(); err != nil {
				return nil, fmt.Errorf("tally: open %s: %w", dir, err)
			}
			return nil, fmt.Errorf("%w: tally: open %s: pebble did not finish opening", ErrFailed, dir)
		}
	}
	if r.err != nil {
		return nil, openError(dir, r.err)
	}
	if err := e.refusal(); err != nil && !popts.ReadOnly {
		// Pebble opened, but a write of its recovery failed: refuse now
		// rather than fail the first write.
		e.closePebble(r.pdb)
		return nil, fmt.Errorf("tally: open %s: %w", dir, err)
	}
	return r.pdb, nil
}

// checkOptionsFile runs Pebble's own check of its newest OPTIONS file
// before Pebble does, so a damaged one is reported as ErrCorrupt naming the
// file (Pebble's error, "merger name from file ... != ...", reads like
// misuse; tally always opens with the same comparer and merger).
func checkOptionsFile(fs vfs.FS, dir string, popts *pebble.Options) error {
	names, err := fs.List(dir)
	if err != nil {
		return nil
	}
	var newest string
	for _, n := range names {
		if strings.HasPrefix(n, "OPTIONS-") && n > newest {
			newest = n
		}
	}
	if newest == "" {
		return nil
	}
	path := fs.PathJoin(dir, newest)
	f, err := fs.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("tally: read %s: %w", path, err)
	}
	o := popts.Clone()
	o.EnsureDefaults()
	if err := o.CheckCompatibility(dir, string(b)); err != nil {
		return &pebbleError{ErrCorrupt, path + ": " + firstLine(err.Error()), nil}
	}
	return nil
}

// openError names what a failed pebble.Open means for the store.
func openError(dir string, err error) error {
	switch perr := pebbleErr(err); {
	case errors.Is(perr, ErrCorrupt), errors.Is(perr, ErrDiskFull):
		return perr
	case errors.Is(err, pebble.ErrDBDoesNotExist), errors.Is(err, pebble.ErrDBNotPristine):
		return fmt.Errorf("%w: %s is not a complete Pebble database: %v", ErrCorrupt, dir, err)
	case errors.Is(err, os.ErrNotExist):
		// The MANIFEST names a file that is gone (checkPebbleDir found the
		// directory and its markers).
		return fmt.Errorf("%w: %s: a file the database needs is missing: %v", ErrCorrupt, dir, firstLine(err.Error()))
	}
	return fmt.Errorf("tally: open pebble: %w", err)
}

// preflight refuses a writable Open that cannot have the space to replay
// the WAL into an sstable, before Pebble starts a flush that cannot end.
// Filesystems that do not report usage (vfs.MemFS) pass. It counts the two
// newest WAL files: older ones are Pebble's recycled logs (flushed, kept
// for reuse), and more than two live ones are rare; if the estimate is
// short, the bounded wait of openPebble still ends the Open.
func preflight(fs vfs.FS, dir string) error {
	names, err := fs.List(dir)
	if err != nil {
		return nil // a new store: Pebble creates the directory
	}
	var wals []string
	for _, n := range names {
		if isWAL(n) {
			wals = append(wals, n)
		}
	}
	slices.Sort(wals) // fixed-width numbers: name order is number order
	var wal int64
	for _, n := range wals[max(0, len(wals)-2):] {
		if st, err := fs.Stat(fs.PathJoin(dir, n)); err == nil {
			wal += st.Size()
		}
	}
	u, err := fs.GetDiskUsage(dir)
	if err != nil {
		return nil
	}
	if need := uint64(wal + wal/8 + preflightMargin); u.AvailBytes < need {
		return fmt.Errorf("%w: %s: opening for writes replays %d bytes of WAL and needs about %d bytes free, %d available (open it with Options.ReadOnly to read)",
			ErrDiskFull, dir, wal, need, u.AvailBytes)
	}
	return nil
}

// checkPebbleDir decides whether Pebble's directory holds a database, and
// refuses one whose markers are gone: Pebble would take it for a new
// database and delete every sstable as obsolete (issue 12, defect 5).
// Pebble creates MANIFEST-* and marker.manifest.* before any WAL, sstable,
// OPTIONS file or format marker, so a directory with only a MANIFEST is an
// interrupted creation and may be created again. format is the database's
// format major version (0 when it has none yet).
func checkPebbleDir(fs vfs.FS, dir string) (exists bool, format int, err error) {
	names, lerr := fs.List(dir)
	if lerr != nil {
		return false, 0, nil // missing: a new store
	}
	var manifestMarker, formatMarker, data bool
	var sample string
	for _, n := range names {
		switch {
		case strings.HasPrefix(n, "marker.manifest."):
			manifestMarker = true
		case strings.HasPrefix(n, "marker.format-version."):
			// marker.format-version.<iteration>.<version>
			formatMarker = true
			if v, err := strconv.Atoi(n[strings.LastIndexByte(n, '.')+1:]); err == nil {
				format = max(format, v)
			}
		case strings.HasSuffix(n, ".sst"), strings.HasSuffix(n, ".blob"), isWAL(n), strings.HasPrefix(n, "OPTIONS-"):
			data = true
			sample = n
		}
	}
	switch {
	case manifestMarker && formatMarker:
		return true, format, nil
	case !data && !formatMarker:
		return false, 0, nil
	case !manifestMarker:
		return false, 0, fmt.Errorf("%w: %s holds Pebble data (%s) but no marker.manifest.* file: it would be opened as a new database; restore the marker (a file named marker.manifest.NNNNNN.MANIFEST-NNNNNN naming the newest MANIFEST)",
			ErrCorrupt, dir, sample)
	default:
		return false, 0, fmt.Errorf("%w: %s holds a Pebble database without its marker.format-version.* file", ErrCorrupt, dir)
	}
}

// pebbleError is an error of Pebble's classified for tally's callers: kind
// is ErrCorrupt or ErrDiskFull; cause, if not nil, is Pebble's or the OS's
// error.
type pebbleError struct {
	kind  error
	msg   string
	cause error
}

func (e *pebbleError) Error() string { return e.kind.Error() + ": " + e.msg }

func (e *pebbleError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.cause}
}

// pebbleErr classifies an error from Pebble: damaged bytes wrap ErrCorrupt
// and name the file, a full disk wraps ErrDiskFull; the original error
// stays in the chain.
func pebbleErr(err error) error {
	var pe *pebbleError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pe):
		return pe // tally's own, from deep inside a Pebble call (logcheck)
	case errors.Is(err, ErrCorrupt), errors.Is(err, ErrDiskFull):
		return err
	}
	if info := pebble.ExtractDataCorruptionInfo(err); info != nil {
		return &pebbleError{ErrCorrupt, info.Path + ": " + firstLine(info.Details.Error()), err}
	}
	if pebble.IsCorruptionError(err) {
		return &pebbleError{ErrCorrupt, "pebble: " + firstLine(err.Error()), err}
	}
	if isDiskFull(err) {
		return &pebbleError{ErrDiskFull, firstLine(err.Error()), err}
	}
	return err
}

func isDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// pebbleFatal is the panic value of pebbleLogger.Fatalf on a goroutine that
// came from a tally call.
type pebbleFatal struct{ err error }

// recoverPebble ends a panic of pebbleLogger.Fatalf in a call into Pebble
// and stores its error in *errp. Every tally entry point that reaches Pebble
// defers it; other panics go on.
func recoverPebble(errp *error) {
	if r := recover(); r != nil {
		f, ok := r.(*pebbleFatal)
		if !ok {
			panic(r)
		}
		*errp = fmt.Errorf("%w: %w", ErrFailed, f.err)
	}
}

// panicError turns any panic inside pebble.Open into an error: Open's input
// is the disk, so a panic there (Pebble's WAL replay still has some for
// malformed batches) is damage, not a tally bug.
func panicError(p any) error {
	if f, ok := p.(*pebbleFatal); ok {
		return f.err
	}
	return fmt.Errorf("%w: pebble panicked while opening: %v", ErrCorrupt, p)
}

// tallyOnStack reports whether the calling goroutine runs a tally call (as
// opposed to one of Pebble's own goroutines).
func tallyOnStack() bool {
	pcs := make([]uintptr, 512)
	n := runtime.Callers(3, pcs) // skip Callers, tallyOnStack, Fatalf
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if strings.HasPrefix(f.Function, "github.com/tallydb/tally/") {
			return true
		}
		if !more {
			return false
		}
	}
}

// pebbleLogger keeps Pebble off the host's stderr: errors go to the store's
// background error list (Stats.Errors), Fatalf as described in the file
// comment.
type pebbleLogger struct{ env *pebbleEnv }

func (pebbleLogger) Infof(string, ...any) {}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.env.errs.add(fmt.Errorf("pebble: "+format, args...))
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := firstLine(fmt.Sprintf(format, args...))
	var err error = fmt.Errorf("pebble: fatal: %s", msg)
	for _, a := range args {
		if ae, ok := a.(error); ok {
			if c := pebbleErr(ae); c != ae {
				err = &pebbleError{c.(*pebbleError).kind, "pebble: fatal: " + msg, ae}
			}
			break
		}
	}
	if errors.Is(err, ErrDiskFull) {
		l.env.block(err)
	}
	l.env.fail(err)
	if tallyOnStack() {
		panic(&pebbleFatal{err})
	}
	l.env.abandon.Store(true)
	l.env.signalStuck()
	runtime.Goexit()
}

// listener routes Pebble's events into the env.
func (e *pebbleEnv) listener() *pebble.EventListener {
	return &pebble.EventListener{
		BackgroundError: func(err error) {
			if errors.Is(err, errFenced) {
				return
			}
			err = pebbleErr(err)
			if errors.Is(err, ErrDiskFull) {
				e.block(err)
			}
			e.errs.add(fmt.Errorf("pebble: background: %w", err))
		},
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			e.errs.add(fmt.Errorf("%w: %s: %s", ErrCorrupt, info.Path, firstLine(info.Details.Error())))
		},
	}
}
