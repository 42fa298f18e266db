package cluster

// Rebalancing leadership (issue 23, operation).
//
// A shard's leader does all of its writes, its linearizable reads and its
// cross-shard sends, so a machine that leads many shards carries much
// more than one that leads none. Rebalancing moves leadership, never
// data: each move is a Raft leadership transfer to another voter of the
// same shard (TALLY.CLUSTER TRANSFER id), which costs clients one MOVED
// and no write. What it balances is the number of shards led per unit:
// per host (the host part of the replicas' client addresses, the
// default) or per node (a process; a tally process serves one shard, so
// per node every node leads at most one shard and the plan is empty
// unless that changes).
//
// The planner is a pure function (PlanRebalance) of what the cluster
// looks like; the executor (Node.rebalance, TALLY.SHARDS REBALANCE) reads
// the cluster, plans and transfers.
//
// # The plan
//
// Assigning each shard's leadership to one of its voters' units so that
// the most loaded unit leads as few shards as possible is a semi-matching
// problem. The planner starts from the current leaders and applies
// cost-reducing paths: from a unit U leading c shards, a chain of shards
// s1..sk where s1 is led by U and has a voter on unit W1, s2 is led by W1
// and has a voter on W2, ..., ending at a unit V leading at most c-2;
// moving each si's leadership one step along the chain takes one shard
// from U and gives one to V, leaving the units between unchanged. Each
// path lowers the sum of the squared loads, so the loop ends, and a
// semi-matching with no such path is optimal for the maximum load (and
// every other convex cost: Harvey, Ladner, Lovász, Tamir, "Semi-matchings
// for bipartite graphs and load balancing", 2006). A greedy that only
// moves a shard straight from the most to the least loaded unit misses
// the chains (U leads a shard whose only other voter is on W, W leads one
// that can go to V). The loads can be as uneven as the placement allows:
// a shard whose every voter is on one host has nowhere to go.
//
// Ties are broken by unit name and shard id, so a plan is deterministic,
// and a balanced cluster (no cost-reducing path) gets an empty plan. A
// shard is left as it is (Skipped, with the reason) when it has no known
// leader, when its leader is not one of its voters, or when a voter does
// not answer: a transfer to a dead node fails, and one to a node next to
// a dead one would leave the shard on its last quorum. A skipped shard's
// leader still counts toward its unit's load.
//
// Per host, the node that takes a shard on its new host is the shard's
// voter there leading the fewest shards after the moves so far (ties:
// the lowest id); a shard that stays on its host keeps its leader.
//
// Warnings name every shard with two or more replicas on one host:
// losing that host loses both, whatever the leadership.

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
)

// ErrInvalidRebalance is wrapped by PlanRebalance's errors for inputs
// that cannot be planned (a shard listed twice, an unknown unit kind).
var ErrInvalidRebalance = errors.New("cluster: invalid rebalance")

// RebalanceBy is what leadership is balanced across.
type RebalanceBy uint8

const (
	// ByHost balances the shards led per host (a client address's host).
	ByHost RebalanceBy = iota
	// ByNode balances the shards led per node (replica id).
	ByNode
)

func (b RebalanceBy) String() string {
	switch b {
	case ByHost:
		return "host"
	case ByNode:
		return "node"
	}
	return fmt.Sprintf("by(%d)", uint8(b))
}

// ParseRebalanceBy reads "host" or "node" (any case).
func ParseRebalanceBy(s string) (RebalanceBy, error) {
	switch strings.ToLower(s) {
	case "host":
		return ByHost, nil
	case "node":
		return ByNode, nil
	}
	return 0, fmt.Errorf("%w: by %q (want node or host)", ErrInvalidRebalance, s)
}

// LeaderShard is one shard as the planner sees it.
type LeaderShard struct {
	ID uint32
	// Leader is the replica leading the shard, 0 when unknown.
	Leader uint64
	// Voters are the shard's voting replicas (learners cannot lead).
	Voters []LeaderVoter
}

