package timeline

import (
	"context"
	"fmt"
	"slices"

	"github.com/tallydb/tally/internal/radix"
)

// Edge is one follow: Follower follows Followee.
type Edge struct {
	Follower, Followee uint64
}

// Check returns an error if the graph cannot hold e: an id outside
// 1..MaxID (ErrBadID, naming follower or followee) or a user following
// themselves (ErrSelfFollow). Follow, FollowMany and LoadFollows refuse
// such an edge with this error; a host that parses edges (a CLI load, a
// server command) calls it to refuse one with the same rule.
func (e Edge) Check() error {
	if err := CheckID("follower", e.Follower); err != nil {
		return err
	}
	if err := CheckID("followee", e.Followee); err != nil {
		return err
	}
	if e.Follower == e.Followee {
		return fmt.Errorf("%w: user %d", ErrSelfFollow, e.Follower)
	}
	return nil
}

// LoadStats reports what LoadFollows did.
type LoadStats struct {
	Edges    int // edges given
	Added    int // new follows
	Existing int // follows already in the graph, or repeated in the input
	Users    int // users who got an ordinal
	Expired  int // active followers whose inbox was dropped, to be rebuilt on their next read
}

// loadBatchEdges is the number of edges one LoadFollows batch commits.
const loadBatchEdges = 64 << 10

// LoadFollows adds many follows at once, for imports and benchmarks. Every
// edge is validated first (ErrBadID, ErrSelfFollow naming the edge's index,
// ErrTooManyFollowees counting only the follows the load adds): one bad
// edge and nothing is loaded. Follows that exist already, and repeats,
// count once. Edges are then committed in batches of 64K (with counts,
// follower bitmaps and observer calls, as FollowMany does; a follower's
// edges stay in one batch), each holding the graph lock exclusively, so no
// follow, publish or rebuild interleaves with it; progress, if not nil, is
// called with the edges done after each batch.
//
// Each batch checks the followee limit again under its lock before it
// writes anything, so the limit holds exactly whatever runs concurrently.
// A load of one batch (up to 64K edges) is therefore all or nothing; in a
// longer load, a follow made between two batches that leaves a later
// batch's follower too little room refuses that batch after earlier ones
// loaded (the error says which user).
//
// A follower whose inbox is live gets it dropped (their next read rebuilds
// it by pull, including the new followees' posts) instead of one backfill
// job per edge. A load that fails or crashes part-way leaves some batches
// loaded; running it again converges (follows are idempotent). A sharded
// timeline (Options.Remote) refuses it with ErrSharded.
func (t *Timeline) LoadFollows(ctx context.Context, edges []Edge, progress func(done int)) (LoadStats, error) {
	st := LoadStats{Edges: len(edges)}
	if err := t.live(); err != nil {
		return st, err
	}
	if t.remote != nil {
		// Its edges would need the cross-shard messages of FollowMany.
		return st, fmt.Errorf("%w: LoadFollows (use FollowMany)", ErrSharded)
	}
	for i, e := range edges {
		if err := e.Check(); err != nil {
			return st, fmt.Errorf("edge %d: %w", i, err)
		}
	}
	if len(edges) >= 1<<32 {
		return st, fmt.Errorf("%w: %d edges in one load (split it)", ErrInvalidOption, len(edges))
	}
	sorted := sortEdges(edges)
	// The followee limit, checked for the whole load before anything is
	// written; loadBatch checks it again under the graph lock, exactly.
	if err := t.checkFolloweeLimits(sorted); err != nil {
		return st, err
	}
	done := 0
	for start := 0; start < len(sorted); {
		end := min(start+loadBatchEdges, len(sorted))
		for end < len(sorted) && sorted[end].Follower == sorted[end-1].Follower {
			end++ // a follower's edges stay in one batch
		}
		if err := ctx.Err(); err != nil {
			return st, err
		}
		if err := t.loadBatch(sorted[start:end], &st); err != nil {
			return st, err
		}
		done += end - start
		start = end
		if progress != nil {
			progress(done)
		}
	}
	st.Existing = len(edges) - st.Added
	return st, nil
}

