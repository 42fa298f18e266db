package server

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tallydb/tally"
	"github.com/tallydb/tally/internal/limits"
	"github.com/tallydb/tally/store"
)

// Counter commands: keys are COUNTER:ID, hash fields are columns.

// counterEntry caches a counter's handle and its columns, so a command
// finds both without allocating.
type counterEntry struct {
	c    *store.Counter
	name string
	cid  uint32 // the store's counter id, for row-lock stripes
	cols atomic.Pointer[columnSet]
}

// columnSet is a counter's columns at one moment. Columns are only ever
// added, so a set whose length matches the counter's is current.
type columnSet struct {
	names []string
	max   []uint64 // a value's largest allowed value through this server
	wide  []bool   // 64-bit column: results may not fit a RESP integer
}

func (e *counterEntry) columns() *columnSet {
	cs := e.cols.Load()
	if cs != nil && len(cs.names) == e.c.NumColumns() {
		return cs
	}
	info := e.c.Info()
	cs = &columnSet{}
	for _, col := range info.Columns {
		cs.names = append(cs.names, col.Name)
		cs.max = append(cs.max, min(col.Max(), maxInt64))
		cs.wide = append(cs.wide, col.Max() > maxInt64)
	}
	e.cols.Store(cs)
	return cs
}

// index returns the position of the column named field, or -1.
func (cs *columnSet) index(field []byte) int {
	for i, n := range cs.names {
		if n == string(field) {
			return i
		}
	}
	return -1
}

// counterCache maps counter names to entries. It is copy-on-write: readers
// load the map without a lock. It mirrors the schema only (counters and
// columns, never changed by a batch commit), so no commit, skipped as a
// re-applied entry's duplicate or not, changes it: the server keeps no
// memory derived from commits (row locks and statistics aside).
type counterCache struct {
	m  atomic.Pointer[map[string]*counterEntry]
	mu sync.Mutex
}

// counter returns the entry of the named counter, or nil and the error
// reply: no such counter, or a counter that a package owns (reserved: its
// data is reached through the package's commands).
func (s *Server) counter(name []byte) (*counterEntry, string) {
	if m := s.counters.m.Load(); m != nil {
		if e := (*m)[string(name)]; e != nil {
			return e, ""
		}
	}
	noSuch := fmt.Sprintf("ERR no such counter '%.64s' (create it with TALLY.COUNTER ADD)", sanitize(name))
	if len(name) == 0 || len(name) > limits.MaxNameLen {
		return nil, noSuch
	}
	h, err := tally.UserCounter(s.db, string(name))
	if errors.Is(err, store.ErrReserved) {
		return nil, replyFor(err)
	}
	if err != nil {
		return nil, noSuch
	}
	s.counters.mu.Lock()
	defer s.counters.mu.Unlock()
	old := s.counters.m.Load()
	if old != nil {
		if e := (*old)[h.Name()]; e != nil {
			return e, ""
		}
	}
	m := make(map[string]*counterEntry, 1+lenMap(old))
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	e := &counterEntry{c: h, name: h.Name(), cid: h.Info().ID}
	m[e.name] = e
	s.counters.m.Store(&m)
	return e, ""
}

func lenMap(m *map[string]*counterEntry) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// Error replies of the counter commands.
const (
	msgNotInteger = "ERR value is not an integer or out of range"
	msgOverflow   = "ERR increment or decrement would overflow"
)

// parseKey splits COUNTER:ID and finds the counter.
func (s *Server) parseKey(key []byte) (*counterEntry, uint64, string) {
	i := bytes.LastIndexByte(key, ':')
	if i < 0 {
		return nil, 0, fmt.Sprintf("ERR invalid key '%.128s': tally keys are COUNTER:ID with a decimal id", sanitize(key))
	}
	id, ok := parseUint(key[i+1:])
	if !ok {
		return nil, 0, fmt.Sprintf("ERR invalid key '%.128s': tally keys are COUNTER:ID with a decimal id", sanitize(key))
	}
	e, msg := s.counter(key[:i])
	if e == nil {
		return nil, 0, msg
	}
	return e, id, ""
}

