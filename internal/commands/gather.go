package commands

import (
	"context"
	"fmt"
	"strconv"
)

// Gathered reads (issue 23). In a sharded cluster some reads have no key
// that places them on one shard: a business's board, a user's likes list
// and an owner's received total are spread over every shard. Such a
// command sets Command.Gather: the server, in cluster mode with a slot
// map, runs it instead of Run on the node the client asks; it sends the
// command's per-shard parts (local commands such as LIKE.PART TOP) to
// every shard through a Gatherer and merges the replies into Run's
// result, which Text and Reply render unchanged. Without a slot map (one
// node, one Raft group) Run answers, as before.

// Gatherer sends a gathered read's per-shard parts to the shards of a
// sharded cluster. The server implements it, for one read, against one
// version of the slot map.
type Gatherer interface {
	// Shards returns the ids of the cluster's shards, ascending: the
	// shards Call asks, in its order.
	Shards() []uint32
	// Call sends argvs[i] to shard Shards()[i] (one replica of each,
	// in parallel; a nil argv skips that shard, whose reply is then nil)
	// and returns the replies in the same order: int64, string (a bulk
	// string), nil, or []any of those. It fails as a whole when any
	// shard fails (never a partial answer); the error says whether a
	// retry may succeed.
	Call(ctx context.Context, argvs [][]string) ([]any, error)
}

// callAll sends the same argv to every shard.
func callAll(ctx context.Context, g Gatherer, argv []string) ([]any, error) {
	argvs := make([][]string, len(g.Shards()))
	for i := range argvs {
		argvs[i] = argv
	}
	return g.Call(ctx, argvs)
}

// partArray returns reply as an array of n elements (n < 0: any length).
func partArray(shard uint32, reply any, n int) ([]any, error) {
	a, ok := reply.([]any)
	if !ok || n >= 0 && len(a) != n {
		return nil, fmt.Errorf("tally: shard %d's part: want an array of %d, got %T of %v", shard, n, reply, reply)
	}
	return a, nil
}

// partUint returns reply as an unsigned integer (an integer reply, or a
// bulk string for one above 2^63-1).
func partUint(shard uint32, reply any) (uint64, error) {
	switch v := reply.(type) {
	case int64:
		if v >= 0 {
			return uint64(v), nil
		}
	case string:
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("tally: shard %d's part: want an unsigned integer, got %T %v", shard, reply, reply)
}

// partUints returns reply as an array of n unsigned integers (n < 0: any
// length).
func partUints(shard uint32, reply any, n int) ([]uint64, error) {
	a, err := partArray(shard, reply, n)
	if err != nil {
		return nil, err
	}
	out := make([]uint64, len(a))
	for i, v := range a {
		if out[i], err = partUint(shard, v); err != nil {
			return nil, err
		}
	}
	return out, nil
}