// checkFolloweeLimits refuses sorted, unique edges that would take a
// follower past MaxFollowees. It reads a follower's followee list only
// when their count plus their edges could pass the limit.
func (t *Timeline) checkFolloweeLimits(sorted []Edge) error {
	var buf [numCols]uint64
	for i := 0; i < len(sorted); {
		u := sorted[i].Follower
		j := i
		for j < len(sorted) && sorted[j].Follower == u {
			j++
		}
		r, err := t.row(u, buf[:0])
		if err != nil {
			return err
		}
		if n := uint64(j - i); r[colFollowees]+n > MaxFollowees {
			list, _, err := t.followeesOf(uint32(r[colOrd]), nil, nil)
			if err != nil {
				return err
			}
			if m := len(mergeSorted(list, sorted[i:j])); m > MaxFollowees {
				return fmt.Errorf("%w: user %d follows %d accounts; the load would take them to %d, past the limit of %d",
					ErrTooManyFollowees, u, len(list), m, MaxFollowees)
			}
		}
		i = j
	}
	return nil
}

// sortEdges returns the edges sorted by follower then followee, repeats
// removed (two stable radix passes).
func sortEdges(edges []Edge) []Edge {
	n := len(edges)
	keys := make([]uint64, n)
	idx := make([]uint32, n)
	for i, e := range edges {
		keys[i], idx[i] = e.Followee, uint32(i)
	}
	radix.Sort(keys, idx)
	for i, j := range idx {
		keys[i] = edges[j].Follower
	}
	radix.Sort(keys, idx)
	out := make([]Edge, 0, n)
	for _, j := range idx {
		e := edges[j]
		if k := len(out); k > 0 && out[k-1] == e {
			continue
		}
		out = append(out, e)
	}
	return out
}

// mergeSorted returns the sorted union of list and the followees of es.
func mergeSorted(list []uint64, es []Edge) []uint64 {
	out := make([]uint64, 0, len(list)+len(es))
	i, j := 0, 0
	for i < len(list) || j < len(es) {
		switch {
		case j == len(es) || i < len(list) && list[i] < es[j].Followee:
			out = append(out, list[i])
			i++
		case i == len(list) || es[j].Followee < list[i]:
			out = append(out, es[j].Followee)
			j++
		default:
			out = append(out, list[i])
			i++
			j++
		}
	}
	return out
}

