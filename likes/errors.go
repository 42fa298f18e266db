package likes

import "errors"

// Errors returned by the package. Test for them with errors.Is; a returned
// error usually wraps one of these with detail. Errors of the store
// (store.ErrClosed, store.ErrFailed, store.ErrCorrupt, ...) pass through.
var (
	// ErrInvalidBusiness is returned for a business name that is empty,
	// longer than MaxBusinessLen or not made of [A-Za-z0-9_-] (not
	// starting with '-').
	ErrInvalidBusiness = errors.New("likes: invalid business name")
	// ErrBusinessConflict is returned when a business's counter exists but
	// was not created by this package (its columns are not likes and
	// dislikes), or when too many businesses exist.
	ErrBusinessConflict = errors.New("likes: business conflict")
	// ErrOwnerMismatch is returned by Like when the caller names an owner
	// other than the one the item already has (SetOwner moves an item).
	ErrOwnerMismatch = errors.New("likes: item has another owner")
	// ErrLimit is returned for a page size, a top-N size or a number of
	// items outside what the call allows (see MaxPage, MaxTop, MaxStates).
	ErrLimit = errors.New("likes: limit out of range")
	// ErrBadCursor is returned for a cursor tally did not issue for this
	// store and this call: malformed, forged, or issued for another list.
	ErrBadCursor = errors.New("likes: bad cursor")
	// ErrStaleCursor is returned for a likers cursor issued before the
	// item's set changed representation (it grew past RoaringThreshold
	// and was converted to roaring bitmaps, which list likers in another
	// order): start again from the first page.
	ErrStaleCursor = errors.New("likes: stale cursor (the like set was converted; start from the first page)")
	// ErrDayNotKept is returned by Top and Rank for a day board outside the
	// kept window (Options.BoardDays), or when daily boards are off.
	ErrDayNotKept = errors.New("likes: day board not kept")
	// ErrBadTime is returned by Load for a like time before 1970 or more
	// than a day in the future.
	ErrBadTime = errors.New("likes: bad like time")
	// ErrInvalidOption is returned for an option outside its allowed set.
	ErrInvalidOption = errors.New("likes: invalid option")
	// ErrUnknownBusiness is returned by a like, dislike or SetOwner of a
	// business nobody declared (AddBusiness; a Load declares the businesses
	// it names), unless Options.CreateBusinesses: a business given by a
	// typo must not silently become a new one. Reads of an undeclared
	// business return nothing (zero counts, empty pages), like a missing
	// Redis key.
	ErrUnknownBusiness = errors.New("likes: unknown business")
)

// ErrCursorShards is returned for a cursor of a gathered list (a sharded
// cluster's user likes) made under a slot map with other shards than the
// current one: the shards' positions in it no longer describe the list;
// start again from the first page.
var ErrCursorShards = errors.New("likes: cursor made for another set of shards (start from the first page)")