// LeaderVoter is one voter of a shard.
type LeaderVoter struct {
	ID uint64
	// Addr is its client address; its host is the unit ByHost counts.
	Addr string
	// Alive says it answered when the cluster was read.
	Alive bool
}

// LeaderMove is one leadership transfer of a plan.
type LeaderMove struct {
	Shard            uint32
	From, To         uint64
	FromUnit, ToUnit string
}

// SkippedShard is a shard the plan leaves alone, and why.
type SkippedShard struct {
	Shard  uint32
	Reason string
}

// UnitLoad is the number of shards a unit leads.
type UnitLoad struct {
	Unit    string
	Leaders int
}

// RebalancePlan is PlanRebalance's result.
type RebalancePlan struct {
	By       RebalanceBy
	Moves    []LeaderMove // in shard order
	Skipped  []SkippedShard
	Warnings []string
	// Before and After are every unit's load, by unit name.
	Before, After []UnitLoad
}

// hostOf is the host part of a client address (the address itself when
// it has no port).
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// PlanRebalance plans the leadership transfers that balance the shards
// led per unit (see the file's comment). It does not change its input.
func PlanRebalance(shards []LeaderShard, by RebalanceBy) (*RebalancePlan, error) {
	if by != ByHost && by != ByNode {
		return nil, fmt.Errorf("%w: by %v", ErrInvalidRebalance, by)
	}
	ss := slices.Clone(shards)
	slices.SortFunc(ss, func(a, b LeaderShard) int { return cmp.Compare(a.ID, b.ID) })
	for i := 1; i < len(ss); i++ {
		if ss[i].ID == ss[i-1].ID {
			return nil, fmt.Errorf("%w: shard %d listed twice", ErrInvalidRebalance, ss[i].ID)
		}
	}
	unitOf := func(v LeaderVoter) string {
		if by == ByNode {
			return fmt.Sprint(v.ID)
		}
		return hostOf(v.Addr)
	}
	p := &RebalancePlan{By: by}
	load := map[string]int{}
	type movable struct {
		s      *LeaderShard
		units  []string // the units of its voters, sorted, once each
		assign string   // its leader's unit, as the plan goes
	}
	var mv []*movable
	for i := range ss {
		s := &ss[i]
		p.Warnings = append(p.Warnings, sharedHosts(s)...)
		li := slices.IndexFunc(s.Voters, func(v LeaderVoter) bool { return v.ID == s.Leader })
		reason := ""
		switch {
		case s.Leader == 0:
			reason = "no leader"
		case li < 0:
			reason = fmt.Sprintf("leader %d is not one of its voters", s.Leader)
		default:
			for _, v := range s.Voters {
				if !v.Alive {
					reason = fmt.Sprintf("voter %d (%s) does not answer", v.ID, v.Addr)
					break
				}
			}
		}
		if li >= 0 {
			load[unitOf(s.Voters[li])]++
		}
		if reason != "" {
			p.Skipped = append(p.Skipped, SkippedShard{Shard: s.ID, Reason: reason})
			continue
		}
		m := &movable{s: s, assign: unitOf(s.Voters[li])}
		for _, v := range s.Voters {
			u := unitOf(v)
			load[u] += 0 // a unit a shard can go to is listed at 0
			if !slices.Contains(m.units, u) {
				m.units = append(m.units, u)
			}
		}
		slices.Sort(m.units)
		mv = append(mv, m)
	}
	p.Before = loads(load)

	// Cost-reducing paths until there is none.
	for {
		var path []*movable // the shards of the path, in order
		var dest []string   // the unit each moves to
		for _, ul := range byLoadDesc(load) {
			path, dest = reducingPath(ul.Unit, load, func(u string) []*movable {
				var out []*movable
				for _, m := range mv {
					if m.assign == u {
						out = append(out, m)
					}
				}
				return out
			}, func(m *movable) []string { return m.units })
			if path != nil {
				break
			}
		}
		if path == nil {
			break
		}
		load[path[0].assign]--
		load[dest[len(dest)-1]]++
		for i, m := range path {
			m.assign = dest[i]
		}
	}
	p.After = loads(load)

	// Nodes for the units: keep the leader on its unit, else the voter
	// there leading the fewest shards so far (ties: the lowest id).
	nodeLoad := map[uint64]int{}
	for _, s := range ss {
		if s.Leader != 0 {
			nodeLoad[s.Leader]++
		}
	}
	for _, m := range mv {
		s := m.s
		li := slices.IndexFunc(s.Voters, func(v LeaderVoter) bool { return v.ID == s.Leader })
		if unitOf(s.Voters[li]) == m.assign {
			continue
		}
		var to *LeaderVoter
		for i := range s.Voters {
			v := &s.Voters[i]
			if unitOf(*v) != m.assign {
				continue
			}
			if to == nil || nodeLoad[v.ID] < nodeLoad[to.ID] || nodeLoad[v.ID] == nodeLoad[to.ID] && v.ID < to.ID {
				to = v
			}
		}
		nodeLoad[s.Leader]--
		nodeLoad[to.ID]++
		p.Moves = append(p.Moves, LeaderMove{Shard: s.ID, From: s.Leader, To: to.ID,
			FromUnit: unitOf(s.Voters[li]), ToUnit: m.assign})
	}
	return p, nil
}

