package server

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Inspection commands that Redis's tools send (issue 20): CLIENT LIST,
// CLIENT INFO, CLIENT KILL, SLOWLOG, and CONFIG SET of the slow log's two
// parameters. A connection's descriptive fields (name, library, last
// command, last activity) are read by other connections' CLIENT LIST, so
// they sit behind connInfo's lock or in atomics.

// connInfo is what CLIENT LIST shows of a connection besides its fixed
// fields.
type connInfo struct {
	mu                    sync.Mutex
	name, libName, libVer string
	lastCmd               atomic.Pointer[Command]
	lastActive            atomic.Int64 // Unix ns of the last command's start
	killed                atomic.Bool  // CLIENT KILL: close at the next read
}

// Name returns the name set by CLIENT SETNAME or HELLO SETNAME, or "".
func (c *Conn) Name() string {
	c.info.mu.Lock()
	defer c.info.mu.Unlock()
	return c.info.name
}

func (c *Conn) setName(name string) {
	c.info.mu.Lock()
	c.info.name = name
	c.info.mu.Unlock()
}

// clientLine is the connection's line of CLIENT LIST and CLIENT INFO, with
// Redis's fields (those tally has no notion of read as Redis's idle
// values).
func (c *Conn) clientLine(now time.Time) string {
	c.info.mu.Lock()
	name, libName, libVer := c.info.name, c.info.libName, c.info.libVer
	c.info.mu.Unlock()
	cmd := "NULL"
	if lc := c.info.lastCmd.Load(); lc != nil {
		cmd = lc.fullName
	}
	last := time.Unix(0, c.info.lastActive.Load())
	if last.Before(c.opened) {
		last = c.opened
	}
	laddr := ""
	if a := c.nc.LocalAddr(); a != nil {
		laddr = a.String()
	}
	return fmt.Sprintf("id=%d addr=%s laddr=%s fd=-1 name=%s age=%d idle=%d flags=N db=0 sub=0 psub=0 ssub=0 "+
		"multi=-1 watch=0 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 "+
		"events=r cmd=%s user=default redir=-1 resp=2 lib-name=%s lib-ver=%s",
		c.id, c.addr, laddr, name, int(now.Sub(c.opened).Seconds()), int(now.Sub(last).Seconds()), cmd, libName, libVer)
}

