package cluster

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// lshard builds a shard whose voters are "id@host" (alive unless the host
// ends in "!").
func lshard(id uint32, leader uint64, voters ...string) LeaderShard {
	s := LeaderShard{ID: id, Leader: leader}
	for _, v := range voters {
		var vid uint64
		var host string
		if _, err := fmt.Sscanf(strings.Replace(v, "@", " ", 1), "%d %s", &vid, &host); err != nil {
			panic(v)
		}
		dead := strings.HasSuffix(host, "!")
		host = strings.TrimSuffix(host, "!")
		s.Voters = append(s.Voters, LeaderVoter{ID: vid, Addr: host + ":7000", Alive: !dead})
	}
	return s
}

func mustPlan(t *testing.T, shards []LeaderShard, by RebalanceBy) *RebalancePlan {
	t.Helper()
	p, err := PlanRebalance(shards, by)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func movesString(p *RebalancePlan) string {
	var out []string
	for _, m := range p.Moves {
		out = append(out, fmt.Sprintf("%d:%d@%s>%d@%s", m.Shard, m.From, m.FromUnit, m.To, m.ToUnit))
	}
	return strings.Join(out, " ")
}

func loadsString(ls []UnitLoad) string {
	var out []string
	for _, l := range ls {
		out = append(out, fmt.Sprintf("%s=%d", l.Unit, l.Leaders))
	}
	return strings.Join(out, " ")
}

// threeHosts: shards 1-3, each with one voter on hosts a, b and c (ids
// 10s on a, 20s on b, 30s on c), led as given.
func threeHosts(leaders ...uint64) []LeaderShard {
	var out []LeaderShard
	for i, l := range leaders {
		s := uint64(i + 1)
		out = append(out, lshard(uint32(s), l, fmt.Sprintf("%d@a", 10+s), fmt.Sprintf("%d@b", 20+s), fmt.Sprintf("%d@c", 30+s)))
	}
	return out
}

func TestPlanRebalance(t *testing.T) {
	for _, c := range []struct {
		name          string
		shards        []LeaderShard
		by            RebalanceBy
		moves, before string
		after         string
		skipped       []uint32
	}{
		{name: "balanced", shards: threeHosts(11, 22, 33), by: ByHost,
			moves: "", before: "a=1 b=1 c=1", after: "a=1 b=1 c=1"},
		{name: "all on one host", shards: threeHosts(11, 12, 13), by: ByHost,
			// Ties go to the first unit by name, then the next.
			moves: "1:11@a>21@b 2:12@a>32@c", before: "a=3 b=0 c=0", after: "a=1 b=1 c=1"},
		{name: "two on one host", shards: threeHosts(21, 22, 33), by: ByHost,
			moves: "1:21@b>11@a", before: "a=0 b=2 c=1", after: "a=1 b=1 c=1"},
		{name: "off by one is balanced", shards: append(threeHosts(11, 22, 33), lshard(4, 14, "14@a", "24@b", "34@c")), by: ByHost,
			moves: "", before: "a=2 b=1 c=1", after: "a=2 b=1 c=1"},
		{name: "a chain", by: ByHost, shards: []LeaderShard{
			// a leads 1 and 2, which can only go to b; b leads 3, which
			// can go to c. A direct move from a to c does not exist.
			lshard(1, 1, "1@a", "2@b"), lshard(2, 3, "3@a", "4@b"), lshard(3, 5, "5@b", "6@c"),
		}, moves: "1:1@a>2@b 3:5@b>6@c", before: "a=2 b=1 c=0", after: "a=1 b=1 c=1"},
		{name: "uneven shards", by: ByHost, shards: []LeaderShard{
			// Shard 1 lives on a only: it stays; the others leave a.
			lshard(1, 1, "1@a", "2@a", "3@a"), lshard(2, 4, "4@a", "5@b"), lshard(3, 6, "6@a", "7@b", "8@c", "9@d"),
		}, moves: "2:4@a>5@b 3:6@a>8@c", before: "a=3 b=0 c=0 d=0", after: "a=1 b=1 c=1 d=0"},
		{name: "dead voter skipped", by: ByHost, shards: []LeaderShard{
			lshard(1, 11, "11@a", "21@b", "31@c"), lshard(2, 12, "12@a", "22@b", "32@c!"), lshard(3, 13, "13@a", "23@b", "33@c"),
		}, moves: "1:11@a>21@b 3:13@a>33@c", before: "a=3 b=0 c=0", after: "a=1 b=1 c=1", skipped: []uint32{2}},
		{name: "no leader, leader not a voter", by: ByHost, shards: []LeaderShard{
			lshard(1, 0, "11@a", "21@b"), lshard(2, 99, "12@a", "22@b"), lshard(3, 13, "13@a", "23@b"), lshard(4, 14, "14@a", "24@b"),
		}, moves: "3:13@a>23@b", before: "a=2 b=0", after: "a=1 b=1", skipped: []uint32{1, 2}},
		{name: "by node, one shard a node", shards: threeHosts(11, 12, 13), by: ByNode,
			moves: "", before: "11=1 12=1 13=1 21=0 22=0 23=0 31=0 32=0 33=0", after: "11=1 12=1 13=1 21=0 22=0 23=0 31=0 32=0 33=0"},
		{name: "by node, a node in two shards", by: ByNode, shards: []LeaderShard{
			lshard(1, 1, "1@a", "2@a"), lshard(2, 1, "1@a", "2@a"),
		}, moves: "1:1@1>2@2", before: "1=2 2=0", after: "1=1 2=1"},
		{name: "by host, the least loaded node of the host takes it", by: ByHost, shards: []LeaderShard{
			lshard(1, 1, "1@a", "2@b", "3@b"), lshard(2, 4, "4@a", "3@b", "5@c"), lshard(3, 6, "6@a", "2@b", "7@b"),
			lshard(4, 8, "8@a", "9@c"),
		}, moves: "1:1@a>2@b 2:4@a>5@c", before: "a=4 b=0 c=0", after: "a=2 b=1 c=1"},
		{name: "empty", shards: nil, by: ByHost},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := slices.Clone(c.shards)
			p := mustPlan(t, c.shards, c.by)
			if !reflect.DeepEqual(in, c.shards) {
				t.Fatal("PlanRebalance changed its input")
			}
			if got := movesString(p); got != c.moves {
				t.Errorf("moves %q, want %q", got, c.moves)
			}
			if got := loadsString(p.Before); got != c.before {
				t.Errorf("before %q, want %q", got, c.before)
			}
			if got := loadsString(p.After); got != c.after {
				t.Errorf("after %q, want %q", got, c.after)
			}
			var skipped []uint32
			for _, s := range p.Skipped {
				skipped = append(skipped, s.Shard)
				if s.Reason == "" {
					t.Errorf("shard %d skipped without a reason", s.Shard)
				}
			}
			if !slices.Equal(skipped, c.skipped) {
				t.Errorf("skipped %v, want %v", skipped, c.skipped)
			}
			// The same shards in another order plan the same.
			rev := slices.Clone(c.shards)
			slices.Reverse(rev)
			if q := mustPlan(t, rev, c.by); !reflect.DeepEqual(p, q) {
				t.Errorf("another input order planned %s", movesString(q))
			}
			// Applied, the plan leaves nothing to do.
			if q := mustPlan(t, applyPlan(c.shards, p), c.by); len(q.Moves) != 0 {
				t.Errorf("after the plan: %s", movesString(q))
			}
		})
	}
}