func msgNoColumn(e *counterEntry, field []byte) string {
	return fmt.Sprintf("ERR no such column '%.64s' in counter '%s' (add it with TALLY.COLUMN ADD)", sanitize(field), e.name)
}

func msgNoColumns(e *counterEntry) string {
	return fmt.Sprintf("WRONGTYPE counter '%s' has no columns (add one with TALLY.COLUMN ADD)", e.name)
}

// parseUint parses an unsigned decimal without allocating. Leading zeros
// are allowed (redis-benchmark pads its random ids).
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var v uint64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		d := uint64(ch - '0')
		if v > (1<<64-1-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// parseInt parses a signed decimal without allocating.
func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	u, ok := parseUint(b)
	switch {
	case !ok:
		return 0, false
	case neg && u <= 1<<63:
		return int64(-u), true // -(1<<63) wraps to MinInt64, as intended
	case !neg && u <= maxInt64:
		return int64(u), true
	}
	return 0, false
}

// incrArgs is a parsed increment: HINCRBY, INCR, INCRBY, DECR, DECRBY.
type incrArgs struct {
	e     *counterEntry
	id    uint64
	col   int
	delta int64
}

// incrParser parses one increment command's arguments.
type incrParser func(s *Server, args [][]byte) (incrArgs, string)

func parseHincrby(s *Server, args [][]byte) (incrArgs, string) {
	e, id, msg := s.parseKey(args[1])
	if msg != "" {
		return incrArgs{}, msg
	}
	col := e.columns().index(args[2])
	if col < 0 {
		return incrArgs{}, msgNoColumn(e, args[2])
	}
	delta, ok := parseInt(args[3])
	if !ok {
		return incrArgs{}, msgNotInteger
	}
	return incrArgs{e, id, col, delta}, ""
}

// hincrbyOnceHandler is TALLY.HINCRBYONCE key field increment source seq.
func hincrbyOnceHandler(c *Conn, args [][]byte) {
	a, msg := parseHincrby(c.s, args[:4])
	if msg != "" {
		c.writeError(msg)
		return
	}
	seq, ok := parseUint(args[5])
	if !ok {
		c.writeError(msgNotInteger)
		return
	}
	v, applied, err := c.commitIncr(a, true, string(args[4]), seq)
	if err != nil {
		c.writeIncr(v, err)
		return
	}
	c.WriteArray(2)
	c.WriteUint(v)
	if applied {
		c.WriteInt(1)
	} else {
		c.WriteInt(0)
	}
}

// firstColumn parses the key of a string-style command (INCR, GET...),
// which addresses the counter's first column.
func firstColumn(s *Server, key []byte) (incrArgs, string) {
	e, id, msg := s.parseKey(key)
	if msg != "" {
		return incrArgs{}, msg
	}
	if len(e.columns().names) == 0 {
		return incrArgs{}, msgNoColumns(e)
	}
	return incrArgs{e: e, id: id}, ""
}

// parseStep returns the parser of INCR (sign 1) or DECR (sign -1).
func parseStep(sign int64) incrParser {
	return func(s *Server, args [][]byte) (incrArgs, string) {
		a, msg := firstColumn(s, args[1])
		a.delta = sign
		return a, msg
	}
}

func parseIncrby(s *Server, args [][]byte) (incrArgs, string) {
	a, msg := firstColumn(s, args[1])
	if msg != "" {
		return a, msg
	}
	d, ok := parseInt(args[2])
	if !ok {
		return a, msgNotInteger
	}
	a.delta = d
	return a, ""
}

