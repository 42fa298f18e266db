package server

import (
	"crypto/subtle"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// Connection and server commands: what clients and Redis's tools send.

func pingHandler(c *Conn, args [][]byte) {
	if len(args) == 2 {
		c.WriteBulk(args[1])
		return
	}
	c.WriteSimple("PONG")
}

func echoHandler(c *Conn, args [][]byte) { c.WriteBulk(args[1]) }

func quitHandler(c *Conn, args [][]byte) {
	c.WriteOK()
	c.quit = true
}

func selectHandler(c *Conn, args [][]byte) {
	n, ok := parseInt(args[1])
	switch {
	case !ok:
		c.writeError(msgNotInteger)
	case n != 0:
		c.writeError("ERR DB index is out of range")
	default:
		c.WriteOK()
	}
}

const (
	msgWrongPass = "WRONGPASS invalid username-password pair or user is disabled."
	msgNoPass    = "ERR AUTH <password> called without any password configured for the default user. " +
		"Are you sure your configuration is correct?"
)

// checkAuth checks a username (empty for the one-argument form) and
// password; it returns the error reply, or "" and marks the connection
// authenticated.
func (c *Conn) checkAuth(user, pass []byte) string {
	want := c.s.opts.Password
	if want == "" {
		if len(user) == 0 || string(user) == "default" {
			return msgNoPass
		}
		return msgWrongPass
	}
	okUser := len(user) == 0 || string(user) == "default"
	okPass := subtle.ConstantTimeCompare(pass, []byte(want)) == 1
	if !okUser || !okPass {
		c.s.metrics.authFailures.Inc()
		return msgWrongPass
	}
	c.authed = true
	return ""
}

func authHandler(c *Conn, args [][]byte) {
	var msg string
	switch len(args) {
	case 2:
		msg = c.checkAuth(nil, args[1])
	case 3:
		msg = c.checkAuth(args[1], args[2])
	default:
		msg = "ERR syntax error"
	}
	if msg != "" {
		c.writeError(msg)
		return
	}
	c.WriteOK()
}

// helloHandler is HELLO [protover [AUTH user pass] [SETNAME name]]. Only
// RESP2 is spoken (the reply encoders, resp.go, are RESP2 only), so HELLO
// 3 is refused with NOPROTO and clients stay on RESP2.
func helloHandler(c *Conn, args [][]byte) {
	if len(args) >= 2 {
		v, ok := parseInt(args[1])
		if !ok {
			c.writeError("ERR Protocol version is not an integer or out of range")
			return
		}
		if v != 2 {
			c.writeError("NOPROTO unsupported protocol version")
			return
		}
	}
	var name []byte
	setName := false
	for i := 2; i < len(args); i++ {
		switch opt := strings.ToUpper(string(args[i])); {
		case opt == "AUTH" && i+2 < len(args):
			if msg := c.checkAuth(args[i+1], args[i+2]); msg != "" {
				c.writeError(msg)
				return
			}
			i += 2
		case opt == "SETNAME" && i+1 < len(args):
			name, setName = args[i+1], true
			i++
		default:
			c.writeError(fmt.Sprintf("ERR Syntax error in HELLO option '%.32s'", sanitize(args[i])))
			return
		}
	}
	if !c.authed {
		c.writeError("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> " +
			"AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return
	}
	if setName {
		if !validClientName(name) {
			c.writeError(msgBadClientName)
			return
		}
		c.setName(string(name))
	}
	c.WriteArray(14)
	c.WriteBulkString("server")
	c.WriteBulkString("tally")
	c.WriteBulkString("version")
	c.WriteBulkString(c.s.version)
	c.WriteBulkString("proto")
	c.WriteInt(2)
	c.WriteBulkString("id")
	c.WriteInt(int64(c.id))
	c.WriteBulkString("mode")
	c.WriteBulkString("standalone")
	c.WriteBulkString("role")
	c.WriteBulkString("master")
	c.WriteBulkString("modules")
	c.WriteArray(0)
}

const msgBadClientName = "ERR Client names cannot contain spaces, newlines or special characters."

func validClientName(b []byte) bool {
	for _, ch := range b {
		if ch <= ' ' || ch > '~' {
			return false
		}
	}
	return true
}

func clientIDHandler(c *Conn, args [][]byte) { c.WriteInt(int64(c.id)) }

func clientGetNameHandler(c *Conn, args [][]byte) {
	name := c.Name()
	if name == "" {
		c.WriteNull()
		return
	}
	c.WriteBulkString(name)
}

func clientSetNameHandler(c *Conn, args [][]byte) {
	if !validClientName(args[2]) {
		c.writeError(msgBadClientName)
		return
	}
	c.setName(string(args[2]))
	c.WriteOK()
}

func clientSetInfoHandler(c *Conn, args [][]byte) {
	v := args[3]
	switch strings.ToUpper(string(args[2])) {
	case "LIB-NAME":
		if !validClientName(v) {
			c.writeError("ERR lib-name cannot contain spaces, newlines or special characters.")
			return
		}
		c.info.mu.Lock()
		c.info.libName = string(v)
		c.info.mu.Unlock()
	case "LIB-VER":
		if !validClientName(v) {
			c.writeError("ERR lib-ver cannot contain spaces, newlines or special characters.")
			return
		}
		c.info.mu.Lock()
		c.info.libVer = string(v)
		c.info.mu.Unlock()
	default:
		c.writeError(fmt.Sprintf("ERR Unrecognized option '%.32s'", sanitize(args[2])))
		return
	}
	c.WriteOK()
}

// configParams answers CONFIG GET with what tally has in Redis's terms.
// Anything else matches nothing (an empty reply, as Redis gives for an
// unknown parameter).
func (s *Server) configParams() [][2]string {
	appendfsync := map[string]string{"sync": "always", "interval": "everysec", "nosync": "no"}[s.durability.String()]
	return [][2]string{
		{"appendfsync", appendfsync},
		{"appendonly", "yes"}, // every write goes through tally's log
		{"databases", "1"},
		{"maxclients", strconv.Itoa(s.opts.MaxClients)},
		{"proto-max-bulk-len", strconv.Itoa(s.opts.MaxRequestBytes)},
		{"save", ""}, // no RDB snapshots: checkpoints are tally's own
		{"slowlog-log-slower-than", strconv.FormatInt(s.slow.threshold.Load(), 10)},
		{"slowlog-max-len", strconv.FormatInt(s.slow.maxLen.Load(), 10)},
		{"latency-monitor-threshold", strconv.FormatInt(s.latency.threshold.Load(), 10)},
		{"timeout", strconv.Itoa(int(s.opts.IdleTimeout.Seconds()))},
	}
}

func configGetHandler(c *Conn, args [][]byte) {
	params := c.s.configParams()
	var hits []int
	for i, p := range params {
		for _, pat := range args[2:] {
			if ok, _ := path.Match(strings.ToLower(string(pat)), p[0]); ok {
				hits = append(hits, i)
				break
			}
		}
	}
	c.WriteArray(2 * len(hits))
	for _, i := range hits {
		c.WriteBulkString(params[i][0])
		c.WriteBulkString(params[i][1])
	}
}

func dbsizeHandler(c *Conn, args [][]byte) {
	st := c.s.db.Stats()
	n := 0
	for _, cs := range st.Counters {
		if cs.Owner == "" { // packages' counters are not the user's keys
			n += cs.Rows()
		}
	}
	c.WriteInt(int64(n))
}

func saveHandler(c *Conn, args [][]byte) {
	if err := c.s.db.Checkpoint(); err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteOK()
}

// connectionCommands is the connection and server group.
func connectionCommands() []Command {
	return []Command{
		{Name: "PING", Arity: -1, Flags: FlagFast, Group: "connection", Since: "1.0.0", Complexity: "O(1)",
			Summary: "Returns PONG, or the message.", Args: []Arg{{Name: "message", Type: "string", Optional: true}},
			Handler: pingHandler},
		{Name: "ECHO", Arity: 2, Flags: FlagFast, Group: "connection", Since: "1.0.0", Complexity: "O(1)",
			Summary: "Returns the message.", Args: []Arg{{Name: "message", Type: "string"}}, Handler: echoHandler},
		{Name: "QUIT", Arity: -1, Flags: FlagFast | FlagNoAuth, Group: "connection", Since: "1.0.0", Complexity: "O(1)",
			Summary: "Replies OK and closes the connection.", Handler: quitHandler},
		{Name: "SELECT", Arity: 2, Flags: FlagFast, Group: "connection", Since: "1.0.0", Complexity: "O(1)",
			Summary: "Selects database 0, the only one; any other index is an error.",
			Args:    []Arg{{Name: "index", Type: "integer"}}, Handler: selectHandler},
		{Name: "AUTH", Arity: -2, Flags: FlagFast | FlagNoAuth, Group: "connection", Since: "1.0.0", Complexity: "O(N) where N is the password's length",
			Summary: "Authenticates the connection with the server's password (user \"default\" or none).",
			Args:    []Arg{{Name: "username", Type: "string", Optional: true}, {Name: "password", Type: "string"}},
			Handler: authHandler},
		{Name: "HELLO", Arity: -1, Flags: FlagFast | FlagNoAuth, Group: "connection", Since: "6.0.0", Complexity: "O(1)",
			Summary: "Handshake: protocol 2 only (3 is refused with NOPROTO), optional AUTH and SETNAME.",
			Args: []Arg{{Name: "arguments", Type: "block", Optional: true, Args: []Arg{
				{Name: "protover", Type: "integer"},
				{Name: "username-password", Type: "block", Token: "AUTH", Optional: true, Args: []Arg{
					{Name: "username", Type: "string"}, {Name: "password", Type: "string"}}},
				{Name: "clientname", Type: "string", Token: "SETNAME", Optional: true},
			}}},
			Handler: helloHandler},
		{Name: "CLIENT", Arity: -2, Group: "connection", Since: "2.4.0", Summary: "Client connection commands.",
			Subcommands: append([]Command{
				{Name: "ID", Arity: 2, Flags: FlagFast, Group: "connection", Since: "5.0.0", Complexity: "O(1)",
					Summary: "Returns the connection's id.", Handler: clientIDHandler},
				{Name: "GETNAME", Arity: 2, Flags: FlagFast, Group: "connection", Since: "2.6.9", Complexity: "O(1)",
					Summary: "Returns the connection's name.", Handler: clientGetNameHandler},
				{Name: "SETNAME", Arity: 3, Flags: FlagFast, Group: "connection", Since: "2.6.9", Complexity: "O(1)",
					Summary: "Sets the connection's name.", Args: []Arg{{Name: "connection-name", Type: "string"}},
					Handler: clientSetNameHandler},
				{Name: "SETINFO", Arity: 4, Flags: FlagFast, Group: "connection", Since: "7.2.0", Complexity: "O(1)",
					Summary: "Records the client library's name or version (LIB-NAME, LIB-VER).",
					Args: []Arg{{Name: "attr", Type: "oneof", Args: []Arg{
						{Name: "libname", Type: "string", Token: "LIB-NAME"}, {Name: "libver", Type: "string", Token: "LIB-VER"}}}},
					Handler: clientSetInfoHandler},
			}, clientInspectCommands()...)},
		{Name: "CONFIG", Arity: -2, Group: "server", Since: "2.0.0", Summary: "Configuration commands.",
			Subcommands: []Command{
				{Name: "GET", Arity: -3, Flags: FlagReadOnly | FlagLocal, Group: "server", Since: "2.0.0", Complexity: "O(N) where N is the number of parameters",
					Summary: "Returns matching parameters: appendfsync (from the durability), appendonly, databases, " +
						"maxclients, proto-max-bulk-len (the request limit), save, timeout.",
					Args: []Arg{{Name: "parameter", Type: "string", Multiple: true}}, Handler: configGetHandler},
				configSetCommand(),
			}},
		slowlogCommand(),
		latencyCommand(),
		{Name: "COMMAND", Arity: -1, Group: "server", Since: "2.8.13", Complexity: "O(N) where N is the number of commands",
			Summary: "Returns every command's name, arity, flags and key positions.", Handler: commandHandler,
			Subcommands: []Command{
				{Name: "COUNT", Arity: 2, Group: "server", Since: "2.8.13", Complexity: "O(1)",
					Summary: "Returns the number of commands.", Handler: commandCountHandler},
				{Name: "DOCS", Arity: -2, Group: "server", Since: "7.0.0", Complexity: "O(N) where N is the number of commands",
					Summary: "Returns the documentation of the given commands, or of all.",
					Args:    []Arg{{Name: "command-name", Type: "string", Optional: true, Multiple: true}}, Handler: commandDocsHandler},
				{Name: "INFO", Arity: -2, Group: "server", Since: "2.8.13", Complexity: "O(N) where N is the number of commands",
					Summary: "Returns the COMMAND entry of the given commands (nil for unknown ones), or of all.",
					Args:    []Arg{{Name: "command-name", Type: "string", Optional: true, Multiple: true}}, Handler: commandInfoHandler},
				{Name: "LIST", Arity: 2, Group: "server", Since: "7.0.0", Complexity: "O(N) where N is the number of commands",
					Summary: "Returns every command's name.", Handler: commandListHandler},
			}},
		{Name: "DBSIZE", Arity: 1, Flags: FlagReadOnly, Group: "server", Since: "1.0.0", Complexity: "O(R) where R is the number of id ranges",
			Summary: "Returns the number of stored counter rows (rows with a non-zero value; a row written since its range " +
				"was aged may count twice until the next merge).", Handler: dbsizeHandler},
		{Name: "INFO", Arity: -1, Group: "server", Since: "1.0.0", Complexity: "O(R) where R is the number of id ranges",
			Summary: "Returns server, clients, memory, persistence, stats, keyspace and tally sections in Redis's format " +
				"(tally counts never go below 0: a decrement past 0 leaves 0).",
			Args: []Arg{{Name: "section", Type: "string", Optional: true, Multiple: true}}, Handler: infoHandler},
		{Name: "SAVE", Arity: 1, Flags: FlagAdmin | FlagLocal, Group: "server", Since: "1.0.0", Complexity: "O(N) where N is the number of hot rows",
			Summary: "Writes a checkpoint now (tally's snapshot of its memory tables).", Handler: saveHandler},
	}
}
