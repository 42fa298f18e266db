package main

// The CLI against a sharded cluster (issue 23).
//
// TALLY.EXEC runs the CLI's own code on the database of the node it is
// sent to: one shard's store. In a multi-shard cluster the node holding
// -d DIR is one replica of one shard, so forward routes the command
// first, from the slot map that node holds (TALLY.SHARDS STATUS):
//
//   - a command with keys (a user, an item, a counter row: the table's
//     Key and RowKey parameters, cmdtab.Input.Keys) goes to the leader of
//     the shard serving the keys' slots, following MOVED (a stale leader
//     hint) and retrying TRYAGAIN/CLUSTERDOWN (nothing ran);
//   - keys on more than one shard are refused (errCrossShard): a command
//     over many ids (get posts 1 2 3, unread get, active) prints one
//     answer per id in argument order, which the CLI would have to cut
//     into per-shard commands and merge back line by line, differently
//     for each command; run it once per shard's ids, or use a cluster
//     client (redis-cli -c, TALLY.MGET per slot);
//   - a keyless write (a schema change, dot mark, notice post) runs on
//     every shard's leader, each through its own Raft log: the output is
//     printed once when every shard printed the same and exited alike,
//     else per shard ("shard N: ..."), with the highest exit status. (Over
//     RESP the node broadcasts such a write through the cross-shard
//     streams; TALLY.EXEC is not broadcast, since the server cannot tell
//     its keyless commands from its keyed ones without the CLI's parser.)
//   - a gathered read (top, rank, user-likes, received: Command.Gather)
//     is refused (errCrossShard): the server gathers it over RESP
//     (LIKE.TOP, ...), TALLY.EXEC would answer from one shard;
//   - everything else (node-local commands: stats, jobs, compact, ...;
//     keyless reads of the schema, which every shard holds alike; the
//     loads, which cluster mode refuses) runs on the node, as before.
//
// A node other than the one holding DIR gets DIR "*" (execAnyDir): the
// CLI chose it from the map, so there is no stale address file to guard
// against.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	cmdtab "github.com/tallydb/tally/internal/commands"
	"github.com/tallydb/tally/server"
)

// errCrossShard is the CLI's refusal of a command that TALLY.EXEC cannot
// run on one shard of a sharded cluster (see route.go).
var errCrossShard = errors.New("tally: the command spans shards")

// execAnyDir is TALLY.EXEC's DIR for "the directory this node serves".
const execAnyDir = "*"

// execRoute is where forward sends a command.
type execRoute struct {
	// addrs are the nodes to send to; empty: the node holding DIR alone,
	// as in an unsharded cluster.
	addrs []string
	// shards names each address's shard (for a fan-out's output).
	shards []uint64
}

// route decides where a command line goes (see the file's comment), from
// the map held by the node at addr; a refusal wraps errCrossShard.
func (e *env) route(addr string, rest []string) (execRoute, error) {
	c, cargs, err := lookup(rest)
	if err != nil || !c.table || c.entry.Local {
		return execRoute{}, nil
	}
	ce := &env{} // the command's own -d and --json are the server's business
	args, err := ce.globalFlags(cargs)
	if err != nil {
		return execRoute{}, nil
	}
	in, err := c.entry.ParseCLI(args)
	if err != nil {
		return execRoute{}, nil // the server prints the usage error
	}
	keys := in.Keys()
	if len(keys) == 0 && c.entry.Gather == nil && c.entry.Mode == cmdtab.Read {
		return execRoute{}, nil
	}
	st, err := shardsStatus(addr, e.password)
	if err != nil {
		if msg := err.Error(); strings.Contains(msg, "not part of a multi-shard cluster") || strings.Contains(msg, "unknown command") {
			return execRoute{}, nil // one shard (or no cluster): the node has it all
		}
		return execRoute{}, fmt.Errorf("tally serve at %s: the slot map: %w", addr, err)
	}
	if st.epoch == 0 {
		return execRoute{}, fmt.Errorf("tally serve at %s: CLUSTERDOWN: no slot map yet (tally cluster create)", addr)
	}
	if c.entry.Gather != nil {
		return execRoute{}, fmt.Errorf("%w: %s reads every shard; TALLY.EXEC answers from one: ask a node over RESP (%s), which gathers it",
			errCrossShard, c.name, c.entry.RESP)
	}
	if len(keys) == 0 { // a keyless write: every shard
		var r execRoute
		for _, s := range st.shards {
			r.addrs = append(r.addrs, s.leaderAddr)
			r.shards = append(r.shards, s.id)
		}
		return r, nil
	}
	var shards []uint64
	var where []string
	for _, k := range keys {
		sid := st.shardOfSlot(server.Slot([]byte(k)))
		if sid == 0 {
			return execRoute{}, fmt.Errorf("tally serve at %s: CLUSTERDOWN: slot of %s not served", addr, k)
		}
		if !slices.Contains(shards, sid) {
			shards = append(shards, sid)
			where = append(where, fmt.Sprintf("%s on shard %d", k, sid))
		}
	}
	if len(shards) > 1 {
		return execRoute{}, fmt.Errorf("%w: %s (run it once per shard's keys, or use a cluster client)", errCrossShard, strings.Join(where, ", "))
	}
	if shards[0] == st.shard {
		return execRoute{addrs: []string{addr}, shards: shards}, nil
	}
	for _, s := range st.shards {
		if s.id == shards[0] {
			return execRoute{addrs: []string{s.leaderAddr}, shards: shards}, nil
		}
	}
	return execRoute{}, fmt.Errorf("tally serve at %s: CLUSTERDOWN: shard %d not in the map", addr, shards[0])
}

