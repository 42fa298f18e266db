package server

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tallydb/tally/likes"
)

// Likes commands (LIKE.*): the API of package likes and the likes commands
// of the CLI, over RESP. Registered by "tally serve":
//
//	srv.Register(server.LikesCommands(l)...)
//
//	command                                        reply
//	---------------------------------------------  ---------------------------------------------
//	LIKE.LIKE biz item user [owner]                array: likes, dislikes, changed (1 or 0)
//	LIKE.UNLIKE | LIKE.DISLIKE | LIKE.UNDISLIKE    array: likes, dislikes, changed
//	    biz item user
//	LIKE.SETOWNER biz item owner                   array: likes, dislikes, changed
//	LIKE.COUNTS biz item [item ...]                array of arrays: likes, dislikes per item
//	LIKE.STATES biz user item [item ...]           array of "like", "dislike" or "none"
//	LIKE.LIKERS biz item [LIMIT n] [CURSOR c]      array: next cursor (nil at the end), array
//	    [DISLIKES]                                 of user ids
//	LIKE.USERLIKES biz user [LIMIT n] [CURSOR c]   array: next cursor (nil at the end), array
//	                                               of item ids, newest like first
//	LIKE.TOP biz [n] [DAY yyyy-mm-dd]              array of arrays: rank, item, likes
//	LIKE.RANK biz item [DAY yyyy-mm-dd]            array: rank, likes; nil when not ranked
//	LIKE.RECEIVED owner                            integer: likes received
//	LIKE.BUSINESS ADD biz                          OK: declares a business
//	LIKE.BUSINESS LIST                             array of business names
//
// A write (LIKE.LIKE, LIKE.DISLIKE, LIKE.SETOWNER) to a business nobody
// declared is refused ("ERR likes: unknown business ...") and changes
// nothing; reads of one return nothing.
//
// Ids are unsigned decimals; an id above 2^63-1 is replied as a bulk
// string (RESP integers are signed). Errors of package likes are sent as
// "ERR likes: ..." (an invalid business name, a limit out of range, a bad
// or stale cursor, an owner mismatch, a day not kept).

const likeGroup = "likes"