func parseDecrby(s *Server, args [][]byte) (incrArgs, string) {
	a, msg := firstColumn(s, args[1])
	if msg != "" {
		return a, msg
	}
	d, ok := parseInt(args[2])
	if !ok {
		return a, msgNotInteger
	}
	if d == -1<<63 {
		return a, "ERR decrement would overflow"
	}
	a.delta = -d
	return a, ""
}

// incrCommand makes the handler and batch hooks of one increment command.
func incrCommand(cmd Command, parse incrParser) Command {
	cmd.Handler = func(c *Conn, args [][]byte) {
		a, msg := parse(c.s, args)
		if msg != "" {
			c.writeError(msg)
			return
		}
		c.incr(a)
	}
	cmd.stage = func(c *Conn, args [][]byte, b *store.Batch, p *pending) bool {
		a, msg := parse(c.s, args)
		if msg != "" {
			return false
		}
		cols := a.e.columns()
		var limit uint64 // a 64-bit column: capped to a RESP integer, refused at commit
		if cols.wide[a.col] {
			limit = maxInt64
		}
		if err := b.IncrColumn(a.e.c, a.id, a.col, a.delta, limit); err != nil {
			return false
		}
		p.lock = stripeOf(a.e.cid, a.id) + 1
		return true
	}
	cmd.finish = func(c *Conn, b *store.Batch, p *pending) { c.WriteUint(b.Result(p.op)) }
	return cmd
}

// incr runs one increment on its own.
func (c *Conn) incr(a incrArgs) {
	v, _, err := c.commitIncr(a, false, "", 0)
	c.writeIncr(v, err)
}

// commitIncr commits one increment in its own store batch, under its
// row's shared lock: capped at 2^63-1 for a 64-bit column (a result RESP
// cannot answer as an integer is refused at commit, atomically with the
// write: no read first), and with once applied once per (source, seq).
// It returns the column's value after the call and whether
// the increment was applied (false: a redelivery, nothing changed).
func (c *Conn) commitIncr(a incrArgs, once bool, source string, seq uint64) (uint64, bool, error) {
	cols := a.e.columns()
	l := c.s.rows.stripe(stripeOf(a.e.cid, a.id))
	l.RLock()
	defer l.RUnlock()
	if c.one == nil {
		c.one = c.s.db.NewBatch()
	}
	b := c.one
	b.Reset()
	var limit uint64
	if cols.wide[a.col] {
		limit = maxInt64
	}
	if err := b.IncrCapped(a.e.name, a.id, cols.names[a.col], a.delta, limit); err != nil {
		return 0, false, err
	}
	if once {
		if err := b.Once(source, seq); err != nil {
			return 0, false, err
		}
	}
	if err := b.Commit(); err != nil {
		return 0, false, err
	}
	if b.Duplicate() {
		v, err := a.e.c.GetColumn(a.id, cols.names[a.col])
		return v, false, err
	}
	return b.Result(0), true, nil
}

// writeIncr answers an increment: its value, or its error in Redis's
// words.
func (c *Conn) writeIncr(v uint64, err error) {
	switch {
	case errors.Is(err, store.ErrValueRange):
		c.writeError(msgOverflow)
	case err != nil:
		c.WriteErr(err)
	default:
		c.WriteUint(v)
	}
}

// readRow reads every column of a row into c.vals.
func (c *Conn) readRow(e *counterEntry, id uint64) ([]uint64, bool) {
	vals, err := e.c.Get(id, c.vals[:0])
	c.vals = vals
	if err != nil {
		c.WriteErr(err)
		return nil, false
	}
	c.s.countLookup(anyNonZero(vals))
	return vals, true
}

func hgetHandler(c *Conn, args [][]byte) {
	e, id, msg := c.s.parseKey(args[1])
	if msg != "" {
		c.writeError(msg)
		return
	}
	col := e.columns().index(args[2])
	if col < 0 {
		c.WriteNull()
		return
	}
	vals, ok := c.readRow(e, id)
	if !ok {
		return
	}
	c.WriteBulkUint(vals[col])
}

