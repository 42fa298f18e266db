package server

import (
	"fmt"
	"strings"
	"time"

	"github.com/tallydb/tally/timeline"
)

// Timeline commands (TL.*): the follow graph, posts and home pages of
// package timeline, mirroring its API and the tally command line. Ids are
// decimal; the timeline's own checks (an id of 0, a self-follow, a cursor
// it did not issue, a limit outside 1..1000) answer with its error text
// ("ERR timeline: ..."), and a refused command changes nothing. A command
// of many ids (TL.FOLLOW, TL.UNFOLLOW, TL.POST, TL.UNPOST) is one timeline
// call (FollowMany, UnfollowMany, PublishMany, UnpublishMany) that checks
// every id, the followee limit (counting only new follows) and the posts'
// owners under the locks its one batch commits with: all of it applies or
// none, whatever other clients do meanwhile (issue 16).
//
//	command                                    reply
//	-----------------------------------------  ----------------------------------------------
//	TL.FOLLOW uid followee [followee ...]      integer: new follows
//	TL.UNFOLLOW uid followee [followee ...]    integer: follows removed
//	TL.ISFOLLOWING uid followee                integer: 1 or 0
//	TL.POST author post [post ...] [WAIT]      array, one bulk per post: "queued" (fan-out
//	                                           queued), "published" (nobody to push to),
//	                                           "duplicate"; with WAIT the fan-outs finish
//	                                           first and a post reads "delivered N"
//	TL.UNPOST author post [post ...]           array, one bulk per post: "removed", "absent"
//	TL.HOME uid [LIMIT n] [CURSOR c]           array: the next cursor (nil at the end), then
//	                                           an array of [post, author] pairs, newest first
//	TL.FOLLOWERS uid [LIMIT n] [CURSOR c]      array: next cursor (nil at the end), ids
//	TL.FOLLOWEES uid [LIMIT n] [CURSOR c]      array: next cursor (nil at the end), ids
//	TL.POSTS uid [LIMIT n] [CURSOR c]          the same, of the user's own posts, newest first
//	TL.USER uid                                array: followers N followees M posts K
//	TL.ACTIVE uid [uid ...]                    integer: inboxes rebuilt
//	TL.CONFIG [INBOXCAP n] [ACTIVEWINDOW d]    array: every option and its value after the
//	    [PULLTHRESHOLD n] [CHUNKSIZE n]        change (persisted)
//	TL.EXPIRE                                  integer: users whose inbox expired
//
// TL.POST without WAIT and TL.UNPOST return once the posts are durable;
// their fan-outs run in the store's job workers. TL.POST WAIT, TL.EXPIRE
// and the first TL.HOME of a returning user (which rebuilds the inbox)
// take longer than the other commands, which take microseconds.

