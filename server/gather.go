package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/tallydb/tally/internal/commands"
)

// Sharding: gathered reads (issue 23).
//
// Some reads have no key that places them on one shard: a business's
// leaderboard (LIKE.TOP), an item's rank on it (LIKE.RANK, LIKE.MRANK), a
// user's likes list (LIKE.USERLIKES) and an owner's received total
// (LIKE.RECEIVED, LIKE.MRECEIVED) are spread over every shard, since an
// item's likes live on its slot's shard. In cluster mode with a Topology
// and ClusterOptions.Gather, the node a client asks answers such a read
// itself, on any replica: it sends the read's per-shard part (LIKE.PART
// ...) to every shard of its current slot map in parallel, through
// Gather, and merges the replies exactly (internal/commands and
// likes/merge.go say how). Each part goes to the shard's leader (its hint
// in the map; the caller follows MOVED), which answers after a ReadIndex
// barrier, so every part is linearizable and the merged answer reflects
// every write acknowledged before the read began (the parts are not one
// snapshot across shards: a write racing the read may show on one shard's
// part and not yet on another's). Each round of parts (a rank takes two:
// the items' scores, then the counts above them) is bounded by
// ProposeTimeout; a shard that does not answer, or answers MOVED, ASK,
// TRYAGAIN or CLUSTERDOWN, fails it with TRYAGAIN (CLUSTERDOWN when a
// shard has no replica address), never with a partial answer. A shard's
// own refusal (a day board it does not keep) is the reply. Without a
// Topology or Gather, these commands answer from the node's own store as
// before (one node, or one Raft group holding every slot).

// ShardCaller sends one command to one shard on behalf of a gathered read
// (ClusterOptions.Gather). The cluster package implements it with RESP
// calls to shard leaders; the server depends only on this interface.
type ShardCaller interface {
	// CallShard sends argv to a replica of shard sh (its leader, following
	// MOVED) and returns the reply: int64, string (a bulk string), nil,
	// or []any of those. An error reply of the shard is returned as a
	// *ShardReplyError; any other error (unreachable, timed out) is taken
	// as retryable.
	CallShard(ctx context.Context, sh *TopologyShard, argv []string) (any, error)
}

// ShardReplyError is an error reply a shard sent to a gathered read's
// part, as ShardCaller returns it.
type ShardReplyError struct {
	Shard uint32
	// Msg is the reply's text without its '-': "ERR ...", "MOVED ...".
	Msg string
}

func (e *ShardReplyError) Error() string {
	return fmt.Sprintf("shard %d replied %s", e.Shard, e.Msg)
}

// ErrGather is wrapped by the errors of a gathered read that a shard made
// fail (unreachable, no leader, its error reply).
var ErrGather = errors.New("tally: gathered read failed")

// gatherError is a failed gathered read: reply is the client's error
// reply ("TRYAGAIN ...", "CLUSTERDOWN ...", or a shard's own "ERR ...").
type gatherError struct{ reply string }

func (e *gatherError) Error() string        { return e.reply }
func (e *gatherError) Unwrap() error        { return ErrGather }
func (e *gatherError) Is(target error) bool { return target == ErrTryAgain && e.retry() }
func (e *gatherError) retry() bool {
	return strings.HasPrefix(e.reply, "TRYAGAIN ") || strings.HasPrefix(e.reply, "CLUSTERDOWN ")
}

// gatherer is a commands.Gatherer for one read against one view.
type gatherer struct {
	caller  ShardCaller
	ids     []uint32
	shards  []*TopologyShard
	timeout func(context.Context) (context.Context, context.CancelFunc)
}

// gatherer returns the connection's gatherer, nil when the server does
// not gather (no cluster mode, no topology or no Gather); msg is the error
// reply when it should but cannot (no slot map yet).
func (c *Conn) gatherer() (g *gatherer, msg string) {
	cl := c.s.cluster
	if cl == nil || cl.topo == nil || cl.opts.Gather == nil {
		return nil, ""
	}
	v := c.view()
	if v == nil || len(v.Shards) == 0 {
		return nil, msgNoMap
	}
	g = &gatherer{caller: cl.opts.Gather, timeout: func(ctx context.Context) (context.Context, context.CancelFunc) {
		return context.WithTimeout(ctx, cl.opts.ProposeTimeout)
	}}
	for i := range v.Shards {
		g.shards = append(g.shards, &v.Shards[i])
	}
	slices.SortFunc(g.shards, func(a, b *TopologyShard) int { return int(a.ID) - int(b.ID) })
	for _, sh := range g.shards {
		g.ids = append(g.ids, sh.ID)
	}
	return g, ""
}

// gathers reports whether cmd is a read this server gathers from every
// shard (route lets it run on any node).
func (cl *cluster) gathers(cmd *Command) bool {
	return cmd.gather && cl.topo != nil && cl.opts.Gather != nil
}

func (g *gatherer) Shards() []uint32 { return g.ids }

// Call sends argvs[i] to shard i in parallel; the first failure cancels
// the others and fails the whole call.
func (g *gatherer) Call(ctx context.Context, argvs [][]string) ([]any, error) {
	if len(argvs) != len(g.shards) {
		return nil, fmt.Errorf("%w: %d calls for %d shards", ErrGather, len(argvs), len(g.shards))
	}
	ctx, cancel := g.timeout(ctx)
	defer cancel()
	replies := make([]any, len(argvs))
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for i, argv := range argvs {
		if argv == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := g.call(ctx, g.shards[i], argv)
			if err != nil {
				once.Do(func() { first = err; cancel() })
				return
			}
			replies[i] = r
		}()
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	return replies, nil
}

// call runs one part and classifies its failure.
func (g *gatherer) call(ctx context.Context, sh *TopologyShard, argv []string) (any, error) {
	if sh.master() == nil {
		return nil, &gatherError{fmt.Sprintf("CLUSTERDOWN shard %d has no reachable replica in the slot map", sh.ID)}
	}
	r, err := g.caller.CallShard(ctx, sh, argv)
	if err == nil {
		return r, nil
	}
	var re *ShardReplyError
	if errors.As(err, &re) {
		code, _, _ := strings.Cut(re.Msg, " ")
		switch code {
		case "MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "LOADING", "MASTERDOWN", "BUSY":
			return nil, &gatherError{"TRYAGAIN " + oneLine(fmt.Sprintf("shard %d is not ready for the read: %s", sh.ID, re.Msg))}
		}
		return nil, &gatherError{oneLine(re.Msg)}
	}
	return nil, &gatherError{"TRYAGAIN " + oneLine(fmt.Sprintf("shard %d did not answer: %v", sh.ID, err))}
}

// runGather runs tc's Gather for a call on c if this server gathers: ok
// is false when it does not (Run answers). An error is written as the
// reply here; out is nil then.
func (c *Conn) runGather(tc *commands.Command, in *commands.Input) (out any, ok bool) {
	if tc.Gather == nil {
		return nil, false
	}
	g, msg := c.gatherer()
	if g == nil && msg == "" {
		return nil, false
	}
	if msg != "" {
		c.WriteError(msg)
		return nil, true
	}
	out, err := tc.Gather(c.Context(), g, in)
	if err != nil {
		var ge *gatherError
		if errors.As(err, &ge) {
			c.writeError(ge.reply)
		} else {
			c.WriteErr(err)
		}
		return nil, true
	}
	return out, true
}