func hmgetHandler(c *Conn, args [][]byte) {
	e, id, msg := c.s.parseKey(args[1])
	if msg != "" {
		c.writeError(msg)
		return
	}
	vals, ok := c.readRow(e, id)
	if !ok {
		return
	}
	cols := e.columns()
	c.WriteArray(len(args) - 2)
	for _, f := range args[2:] {
		if i := cols.index(f); i >= 0 && i < len(vals) {
			c.WriteBulkUint(vals[i])
		} else {
			c.WriteNull()
		}
	}
}

func hgetallHandler(c *Conn, args [][]byte) {
	e, id, msg := c.s.parseKey(args[1])
	if msg != "" {
		c.writeError(msg)
		return
	}
	vals, ok := c.readRow(e, id)
	if !ok {
		return
	}
	cols := e.columns()
	n := min(len(vals), len(cols.names))
	c.WriteArray(2 * n)
	for i := 0; i < n; i++ {
		c.WriteBulkString(cols.names[i])
		c.WriteBulkUint(vals[i])
	}
}

// hsetArgs is a parsed HSET: the row and the column positions and values
// of its field/value pairs, in order (a repeated column: the last wins).
type hsetArgs struct {
	e    *counterEntry
	id   uint64
	cols []int
	vals []uint64
}

func (c *Conn) parseHset(args [][]byte) (hsetArgs, string) {
	if len(args)%2 != 0 {
		return hsetArgs{}, fmt.Sprintf("ERR wrong number of arguments for '%s' command", bytes.ToLower(args[0]))
	}
	e, id, msg := c.s.parseKey(args[1])
	if msg != "" {
		return hsetArgs{}, msg
	}
	cs := e.columns()
	a := hsetArgs{e: e, id: id}
	for i := 2; i < len(args); i += 2 {
		col := cs.index(args[i])
		if col < 0 {
			return hsetArgs{}, msgNoColumn(e, args[i])
		}
		v, ok := parseUint(args[i+1])
		if !ok {
			return hsetArgs{}, msgNotInteger
		}
		if v > cs.max[col] {
			return hsetArgs{}, fmt.Sprintf("ERR value %d is out of range for column '%s' (max %d)", v, cs.names[col], cs.max[col])
		}
		a.cols = append(a.cols, col)
		a.vals = append(a.vals, v)
	}
	return a, ""
}

// fullRow returns the row an HSET writes when it names every column, or
// false.
func (a *hsetArgs) fullRow(n int, dst []uint64) ([]uint64, bool) {
	if n == 0 || len(a.cols) < n {
		return nil, false
	}
	var seen [store.MaxColumns]bool
	dst = dst[:0]
	for i := 0; i < n; i++ {
		dst = append(dst, 0)
	}
	k := 0
	for i, col := range a.cols {
		if !seen[col] {
			seen[col] = true
			k++
		}
		dst[col] = a.vals[i]
	}
	return dst, k == n
}