// TimelineCommands returns the TL.* group on tl, for Server.Register.
func TimelineCommands(tl *timeline.Timeline) []Command {
	t := &tlCommands{tl: tl}
	const g = "timeline"
	const since = "0.1.0"
	uid := Arg{Name: "uid", Type: "integer"}
	page := []Arg{uid, {Name: "limit", Type: "integer", Token: "LIMIT", Optional: true}, {Name: "cursor", Type: "string", Token: "CURSOR", Optional: true}}
	return []Command{
		{Name: "TL.FOLLOW", Arity: -3, Flags: FlagWrite, Group: g, Since: since, Complexity: "O(N) where N is the number of followees",
			Summary: "Makes a user follow accounts; returns the number of new follows. Their recent posts show in the user's home at once.",
			Args:    []Arg{uid, {Name: "followee", Type: "integer", Multiple: true}}, Handler: t.follow(true)},
		{Name: "TL.UNFOLLOW", Arity: -3, Flags: FlagWrite, Group: g, Since: since, Complexity: "O(N) where N is the number of followees",
			Summary: "Makes a user stop following accounts; returns the number of follows removed.",
			Args:    []Arg{uid, {Name: "followee", Type: "integer", Multiple: true}}, Handler: t.follow(false)},
		{Name: "TL.ISFOLLOWING", Arity: 3, Flags: FlagReadOnly | FlagFast, Group: g, Since: since, Complexity: "O(log N) in the user's followees",
			Summary: "Returns 1 if the user follows the account, else 0.",
			Args:    []Arg{uid, {Name: "followee", Type: "integer"}}, Handler: t.isFollowing},
		{Name: "TL.POST", Arity: -3, Flags: FlagWrite, Group: g, Since: since, Complexity: "O(N) posts; WAIT adds the fan-outs",
			Summary: "Publishes posts of an author (their fan-out is queued); one status per post. WAIT waits for the fan-outs.",
			Args: []Arg{{Name: "author", Type: "integer"}, {Name: "post", Type: "integer", Multiple: true},
				{Name: "wait", Type: "pure-token", Token: "WAIT", Optional: true}}, Handler: t.post},
		{Name: "TL.UNPOST", Arity: -3, Flags: FlagWrite, Group: g, Since: since, Complexity: "O(N) where N is the number of posts",
			Summary: "Unpublishes posts of an author; they leave every home at once. One status per post.",
			Args:    []Arg{{Name: "author", Type: "integer"}, {Name: "post", Type: "integer", Multiple: true}}, Handler: t.unpost},
		{Name: "TL.HOME", Arity: -2, Flags: FlagReadOnly, Group: g, Since: since, Complexity: "O(limit) from the inbox; below its floor O(followees) seeks",
			Summary: "Returns a page of a user's home timeline, newest first: the next cursor (nil at the end) and [post, author] pairs.",
			Args:    page, Handler: t.home},
		{Name: "TL.FOLLOWERS", Arity: -2, Flags: FlagReadOnly, Group: g, Since: since, Complexity: "O(limit)",
			Summary: "Returns a page of an account's followers: the next cursor (nil at the end) and the ids.",
			Args:    page, Handler: t.idPage(tl.FollowersPage)},
		{Name: "TL.FOLLOWEES", Arity: -2, Flags: FlagReadOnly, Group: g, Since: since, Complexity: "O(followees)",
			Summary: "Returns a page of the accounts a user follows, in id order: the next cursor (nil at the end) and the ids.",
			Args:    page, Handler: t.idPage(tl.FolloweesPage)},
		{Name: "TL.POSTS", Arity: -2, Flags: FlagReadOnly, Group: g, Since: since, Complexity: "O(limit)",
			Summary: "Returns a page of a user's own posts, newest first (unpublished ones left out): the next cursor " +
				"(nil at the end) and the post ids.",
			Args: page, Handler: t.idPage(tl.PostsPage)},
		{Name: "TL.USER", Arity: 2, Flags: FlagReadOnly | FlagFast, Group: g, Since: since, Complexity: "O(1)",
			Summary: "Returns a user's counts: followers, followees and posts, as field/value pairs.",
			Args:    []Arg{uid}, Handler: t.user},
		{Name: "TL.ACTIVE", Arity: -2, Flags: FlagWrite, Group: g, Since: since, Complexity: "O(N) users; a rebuild merges the user's followees' outboxes",
			Summary: "Marks users active now, as a home read would (expired inboxes are rebuilt); returns the inboxes rebuilt.",
			Args:    []Arg{{Name: "uid", Type: "integer", Multiple: true}}, Handler: t.active},
		{Name: "TL.CONFIG", Arity: -1, Flags: FlagAdmin, Group: g, Since: since, Complexity: "O(1)",
			Summary: "Changes the given timeline options (persisted) and returns every option with its value.",
			Args: []Arg{{Name: "inboxcap", Type: "integer", Token: "INBOXCAP", Optional: true},
				{Name: "activewindow", Type: "string", Token: "ACTIVEWINDOW", Optional: true},
				{Name: "pullthreshold", Type: "integer", Token: "PULLTHRESHOLD", Optional: true},
				{Name: "chunksize", Type: "integer", Token: "CHUNKSIZE", Optional: true}}, Handler: t.config},
		{Name: "TL.EXPIRE", Arity: 1, Flags: FlagWrite | FlagAdmin, Group: g, Since: since, Complexity: "O(active users)",
			Summary: "Runs the expiry of inactive users' inboxes now; returns the users expired.",
			Handler: t.expire},
	}
}

type tlCommands struct {
	tl *timeline.Timeline
}

// ids parses decimal ids, writing the error reply for a bad one.
func tlIDs(c *Conn, args [][]byte) ([]uint64, bool) {
	out := make([]uint64, len(args))
	for i, a := range args {
		v, ok := parseUint(a)
		if !ok {
			c.writeError(fmt.Sprintf("ERR invalid id '%.64s': want a decimal integer below 2^64", sanitize(a)))
			return nil, false
		}
		out[i] = v
	}
	return out, true
}