// LikesCommands returns the LIKE.* commands over l.
func LikesCommands(l *likes.Likes) []Command {
	biz := Arg{Name: "business", Type: "string"}
	item := Arg{Name: "item", Type: "integer"}
	user := Arg{Name: "user", Type: "integer"}
	items := Arg{Name: "item", Type: "integer", Multiple: true}
	limit := Arg{Name: "limit", Type: "integer", Token: "LIMIT", Optional: true}
	cursor := Arg{Name: "cursor", Type: "string", Token: "CURSOR", Optional: true}
	day := Arg{Name: "day", Type: "string", Token: "DAY", Optional: true}
	h := &likeHandlers{l: l}
	write := func(name, summary string, op func(string, uint64, uint64, uint64) (likes.Result, error), args ...Arg) Command {
		arity := 4
		if len(args) > 3 {
			arity = -4
		}
		return Command{Name: name, Arity: arity, Flags: FlagWrite | FlagFast, Group: likeGroup, Since: "1.0.0",
			Summary: summary, Complexity: "O(1)", Args: args,
			Handler: func(c *Conn, a [][]byte) { h.transition(c, a, op) }}
	}
	return []Command{
		write("LIKE.LIKE", "Records that a user likes an item (replacing a dislike), idempotently; the first owner named is credited with the item's likes.",
			func(b string, i, u, o uint64) (likes.Result, error) { return l.Like(b, i, u, o) },
			biz, item, user, Arg{Name: "owner", Type: "integer", Optional: true}),
		write("LIKE.UNLIKE", "Removes a user's like of an item, if any.",
			func(b string, i, u, _ uint64) (likes.Result, error) { return l.Unlike(b, i, u) }, biz, item, user),
		write("LIKE.DISLIKE", "Records that a user dislikes an item (replacing a like), idempotently.",
			func(b string, i, u, _ uint64) (likes.Result, error) { return l.Dislike(b, i, u) }, biz, item, user),
		write("LIKE.UNDISLIKE", "Removes a user's dislike of an item, if any.",
			func(b string, i, u, _ uint64) (likes.Result, error) { return l.Undislike(b, i, u) }, biz, item, user),
		{
			Name: "LIKE.SETOWNER", Arity: 4, Flags: FlagWrite | FlagFast, Group: likeGroup, Since: "1.0.0",
			Summary:    "Makes a user the owner of an item: its likes move to the new owner's received total.",
			Complexity: "O(1)", Args: []Arg{biz, item, {Name: "owner", Type: "integer"}}, Handler: h.setOwner,
		},
		{
			Name: "LIKE.COUNTS", Arity: -3, Flags: FlagReadOnly | FlagFast, Group: likeGroup, Since: "1.0.0",
			Summary:    "Returns the like and dislike counts of items.",
			Complexity: "O(N) where N is the number of items", Args: []Arg{biz, items}, Handler: h.counts,
		},
		{
			Name: "LIKE.STATES", Arity: -4, Flags: FlagReadOnly | FlagFast, Group: likeGroup, Since: "1.0.0",
			Summary:    "Returns a user's state (like, dislike or none) on each item of a page.",
			Complexity: "O(N) where N is the number of items", Args: []Arg{biz, user, items}, Handler: h.states,
		},
		{
			Name: "LIKE.LIKERS", Arity: -3, Flags: FlagReadOnly, Group: likeGroup, Since: "1.0.0",
			Summary:    "Returns a page of the users who like (or, with DISLIKES, dislike) an item, and the next cursor.",
			Complexity: "O(N) where N is the page size",
			Args:       []Arg{biz, item, limit, cursor, {Name: "dislikes", Type: "pure-token", Token: "DISLIKES", Optional: true}},
			Handler:    h.likers,
		},
		{
			Name: "LIKE.USERLIKES", Arity: -3, Flags: FlagReadOnly, Group: likeGroup, Since: "1.0.0",
			Summary:    "Returns a page of the items a user likes, newest like first, and the next cursor.",
			Complexity: "O(N) where N is the page size", Args: []Arg{biz, user, limit, cursor}, Handler: h.userLikes,
		},
		{
			Name: "LIKE.TOP", Arity: -2, Flags: FlagReadOnly, Group: likeGroup, Since: "1.0.0",
			Summary:    "Returns the leaderboard: the N items with the most likes (all time, or of one UTC day).",
			Complexity: "O(N)", Args: []Arg{biz, {Name: "n", Type: "integer", Optional: true}, day}, Handler: h.top,
		},
		{
			Name: "LIKE.RANK", Arity: -3, Flags: FlagReadOnly, Group: likeGroup, Since: "1.0.0",
			Summary:    "Returns an item's rank and likes on the all-time (or a day's) board; nil when it has no likes.",
			Complexity: "O(S) where S is the number of distinct scores above the item's", Args: []Arg{biz, item, day}, Handler: h.rank,
		},
		{
			Name: "LIKE.RECEIVED", Arity: 2, Flags: FlagReadOnly | FlagFast, Group: likeGroup, Since: "1.0.0",
			Summary:    "Returns the likes an owner's items received, over every business.",
			Complexity: "O(1)", Args: []Arg{{Name: "owner", Type: "integer"}}, Handler: h.received,
		},
		{
			Name: "LIKE.BUSINESS", Arity: -2, Group: likeGroup, Since: "1.0.0",
			Summary: "Business declaration commands.",
			Subcommands: []Command{
				{
					Name: "ADD", Arity: 3, Flags: FlagWrite | FlagAdmin, Group: likeGroup, Since: "1.0.0",
					Summary: "Declares a business (as \"tally business add\", with the default counter shape): LIKE.LIKE " +
						"and LIKE.DISLIKE refuse businesses nobody declared. Declaring one again changes nothing.",
					Complexity: "O(1)", Args: []Arg{biz}, Handler: h.businessAdd,
				},
				{
					Name: "LIST", Arity: 2, Flags: FlagReadOnly, Group: likeGroup, Since: "1.0.0",
					Summary:    "Returns the declared businesses, sorted (as \"tally business list\").",
					Complexity: "O(B) where B is the number of businesses", Handler: h.businessList,
				},
			},
		},
	}
}

func (h *likeHandlers) businessAdd(c *Conn, a [][]byte) {
	if err := h.l.AddBusiness(string(a[2]), likes.BusinessOptions{}); err != nil {
		likeErr(c, err)
		return
	}
	c.WriteOK()
}

func (h *likeHandlers) businessList(c *Conn, _ [][]byte) {
	names := h.l.Businesses()
	c.WriteArray(len(names))
	for _, n := range names {
		c.WriteBulkString(n)
	}
}