// clients returns the open connections in id order.
func (s *Server) clients() []*Conn {
	s.mu.Lock()
	cs := make([]*Conn, 0, len(s.mu.conns))
	for c := range s.mu.conns {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	slices.SortFunc(cs, func(a, b *Conn) int { return cmp.Compare(a.id, b.id) })
	return cs
}

// clientListHandler is CLIENT LIST [TYPE normal|master|replica|pubsub]
// [ID id [id ...]].
func clientListHandler(c *Conn, args [][]byte) {
	var ids map[uint64]bool
	normal := true
	for i := 2; i < len(args); i++ {
		switch strings.ToUpper(string(args[i])) {
		case "TYPE":
			if i+1 >= len(args) {
				c.writeError("ERR syntax error")
				return
			}
			switch t := strings.ToLower(string(args[i+1])); t {
			case "normal":
			case "master", "replica", "slave", "pubsub":
				normal = false
			default:
				c.writeError(fmt.Sprintf("ERR Unknown client type '%.32s'", sanitize(args[i+1])))
				return
			}
			i++
		case "ID":
			if i+1 >= len(args) {
				c.writeError("ERR syntax error")
				return
			}
			ids = map[uint64]bool{}
			for i++; i < len(args); i++ {
				id, ok := parseUint(args[i])
				if !ok || id == 0 {
					c.writeError(fmt.Sprintf("ERR Invalid client ID '%.32s'", sanitize(args[i])))
					return
				}
				ids[id] = true
			}
		default:
			c.writeError("ERR syntax error")
			return
		}
	}
	var b strings.Builder
	if normal {
		now := time.Now()
		for _, o := range c.s.clients() {
			if ids != nil && !ids[o.id] {
				continue
			}
			b.WriteString(o.clientLine(now))
			b.WriteByte('\n')
		}
	}
	c.WriteBulkString(b.String())
}

func clientInfoHandler(c *Conn, _ [][]byte) {
	c.WriteBulkString(c.clientLine(time.Now()) + "\n")
}

// clientKillHandler is CLIENT KILL addr (the old form: OK or an error) and
// CLIENT KILL filter value [filter value ...] with the filters ID, ADDR,
// LADDR, USER, SKIPME (replies the number killed). A killed connection
// finishes the batch it runs, then closes.
func clientKillHandler(c *Conn, args [][]byte) {
	if len(args) == 3 { // CLIENT KILL addr
		for _, o := range c.s.clients() {
			if o.addr == string(args[2]) {
				c.s.kill(c, o)
				c.WriteOK()
				return
			}
		}
		c.writeError("ERR No such client")
		return
	}
	if len(args)%2 != 0 {
		c.writeError("ERR syntax error")
		return
	}
	var id uint64
	var addr, laddr, user string
	skipMe := true
	for i := 2; i < len(args); i += 2 {
		v := args[i+1]
		switch strings.ToUpper(string(args[i])) {
		case "ID":
			n, ok := parseUint(v)
			if !ok || n == 0 {
				c.writeError("ERR client-id should be greater than 0")
				return
			}
			id = n
		case "ADDR":
			addr = string(v)
		case "LADDR":
			laddr = string(v)
		case "USER":
			user = string(v)
		case "SKIPME":
			switch strings.ToLower(string(v)) {
			case "yes":
				skipMe = true
			case "no":
				skipMe = false
			default:
				c.writeError("ERR syntax error")
				return
			}
		case "TYPE", "MAXAGE":
			// Every client is "normal"; no filter by age is kept: both
			// are accepted and match as Redis would for a normal client.
		default:
			c.writeError("ERR syntax error")
			return
		}
	}
	killed := 0
	for _, o := range c.s.clients() {
		switch {
		case id != 0 && o.id != id,
			addr != "" && o.addr != addr,
			laddr != "" && (o.nc.LocalAddr() == nil || o.nc.LocalAddr().String() != laddr),
			user != "" && user != "default",
			skipMe && o == c:
			continue
		}
		c.s.kill(c, o)
		killed++
	}
	c.WriteInt(int64(killed))
}

// kill closes connection o on behalf of c: o finishes the batch it runs,
// then closes at its next read (c itself after this reply).
func (s *Server) kill(c, o *Conn) {
	o.info.killed.Store(true)
	if o == c {
		c.quit = true
		return
	}
	o.nc.SetReadDeadline(aLongTimeAgo)
}

// slowlog is the server's slow log: the last Options.SlowlogMaxLen
// commands that ran for at least SlowlogThreshold, newest first, as Redis
// keeps it.
type slowlog struct {
	threshold atomic.Int64 // µs; negative: off
	maxLen    atomic.Int64
	mu        sync.Mutex
	nextID    int64
	entries   []slowEntry // oldest first
}

type slowEntry struct {
	id         int64
	at         int64 // Unix seconds
	micros     int64
	args       []string
	addr, name string
}

// Redis's slow log bounds what it keeps of a command.
const (
	slowlogMaxArgs   = 32
	slowlogMaxArgLen = 128
)

// record adds the command args of c if d is over the threshold.
func (l *slowlog) record(c *Conn, args [][]byte, d time.Duration) {
	thr := l.threshold.Load()
	us := d.Microseconds()
	if thr < 0 || us < thr {
		return
	}
	n := min(len(args), slowlogMaxArgs)
	e := slowEntry{at: time.Now().Unix(), micros: us, addr: c.addr, name: c.Name(), args: make([]string, n)}
	for i := 0; i < n; i++ {
		if i == slowlogMaxArgs-1 && len(args) > slowlogMaxArgs {
			e.args[i] = fmt.Sprintf("... (%d more arguments)", len(args)-slowlogMaxArgs+1)
			break
		}
		a := args[i]
		if len(a) > slowlogMaxArgLen {
			cut := slowlogMaxArgLen
			for cut > 0 && !utf8.RuneStart(a[cut]) {
				cut--
			}
			e.args[i] = fmt.Sprintf("%s... (%d more bytes)", a[:cut], len(a)-cut)
		} else {
			e.args[i] = string(a)
		}
	}
	l.mu.Lock()
	e.id = l.nextID
	l.nextID++
	l.entries = append(l.entries, e)
	if max := int(l.maxLen.Load()); len(l.entries) > max {
		l.entries = append(l.entries[:0], l.entries[len(l.entries)-max:]...)
	}
	l.mu.Unlock()
}

func slowlogGetHandler(c *Conn, args [][]byte) {
	count := 10
	if len(args) == 3 {
		n, ok := parseInt(args[2])
		if !ok || n < -1 {
			c.writeError("ERR count should be greater than or equal to -1")
			return
		}
		count = int(n)
	}
	l := &c.s.slow
	l.mu.Lock()
	es := l.entries
	if count == -1 || count > len(es) {
		count = len(es)
	}
	out := make([]slowEntry, count)
	for i := 0; i < count; i++ {
		out[i] = es[len(es)-1-i]
	}
	l.mu.Unlock()
	c.WriteArray(len(out))
	for _, e := range out {
		c.WriteArray(6)
		c.WriteInt(e.id)
		c.WriteInt(e.at)
		c.WriteInt(e.micros)
		c.WriteArray(len(e.args))
		for _, a := range e.args {
			c.WriteBulkString(a)
		}
		c.WriteBulkString(e.addr)
		c.WriteBulkString(e.name)
	}
}

func slowlogLenHandler(c *Conn, _ [][]byte) {
	c.s.slow.mu.Lock()
	n := len(c.s.slow.entries)
	c.s.slow.mu.Unlock()
	c.WriteInt(int64(n))
}

func slowlogResetHandler(c *Conn, _ [][]byte) {
	c.s.slow.mu.Lock()
	c.s.slow.entries = nil
	c.s.slow.mu.Unlock()
	c.WriteOK()
}

// configSetHandler is CONFIG SET parameter value [parameter value ...]:
// the slow log's parameters can change at run time; every other parameter
// is refused, and nothing is set unless every pair is valid.
func configSetHandler(c *Conn, args [][]byte) {
	if len(args)%2 != 0 {
		c.writeError("ERR wrong number of arguments for 'config|set' command")
		return
	}
	var thr, maxLen, latency *int64
	for i := 2; i < len(args); i += 2 {
		name := strings.ToLower(string(args[i]))
		v, err := strconv.ParseInt(string(args[i+1]), 10, 64)
		switch name {
		case "slowlog-log-slower-than":
			if err != nil {
				c.writeError(fmt.Sprintf("ERR CONFIG SET failed (possibly related to argument '%s') - argument couldn't be parsed into an integer", name))
				return
			}
			thr = &v
		case "slowlog-max-len":
			if err != nil || v < 0 {
				c.writeError(fmt.Sprintf("ERR CONFIG SET failed (possibly related to argument '%s') - argument must be between 0 and 9223372036854775807 inclusive", name))
				return
			}
			maxLen = &v
		case "latency-monitor-threshold":
			n, err := parseLatencyThreshold(args[i+1])
			if err != nil {
				c.writeError(fmt.Sprintf("ERR CONFIG SET failed (possibly related to argument '%s') - %v", name, err))
				return
			}
			latency = &n
		default:
			c.writeError(fmt.Sprintf("ERR Unknown option or number of arguments for CONFIG SET - '%.64s' "+
				"(tally sets slowlog-log-slower-than, slowlog-max-len and latency-monitor-threshold at run time; the rest are options of tally serve)",
				sanitize(args[i])))
			return
		}
	}
	if thr != nil {
		c.s.slow.threshold.Store(*thr)
	}
	if latency != nil {
		c.s.latency.threshold.Store(*latency)
	}
	if maxLen != nil {
		c.s.slow.maxLen.Store(*maxLen)
		c.s.slow.mu.Lock()
		if es := c.s.slow.entries; int64(len(es)) > *maxLen {
			c.s.slow.entries = append(es[:0], es[int64(len(es))-*maxLen:]...)
		}
		c.s.slow.mu.Unlock()
	}
	c.WriteOK()
}

// inspectCommands are CLIENT's LIST, INFO and KILL, SLOWLOG and CONFIG
// SET, added to the containers of connectionCommands.
func clientInspectCommands() []Command {
	return []Command{
		{Name: "LIST", Arity: -2, Group: "connection", Since: "2.4.0", Complexity: "O(N) where N is the number of clients",
			Summary: "Returns a line per client connection, in Redis's format.",
			Args: []Arg{{Name: "client-type", Type: "string", Token: "TYPE", Optional: true},
				{Name: "client-id", Type: "integer", Token: "ID", Optional: true, Multiple: true}},
			Handler: clientListHandler},
		{Name: "INFO", Arity: 2, Flags: FlagFast, Group: "connection", Since: "6.2.0", Complexity: "O(1)",
			Summary: "Returns the line of this connection, as CLIENT LIST shows it.", Handler: clientInfoHandler},
		{Name: "KILL", Arity: -3, Flags: FlagAdmin | FlagLocal, Group: "connection", Since: "2.4.0", Complexity: "O(N) where N is the number of clients",
			Summary: "Closes connections by address, or by ID, ADDR, LADDR, USER and SKIPME filters (each finishes the commands it sent).",
			Args:    []Arg{{Name: "filter", Type: "string", Multiple: true}}, Handler: clientKillHandler},
	}
}

func slowlogCommand() Command {
	return Command{Name: "SLOWLOG", Arity: -2, Group: "server", Since: "2.2.12", Summary: "Slow log commands.",
		Subcommands: []Command{
			{Name: "GET", Arity: -2, Flags: FlagAdmin | FlagLocal, Group: "server", Since: "2.2.12", Complexity: "O(N) where N is the number of entries returned",
				Summary: "Returns the slowest recent commands (default 10; -1 all): id, time, microseconds, arguments, client address, name.",
				Args:    []Arg{{Name: "count", Type: "integer", Optional: true}}, Handler: slowlogGetHandler},
			{Name: "LEN", Arity: 2, Flags: FlagAdmin | FlagLocal, Group: "server", Since: "2.2.12", Complexity: "O(1)",
				Summary: "Returns the number of entries in the slow log.", Handler: slowlogLenHandler},
			{Name: "RESET", Arity: 2, Flags: FlagAdmin | FlagLocal, Group: "server", Since: "2.2.12", Complexity: "O(N) where N is the number of entries",
				Summary: "Empties the slow log.", Handler: slowlogResetHandler},
		}}
}

func configSetCommand() Command {
	return Command{Name: "SET", Arity: -4, Flags: FlagAdmin | FlagLocal, Group: "server", Since: "2.0.0", Complexity: "O(N) where N is the number of parameters",
		Summary: "Sets slowlog-log-slower-than (µs; negative: off), slowlog-max-len and latency-monitor-threshold (ms; 0: off) " +
			"at run time; other parameters are refused.",
		Args: []Arg{{Name: "data", Type: "block", Multiple: true, Args: []Arg{
			{Name: "parameter", Type: "string"}, {Name: "value", Type: "string"}}}},
		Handler: configSetHandler}
}