// tlCheck answers the first out-of-range id before anything is done, by
// the timeline's own rule (timeline.CheckID).
func tlCheck(c *Conn, ids ...uint64) bool {
	if err := timeline.CheckID("", ids...); err != nil {
		c.WriteErr(err)
		return false
	}
	return true
}

// follow is TL.FOLLOW and TL.UNFOLLOW: one FollowMany or UnfollowMany,
// which checks every followee (ids, self-follows, the followee limit) and
// commits the whole command in one batch, or refuses it whole.
func (t *tlCommands) follow(follow bool) Handler {
	return func(c *Conn, args [][]byte) {
		ids, ok := tlIDs(c, args[1:])
		if !ok || !tlCheck(c, ids...) {
			return
		}
		var n int
		var err error
		if follow {
			n, err = t.tl.FollowMany(ids[0], ids[1:]...)
		} else {
			n, err = t.tl.UnfollowMany(ids[0], ids[1:]...)
		}
		if err != nil {
			c.WriteErr(err)
			return
		}
		c.WriteInt(int64(n))
	}
}

func (t *tlCommands) isFollowing(c *Conn, args [][]byte) {
	ids, ok := tlIDs(c, args[1:])
	if !ok {
		return
	}
	yes, err := t.tl.IsFollowing(ids[0], ids[1])
	if err != nil {
		c.WriteErr(err)
		return
	}
	if yes {
		c.WriteInt(1)
	} else {
		c.WriteInt(0)
	}
}

func (t *tlCommands) post(c *Conn, args [][]byte) {
	wait := false
	if last := args[len(args)-1]; strings.EqualFold(string(last), "WAIT") {
		wait = true
		args = args[:len(args)-1]
		if len(args) < 3 {
			c.writeError("ERR wrong number of arguments for 'tl.post' command")
			return
		}
	}
	ids, ok := tlIDs(c, args[1:])
	if !ok || !tlCheck(c, ids...) {
		return
	}
	author, posts := ids[0], ids[1:]
	// One PublishMany: another author's post refuses the whole command,
	// checked atomically with the publish.
	res, err := t.tl.PublishMany(author, posts...)
	if err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteArray(len(posts))
	for i, p := range posts {
		r := res[i]
		switch {
		case r.Duplicate:
			c.WriteBulkString("duplicate")
		case !wait && r.Job != 0:
			c.WriteBulkString("queued")
		case !wait:
			c.WriteBulkString("published")
		default:
			if r.Job != 0 {
				if err := t.tl.DB().WaitJob(c.Context(), r.Job); err != nil {
					c.WriteBulkString("error: " + err.Error())
					continue
				}
			}
			info, _, err := t.tl.Post(p)
			if err != nil {
				c.WriteBulkString("error: " + err.Error())
				continue
			}
			c.WriteBulkString(fmt.Sprintf("delivered %d", info.Delivered))
		}
	}
}

func (t *tlCommands) unpost(c *Conn, args [][]byte) {
	ids, ok := tlIDs(c, args[1:])
	if !ok || !tlCheck(c, ids...) {
		return
	}
	res, err := t.tl.UnpublishMany(ids[0], ids[1:]...)
	if err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteArray(len(res))
	for _, r := range res {
		if r.Removed {
			c.WriteBulkString("removed")
		} else {
			c.WriteBulkString("absent")
		}
	}
}

// pageArgs parses uid [LIMIT n] [CURSOR c].
func pageArgs(c *Conn, args [][]byte) (uid uint64, limit int, cursor string, ok bool) {
	uid, ok = parseUint(args[1])
	if !ok {
		c.writeError(fmt.Sprintf("ERR invalid id '%.64s': want a decimal integer below 2^64", sanitize(args[1])))
		return 0, 0, "", false
	}
	limit = timeline.DefaultLimit
	rest := args[2:]
	for len(rest) > 0 {
		if len(rest) < 2 {
			c.writeError("ERR syntax error")
			return 0, 0, "", false
		}
		switch strings.ToUpper(string(rest[0])) {
		case "LIMIT":
			v, ok := parseInt(rest[1])
			if !ok || v < -1<<31 || v > 1<<31 {
				c.writeError(fmt.Sprintf("ERR invalid limit '%.64s': want an integer", sanitize(rest[1])))
				return 0, 0, "", false
			}
			if v <= 0 || v > timeline.MaxLimit {
				c.WriteErr(fmt.Errorf("%w: LIMIT %d (want 1..%d)", timeline.ErrBadLimit, v, timeline.MaxLimit))
				return 0, 0, "", false
			}
			limit = int(v)
		case "CURSOR":
			cursor = string(rest[1])
		default:
			c.writeError("ERR syntax error")
			return 0, 0, "", false
		}
		rest = rest[2:]
	}
	return uid, limit, cursor, true
}