// hsetCommand is HSET (reply: the fields added, as Redis counts them: a
// column that read 0, an absent field in tally's terms, and now holds a
// value) or HMSET (reply: OK). Both are batched (stage): a pipeline of
// them commits once.
func hsetCommand(cmd Command, okReply bool) Command {
	reply := func(c *Conn, added int) {
		if okReply {
			c.WriteOK()
		} else {
			c.WriteInt(int64(added))
		}
	}
	cmd.Handler = func(c *Conn, args [][]byte) {
		a, msg := c.parseHset(args)
		if msg != "" {
			c.writeError(msg)
			return
		}
		l := c.s.rows.stripe(stripeOf(a.e.cid, a.id))
		l.Lock()
		defer l.Unlock()
		var err error
		added := 0
		for attempt := 0; attempt < 3; attempt++ {
			// A write's read: not a keyspace hit or miss (readRow's).
			vals, gerr := a.e.c.Get(a.id, c.vals[:0])
			c.vals = vals
			if gerr != nil {
				c.WriteErr(gerr)
				return
			}
			added = 0
			var was uint64 // bit i: column i read 0 (limits.MaxColumns is 16)
			for _, col := range a.cols {
				if vals[col] == 0 {
					was |= 1 << col
				}
			}
			for i, col := range a.cols {
				vals[col] = a.vals[i]
			}
			for _, col := range a.cols {
				if was&(1<<col) != 0 && vals[col] != 0 {
					was &^= 1 << col
					added++
				}
			}
			// A column added between Get and Set makes Set refuse the
			// row's length (ErrValueRange); read again.
			if err = a.e.c.Set(a.id, vals...); !errors.Is(err, store.ErrValueRange) {
				break
			}
		}
		if err != nil {
			c.WriteErr(err)
			return
		}
		reply(c, added)
	}
	// Staged, each field is a SetColumn: the store sets it on the row's
	// after-image under its commit lock, so concurrent increments of the
	// row are ordered by the store and the row lock is shared; the reply
	// counts, per distinct column, one that read 0 before the command
	// (Batch.Previous of its first set) and holds a value after (the
	// Result of its last).
	cmd.stage = func(c *Conn, args [][]byte, b *store.Batch, p *pending) bool {
		a, msg := c.parseHset(args)
		if msg != "" {
			return false
		}
		names := a.e.columns().names
		for i, col := range a.cols {
			if err := b.SetColumn(a.e.name, a.id, names[col], a.vals[i]); err != nil {
				return false
			}
		}
		p.lock = stripeOf(a.e.cid, a.id) + 1
		return true
	}
	cmd.finish = func(c *Conn, b *store.Batch, p *pending) {
		if okReply {
			c.WriteOK()
			return
		}
		a, _ := c.parseHset(p.args) // parsed when staged: cannot fail now
		var seen, added uint64      // bits by column (limits.MaxColumns is 16)
		for i, col := range a.cols {
			if seen&(1<<col) != 0 {
				continue
			}
			seen |= 1 << col
			last := i
			for j := len(a.cols) - 1; j > i; j-- {
				if a.cols[j] == col {
					last = j
					break
				}
			}
			if b.Previous(p.op+i) == 0 && b.Result(p.op+last) != 0 {
				added++
			}
		}
		c.WriteInt(int64(added))
	}
	return cmd
}

// delHandler is DEL and UNLINK: delete every named row atomically; the
// reply counts the rows that held a non-zero value.
func delHandler(c *Conn, args [][]byte) {
	type row struct {
		e  *counterEntry
		id uint64
	}
	rows := make([]row, 0, len(args)-1)
	c.locks = c.locks[:0]
	for _, k := range args[1:] {
		e, id, msg := c.s.parseKey(k)
		if msg != "" {
			c.writeError(msg)
			return
		}
		rows = append(rows, row{e, id})
		c.locks = append(c.locks, stripeOf(e.cid, id))
	}
	c.lockRows()
	defer c.unlockRows()
	b := c.s.db.NewBatch()
	defer b.Close()
	n := 0
	for i, r := range rows {
		dup := false
		for _, q := range rows[:i] {
			dup = dup || q == r
		}
		if dup {
			continue
		}
		vals, ok := c.readRow(r.e, r.id)
		if !ok {
			return
		}
		if anyNonZero(vals) {
			n++
			if err := b.Delete(r.e.name, r.id); err != nil {
				c.WriteErr(err)
				return
			}
		}
	}
	if err := b.Commit(); err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteInt(int64(n))
}

func existsHandler(c *Conn, args [][]byte) {
	n := 0
	for _, k := range args[1:] {
		e, id, msg := c.s.parseKey(k)
		if msg != "" {
			c.writeError(msg)
			return
		}
		vals, ok := c.readRow(e, id)
		if !ok {
			return
		}
		if anyNonZero(vals) {
			n++
		}
	}
	c.WriteInt(int64(n))
}

