package tally

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/tallydb/tally/likes"
	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/timeline"
	"github.com/tallydb/tally/unread"
)

// Options configure Open. A nil *Options means all defaults; Open copies
// what it is given and never changes the caller's values.
type Options struct {
	// Store configures the store: durability, read-only, checkpoints,
	// background work. Open adds the packages' key families to its
	// Families. The default is store's defaults.
	Store *store.Options
	// Timeline configures timelines. The default is timeline's defaults.
	Timeline *timeline.Options
	// Unread configures unread counts; its Graph is set by Open to the
	// database's timeline (a Graph given here is an error). The default is
	// unread's defaults.
	Unread *unread.Options
	// Likes configures likes. The default is likes' defaults.
	Likes *likes.Options
	// ExistingOnly opens only the packages whose data the store already
	// holds, as a read-only Open always does: for tools that run the
	// queued jobs or report on a store and must create nothing. Accessors
	// of the packages not opened return nil. The default is false (a
	// writable Open opens every package, creating what is missing).
	ExistingOnly bool
	// Packages, if not nil, names the packages to open ("timeline",
	// "unread", "likes"; unread needs timeline): a host or a benchmark
	// that uses one package opens only it, still through Open. Accessors
	// of the others return nil. A package left out cannot be bypassed: a
	// timeline opened where unread data exists refuses every follow-graph
	// change (timeline.ErrObserverMissing). The default, nil, is every
	// package.
	Packages []string
}

// ErrInvalidOption is returned by Open for options that cannot work
// together.
var ErrInvalidOption = errors.New("tally: invalid option")

// DB is an open tally database: the store and every package on it. Its
// methods and the packages' are safe for concurrent use.
type DB struct {
	store    *store.DB
	timeline *timeline.Timeline
	unread   *unread.Unread
	likes    *likes.Likes
	// pkgs are the open packages in the order they were opened (Close
	// closes them in reverse).
	pkgs []store.Package
}

// Families returns the key families of every package, to declare in
// store.Options.Families when opening the store some other way.
func Families() []store.FamilySpec {
	var out []store.FamilySpec
	out = append(out, timeline.Families()...)
	out = append(out, unread.Families()...)
	out = append(out, likes.Families()...)
	return out
}

// CounterOwner returns the package whose namespace a counter name is in
// ("timeline", "unread", "likes"), or "" for a name the host may use for
// its own counters. Tools refuse to create or write a counter in a
// package's namespace (store.ReservedError).
func CounterOwner(name string) string {
	switch {
	case timeline.OwnsCounter(name):
		return "timeline"
	case unread.OwnsCounter(name):
		return "unread"
	case likes.OwnsCounter(name):
		return "likes"
	}
	return ""
}

// CheckCounterName refuses, with an error wrapping store.ErrReserved, a
// counter name in a package's namespace: what the tools check before
// creating a counter of the host's.
func CheckCounterName(name string) error {
	if owner := CounterOwner(name); owner != "" {
		return store.ReservedError(name, owner)
	}
	return nil
}

// UserCounter returns the host's counter named name, for the tools'
// counter commands (tally incr, HINCRBY...): a counter a package owns, or
// a name in a package's namespace, is refused with an error wrapping
// store.ErrReserved, since its data is reached through the package.
func UserCounter(db *store.DB, name string) (*store.Counter, error) {
	c, err := db.UserCounter(name)
	if errors.Is(err, store.ErrCounterNotFound) {
		if err := CheckCounterName(name); err != nil {
			return nil, err
		}
	}
	return c, err
}

// UserCounters returns the schemas of the host's counters (those no
// package owns), sorted by id: what "tally counter list" and
// TALLY.COUNTER LIST show.
func UserCounters(db *store.DB) []store.CounterInfo {
	var out []store.CounterInfo
	for _, ci := range db.Counters() {
		if ci.Owner == "" {
			out = append(out, ci)
		}
	}
	return out
}

// Open opens (creating it if needed, unless read-only) the database in dir
// with every package: the store with the packages' families declared, then
// timeline, unread on timeline's follow graph, and likes. On error nothing
// stays open.
func Open(dir string, opts *Options) (*DB, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	var so store.Options
	if o.Store != nil {
		so = *o.Store
	}
	// A writable store declares every family before Pebble opens, so
	// merges and value checks apply from the first read. A read-only one
	// declares only those of the packages it holds, which register theirs
	// as they open (nothing reads a family before its package opens).
	if !so.ReadOnly {
		so.Families = slices.Clone(so.Families)
		for _, f := range Families() {
			if !slices.ContainsFunc(so.Families, func(g store.FamilySpec) bool { return g.Name == f.Name }) {
				so.Families = append(so.Families, f)
			}
		}
	}
	for _, p := range o.Packages {
		if p != "timeline" && p != "unread" && p != "likes" {
			return nil, fmt.Errorf("%w: package %q (want timeline, unread or likes)", ErrInvalidOption, p)
		}
	}
	if o.Packages != nil && slices.Contains(o.Packages, "unread") && !slices.Contains(o.Packages, "timeline") {
		return nil, fmt.Errorf("%w: unread needs timeline (its feed counts observe the follow graph)", ErrInvalidOption)
	}
	var uo unread.Options
	if o.Unread != nil {
		uo = *o.Unread
		if uo.Graph != nil {
			return nil, fmt.Errorf("%w: Unread.Graph is set by Open", ErrInvalidOption)
		}
	}

	sdb, err := store.Open(dir, &so)
	if err != nil {
		return nil, err
	}
	db := &DB{store: sdb}
	if err := db.openPackages(o, uo); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return db, nil
}