func writeCursor(c *Conn, cursor string, noMore bool) {
	if noMore {
		c.WriteNull()
	} else {
		c.WriteBulkString(cursor)
	}
}

func (t *tlCommands) home(c *Conn, args [][]byte) {
	uid, limit, cursor, ok := pageArgs(c, args)
	if !ok {
		return
	}
	p, err := t.tl.Home(uid, cursor, limit)
	if err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteArray(2)
	writeCursor(c, p.Cursor, p.NoMore)
	c.WriteArray(len(p.Entries))
	for _, e := range p.Entries {
		c.WriteArray(2)
		c.WriteUint(e.Post)
		c.WriteUint(e.Author)
	}
}

// idPage is the handler of a page of ids: page is the timeline's method
// (FollowersPage, FolloweesPage, PostsPage).
func (t *tlCommands) idPage(page func(uint64, string, int) (timeline.IDPage, error)) Handler {
	return func(c *Conn, args [][]byte) {
		uid, limit, cursor, ok := pageArgs(c, args)
		if !ok {
			return
		}
		p, err := page(uid, cursor, limit)
		if err != nil {
			c.WriteErr(err)
			return
		}
		c.WriteArray(2)
		writeCursor(c, p.Cursor, p.NoMore)
		c.WriteArray(len(p.IDs))
		for _, id := range p.IDs {
			c.WriteUint(id)
		}
	}
}

func (t *tlCommands) user(c *Conn, args [][]byte) {
	ids, ok := tlIDs(c, args[1:])
	if !ok {
		return
	}
	u, err := t.tl.User(ids[0])
	if err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteArray(6)
	c.WriteBulkString("followers")
	c.WriteUint(u.Followers)
	c.WriteBulkString("followees")
	c.WriteUint(u.Followees)
	c.WriteBulkString("posts")
	c.WriteUint(u.Posts)
}

func (t *tlCommands) active(c *Conn, args [][]byte) {
	ids, ok := tlIDs(c, args[1:])
	if !ok || !tlCheck(c, ids...) {
		return
	}
	n, err := t.tl.MarkActiveMany(c.Context(), ids)
	if err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteInt(int64(n))
}

func (t *tlCommands) config(c *Conn, args [][]byte) {
	var cfg timeline.Config
	rest := args[1:]
	for len(rest) > 0 {
		if len(rest) < 2 {
			c.writeError("ERR syntax error")
			return
		}
		opt, val := strings.ToUpper(string(rest[0])), rest[1]
		rest = rest[2:]
		if opt == "ACTIVEWINDOW" {
			d, err := time.ParseDuration(string(val))
			if err != nil || d <= 0 {
				c.WriteErr(fmt.Errorf("%w: ACTIVEWINDOW '%.64s' (want a duration such as 168h)", timeline.ErrInvalidOption, sanitize(val)))
				return
			}
			cfg.ActiveWindow = d
			continue
		}
		v, ok := parseUint(val)
		if !ok || v == 0 || v > 1<<40 {
			c.WriteErr(fmt.Errorf("%w: %s '%.64s' (want a positive integer)", timeline.ErrInvalidOption, opt, sanitize(val)))
			return
		}
		switch opt {
		case "INBOXCAP":
			cfg.InboxCap = int(v)
		case "PULLTHRESHOLD":
			cfg.PullThreshold = v
		case "CHUNKSIZE":
			cfg.ChunkSize = int(v)
		default:
			c.writeError("ERR syntax error")
			return
		}
	}
	got, err := t.tl.SetConfig(cfg)
	if err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteArray(8)
	c.WriteBulkString("inbox_cap")
	c.WriteInt(int64(got.InboxCap))
	c.WriteBulkString("active_window")
	c.WriteBulkString(got.ActiveWindow.String())
	c.WriteBulkString("pull_threshold")
	c.WriteUint(got.PullThreshold)
	c.WriteBulkString("chunk_size")
	c.WriteInt(int64(got.ChunkSize))
}

func (t *tlCommands) expire(c *Conn, _ [][]byte) {
	n, err := t.tl.Expire(c.Context())
	if err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteInt(n)
}
