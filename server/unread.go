package server

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/unread"
)

// Unread commands (package unread), mirroring its API and the CLI's
// "unread", "dot" and "notice" commands:
//
//	UNREAD.KIND ADD kind [HINT 8|16|32] [MAX 32|64]   OK
//	UNREAD.KIND LIST                                  array of kind names, in Get order
//	UNREAD.INCR user kind [n]                         integer: the new count
//	UNREAD.RESET user [kind ...]                      OK (no kind: every kind)
//	UNREAD.GET user                                   array of integers, one per kind
//	UNREAD.MGET user [user ...]                       array of such arrays
//	UNREAD.FEED user                                  integer: feed unread
//	UNREAD.FEEDRESET user                             OK
//	DOT.MARK channel                                  integer: the channel's new tag
//	DOT.CLEAR user channel                            OK
//	UNREAD.FORGET user [user ...]                     OK: the users' tags dropped, in one write
//	DOT.HAS user channel                              integer 1 or 0
//	NOTICE.POST channel id                            integer 1, or 0 for a re-post
//	NOTICE.READ user channel                          OK
//	NOTICE.UNREAD user channel                        integer: notices not read
//
// A user or notice id that is not an unsigned decimal is "ERR value is not
// an integer or out of range"; unread's refusals (unknown kind or channel,
// invalid channel name, notice id 0, a count past the kind's maximum) are
// "ERR " and unread's message. A refused command changes nothing.

