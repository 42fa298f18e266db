package server

import (
	"fmt"
	"math/rand/v2"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]: the keys of the
// user's counters' stored rows (COUNTER:ID with a non-zero column), counter
// by counter in name order, each in id order (store.Counter.Scan). Every
// row stored for the whole iteration is returned exactly once; rows
// written or deleted meanwhile may or may not be, as Redis promises.
//
// A position (a counter and the next id) does not fit Redis's 64-bit
// cursor, so the server keeps it: a cursor is a random number naming a
// position in a table of the last maxScanCursors cursors handed out. A
// cursor the server does not know (from before a restart, or evicted by
// newer ones) is refused with "ERR invalid cursor"; start again from 0.
//
// COUNT is a hint, as in Redis: a call visits at least scanMinPage rows
// (or the rest), because a page costs a pass over an id range's hot table
// whatever its size (store.Counter.Scan), so small pages would cost far
// more in all. MATCH is a glob (path.Match's syntax: * ? [...] and \)
// against COUNTER:ID; a pattern with a literal counter name scans that
// counter only. TYPE hash matches every row; any other type none.

const (
	maxScanCursors = 4096
	scanMinPage    = 1000
	maxScanCount   = 100000
)

// scanPos is where a cursor resumes: the counter, and the next id in it.
type scanPos struct {
	counter string
	from    uint64
}

// scanCursors is the server's table of live cursors.
type scanCursors struct {
	mu    sync.Mutex
	m     map[uint64]scanPos
	order []uint64 // oldest first, for eviction
}

func (sc *scanCursors) get(cur uint64) (scanPos, bool) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	p, ok := sc.m[cur]
	return p, ok
}

// put records p and returns its new cursor (never 0).
func (sc *scanCursors) put(p scanPos) uint64 {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.m == nil {
		sc.m = map[uint64]scanPos{}
	}
	var cur uint64
	for cur == 0 || sc.m[cur] != (scanPos{}) {
		cur = rand.Uint64() >> 1 // clients may parse it as a signed integer
	}
	sc.m[cur] = p
	sc.order = append(sc.order, cur)
	if len(sc.order) > maxScanCursors {
		delete(sc.m, sc.order[0])
		sc.order = sc.order[1:]
	}
	return cur
}

// userCounters returns the names of the user's counters, sorted, from
// name on (all when name is "").
func (s *Server) userCounters(name string) []string {
	var out []string
	for _, ci := range s.db.Counters() {
		if ci.Owner == "" && ci.Name >= name {
			out = append(out, ci.Name)
		}
	}
	sort.Strings(out)
	return out
}

func scanHandler(c *Conn, args [][]byte) {
	cur, ok := parseUint(args[1])
	if !ok {
		c.writeError("ERR invalid cursor")
		return
	}
	count, pattern, typ := 10, "", ""
	for i := 2; i < len(args); i += 2 {
		if i+1 >= len(args) {
			c.writeError("ERR syntax error")
			return
		}
		v := args[i+1]
		switch strings.ToUpper(string(args[i])) {
		case "MATCH":
			pattern = string(v)
			if _, err := path.Match(pattern, ""); err != nil {
				c.writeError(fmt.Sprintf("ERR bad MATCH pattern '%.64s': %v", sanitize(v), err))
				return
			}
		case "COUNT":
			n, ok := parseInt(v)
			if !ok {
				c.writeError(msgNotInteger)
				return
			}
			if n < 1 {
				c.writeError("ERR syntax error")
				return
			}
			count = int(min(n, maxScanCount))
		case "TYPE":
			typ = strings.ToLower(string(v))
		default:
			c.writeError("ERR syntax error")
			return
		}
	}
	pos := scanPos{}
	if cur != 0 {
		if pos, ok = c.s.scans.get(cur); !ok {
			c.writeError("ERR invalid cursor (unknown to this server: cursors live in its memory; start again from 0)")
			return
		}
	}
	// A literal counter name in the pattern limits the scan to it.
	only := ""
	if i := strings.IndexByte(pattern, ':'); i > 0 && !strings.ContainsAny(pattern[:i], `*?[\`) {
		only = pattern[:i]
	}
	var keys []string
	budget := max(count, scanMinPage)
	next := scanPos{}
	names := c.s.userCounters(pos.counter)
	if typ != "" && typ != "hash" {
		names = nil // only hashes here
	}
	for i, name := range names {
		if only != "" && name != only {
			continue
		}
		from := uint64(0)
		if name == pos.counter {
			from = pos.from
		}
		h, err := c.s.db.UserCounter(name)
		if err != nil {
			continue // dropped meanwhile, or reserved
		}
		n, err := h.Scan(c.Context(), from, budget, func(id uint64, _ []uint64) bool {
			key := name + ":" + strconv.FormatUint(id, 10)
			if pattern == "" || matchKey(pattern, key) {
				keys = append(keys, key)
			}
			budget--
			return true
		})
		if err != nil {
			c.WriteErr(err)
			return
		}
		if n != 0 {
			next = scanPos{counter: name, from: n}
			break
		}
		if budget <= 0 && i+1 < len(names) {
			next = scanPos{counter: names[i+1]}
			break
		}
	}
	var out uint64
	if next.counter != "" {
		out = c.s.scans.put(next)
	}
	c.WriteArray(2)
	c.WriteBulkString(strconv.FormatUint(out, 10))
	c.WriteArray(len(keys))
	for _, k := range keys {
		c.WriteBulkString(k)
	}
}

func matchKey(pattern, key string) bool {
	ok, _ := path.Match(pattern, key)
	return ok
}

func scanCommand() Command {
	return Command{Name: "SCAN", Arity: -2, Flags: FlagReadOnly, Group: "generic", Since: "2.8.0",
		Complexity: "O(N) rows per call (at least 1000), O(rows) for a full iteration",
		Summary: "Iterates the keys of stored counter rows (COUNTER:ID), counter by counter in id order; the cursor " +
			"is kept by the server (the last 4096 are valid).",
		Args: []Arg{{Name: "cursor", Type: "integer"},
			{Name: "pattern", Type: "string", Token: "MATCH", Optional: true},
			{Name: "count", Type: "integer", Token: "COUNT", Optional: true},
			{Name: "type", Type: "string", Token: "TYPE", Optional: true}},
		Handler: scanHandler}
}