func anyNonZero(vals []uint64) bool {
	for _, v := range vals {
		if v != 0 {
			return true
		}
	}
	return false
}

func getHandler(c *Conn, args [][]byte) {
	a, msg := firstColumn(c.s, args[1])
	if msg != "" {
		c.writeError(msg)
		return
	}
	vals, ok := c.readRow(a.e, a.id)
	if !ok {
		return
	}
	c.WriteBulkUint(vals[0])
}

// mgetHandler reads the first column of every key; a key that does not
// address a counter row reads as nil, as MGET does for a missing key. Keys
// of one counter are read with one MultiGet.
func mgetHandler(c *Conn, args [][]byte) {
	keys := args[1:]
	c.ids = c.ids[:0]
	c.ents = c.ents[:0]
	var same *counterEntry
	for i, k := range keys {
		a, msg := firstColumn(c.s, k)
		if msg != "" {
			a.e = nil
		}
		c.ents = append(c.ents, a.e)
		c.ids = append(c.ids, a.id)
		if i == 0 {
			same = a.e
		} else if a.e != same {
			same = nil
		}
	}
	if same != nil {
		vals, err := same.c.MultiGet(c.ids, c.vals[:0])
		c.vals = vals
		if err != nil {
			c.WriteErr(err)
			return
		}
		n := len(vals) / len(keys)
		c.WriteArray(len(keys))
		for i := range keys {
			c.s.countLookup(anyNonZero(vals[i*n : (i+1)*n]))
			c.WriteBulkUint(vals[i*n])
		}
		return
	}
	c.WriteArray(len(keys))
	for i, e := range c.ents {
		if e == nil {
			c.s.countLookup(false)
			c.WriteNull()
			continue
		}
		vals, err := e.c.Get(c.ids[i], c.vals[:0])
		c.vals = vals
		if err != nil || len(vals) == 0 {
			c.WriteNull()
			continue
		}
		c.s.countLookup(anyNonZero(vals))
		c.WriteBulkUint(vals[0])
	}
}

// tallyMgetHandler is TALLY.MGET COUNTER ID [ID ...]: every column of every
// id in one call. The reply is an array with one entry per id, in request
// order; each entry is an array of the row's values in column order, as
// integers (a value above 2^63-1, possible only in a 64-bit column, as a
// bulk string).
func tallyMgetHandler(c *Conn, args [][]byte) {
	e, msg := c.s.counter(args[1])
	if e == nil {
		c.writeError(msg)
		return
	}
	c.ids = c.ids[:0]
	for _, a := range args[2:] {
		id, ok := parseUint(a)
		if !ok {
			c.writeError(fmt.Sprintf("ERR invalid id '%.64s': want a decimal integer below 2^64", sanitize(a)))
			return
		}
		c.ids = append(c.ids, id)
	}
	vals, err := e.c.MultiGet(c.ids, c.vals[:0])
	c.vals = vals
	if err != nil {
		c.WriteErr(err)
		return
	}
	n := len(vals) / len(c.ids)
	c.WriteArray(len(c.ids))
	for i := range c.ids {
		c.WriteArray(n)
		for _, v := range vals[i*n : (i+1)*n] {
			c.WriteUint(v)
		}
	}
}

