package server

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tallydb/tally"
	"github.com/tallydb/tally/store"
)

// Schema commands, mirroring the CLI's "counter add", "counter list" and
// "column add".

// counterAddHandler is TALLY.COUNTER ADD NAME [RANGEBITS n]
// [KEEPHOT | HOTRANGES k | AGE dur [EPOCHMS ms] [TIMESHIFT bits]].
func counterAddHandler(c *Conn, args [][]byte) {
	name := string(args[2])
	opts := store.CounterOptions{} // without RANGEBITS the ranges size themselves
	policy := ""
	var epochSet, shiftSet bool
	age := store.AgePolicy{IDEpochMs: store.DefaultIDEpochMs, IDTimeShift: store.DefaultIDTimeShift}
	rest := args[3:]
	next := func(opt string) (string, bool) {
		if len(rest) < 2 {
			c.writeError(fmt.Sprintf("ERR %s needs a value", opt))
			return "", false
		}
		v := string(rest[1])
		rest = rest[2:]
		return v, true
	}
	setPolicy := func(p string) bool {
		if policy != "" {
			c.writeError(fmt.Sprintf("ERR %s and %s are mutually exclusive", policy, p))
			return false
		}
		policy = p
		return true
	}
	for len(rest) > 0 {
		opt := strings.ToUpper(string(rest[0]))
		switch opt {
		case "RANGEBITS", "HOTRANGES", "EPOCHMS", "TIMESHIFT":
			v, ok := next(opt)
			if !ok {
				return
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || opt != "EPOCHMS" && n > 255 || opt == "RANGEBITS" && n == 0 {
				c.writeError(fmt.Sprintf("ERR bad %s %q", opt, v))
				return
			}
			switch opt {
			case "RANGEBITS":
				opts.RangeBits = uint8(n)
			case "HOTRANGES":
				if !setPolicy(opt) {
					return
				}
				opts.Age = store.AgePolicy{Kind: store.KeepNewest, HotRanges: int(n)}
			case "EPOCHMS":
				age.IDEpochMs, epochSet = n, true
			case "TIMESHIFT":
				age.IDTimeShift, shiftSet = uint8(n), true
			}
		case "AGE":
			v, ok := next(opt)
			if !ok {
				return
			}
			d, err := time.ParseDuration(v)
			if err != nil {
				c.writeError(fmt.Sprintf("ERR bad AGE %q: want a duration such as 4320h", v))
				return
			}
			if !setPolicy(opt) {
				return
			}
			age.Kind, age.MaxAge = store.AgeByTime, d
		case "KEEPHOT":
			rest = rest[1:]
			if !setPolicy(opt) {
				return
			}
		default:
			c.writeError(fmt.Sprintf("ERR syntax error: unknown option '%.32s'", sanitize(rest[0])))
			return
		}
	}
	if (epochSet || shiftSet) && policy != "AGE" {
		c.writeError("ERR EPOCHMS and TIMESHIFT go with AGE")
		return
	}
	if policy == "AGE" {
		opts.Age = age
	}
	if err := tally.CheckCounterName(name); err != nil {
		c.WriteErr(err)
		return
	}
	if err := c.s.db.CreateCounter(name, opts); err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteOK()
}

// counterListHandler replies one line per counter of the user's (not the
// packages'), as "tally counter list" prints: NAME range_bits=N policy=P
// columns=COL:HINT/MAX,...
func counterListHandler(c *Conn, args [][]byte) {
	infos := tally.UserCounters(c.s.db)
	c.WriteArray(len(infos))
	for _, ci := range infos {
		c.WriteBulkString(CounterLine(ci))
	}
}

// CounterLine formats a counter's schema as one line, the format of
// TALLY.COUNTER LIST and of "tally counter list":
//
//	NAME range_bits=N policy=POLICY columns=COL:HINT/MAX,...
//
// POLICY is keep-hot, hot-ranges:K or age:DURATION:EPOCH_MS:TIME_SHIFT.
func CounterLine(ci store.CounterInfo) string {
	cols := make([]string, len(ci.Columns))
	for i, col := range ci.Columns {
		cols[i] = fmt.Sprintf("%s:%d/%d", col.Name, col.HintBits, col.MaxBits)
	}
	var policy string
	switch a := ci.Age; a.Kind {
	case store.KeepHot:
		policy = "keep-hot"
	case store.KeepNewest:
		policy = fmt.Sprintf("hot-ranges:%d", a.HotRanges)
	case store.AgeByTime:
		policy = fmt.Sprintf("age:%v:%d:%d", a.MaxAge.Round(time.Millisecond), a.IDEpochMs, a.IDTimeShift)
	default:
		policy = a.Kind.String()
	}
	return fmt.Sprintf("%s range_bits=%d policy=%s columns=%s", ci.Name, ci.RangeBits, policy, strings.Join(cols, ","))
}

// columnAddHandler is TALLY.COLUMN ADD COUNTER COLUMN [HINT 8|16|32]
// [MAX 32|64].
func columnAddHandler(c *Conn, args [][]byte) {
	opts := store.ColumnOptions{HintBits: 16, MaxBits: 32}
	rest := args[4:]
	for len(rest) > 0 {
		opt := strings.ToUpper(string(rest[0]))
		if opt != "HINT" && opt != "MAX" || len(rest) < 2 {
			if len(rest) < 2 && (opt == "HINT" || opt == "MAX") {
				c.writeError(fmt.Sprintf("ERR %s needs a value", opt))
			} else {
				c.writeError(fmt.Sprintf("ERR syntax error: unknown option '%.32s'", sanitize(rest[0])))
			}
			return
		}
		n, err := strconv.ParseUint(string(rest[1]), 10, 8)
		if err != nil || n == 0 {
			c.writeError(fmt.Sprintf("ERR bad %s %q", opt, sanitize(rest[1])))
			return
		}
		if opt == "HINT" {
			opts.HintBits = uint8(n)
		} else {
			opts.MaxBits = uint8(n)
		}
		rest = rest[2:]
	}
	if _, err := tally.UserCounter(c.s.db, string(args[2])); errors.Is(err, store.ErrReserved) {
		c.WriteErr(err)
		return
	}
	if err := c.s.db.AddColumn(string(args[2]), string(args[3]), opts); err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteOK()
}

// schemaCommands is the schema group.
func schemaCommands() []Command {
	return []Command{
		{
			Name: "TALLY.COUNTER", Arity: -2, Group: "tally",
			Summary: "Counter schema commands.", Since: "0.1.0",
			Subcommands: []Command{
				{
					Name: "ADD", Arity: -3, Flags: FlagWrite | FlagAdmin, Group: "tally",
					Summary: "Creates a counter without columns (as \"tally counter add\"). RANGEBITS: low id bits per row, fixed " +
						"(8..48; without it the ranges start at 32 bits and widen to the ids); KEEPHOT (default), HOTRANGES k or AGE duration [EPOCHMS ms] [TIMESHIFT bits] " +
						"choose how ranges age into the cold tier.",
					Since: "0.1.0", Complexity: "O(1)",
					Args: []Arg{
						{Name: "name", Type: "string"},
						{Name: "rangebits", Type: "integer", Token: "RANGEBITS", Optional: true},
						{Name: "policy", Type: "oneof", Optional: true, Args: []Arg{
							{Name: "keephot", Type: "pure-token", Token: "KEEPHOT"},
							{Name: "hotranges", Type: "integer", Token: "HOTRANGES"},
							{Name: "age", Type: "block", Args: []Arg{
								{Name: "duration", Type: "string", Token: "AGE"},
								{Name: "epochms", Type: "integer", Token: "EPOCHMS", Optional: true},
								{Name: "timeshift", Type: "integer", Token: "TIMESHIFT", Optional: true},
							}},
						}},
					},
					Handler: counterAddHandler,
				},
				{
					Name: "LIST", Arity: 2, Flags: FlagReadOnly, Group: "tally",
					Summary: "Lists counters, one line each: NAME range_bits=N policy=P columns=COL:HINT/MAX,...",
					Since:   "0.1.0", Complexity: "O(N) where N is the number of counters",
					Handler: counterListHandler,
				},
			},
		},
		{
			Name: "TALLY.COLUMN", Arity: -2, Group: "tally",
			Summary: "Column schema commands.", Since: "0.1.0",
			Subcommands: []Command{
				{
					Name: "ADD", Arity: -4, Flags: FlagWrite | FlagAdmin, Group: "tally",
					Summary: "Adds a column to a counter (as \"tally column add\"); existing rows read 0 in it. HINT: width in a " +
						"memory row, 8, 16 or 32 (default 16); MAX: values stay below 2^MAX, 32 or 64 (default 32).",
					Since: "0.1.0", Complexity: "O(1)",
					Args: []Arg{
						{Name: "counter", Type: "string"},
						{Name: "column", Type: "string"},
						{Name: "hint", Type: "integer", Token: "HINT", Optional: true},
						{Name: "max", Type: "integer", Token: "MAX", Optional: true},
					},
					Handler: columnAddHandler,
				},
			},
		},
	}
}