// UnreadCommands returns the unread command group on x, for Register.
func UnreadCommands(x *unread.Unread) []Command {
	u := &unreadCmds{x: x}
	user := Arg{Name: "user", Type: "integer"}
	channel := Arg{Name: "channel", Type: "string"}
	return []Command{
		{
			Name: "UNREAD.KIND", Arity: -2, Group: "unread",
			Summary: "Kinds of one-to-one unread counts.", Since: "0.1.0",
			Subcommands: []Command{
				{
					Name: "ADD", Arity: -3, Flags: FlagWrite | FlagAdmin, Group: "unread",
					Summary: "Adds a kind of one-to-one unread count, live (as \"tally unread kind add\"); users' counts read 0 " +
						"in it. HINT: width in memory, 8, 16 or 32 (default 16); MAX: counts stay below 2^MAX, 32 or 64 (default 32).",
					Since: "0.1.0", Complexity: "O(1)",
					Args: []Arg{
						{Name: "kind", Type: "string"},
						{Name: "hint", Type: "integer", Token: "HINT", Optional: true},
						{Name: "max", Type: "integer", Token: "MAX", Optional: true},
					},
					Handler: u.kindAdd,
				},
				{
					Name: "LIST", Arity: 2, Flags: FlagReadOnly | FlagFast, Group: "unread",
					Summary: "Lists the kinds in the order UNREAD.GET returns them.",
					Since:   "0.1.0", Complexity: "O(N) where N is the number of kinds",
					Handler: u.kindList,
				},
			},
		},
		{
			Name: "UNREAD.INCR", Arity: -3, Flags: FlagWrite | FlagFast, Group: "unread",
			Summary: "Adds n (default 1, may be negative; counts never go below 0) to a user's unread count of a kind " +
				"and returns the new count.",
			Since: "0.1.0", Complexity: "O(1)",
			Args:    []Arg{user, {Name: "kind", Type: "string"}, {Name: "n", Type: "integer", Optional: true}},
			Handler: u.incr,
		},
		{
			Name: "UNREAD.RESET", Arity: -2, Flags: FlagWrite | FlagFast, Group: "unread",
			Summary: "Sets a user's unread counts of the kinds (no kind: every kind) to 0, atomically.",
			Since:   "0.1.0", Complexity: "O(N) where N is the number of kinds",
			Args:    []Arg{user, {Name: "kind", Type: "string", Optional: true, Multiple: true}},
			Handler: u.reset,
		},
		{
			Name: "UNREAD.GET", Arity: 2, Flags: FlagReadOnly | FlagFast, Group: "unread",
			Summary: "Returns a user's unread counts of every kind, in UNREAD.KIND LIST order: one memory read.",
			Since:   "0.1.0", Complexity: "O(1)",
			Args:    []Arg{user},
			Handler: u.get,
		},
		{
			Name: "UNREAD.MGET", Arity: -2, Flags: FlagReadOnly | FlagFast, Group: "unread",
			Summary: "Returns, for each user, an array of their unread counts of every kind.",
			Since:   "0.1.0", Complexity: "O(N) where N is the number of users",
			Args:    []Arg{{Name: "user", Type: "integer", Multiple: true}},
			Handler: u.mget,
		},
		{
			Name: "UNREAD.FEED", Arity: 2, Flags: FlagReadOnly, Group: "unread",
			Summary: "Returns a user's feed unread: the posts of the accounts they follow published since their last " +
				"UNREAD.FEEDRESET or since they followed them, whichever is later.",
			Since: "0.1.0", Complexity: "O(N) where N is the number of accounts the user follows",
			Args:    []Arg{user},
			Handler: u.feed,
		},
		{
			Name: "UNREAD.FEEDRESET", Arity: 2, Flags: FlagWrite, Group: "unread",
			Summary: "Marks a user's feed read: their feed unread becomes 0.",
			Since:   "0.1.0", Complexity: "O(N) where N is the number of accounts the user follows",
			Args:    []Arg{user},
			Handler: u.feedReset,
		},
		{
			Name: "UNREAD.FORGET", Arity: -2, Flags: FlagWrite, Group: "unread",
			Summary: "Drops users' red-dot tags and last-read notices (accounts deleted), all in one write: they then " +
				"read as users who never cleared or read, on every channel. Returns OK.",
			Since: "0.1.0", Complexity: "O(N×C) where N is the number of users and C of channels",
			Args:    []Arg{{Name: "user", Type: "integer", Multiple: true}},
			Handler: u.forget,
		},
		{
			Name: "DOT.MARK", Arity: 2, Flags: FlagWrite | FlagFast, Group: "unread",
			Summary: "Puts a red dot on a channel for every user at once (one write); declares the channel. " +
				"Returns the channel's new tag.",
			Since: "0.1.0", Complexity: "O(1)",
			Args:    []Arg{channel},
			Handler: u.dotMark,
		},
		{
			Name: "DOT.CLEAR", Arity: 3, Flags: FlagWrite | FlagFast, Group: "unread",
			Summary: "Clears a channel's red dot for a user.",
			Since:   "0.1.0", Complexity: "O(1)",
			Args:    []Arg{user, channel},
			Handler: u.dotClear,
		},
		{
			Name: "DOT.HAS", Arity: 3, Flags: FlagReadOnly | FlagFast, Group: "unread",
			Summary: "Returns 1 if the channel was marked since the user last cleared it, else 0. A user who never " +
				"cleared the channel has the dot once it was marked; a channel nobody declared has none. Writes nothing.",
			Since: "0.1.0", Complexity: "O(1)",
			Args:    []Arg{user, channel},
			Handler: u.dotHas,
		},
		{
			Name: "NOTICE.POST", Arity: 3, Flags: FlagWrite | FlagFast, Group: "unread",
			Summary: "Posts a system notice (id 1 or more, higher is newer) to a channel, declaring it. Returns 1, " +
				"or 0 if the channel had the id.",
			Since: "0.1.0", Complexity: "O(1)",
			Args:    []Arg{channel, {Name: "id", Type: "integer"}},
			Handler: u.noticePost,
		},
		{
			Name: "NOTICE.READ", Arity: 3, Flags: FlagWrite | FlagFast, Group: "unread",
			Summary: "Marks every notice of a channel read for a user.",
			Since:   "0.1.0", Complexity: "O(1)",
			Args:    []Arg{user, channel},
			Handler: u.noticeRead,
		},
		{
			Name: "NOTICE.UNREAD", Arity: 3, Flags: FlagReadOnly | FlagFast, Group: "unread",
			Summary: "Returns the number of a channel's notices newer than the last one the user read. A user who " +
				"never read the channel is new and has 0 until NOTICE.READ; so does every user of a channel nobody " +
				"declared. Writes nothing.",
			Since: "0.1.0", Complexity: "O(log N) where N is the number of notices of the channel",
			Args:    []Arg{user, channel},
			Handler: u.noticeUnread,
		},
	}
}

type unreadCmds struct{ x *unread.Unread }

// id parses a user or notice id; on failure it writes the error reply.
func (u *unreadCmds) id(c *Conn, b []byte) (uint64, bool) {
	v, ok := parseUint(b)
	if !ok {
		c.writeError(msgNotInteger)
	}
	return v, ok
}