type likeHandlers struct {
	l *likes.Likes
}

func likeErr(c *Conn, err error) { c.WriteErr(err) }

// uintArg parses argument a named what, writing the error reply if bad.
func uintArg(c *Conn, a []byte, what string) (uint64, bool) {
	v, ok := parseUint(a)
	if !ok {
		c.WriteError(fmt.Sprintf("ERR %s '%.64s' is not an unsigned decimal integer below 2^64", what, sanitize(a)))
	}
	return v, ok
}

func (h *likeHandlers) transition(c *Conn, a [][]byte, op func(string, uint64, uint64, uint64) (likes.Result, error)) {
	if len(a) > 5 {
		c.WriteError(fmt.Sprintf("ERR wrong number of arguments for '%s' command", strings.ToLower(string(a[0]))))
		return
	}
	item, ok := uintArg(c, a[2], "item")
	if !ok {
		return
	}
	user, ok := uintArg(c, a[3], "user")
	if !ok {
		return
	}
	var owner uint64
	if len(a) == 5 {
		if owner, ok = uintArg(c, a[4], "owner"); !ok {
			return
		}
	}
	res, err := op(string(a[1]), item, user, owner)
	if err != nil {
		likeErr(c, err)
		return
	}
	writeResult(c, res)
}

func writeResult(c *Conn, res likes.Result) {
	c.WriteArray(3)
	c.WriteUint(res.Likes)
	c.WriteUint(res.Dislikes)
	if res.Changed {
		c.WriteInt(1)
	} else {
		c.WriteInt(0)
	}
}

func (h *likeHandlers) setOwner(c *Conn, a [][]byte) {
	item, ok := uintArg(c, a[2], "item")
	if !ok {
		return
	}
	owner, ok := uintArg(c, a[3], "owner")
	if !ok {
		return
	}
	res, err := h.l.SetOwner(string(a[1]), item, owner)
	if err != nil {
		likeErr(c, err)
		return
	}
	writeResult(c, res)
}

// itemArgs parses a list of ids.
func itemArgs(c *Conn, a [][]byte) ([]uint64, bool) {
	if len(a) > likes.MaxStates {
		c.WriteError(fmt.Sprintf("ERR %v: %d items (limit %d)", likes.ErrLimit, len(a), likes.MaxStates))
		return nil, false
	}
	out := make([]uint64, len(a))
	for i, b := range a {
		v, ok := uintArg(c, b, "item")
		if !ok {
			return nil, false
		}
		out[i] = v
	}
	return out, true
}

func (h *likeHandlers) counts(c *Conn, a [][]byte) {
	items, ok := itemArgs(c, a[2:])
	if !ok {
		return
	}
	counts, err := h.l.Counts(string(a[1]), items, nil)
	if err != nil {
		likeErr(c, err)
		return
	}
	c.WriteArray(len(counts))
	for _, n := range counts {
		c.WriteArray(2)
		c.WriteUint(n.Likes)
		c.WriteUint(n.Dislikes)
	}
}

func (h *likeHandlers) states(c *Conn, a [][]byte) {
	user, ok := uintArg(c, a[2], "user")
	if !ok {
		return
	}
	items, ok := itemArgs(c, a[3:])
	if !ok {
		return
	}
	states, err := h.l.States(string(a[1]), user, items, nil)
	if err != nil {
		likeErr(c, err)
		return
	}
	c.WriteArray(len(states))
	for _, s := range states {
		c.WriteBulkString(s.String())
	}
}

// pageOptions parses [LIMIT n] [CURSOR c] and, when allowed, [DISLIKES].
func pageOptions(c *Conn, a [][]byte, allowDislikes bool) (limit int, cursor string, dislikes, ok bool) {
	limit = 100
	for i := 0; i < len(a); i++ {
		switch strings.ToUpper(string(a[i])) {
		case "LIMIT":
			if i+1 == len(a) {
				c.WriteError("ERR syntax error")
				return 0, "", false, false
			}
			n, err := strconv.Atoi(string(a[i+1]))
			if err != nil {
				c.WriteError(msgNotInteger)
				return 0, "", false, false
			}
			limit = n
			i++
		case "CURSOR":
			if i+1 == len(a) {
				c.WriteError("ERR syntax error")
				return 0, "", false, false
			}
			cursor = string(a[i+1])
			i++
		case "DISLIKES":
			if !allowDislikes {
				c.WriteError("ERR syntax error")
				return 0, "", false, false
			}
			dislikes = true
		default:
			c.WriteError("ERR syntax error")
			return 0, "", false, false
		}
	}
	return limit, cursor, dislikes, true
}