// reducingPath searches breadth-first from unit u for a chain of shards
// ending at a unit leading at most load[u]-2 (the least loaded such unit,
// then the nearest, then by name). It returns the chain's shards and the
// unit each moves to, or nil.
func reducingPath[M any](u string, load map[string]int, ledBy func(string) []M, unitsOf func(M) []string) ([]M, []string) {
	type step struct {
		from string // the unit before
		via  M      // the shard moved from there to here
	}
	prev := map[string]step{u: {}}
	level := []string{u}
	var best string
	for len(level) > 0 {
		var next []string
		for _, w := range level {
			for _, m := range ledBy(w) {
				for _, x := range unitsOf(m) {
					if _, seen := prev[x]; seen {
						continue
					}
					prev[x] = step{from: w, via: m}
					next = append(next, x)
				}
			}
		}
		for _, x := range next {
			if load[x] <= load[u]-2 && (best == "" || load[x] < load[best] || load[x] == load[best] && x < best) {
				best = x
			}
		}
		if best != "" {
			break
		}
		slices.Sort(next)
		level = next
	}
	if best == "" {
		return nil, nil
	}
	var path []M
	var dest []string
	for x := best; x != u; x = prev[x].from {
		path = append(path, prev[x].via)
		dest = append(dest, x)
	}
	slices.Reverse(path)
	slices.Reverse(dest)
	return path, dest
}

// byLoadDesc lists the units by load, highest first, then by name.
func byLoadDesc(load map[string]int) []UnitLoad {
	out := loads(load)
	slices.SortStableFunc(out, func(a, b UnitLoad) int { return b.Leaders - a.Leaders })
	return out
}

// loads lists the units' loads by name.
func loads(load map[string]int) []UnitLoad {
	out := make([]UnitLoad, 0, len(load))
	for u, n := range load {
		out = append(out, UnitLoad{u, n})
	}
	slices.SortFunc(out, func(a, b UnitLoad) int { return strings.Compare(a.Unit, b.Unit) })
	return out
}

// sharedHosts warns of the hosts holding two or more voters of s.
func sharedHosts(s *LeaderShard) []string {
	byHost := map[string][]string{}
	var hosts []string
	for _, v := range s.Voters {
		h := hostOf(v.Addr)
		if byHost[h] == nil {
			hosts = append(hosts, h)
		}
		byHost[h] = append(byHost[h], fmt.Sprint(v.ID))
	}
	slices.Sort(hosts)
	var out []string
	for _, h := range hosts {
		if ids := byHost[h]; len(ids) > 1 {
			out = append(out, fmt.Sprintf("shard %d: replicas %s share host %s (losing it loses them all)", s.ID, strings.Join(ids, ", "), h))
		}
	}
	return out
}