// counterCommands is the counter group.
func counterCommands() []Command {
	key := Arg{Name: "key", Type: "key"}
	field := Arg{Name: "field", Type: "string"}
	const g = "hash"
	return []Command{
		incrCommand(Command{
			Name: "HINCRBY", Arity: 4, Flags: FlagWrite | FlagFast, FirstKey: 1, LastKey: 1, KeyStep: 1, Group: g,
			Summary: "Adds increment to one column of a counter row (key COUNTER:ID, field COLUMN) and returns the new value. " +
				"A count never goes below 0: a larger negative increment leaves 0.",
			Since: "2.0.0", Complexity: "O(1)",
			Args: []Arg{key, field, {Name: "increment", Type: "integer"}},
		}, parseHincrby),
		{
			Name: "TALLY.HINCRBYONCE", Arity: 6, Flags: FlagWrite | FlagFast, FirstKey: 1, LastKey: 1, KeyStep: 1, Group: "tally",
			Summary: "HINCRBY applied once per (source, seq), for at-least-once queues (as \"tally incr ... --source S " +
				"--seq N\"): returns [new value, 1] when applied, [current value, 0] for a redelivered or older seq.",
			Since: "0.1.0", Complexity: "O(1)",
			Args: []Arg{key, field, {Name: "increment", Type: "integer"}, {Name: "source", Type: "string"},
				{Name: "seq", Type: "integer"}},
			Handler: hincrbyOnceHandler,
		},
		{
			Name: "HGET", Arity: 3, Flags: FlagReadOnly | FlagFast, FirstKey: 1, LastKey: 1, KeyStep: 1, Group: g,
			Summary: "Returns one column of a counter row (0 for a row never written; nil for an unknown column).",
			Since:   "2.0.0", Complexity: "O(1)", Args: []Arg{key, field}, Handler: hgetHandler,
		},
		{
			Name: "HMGET", Arity: -3, Flags: FlagReadOnly | FlagFast, FirstKey: 1, LastKey: 1, KeyStep: 1, Group: g,
			Summary: "Returns the given columns of a counter row (nil for an unknown column).",
			Since:   "2.0.0", Complexity: "O(N) where N is the number of fields",
			Args: []Arg{key, {Name: "field", Type: "string", Multiple: true}}, Handler: hmgetHandler,
		},
		{
			Name: "HGETALL", Arity: 2, Flags: FlagReadOnly, FirstKey: 1, LastKey: 1, KeyStep: 1, Group: g,
			Summary: "Returns every column of a counter row with its value, zeros included.",
			Since:   "2.0.0", Complexity: "O(N) where N is the number of columns",
			Args: []Arg{key}, Handler: hgetallHandler,
		},
		hsetCommand(Command{
			Name: "HSET", Arity: -4, Flags: FlagWrite | FlagFast, FirstKey: 1, LastKey: 1, KeyStep: 1, Group: g,
			Summary: "Sets the given columns of a counter row; the others keep their values. Replies the number of fields " +
				"added: columns that read 0 (absent) and now hold a value.",
			Since: "2.0.0", Complexity: "O(N) where N is the number of fields",
			Args: []Arg{key, {Name: "data", Type: "block", Multiple: true, Args: []Arg{field, {Name: "value", Type: "integer"}}}},
		}, false),
		hsetCommand(Command{
			Name: "HMSET", Arity: -4, Flags: FlagWrite | FlagFast, FirstKey: 1, LastKey: 1, KeyStep: 1, Group: g,
			Summary: "Sets the given columns of a counter row (as HSET); replies OK.",
			Since:   "2.0.0", Complexity: "O(N) where N is the number of fields",
			Args: []Arg{key, {Name: "data", Type: "block", Multiple: true, Args: []Arg{field, {Name: "value", Type: "integer"}}}},
		}, true),
		{
			Name: "DEL", Arity: -2, Flags: FlagWrite, FirstKey: 1, LastKey: -1, KeyStep: 1, Group: "generic",
			Summary: "Deletes counter rows atomically (every column reads 0 afterwards); replies the number of rows that held a non-zero value.",
			Since:   "1.0.0", Complexity: "O(N) where N is the number of keys",
			Args: []Arg{{Name: "key", Type: "key", Multiple: true}}, Handler: delHandler,
		},
		{
			Name: "UNLINK", Arity: -2, Flags: FlagWrite | FlagFast, FirstKey: 1, LastKey: -1, KeyStep: 1, Group: "generic",
			Summary: "Same as DEL.",
			Since:   "4.0.0", Complexity: "O(N) where N is the number of keys",
			Args: []Arg{{Name: "key", Type: "key", Multiple: true}}, Handler: delHandler,
		},
		{
			Name: "EXISTS", Arity: -2, Flags: FlagReadOnly | FlagFast, FirstKey: 1, LastKey: -1, KeyStep: 1, Group: "generic",
			Summary: "Counts the given counter rows that hold a non-zero value.",
			Since:   "1.0.0", Complexity: "O(N) where N is the number of keys",
			Args: []Arg{{Name: "key", Type: "key", Multiple: true}}, Handler: existsHandler,
		},
		incrCommand(Command{
			Name: "INCR", Arity: 2, Flags: FlagWrite | FlagFast, FirstKey: 1, LastKey: 1, KeyStep: 1, Group: "string",
			Summary: "Adds 1 to the first column of a counter row and returns the new value.",
			Since:   "1.0.0", Complexity: "O(1)", Args: []Arg{key},
		}, parseStep(1)),
		incrCommand(Command{
			Name: "DECR", Arity: 2, Flags: FlagWrite | FlagFast, FirstKey: 1, LastKey: 1, KeyStep: 1, Group: "string",
			Summary: "Subtracts 1 from the first column of a counter row and returns the new value; a count at 0 stays 0 (tally counts never go below 0).",
			Since:   "1.0.0", Complexity: "O(1)", Args: []Arg{key},
		}, parseStep(-1)),
		incrCommand(Command{
			Name: "INCRBY", Arity: 3, Flags: FlagWrite | FlagFast, FirstKey: 1, LastKey: 1, KeyStep: 1, Group: "string",
			Summary: "Adds increment to the first column of a counter row; a count never goes below 0.",
			Since:   "1.0.0", Complexity: "O(1)", Args: []Arg{key, {Name: "increment", Type: "integer"}},
		}, parseIncrby),
		incrCommand(Command{
			Name: "DECRBY", Arity: 3, Flags: FlagWrite | FlagFast, FirstKey: 1, LastKey: 1, KeyStep: 1, Group: "string",
			Summary: "Subtracts decrement from the first column of a counter row; the count stops at 0 (tally counts never go below 0).",
			Since:   "1.0.0", Complexity: "O(1)", Args: []Arg{key, {Name: "decrement", Type: "integer"}},
		}, parseDecrby),
		{
			Name: "GET", Arity: 2, Flags: FlagReadOnly | FlagFast, FirstKey: 1, LastKey: 1, KeyStep: 1, Group: "string",
			Summary: "Returns the first column of a counter row (0 for a row never written).",
			Since:   "1.0.0", Complexity: "O(1)", Args: []Arg{key}, Handler: getHandler,
		},
		{
			Name: "MGET", Arity: -2, Flags: FlagReadOnly | FlagFast, FirstKey: 1, LastKey: -1, KeyStep: 1, Group: "string",
			Summary: "Returns the first column of every counter row named; nil for a key that names no counter row.",
			Since:   "1.0.0", Complexity: "O(N) where N is the number of keys",
			Args: []Arg{{Name: "key", Type: "key", Multiple: true}}, Handler: mgetHandler,
		},
		{
			Name: "TALLY.MGET", Arity: -3, Flags: FlagReadOnly | FlagFast, Group: "tally", Keys: rowKeys(1, 2, true),
			Summary: "Returns every column of every id of a counter in one call (a feed page): an array with one array " +
				"of column values per id, in request order.",
			Since: "0.1.0", Complexity: "O(N) where N is the number of ids",
			Args: []Arg{{Name: "counter", Type: "string"}, {Name: "id", Type: "integer", Multiple: true}}, Handler: tallyMgetHandler,
		},
	}
}
