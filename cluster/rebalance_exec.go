package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tallydb/tally/server"
	"github.com/tallydb/tally/shard"
)

// The rebalance executor: TALLY.SHARDS REBALANCE [BY node|host] [DRYRUN]
// on any node of a sharded cluster. It reads every replica's own view
// (TALLY.CLUSTER STATUS), plans with PlanRebalance and, unless DRYRUN,
// asks each moving shard's leader to hand leadership to the planned
// voter (TALLY.CLUSTER TRANSFER id), one shard after the other, and
// checks that the voter leads. A failed move is reported and the others
// go on; running it again plans from what the cluster is then.

// rebalanceProbeTimeout bounds one replica's status read: a replica that
// does not answer in time counts as dead (its shard is skipped).
const rebalanceProbeTimeout = 2 * time.Second

// rebalanceMoveTimeout bounds one leadership transfer and its check.
const rebalanceMoveTimeout = 20 * time.Second

// replicaView is what one replica says of its group.
type replicaView struct {
	ok      bool
	role    string
	term    uint64
	members []struct {
		id    uint64
		addr  string
		voter bool
	}
}

// probe reads TALLY.CLUSTER STATUS at addr.
func (n *Node) probe(ctx context.Context, addr string) replicaView {
	ctx, cancel := context.WithTimeout(ctx, rebalanceProbeTimeout)
	defer cancel()
	rc := redis.NewClient(&redis.Options{Addr: addr, Password: n.cfg.password(), MaxRetries: -1, Protocol: 2,
		DisableIndentity: true, DialTimeout: rebalanceProbeTimeout, ReadTimeout: rebalanceProbeTimeout})
	defer rc.Close()
	v, err := rc.Do(ctx, "TALLY.CLUSTER", "STATUS").Slice()
	if err != nil {
		return replicaView{}
	}
	rv := replicaView{ok: true}
	for i := 0; i+1 < len(v); i += 2 {
		switch v[i] {
		case "role":
			rv.role = fmt.Sprint(v[i+1])
		case "term":
			t, _ := v[i+1].(int64)
			rv.term = uint64(t)
		case "members":
			ms, _ := v[i+1].([]any)
			for _, m := range ms {
				f, _ := m.([]any)
				var e struct {
					id    uint64
					addr  string
					voter bool
				}
				for j := 0; j+1 < len(f); j += 2 {
					switch f[j] {
					case "id":
						x, _ := f[j+1].(int64)
						e.id = uint64(x)
					case "client_addr":
						e.addr = fmt.Sprint(f[j+1])
					case "voter":
						e.voter = f[j+1] == int64(1)
					}
				}
				rv.members = append(rv.members, e)
			}
		}
	}
	return rv
}