// loadBatch commits one batch of sorted, unique edges.
func (t *Timeline) loadBatch(es []Edge, st *LoadStats) error {
	ids := make([]uint64, 0, 2*len(es))
	for _, e := range es {
		ids = append(ids, e.Follower, e.Followee)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	t.graphMu.Lock()
	defer t.graphMu.Unlock()
	// No follow interleaves from here to the commit: this check is exact,
	// and a refused batch writes nothing (not even ordinals).
	if err := t.checkFolloweeLimits(es); err != nil {
		return err
	}
	t.allocMu.Lock()
	before := t.nextOrd
	t.allocMu.Unlock()
	if err := t.ensureOrds(ids...); err != nil {
		return err
	}
	t.allocMu.Lock()
	st.Users += int(usersBelow(t.nextOrd) - usersBelow(before))
	t.allocMu.Unlock()

	rows, err := t.users.MultiGet(ids, nil)
	if err != nil {
		return err
	}
	nc := t.users.NumColumns()
	rowOf := func(id uint64) []uint64 {
		i, _ := slices.BinarySearch(ids, id)
		return rows[i*nc : (i+1)*nc]
	}
	// Followers whose inbox is live: zero their read mark first (its own
	// commit: a reader must see the mark go before the inbox does), under
	// their locks.
	var live []uint64
	for i := 0; i < len(es); {
		u := es[i].Follower
		if rowOf(u)[colRead] != 0 {
			live = append(live, u)
		}
		for i < len(es) && es[i].Follower == u {
			i++
		}
	}
	unlock := t.lockUsers(live)
	defer unlock()
	b := t.db.NewBatch()
	defer b.Close()
	var dropped []uint32
	if len(live) > 0 {
		byChunk := map[uint16][]uint32{}
		for _, u := range live {
			r, err := t.row(u, nil)
			if err != nil {
				return err
			}
			if r[colRead] == 0 {
				continue
			}
			o := uint32(r[colOrd])
			if err := b.SetColumn(UsersCounter, u, ColRead, 0); err != nil {
				return err
			}
			byChunk[chunkOf(o)] = append(byChunk[chunkOf(o)], o)
			for _, a := range t.pendingOf(o, nil) {
				if err := t.fam.pending.Delete(b, pendingKey(nil, o, a)); err != nil {
					return err
				}
			}
			dropped = append(dropped, o)
		}
		for c, os := range byChunk {
			if err := t.fam.active.Merge(b, activeKey(nil, c), followersOperand(nil, os, c)); err != nil {
				return err
			}
		}
		if !b.Empty() {
			if err := b.Commit(); err != nil {
				return err
			}
			b.Reset()
		}
		t.pushRemove(dropped)
		for _, o := range dropped {
			t.pendingClear(o)
		}
		st.Expired += len(dropped)
	}

	observers := t.observersNow()
	adds := map[[2]uint32][]uint32{} // (author ordinal, chunk) -> follower ordinals
	followers := map[uint64]int64{}
	var list []uint64
	var lbuf []byte
	var rewritten []uint32 // ordinals whose followee list the batch rewrites
	for i := 0; i < len(es); {
		u := es[i].Follower
		j := i
		for j < len(es) && es[j].Follower == u {
			j++
		}
		uOrd := uint32(rowOf(u)[colOrd])
		list, lbuf, err = t.followeesOf(uOrd, list, lbuf)
		if err != nil {
			return err
		}
		var added int64
		for _, e := range es[i:j] {
			if contains(list, e.Followee) {
				continue
			}
			aOrd := uint32(rowOf(e.Followee)[colOrd])
			k := [2]uint32{aOrd, uint32(chunkOf(uOrd))}
			adds[k] = append(adds[k], uOrd)
			followers[e.Followee]++
			added++
			if t.IsVisible(u, e.Followee) {
				for _, o := range observers {
					if err := o.Followed(b, u, e.Followee, rowOf(e.Followee)[colPosts]); err != nil {
						return err
					}
				}
			}
		}
		if added > 0 {
			merged := mergeSorted(list, es[i:j])
			if err := t.fam.followees.Put(b, followeesKey(nil, uOrd), appendFollowees(nil, merged)); err != nil {
				return err
			}
			rewritten = append(rewritten, uOrd)
			if err := b.Incr(UsersCounter, u, ColFollowees, added); err != nil {
				return err
			}
			st.Added += int(added)
		}
		i = j
	}
	for k, os := range adds {
		c := uint16(k[1])
		if err := t.fam.followers.Merge(b, followersKey(nil, k[0], c), followersOperand(os, nil, c)); err != nil {
			return err
		}
	}
	authors := make([]uint64, 0, len(followers))
	for a, n := range followers {
		if err := b.Incr(UsersCounter, a, ColFollowers, n); err != nil {
			return err
		}
		authors = append(authors, a)
	}
	for _, o := range dropped {
		if err := t.fam.inbox.Delete(b, inboxKey(nil, o)); err != nil {
			return err
		}
	}
	if !b.Empty() {
		aOrds := make([]uint32, 0, len(adds))
		for k := range adds {
			aOrds = append(aOrds, k[0])
		}
		releaseFol := t.folCache.holdMany(aOrds)
		release := t.fcache.holdMany(rewritten)
		err := b.Commit()
		release()
		releaseFol()
		if err != nil {
			return err
		}
	}
	slices.Sort(authors)
	var buf [numCols]uint64
	for _, a := range authors {
		r, err := t.row(a, buf[:0])
		if err != nil {
			return err
		}
		if err := t.maybePull(a, r[colFollowers]); err != nil {
			return err
		}
	}
	return nil
}