// openPackages opens the packages in dependency order. On a read-only
// store, or with ExistingOnly, only those whose data exists.
func (db *DB) openPackages(o Options, uo unread.Options) error {
	ro := db.store.ReadOnly() || o.ExistingOnly
	want := func(name string) bool { return o.Packages == nil || slices.Contains(o.Packages, name) }
	if want("timeline") && (!ro || timeline.Exists(db.store)) {
		tl, err := timeline.New(db.store, o.Timeline)
		if err != nil {
			return err
		}
		db.timeline = tl
		db.pkgs = append(db.pkgs, tl)
	}
	if want("unread") && (!ro || unread.Exists(db.store)) {
		if db.timeline != nil {
			uo.Graph = db.timeline
		}
		x, err := unread.New(db.store, &uo)
		if err != nil {
			return err
		}
		db.unread = x
		db.pkgs = append(db.pkgs, x)
	}
	if want("likes") && (!ro || likes.Exists(db.store)) {
		l, err := likes.New(db.store, o.Likes)
		if err != nil {
			return err
		}
		db.likes = l
		db.pkgs = append(db.pkgs, l)
	}
	return nil
}

// Store returns the store: counters, key families, jobs, checkpoints.
func (db *DB) Store() *store.DB { return db.store }

// Timeline returns the timelines: follow graph, posts, homes. It is nil
// only on a database opened read-only (or ExistingOnly) that holds no
// timeline data.
func (db *DB) Timeline() *timeline.Timeline { return db.timeline }

// Unread returns the unread counts, red dots, notices and feed unread. It
// is nil only on a database opened read-only (or ExistingOnly) that holds
// no unread data.
func (db *DB) Unread() *unread.Unread { return db.unread }

// Likes returns likes, dislikes and their boards. It is nil only on a
// database opened read-only (or ExistingOnly) that holds no likes.
func (db *DB) Likes() *likes.Likes { return db.likes }

// Packages returns the open packages, in the order Open opened them.
func (db *DB) Packages() []store.Package { return slices.Clone(db.pkgs) }

// Check verifies the invariants of the store's memory and of every
// package's data (see each package's Check) and returns every problem
// found, each naming its package, wrapped in store.ErrCorrupt. It reads
// everything: for tests and tools on a quiet database.
func (db *DB) Check() error {
	errs := []error{db.store.Check()}
	for _, p := range db.pkgs {
		if err := p.Check(); err != nil {
			errs = append(errs, packageProblem(p, err))
		}
	}
	return errors.Join(errs...)
}

// packageProblem wraps a package's Check failure as damage naming it
// (unless it is not about the data: a closed store).
func packageProblem(p store.Package, err error) error {
	if errors.Is(err, store.ErrCorrupt) || errors.Is(err, store.ErrClosed) {
		return fmt.Errorf("%s: %w", p.PackageName(), err)
	}
	return fmt.Errorf("%w: %s: %w", store.ErrCorrupt, p.PackageName(), err)
}

// Verify reads everything the database holds on disk (store.DB.Verify:
// every schema record, cold block, checkpoint chunk, log record and family
// value, the packages' values decoded by their families' checks), then
// checks every package's invariants. Problems are joined, each wrapped in
// store.ErrCorrupt; other errors (I/O, ctx) are returned as they are.
func (db *DB) Verify(ctx context.Context) error {
	if err := db.store.Verify(ctx); err != nil {
		return err
	}
	var errs []error
	for _, p := range db.pkgs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := p.Check(); err != nil {
			errs = append(errs, packageProblem(p, err))
		}
	}
	return errors.Join(errs...)
}

// DescribeJob says what a queued job does, in the user's words, asking
// each package (store.JobDescriber); a job no package knows is described
// by its kind and key.
func (db *DB) DescribeJob(j store.JobInfo) string {
	for _, p := range db.pkgs {
		if d, ok := p.(store.JobDescriber); ok {
			if s, ok := d.DescribeJob(j.Kind, j.Key); ok {
				return s
			}
		}
	}
	return fmt.Sprintf("%s job key %q", j.Kind, j.Key)
}

// PackageStats is one package's figures.
type PackageStats struct {
	Name  string
	Stats []store.Stat
}

// PackageStats returns every open package's figures, in opening order
// ("tally stats" prints them as NAME.KEY VALUE).
func (db *DB) PackageStats() []PackageStats {
	out := make([]PackageStats, 0, len(db.pkgs))
	for _, p := range db.pkgs {
		out = append(out, PackageStats{Name: p.PackageName(), Stats: p.Stats()})
	}
	return out
}

// Close stops every package's background work, then checkpoints and
// closes the store. Close is safe to call more than once.
func (db *DB) Close() error {
	var errs []error
	for i := len(db.pkgs) - 1; i >= 0; i-- {
		errs = append(errs, db.pkgs[i].Close())
	}
	errs = append(errs, db.store.Close())
	return errors.Join(errs...)
}