func writePage(c *Conn, pg likes.Page) {
	c.WriteArray(2)
	if pg.Next == "" {
		c.WriteNull()
	} else {
		c.WriteBulkString(pg.Next)
	}
	c.WriteArray(len(pg.IDs))
	for _, id := range pg.IDs {
		c.WriteUint(id)
	}
}

func (h *likeHandlers) likers(c *Conn, a [][]byte) {
	item, ok := uintArg(c, a[2], "item")
	if !ok {
		return
	}
	limit, cursor, dislikes, ok := pageOptions(c, a[3:], true)
	if !ok {
		return
	}
	var pg likes.Page
	var err error
	if dislikes {
		pg, err = h.l.Dislikers(string(a[1]), item, limit, cursor)
	} else {
		pg, err = h.l.Likers(string(a[1]), item, limit, cursor)
	}
	if err != nil {
		likeErr(c, err)
		return
	}
	writePage(c, pg)
}

func (h *likeHandlers) userLikes(c *Conn, a [][]byte) {
	user, ok := uintArg(c, a[2], "user")
	if !ok {
		return
	}
	limit, cursor, _, ok := pageOptions(c, a[3:], false)
	if !ok {
		return
	}
	pg, err := h.l.UserLikes(string(a[1]), user, limit, cursor)
	if err != nil {
		likeErr(c, err)
		return
	}
	writePage(c, pg)
}

// dayOption parses an optional trailing DAY yyyy-mm-dd.
func dayOption(c *Conn, a [][]byte) (time.Time, bool, bool) {
	switch {
	case len(a) == 0:
		return time.Time{}, false, true
	case len(a) == 2 && strings.EqualFold(string(a[0]), "DAY"):
		t, err := time.Parse(time.DateOnly, string(a[1]))
		if err != nil {
			c.WriteError(fmt.Sprintf("ERR invalid day '%.32s': want YYYY-MM-DD", sanitize(a[1])))
			return time.Time{}, false, false
		}
		return t, true, true
	}
	c.WriteError("ERR syntax error")
	return time.Time{}, false, false
}

func (h *likeHandlers) top(c *Conn, a [][]byte) {
	n := 10
	rest := a[2:]
	if len(rest)%2 == 1 {
		v, err := strconv.Atoi(string(rest[0]))
		if err != nil {
			c.WriteError(msgNotInteger)
			return
		}
		n, rest = v, rest[1:]
	}
	day, isDay, ok := dayOption(c, rest)
	if !ok {
		return
	}
	var top []likes.Entry
	var err error
	if isDay {
		top, err = h.l.TopDay(string(a[1]), day, n)
	} else {
		top, err = h.l.Top(string(a[1]), n)
	}
	if err != nil {
		likeErr(c, err)
		return
	}
	c.WriteArray(len(top))
	for _, e := range top {
		c.WriteArray(3)
		c.WriteInt(int64(e.Rank))
		c.WriteUint(e.Item)
		c.WriteUint(e.Likes)
	}
}

func (h *likeHandlers) rank(c *Conn, a [][]byte) {
	item, ok := uintArg(c, a[2], "item")
	if !ok {
		return
	}
	day, isDay, ok := dayOption(c, a[3:])
	if !ok {
		return
	}
	var e likes.Entry
	var ranked bool
	var err error
	if isDay {
		e, ranked, err = h.l.RankDay(string(a[1]), day, item)
	} else {
		e, ranked, err = h.l.Rank(string(a[1]), item)
	}
	if err != nil {
		likeErr(c, err)
		return
	}
	if !ranked {
		c.WriteNull()
		return
	}
	c.WriteArray(2)
	c.WriteInt(int64(e.Rank))
	c.WriteUint(e.Likes)
}

func (h *likeHandlers) received(c *Conn, a [][]byte) {
	owner, ok := uintArg(c, a[1], "owner")
	if !ok {
		return
	}
	n, err := h.l.Received(owner)
	if err != nil {
		likeErr(c, err)
		return
	}
	c.WriteUint(n)
}
