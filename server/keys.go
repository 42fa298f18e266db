package server

import (
	"math"
	"strings"
)

// Key inspection commands of Redis's tools (issue 20): TYPE and MEMORY
// USAGE. A tally key is COUNTER:ID, a row of a user's counter, and reads
// as a Redis hash of its columns when some column is non-zero; any other
// key, a package's counter or an all-zero row does not exist ("none", nil),
// as a missing key in Redis.

// lookupRow reads the row key names, for commands that treat a malformed
// or unknown key as missing: ok is false then, and on a read error, which
// it has replied.
func (c *Conn) lookupRow(key []byte) (e *counterEntry, vals []uint64, exists, ok bool) {
	e, id, msg := c.s.parseKey(key)
	if msg != "" {
		return nil, nil, false, true
	}
	vals, ok = c.readRow(e, id)
	if !ok {
		return nil, nil, false, false
	}
	return e, vals, anyNonZero(vals), true
}

func typeHandler(c *Conn, args [][]byte) {
	_, _, exists, ok := c.lookupRow(args[1])
	switch {
	case !ok:
	case exists:
		c.WriteSimple("hash")
	default:
		c.WriteSimple("none")
	}
}

// memoryUsageHandler is MEMORY USAGE key [SAMPLES n]: the bytes a row
// adds to its counter: a slot of the counter's fixed-width hot table at
// its current range width and columns (the store's per-row figure,
// Counter.RowBytes, O(1)). A row's bytes are not stored apart: a
// hot row is such a slot, a cold row part of a compressed block (fewer
// bytes). Per-range costs are not spread over rows: INFO's memory section
// and DBSIZE give the totals.
func memoryUsageHandler(c *Conn, args [][]byte) {
	if len(args) != 3 && (len(args) != 5 || !strings.EqualFold(string(args[3]), "SAMPLES")) {
		c.writeError("ERR syntax error")
		return
	}
	if len(args) == 5 {
		if _, ok := parseInt(args[4]); !ok {
			c.writeError(msgNotInteger)
			return
		}
	}
	e, _, exists, ok := c.lookupRow(args[2])
	if !ok {
		return
	}
	if !exists {
		c.WriteNull()
		return
	}
	c.WriteInt(max(1, int64(math.Ceil(e.c.RowBytes()))))
}

// hlenHandler is HLEN key: the number of fields HGETALL returns (every
// column of the counter) for a stored row, 0 for a missing one.
func hlenHandler(c *Conn, args [][]byte) {
	e, _, exists, ok := c.lookupRow(args[1])
	switch {
	case !ok:
	case !exists:
		c.WriteInt(0)
	default:
		c.WriteInt(int64(min(len(c.vals), len(e.columns().names))))
	}
}

func keyCommands() []Command {
	return []Command{
		scanCommand(),
		{Name: "HLEN", Arity: 2, Flags: FlagReadOnly | FlagFast, FirstKey: 1, LastKey: 1, KeyStep: 1, Group: "hash",
			Since: "2.0.0", Complexity: "O(1)",
			Summary: "Returns the number of fields of a stored row (every column of its counter), 0 for a missing row.",
			Args:    []Arg{{Name: "key", Type: "key"}}, Handler: hlenHandler},
		{Name: "TYPE", Arity: 2, Flags: FlagReadOnly | FlagFast, FirstKey: 1, LastKey: 1, KeyStep: 1, Group: "generic",
			Since: "1.0.0", Complexity: "O(1)",
			Summary: "Returns hash for a stored counter row (COUNTER:ID with a non-zero column), none for anything else.",
			Args:    []Arg{{Name: "key", Type: "key"}}, Handler: typeHandler},
		{Name: "MEMORY", Arity: -2, Group: "server", Since: "4.0.0", Summary: "Memory commands.",
			Subcommands: []Command{
				{Name: "USAGE", Arity: -3, Flags: FlagReadOnly, FirstKey: 2, LastKey: 2, KeyStep: 1, Group: "server", Since: "4.0.0",
					Complexity: "O(R) where R is the number of id ranges",
					Summary:    "Returns the bytes a stored row adds to its counter's hot table (nil for a missing row).",
					Args: []Arg{{Name: "key", Type: "key"},
						{Name: "count", Type: "integer", Token: "SAMPLES", Optional: true}},
					Handler: memoryUsageHandler},
			}},
	}
}