func TestPlanRebalanceWarnsSharedHosts(t *testing.T) {
	p := mustPlan(t, []LeaderShard{
		lshard(1, 1, "1@a", "2@a", "3@b"), lshard(2, 4, "4@a", "5@b", "6@c"), lshard(3, 7, "7@c", "8@c", "9@c"),
	}, ByHost)
	want := []string{
		"shard 1: replicas 1, 2 share host a (losing it loses them all)",
		"shard 3: replicas 7, 8, 9 share host c (losing it loses them all)",
	}
	if !slices.Equal(p.Warnings, want) {
		t.Fatalf("warnings %q", p.Warnings)
	}
}

func TestPlanRebalanceRefuses(t *testing.T) {
	if _, err := PlanRebalance(append(threeHosts(11), threeHosts(11)...), ByHost); !errors.Is(err, ErrInvalidRebalance) {
		t.Fatalf("a shard twice: %v", err)
	}
	if _, err := PlanRebalance(nil, RebalanceBy(7)); !errors.Is(err, ErrInvalidRebalance) {
		t.Fatalf("bad by: %v", err)
	}
	for _, s := range []string{"NODE", "host"} {
		if _, err := ParseRebalanceBy(s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ParseRebalanceBy("rack"); !errors.Is(err, ErrInvalidRebalance) {
		t.Fatalf("rack: %v", err)
	}
}

// applyPlan returns the shards with the plan's leaders.
func applyPlan(shards []LeaderShard, p *RebalancePlan) []LeaderShard {
	out := slices.Clone(shards)
	for _, m := range p.Moves {
		for i := range out {
			if out[i].ID == m.Shard {
				out[i].Leader = m.To
			}
		}
	}
	return out
}

// TestPlanRebalanceOptimal checks random small clusters against brute
// force: every move goes to a live voter of a shard that is not skipped,
// After is the load the moves make, and its maximum is the least any
// assignment of the movable shards reaches.
func TestPlanRebalanceOptimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 4))
	hosts := []string{"a", "b", "c", "d"}
	for iter := range 400 {
		var shards []LeaderShard
		nextID := uint64(1)
		for sid := uint32(1); sid <= uint32(1+rng.IntN(6)); sid++ {
			s := LeaderShard{ID: sid}
			for range 1 + rng.IntN(3) {
				s.Voters = append(s.Voters, LeaderVoter{ID: nextID, Addr: hosts[rng.IntN(len(hosts))] + ":1", Alive: rng.IntN(12) != 0})
				nextID++
			}
			s.Leader = s.Voters[rng.IntN(len(s.Voters))].ID
			if rng.IntN(15) == 0 {
				s.Leader = 0
			}
			shards = append(shards, s)
		}
		p := mustPlan(t, shards, ByHost)
		skipped := map[uint32]bool{}
		for _, s := range p.Skipped {
			skipped[s.Shard] = true
		}
		after := map[string]int{}
		final := applyPlan(shards, p)
		for i, s := range final {
			for _, v := range s.Voters {
				if v.ID == s.Leader {
					after[hostOf(v.Addr)]++
				}
			}
			if s.Leader != shards[i].Leader && skipped[s.ID] {
				t.Fatalf("iter %d: skipped shard %d moved", iter, s.ID)
			}
		}
		for _, m := range p.Moves {
			s := shards[m.Shard-1]
			i := slices.IndexFunc(s.Voters, func(v LeaderVoter) bool { return v.ID == m.To })
			if i < 0 || !s.Voters[i].Alive || m.From != s.Leader || hostOf(s.Voters[i].Addr) != m.ToUnit {
				t.Fatalf("iter %d: move %+v of %+v", iter, m, s)
			}
		}
		maxAfter := 0
		for _, l := range p.After {
			if l.Leaders != after[l.Unit] {
				t.Fatalf("iter %d: After says %s=%d, the moves make %d", iter, l.Unit, l.Leaders, after[l.Unit])
			}
			maxAfter = max(maxAfter, l.Leaders)
		}
		if best := bruteMax(shards, skipped); maxAfter != best {
			t.Fatalf("iter %d: max load %d, brute force %d\n%+v\n%s", iter, maxAfter, best, shards, movesString(p))
		}
	}
}

// bruteMax is the least maximum load per host over every choice of a
// leader among the voters of each shard not skipped.
func bruteMax(shards []LeaderShard, skipped map[uint32]bool) int {
	load := map[string]int{}
	best := 1 << 30
	var rec func(i int)
	rec = func(i int) {
		if i == len(shards) {
			m := 0
			for _, n := range load {
				m = max(m, n)
			}
			best = min(best, m)
			return
		}
		s := shards[i]
		if skipped[s.ID] {
			for _, v := range s.Voters {
				if v.ID == s.Leader {
					load[hostOf(v.Addr)]++
					rec(i + 1)
					load[hostOf(v.Addr)]--
					return
				}
			}
			rec(i + 1)
			return
		}
		for _, v := range s.Voters {
			h := hostOf(v.Addr)
			load[h]++
			rec(i + 1)
			load[h]--
		}
	}
	rec(0)
	return best
}