func (u *unreadCmds) kindAdd(c *Conn, args [][]byte) {
	opts := store.ColumnOptions{HintBits: 16, MaxBits: 32}
	rest := args[3:]
	for len(rest) > 0 {
		opt := strings.ToUpper(string(rest[0]))
		if opt != "HINT" && opt != "MAX" {
			c.writeError(fmt.Sprintf("ERR syntax error: unknown option '%.32s'", sanitize(rest[0])))
			return
		}
		if len(rest) < 2 {
			c.writeError(fmt.Sprintf("ERR %s needs a value", opt))
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
	if err := u.x.AddKind(string(args[2]), opts); err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteOK()
}

func (u *unreadCmds) kindList(c *Conn, args [][]byte) {
	kinds := u.x.Kinds()
	c.WriteArray(len(kinds))
	for _, k := range kinds {
		c.WriteBulkString(k)
	}
}

func (u *unreadCmds) incr(c *Conn, args [][]byte) {
	if len(args) > 4 {
		c.writeError("ERR syntax error")
		return
	}
	user, ok := u.id(c, args[1])
	if !ok {
		return
	}
	n := int64(1)
	if len(args) == 4 {
		if n, ok = parseInt(args[3]); !ok {
			c.writeError(msgNotInteger)
			return
		}
	}
	v, err := u.x.Incr(user, string(args[2]), n)
	if err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteUint(v)
}

func (u *unreadCmds) reset(c *Conn, args [][]byte) {
	user, ok := u.id(c, args[1])
	if !ok {
		return
	}
	kinds := make([]string, len(args)-2)
	for i, k := range args[2:] {
		kinds[i] = string(k)
	}
	if err := u.x.Reset(user, kinds...); err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteOK()
}

func (u *unreadCmds) get(c *Conn, args [][]byte) {
	user, ok := u.id(c, args[1])
	if !ok {
		return
	}
	vals, err := u.x.Get(user, c.ids[:0])
	c.ids = vals[:0]
	if err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteArray(len(vals))
	for _, v := range vals {
		c.WriteUint(v)
	}
}

func (u *unreadCmds) mget(c *Conn, args [][]byte) {
	users := make([]uint64, len(args)-1)
	for i, a := range args[1:] {
		var ok bool
		if users[i], ok = u.id(c, a); !ok {
			return
		}
	}
	vals, err := u.x.GetMany(users, nil)
	if err != nil {
		c.WriteErr(err)
		return
	}
	n := len(vals) / len(users) // the kinds at the read (one may be added meanwhile)
	c.WriteArray(len(users))
	for i := range users {
		c.WriteArray(n)
		for _, v := range vals[i*n : (i+1)*n] {
			c.WriteUint(v)
		}
	}
}

func (u *unreadCmds) feed(c *Conn, args [][]byte) {
	user, ok := u.id(c, args[1])
	if !ok {
		return
	}
	n, err := u.x.Feed(user)
	if err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteUint(n)
}

func (u *unreadCmds) feedReset(c *Conn, args [][]byte) {
	user, ok := u.id(c, args[1])
	if !ok {
		return
	}
	if err := u.x.FeedReset(user); err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteOK()
}

func (u *unreadCmds) forget(c *Conn, args [][]byte) {
	users := make([]uint64, 0, len(args)-1)
	for _, a := range args[1:] {
		user, ok := u.id(c, a)
		if !ok {
			return // checked before anything is written
		}
		users = append(users, user)
	}
	if err := u.x.ForgetTags(users...); err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteOK()
}

func (u *unreadCmds) dotMark(c *Conn, args [][]byte) {
	tag, err := u.x.Mark(string(args[1]))
	if err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteUint(tag)
}

func (u *unreadCmds) dotClear(c *Conn, args [][]byte) {
	user, ok := u.id(c, args[1])
	if !ok {
		return
	}
	if err := u.x.Clear(user, string(args[2])); err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteOK()
}

func (u *unreadCmds) dotHas(c *Conn, args [][]byte) {
	user, ok := u.id(c, args[1])
	if !ok {
		return
	}
	has, err := u.x.Has(user, string(args[2]))
	if err != nil {
		c.WriteErr(err)
		return
	}
	if has {
		c.WriteInt(1)
	} else {
		c.WriteInt(0)
	}
}

func (u *unreadCmds) noticePost(c *Conn, args [][]byte) {
	id, ok := u.id(c, args[2])
	if !ok {
		return
	}
	posted, err := u.x.Post(string(args[1]), id)
	if err != nil {
		c.WriteErr(err)
		return
	}
	if posted {
		c.WriteInt(1)
	} else {
		c.WriteInt(0)
	}
}

func (u *unreadCmds) noticeRead(c *Conn, args [][]byte) {
	user, ok := u.id(c, args[1])
	if !ok {
		return
	}
	if err := u.x.Read(user, string(args[2])); err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteOK()
}

func (u *unreadCmds) noticeUnread(c *Conn, args [][]byte) {
	user, ok := u.id(c, args[1])
	if !ok {
		return
	}
	n, err := u.x.Unread(user, string(args[2]))
	if err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteUint(n)
}