// shardOfSlot returns the shard serving slot (0: none).
func (v shardsView) shardOfSlot(slot int) uint64 {
	for _, s := range v.shards {
		for _, r := range s.slots {
			var lo, hi int
			if n, _ := fmt.Sscanf(r, "%d-%d", &lo, &hi); n == 2 && slot >= lo && slot <= hi {
				return s.id
			}
		}
	}
	return 0
}

// execResult is one node's TALLY.EXEC reply.
type execResult struct {
	code        int
	out, errOut string
}

// execAt sends TALLY.EXEC (args, DIR at args[1]) to addr, following MOVED
// to another node (DIR then execAnyDir) and retrying TRYAGAIN and
// CLUSTERDOWN, which ran nothing, for up to 30 seconds.
func (e *env) execAt(ctx context.Context, addr string, args []any) (execResult, error) {
	deadline := time.Now().Add(30 * time.Second)
	for hops := 0; ; {
		rdb := redis.NewClient(&redis.Options{Addr: addr, Password: e.password, Protocol: 2, DisableIndentity: true,
			PoolSize: 1, MaxRetries: -1, DialTimeout: 5 * time.Second, ReadTimeout: -1, WriteTimeout: time.Minute})
		res, err := rdb.Do(ctx, args...).Slice()
		rdb.Close()
		if err == nil {
			if len(res) != 3 {
				return execResult{}, fmt.Errorf("tally serve at %s: bad TALLY.EXEC reply of %d elements", addr, len(res))
			}
			n, _ := res[0].(int64)
			out, _ := res[1].(string)
			errOut, _ := res[2].(string)
			return execResult{int(n), out, errOut}, nil
		}
		msg := err.Error()
		switch {
		case strings.HasPrefix(msg, "MOVED ") && hops < 5:
			f := strings.Fields(msg)
			if len(f) != 3 {
				return execResult{}, fmt.Errorf("tally serve at %s: %w", addr, err)
			}
			addr, hops = f[2], hops+1
			args = slices.Clone(args)
			args[1] = execAnyDir
			continue
		case (strings.HasPrefix(msg, "TRYAGAIN") || strings.HasPrefix(msg, "CLUSTERDOWN")) && time.Now().Before(deadline):
			time.Sleep(100 * time.Millisecond)
			continue
		}
		return execResult{}, fmt.Errorf("tally serve at %s: %w", addr, err)
	}
}

// fanOut runs TALLY.EXEC on every shard of r and prints the outcome: once
// when every shard answered alike, else per shard. It returns the highest
// exit status; a shard that could not be reached is reported as failed
// after the others ran.
func (e *env) fanOut(ctx context.Context, r execRoute, args []any) int {
	res := make([]execResult, len(r.addrs))
	errs := make([]error, len(r.addrs))
	for i, a := range r.addrs {
		args := slices.Clone(args)
		args[1] = execAnyDir
		res[i], errs[i] = e.execAt(ctx, a, args)
	}
	same := true
	for i := range res {
		same = same && errs[i] == nil && res[i] == res[0]
	}
	if same {
		fmt.Fprint(e.stdout, res[0].out)
		fmt.Fprint(e.stderr, res[0].errOut)
		return res[0].code
	}
	code := 0
	for i := range res {
		if errs[i] != nil {
			fmt.Fprintf(e.stderr, "shard %d: %s\n", r.shards[i], errorLine(errs[i]))
			code = max(code, exitError)
			continue
		}
		for _, l := range strings.SplitAfter(res[i].out, "\n") {
			if l != "" {
				fmt.Fprintf(e.stdout, "shard %d: %s", r.shards[i], l)
			}
		}
		for _, l := range strings.SplitAfter(res[i].errOut, "\n") {
			if l != "" {
				fmt.Fprintf(e.stderr, "shard %d: %s", r.shards[i], l)
			}
		}
		code = max(code, res[i].code)
	}
	return code
}