// readLeadership reads every shard of m as the planner needs it: the
// leader is the replica that says it leads (the highest term if two do),
// the voters are that leader's, each alive if it answered.
func (n *Node) readLeadership(ctx context.Context, m *shard.Map) []LeaderShard {
	var mu sync.Mutex
	views := map[string]replicaView{}
	probeAll := func(addrs []string) {
		var wg sync.WaitGroup
		for _, a := range addrs {
			mu.Lock()
			_, done := views[a]
			mu.Unlock()
			if done {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				v := n.probe(ctx, a)
				mu.Lock()
				views[a] = v
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	var addrs []string
	for _, s := range m.Shards {
		for _, r := range s.Replicas {
			addrs = append(addrs, r.ClientAddr)
		}
	}
	probeAll(addrs)
	out := make([]LeaderShard, 0, len(m.Shards))
	for _, s := range m.Shards {
		ls := LeaderShard{ID: s.ID}
		var lead *replicaView
		for _, r := range s.Replicas {
			if v := views[r.ClientAddr]; v.ok && v.role == "leader" && (lead == nil || v.term > lead.term) {
				ls.Leader, lead = r.ID, &v
			}
		}
		if lead == nil {
			for _, r := range s.Replicas {
				ls.Voters = append(ls.Voters, LeaderVoter{ID: r.ID, Addr: r.ClientAddr, Alive: views[r.ClientAddr].ok})
			}
			out = append(out, ls)
			continue
		}
		// The leader's member table is the truth; a voter the map does
		// not list yet is read too.
		var more []string
		for _, mb := range lead.members {
			if mb.voter {
				more = append(more, mb.addr)
			}
		}
		probeAll(more)
		for _, mb := range lead.members {
			if mb.voter {
				ls.Voters = append(ls.Voters, LeaderVoter{ID: mb.id, Addr: mb.addr, Alive: views[mb.addr].ok})
			}
		}
		out = append(out, ls)
	}
	return out
}

// rebalance plans, and unless dryRun carries out, the leadership moves
// of the cluster in this node's map. results[i] is the outcome of
// plan.Moves[i] (nil when done; all nil on a dry run).
func (n *Node) rebalance(ctx context.Context, by RebalanceBy, dryRun bool) (*RebalancePlan, []error, error) {
	m := n.meta.Map()
	if m == nil {
		return nil, nil, shard.ErrNoMap
	}
	plan, err := PlanRebalance(n.readLeadership(ctx, m), by)
	if err != nil {
		return nil, nil, err
	}
	results := make([]error, len(plan.Moves))
	if dryRun {
		return plan, results, nil
	}
	addrOf := map[uint64]string{}
	for _, s := range m.Shards {
		for _, r := range s.Replicas {
			addrOf[r.ID] = r.ClientAddr
		}
	}
	for i, mv := range plan.Moves {
		results[i] = n.transfer(ctx, mv, addrOf)
	}
	return plan, results, nil
}

// transfer asks the shard's leader to hand leadership to mv.To and waits
// until mv.To says it leads.
func (n *Node) transfer(ctx context.Context, mv LeaderMove, addrOf map[uint64]string) error {
	ctx, cancel := context.WithTimeout(ctx, rebalanceMoveTimeout)
	defer cancel()
	from, to := addrOf[mv.From], addrOf[mv.To]
	if from == "" || to == "" {
		return fmt.Errorf("cluster: no address of replica %d or %d in the map", mv.From, mv.To)
	}
	rc := redis.NewClient(&redis.Options{Addr: from, Password: n.cfg.password(), MaxRetries: -1, Protocol: 2,
		DisableIndentity: true, DialTimeout: rebalanceProbeTimeout, ReadTimeout: rebalanceMoveTimeout})
	err := rc.Do(ctx, "TALLY.CLUSTER", "TRANSFER", mv.To).Err()
	rc.Close()
	if err != nil {
		return err
	}
	for {
		if v := n.probe(ctx, to); v.ok && v.role == "leader" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: replica %d does not lead shard %d: %w", mv.To, mv.Shard, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// rebalanceHandler is TALLY.SHARDS REBALANCE [BY node|host] [DRYRUN]. The
// reply is one line per fact, in this order: "by UNIT", "before U=N ...",
// "after U=N ...", "warn ...", "skip shard S: REASON", then per move
// "move shard S FROM@UNIT -> TO@UNIT" followed by " planned" (DRYRUN),
// " ok" or " failed: ERROR".
func (n *Node) rebalanceHandler(c *server.Conn, args [][]byte) {
	if n.meta == nil {
		c.WriteErr(ErrNotSharded)
		return
	}
	by, dry := ByHost, false
	for i := 2; i < len(args); i++ {
		switch strings.ToUpper(string(args[i])) {
		case "DRYRUN":
			dry = true
		case "BY":
			if i+1 == len(args) {
				c.WriteError("ERR syntax error: BY needs node or host")
				return
			}
			b, err := ParseRebalanceBy(string(args[i+1]))
			if err != nil {
				c.WriteErr(err)
				return
			}
			by = b
			i++
		default:
			c.WriteError(fmt.Sprintf("ERR syntax error: %q (TALLY.SHARDS REBALANCE [BY node|host] [DRYRUN])", args[i]))
			return
		}
	}
	plan, results, err := n.rebalance(c.Context(), by, dry)
	if err != nil {
		c.WriteErr(err)
		return
	}
	lines := rebalanceLines(plan, results, dry)
	c.WriteArray(len(lines))
	for _, l := range lines {
		c.WriteBulkString(l)
	}
}

// rebalanceLines renders a plan and its results (see rebalanceHandler).
func rebalanceLines(p *RebalancePlan, results []error, dry bool) []string {
	out := []string{"by " + p.By.String(), "before " + loadLine(p.Before), "after " + loadLine(p.After)}
	for _, w := range p.Warnings {
		out = append(out, "warn "+w)
	}
	for _, s := range p.Skipped {
		out = append(out, fmt.Sprintf("skip shard %d: %s", s.Shard, s.Reason))
	}
	for i, mv := range p.Moves {
		l := fmt.Sprintf("move shard %d %d@%s -> %d@%s", mv.Shard, mv.From, mv.FromUnit, mv.To, mv.ToUnit)
		switch {
		case dry:
			l += " planned"
		case results[i] == nil:
			l += " ok"
		default:
			l += " failed: " + strings.ReplaceAll(results[i].Error(), "\n", " ")
		}
		out = append(out, l)
	}
	return out
}

func loadLine(ls []UnitLoad) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.Unit + "=" + strconv.Itoa(l.Leaders)
	}
	return strings.Join(parts, " ")
}

// ErrMoveFailed is wrapped by RebalanceFailed's error: a move of a
// rebalance did not happen.
var ErrMoveFailed = errors.New("cluster: a leadership move failed")

// RebalanceFailed reports whether TALLY.SHARDS REBALANCE's reply lines
// hold a failed move: an error wrapping ErrMoveFailed that names them.
func RebalanceFailed(lines []string) error {
	var failed []string
	for _, l := range lines {
		if strings.HasPrefix(l, "move ") && strings.Contains(l, " failed: ") {
			failed = append(failed, l)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrMoveFailed, strings.Join(failed, "; "))
}
