package commands

// Timeline commands: package timeline's follow graph, posts, homes and
// configuration. Ids are decimal; the timeline's own rules (timeline.CheckID,
// Edge.Check, CheckLimit: an id of 0 or above 2^63-1, a self-follow, a
// limit outside 0..1000) refuse bad input in Check, before anything is
// opened, with the library's errors ("timeline: bad id ..."); a cursor the
// timeline did not issue, the followee limit and another author's post are
// refused by the library, under the locks its one batch commits with. A
// command of many ids (follow, unfollow, post, unpost) is one timeline call
// (FollowMany, UnfollowMany, PublishMany, UnpublishMany): all of it applies
// or none, whatever other clients do meanwhile (issue 16).
//
//	CLI                               RESP                                  reply
//	--------------------------------  ------------------------------------  ---------------------------------------
//	follow UID FOLLOWEE...            TL.FOLLOW uid followee [followee ...]  "followed N" / integer: new follows
//	unfollow UID FOLLOWEE...          TL.UNFOLLOW uid followee [...]         "unfollowed N" / integer: removed
//	is-following UID FOLLOWEE...      TL.MISFOLLOWING uid followee [...]     "FOLLOWEE yes|no" / array of 1 or 0
//	                                  TL.ISFOLLOWING uid followee            integer: 1 or 0
//	active UID...                     TL.ACTIVE uid [uid ...]                "active N rebuilt M" / integer: rebuilt
//	post AUTHOR POST... [--wait]      TL.POST author post [post ...]         one line / one record per post: post,
//	    [--async]                         [WAIT] [ASYNC]                     status (queued; published: no job, the
//	                                                                         fan-out was in the post's commit or
//	                                                                         nobody is pushed to; duplicate;
//	                                                                         delivered) and, delivered, deliveries
//	unpost AUTHOR POST...             TL.UNPOST author post [post ...]       "POST removed|absent" / bulk per post
//	home UID [--limit N]              TL.HOME uid [LIMIT n] [CURSOR c]       "POST AUTHOR" lines / [next cursor (nil
//	    [--cursor C]                                                         at the end), [[post, author] ...]]
//	followers UID ...                 TL.FOLLOWERS uid [LIMIT n] [CURSOR c]  ids / [next cursor, [id ...]]
//	followees UID ...                 TL.FOLLOWEES uid [LIMIT n] [CURSOR c]  ids, in id order / the same
//	posts AUTHOR ...                  TL.POSTS author [LIMIT n] [CURSOR c]   the author's own post ids, newest first
//	user UID...                       TL.MUSER uid [uid ...]                 "UID followers=N followees=M posts=K" /
//	                                                                         array of the TL.USER replies
//	                                  TL.USER uid                            [followers N followees M posts K]
//	timeline config [--inbox-cap N]   TL.CONFIG [INBOXCAP n]                 "key value" lines / array of every
//	    [--active-window D]               [ACTIVEWINDOW d] [PULLTHRESHOLD n]  option and its value after the change
//	    [--pull-threshold N]              [CHUNKSIZE n]                      (persisted)
//	    [--chunk-size N]
//	timeline expire                   TL.EXPIRE                              "expired N" / integer
//
// A page's lines end with "next CURSOR" (pass it to --cursor / CURSOR) or
// "end"; over RESP the cursor is nil at the end.
//
// post is the one command whose default differs by front end: the CLI
// waits for the fan-outs (its process exits when the command returns, and
// a user at a terminal wants to see the deliveries), RESP returns at the
// commit (a client wants the commit's latency; fan-out is asynchronous in
// every system of the field). --wait / WAIT and --async / ASYNC choose.
// TL.POST WAIT, TL.EXPIRE and the first TL.HOME of a returning user (which
// rebuilds the inbox) take longer than the other commands, which take
// microseconds.
//
// "follows load FILE" reads a local file: it is CLI-only, reached over
// RESP through TALLY.EXEC.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/internal/quote"
	"github.com/tallydb/tally/timeline"
)

const timelineGroup = "timeline"

var (
	// A user is the key of the data about it: its inbox, following list,
	// outbox, follower set, mutes and unread counts live on its slot's
	// shard (the slot of its decimal id).
	pUID       = Param{Name: "uid", Kind: Uint, Key: true}
	pUIDs      = Param{Name: "uid", Kind: Uint, Multiple: true, Key: true}
	pFollowees = Param{Name: "followee", Kind: Uint, Multiple: true}
	pAuthor    = Param{Name: "author", Kind: Uint, Key: true}
	pPosts     = Param{Name: "post", Kind: Uint, Multiple: true}
	pTLLimit   = Param{Name: "limit", Kind: Int, Option: true,
		Help: fmt.Sprintf("entries per page, 1..%d (default %d; 0 means the default)", timeline.MaxLimit, timeline.DefaultLimit)}
)

// errNoTimeline is Run's error on a database opened without its timeline;
// the table opens every command's database writable, which opens it, so
// only a broken host sees it.
var errNoTimeline = errors.New("timeline: not open on this database")

func timelineOf(db *tallydb.DB) (*timeline.Timeline, error) {
	if tl := db.Timeline(); tl != nil {
		return tl, nil
	}
	return nil, errNoTimeline
}

// checkEdges refuses what FollowMany and UnfollowMany would refuse of
// their ids: a bad id, a self-follow (Edge.Check, the library's rule).
func checkEdges(in *Input) error {
	uid := in.Uint("uid")
	for _, f := range in.Uints("followee") {
		if err := (timeline.Edge{Follower: uid, Followee: f}).Check(); err != nil {
			return err
		}
	}
	return nil
}

func checkUsers(in *Input) error { return timeline.CheckID("user", in.Uints("uid")...) }

func checkAuthorPosts(in *Input) error {
	if err := timeline.CheckID("author", in.Uint("author")); err != nil {
		return err
	}
	return timeline.CheckID("post", in.Uints("post")...)
}

// checkPage checks a page read's id (named what) and limit.
func checkPage(what string) func(in *Input) error {
	return func(in *Input) error {
		if err := timeline.CheckID(what, in.Uint(what)); err != nil {
			return err
		}
		// A command's page holds 1..1000 entries, as likes' pages; 0,
		// the Go API's "default", is not a page size a user types.
		if in.Has("limit") && in.Int("limit") == 0 {
			return fmt.Errorf("%w: 0 (want 1..%d; leave the limit out for %d)", timeline.ErrBadLimit, timeline.MaxLimit, timeline.DefaultLimit)
		}
		return timeline.CheckLimit(in.Int("limit"))
	}
}

// pageCommand is a page of ids: followers, followees, a user's posts.
func pageCommand(cli, resp, what, summary, complexity, help string,
	read func(tl *timeline.Timeline, id uint64, cursor string, limit int) (timeline.IDPage, error)) *Command {
	return &Command{
		CLI: cli, RESP: resp, Group: timelineGroup, Mode: Read, Open: OpenWrite,
		Summary: summary, Complexity: complexity, Help: help,
		Params: []Param{{Name: what, Kind: Uint, Key: true}, pTLLimit, pCur},
		Check:  checkPage(what),
		Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
			tl, err := timelineOf(db)
			if err != nil {
				return nil, err
			}
			return read(tl, in.Uint(what), in.String("cursor"), int(in.Int("limit")))
		},
		Text: func(w io.Writer, _ *Input, out any) error {
			p := out.(timeline.IDPage)
			var b strings.Builder
			for _, id := range p.IDs {
				b.WriteString(strconv.FormatUint(id, 10))
				b.WriteByte('\n')
			}
			writeTLNext(&b, p.Cursor, p.NoMore)
			_, err := io.WriteString(w, b.String())
			return err
		},
		Reply: func(w Replier, _ *Input, out any) {
			p := out.(timeline.IDPage)
			w.WriteArray(2)
			replyTLCursor(w, p.Cursor, p.NoMore)
			w.WriteArray(len(p.IDs))
			for _, id := range p.IDs {
				w.WriteUint(id)
			}
		},
	}
}

// writeTLNext ends a timeline page's lines: "next CURSOR", or "end" when
// the list ends with the page.
func writeTLNext(b *strings.Builder, cursor string, noMore bool) {
	if noMore {
		b.WriteString("end\n")
	} else {
		fmt.Fprintf(b, "next %s\n", cursor)
	}
}

// replyTLCursor writes a timeline page's next cursor: nil at the end.
func replyTLCursor(w Replier, cursor string, noMore bool) {
	if noMore {
		w.WriteNull()
	} else {
		w.WriteBulkString(cursor)
	}
}

// followCommand is follow or unfollow: one FollowMany (UnfollowMany),
// which checks every followee, the followee limit included, and commits
// the command in one batch or not at all.
func followCommand(follow bool) *Command {
	cli, resp, done := "unfollow", "TL.UNFOLLOW", "unfollowed"
	summary := "make a user stop following accounts"
	help := `Makes user UID stop following each FOLLOWEE and prints "unfollowed N", the
number of follows removed. Their posts leave UID's home at once. Ids are
checked as for "follow" before anything changes. Over RESP the reply is
the integer N.

Example:
  $ tally -d /var/lib/tally unfollow 1 21
  unfollowed 1
`
	if follow {
		cli, resp, done = "follow", "TL.FOLLOW", "followed"
		summary = "make a user follow accounts (their recent posts show at once)"
		help = `Makes user UID follow each FOLLOWEE and prints "followed N", the number of
new follows (following an account already followed changes nothing). The
followees' recent posts, including older ones, show in UID's home at once;
a background job then merges them into UID's inbox ("tally jobs wait" runs
it now). The command is all or nothing: a malformed id is a usage error; an
id of 0 or above 2^63-1, UID among the FOLLOWEEs, or new follows that would
take UID past 100,000 followees are refused, and nothing is changed. Over
RESP the reply is the integer N.

Example:
  $ tally -d /var/lib/tally follow 1 20 21 22
  followed 3
`
	}
	return &Command{
		CLI: cli, RESP: resp, Group: timelineGroup, Mode: Write, Open: OpenWrite,
		Summary: summary, Complexity: "O(N) where N is the number of followees", Help: help,
		Params: []Param{pUID, pFollowees}, Check: checkEdges,
		Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
			tl, err := timelineOf(db)
			if err != nil {
				return nil, err
			}
			if follow {
				return tl.FollowMany(in.Uint("uid"), in.Uints("followee")...)
			}
			return tl.UnfollowMany(in.Uint("uid"), in.Uints("followee")...)
		},
		Text: func(w io.Writer, _ *Input, out any) error {
			_, err := fmt.Fprintf(w, "%s %d\n", done, out.(int))
			return err
		},
		Reply: func(w Replier, _ *Input, out any) { w.WriteInt(int64(out.(int))) },
	}
}

// pairCommand is mute, unmute, hide or unhide: one Timeline.Mute (Unmute,
// Hide, Unhide), which checks every id and commits in one batch or not at
// all.
func pairCommand(mute, add bool) *Command {
	other := "author"
	if !mute {
		other = "follower"
	}
	var cli, resp, done, summary, help string
	switch {
	case mute && add:
		cli, resp, done = "mute", "TL.MUTE", "muted"
		summary = "stop showing accounts' posts in a user's home (the user keeps following them)"
		help = `Makes user UID mute each AUTHOR and prints "muted N", the number of new
mutes. AUTHOR's posts leave UID's home at once and feed unread stops counting
them; UID keeps following AUTHOR and keeps counting in AUTHOR's followers.
An author need not be followed. The command is all or
nothing: a malformed id is a usage error; an id of 0 or above 2^63-1, or
UID among the AUTHORs, is refused and nothing is changed. Over RESP the
reply is the integer N.

Example:
  $ tally -d /var/lib/tally mute 1 20
  muted 1
`
	case mute:
		cli, resp, done = "unmute", "TL.UNMUTE", "unmuted"
		summary = "show muted accounts' posts in a user's home again"
		help = `Makes user UID stop muting each AUTHOR and prints "unmuted N", the number
of mutes removed. A followed AUTHOR's posts show in UID's home again at
once. Ids are checked as for "mute". Over RESP the reply is the integer N.

Example:
  $ tally -d /var/lib/tally unmute 1 20
  unmuted 1
`
	case add:
		cli, resp, done = "hide", "TL.HIDE", "hidden"
		summary = "stop showing a user's posts in the homes of some of their followers"
		help = `Makes user UID hide their posts from each FOLLOWER and prints "hidden N",
the number of new hides. UID's posts leave FOLLOWER's home at once; the
follow is unchanged. Ids are checked as for "mute". Over RESP the reply is
the integer N.

Example:
  $ tally -d /var/lib/tally hide 20 2
  hidden 1
`
	default:
		cli, resp, done = "unhide", "TL.UNHIDE", "unhidden"
		summary = "show a user's posts to followers they were hidden from again"
		help = `Makes user UID stop hiding their posts from each FOLLOWER and prints
"unhidden N", the number of hides removed. UID's posts show in a following
FOLLOWER's home again at once. Ids are checked as for "mute". Over RESP
the reply is the integer N.

Example:
  $ tally -d /var/lib/tally unhide 20 2
  unhidden 1
`
	}
	return &Command{
		CLI: cli, RESP: resp, Group: timelineGroup, Mode: Write, Open: OpenWrite,
		Summary: summary, Complexity: "O(N) where N is the number of accounts", Help: help,
		Params: []Param{pUID, {Name: other, Kind: Uint, Multiple: true}},
		Check: func(in *Input) error {
			uid := in.Uint("uid")
			if err := timeline.CheckID("user", uid); err != nil {
				return err
			}
			for _, o := range in.Uints(other) {
				if err := timeline.CheckID(other, o); err != nil {
					return err
				}
				if o == uid {
					return fmt.Errorf("%w: user %d", timeline.ErrSelfMute, uid)
				}
			}
			return nil
		},
		Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
			tl, err := timelineOf(db)
			if err != nil {
				return nil, err
			}
			uid, os := in.Uint("uid"), in.Uints(other)
			switch {
			case mute && add:
				return tl.Mute(uid, os...)
			case mute:
				return tl.Unmute(uid, os...)
			case add:
				return tl.Hide(uid, os...)
			}
			return tl.Unhide(uid, os...)
		},
		Text: func(w io.Writer, _ *Input, out any) error {
			_, err := fmt.Fprintf(w, "%s %d\n", done, out.(int))
			return err
		},
		Reply: func(w Replier, _ *Input, out any) { w.WriteInt(int64(out.(int))) },
	}
}

// published is one post's outcome of post.
type published struct {
	post      uint64
	res       timeline.PublishResult
	waited    bool   // the command waited for the fan-out
	delivered uint64 // inboxes the fan-out wrote, when waited
	err       error  // the wait's or the read's failure, when waited
}

// postWaits reports whether post waits for the fan-outs: --wait / WAIT
// says so, --async / ASYNC says not; without either the CLI waits (its
// process exits when the command returns) and RESP does not (a client
// wants the commit's latency).
func postWaits(in *Input) bool { return in.Has("wait") || in.CLI() && !in.Has("async") }

func runPost(ctx context.Context, db *tallydb.DB, in *Input) (any, error) {
	tl, err := timelineOf(db)
	if err != nil {
		return nil, err
	}
	posts := in.Uints("post")
	var opts timeline.PublishOptions
	if in.Has("type") {
		opts = timeline.PublishOptions{Type: postType(in.String("type")), Ref: in.Uint("parent")}
	}
	// One PublishWith: another author's post refuses the whole command,
	// checked atomically with the publish.
	res, err := tl.PublishWith(in.Uint("author"), opts, posts...)
	if err != nil {
		return nil, err
	}
	return waitPublished(ctx, db, tl, in, posts, res)
}

// postType is post's --type (checked by checkPostType).
func postType(s string) timeline.EntryType {
	if strings.EqualFold(s, "reply") {
		return timeline.TypeReply
	}
	return timeline.TypeComment
}

// checkPostType checks post's --type and --parent: both or neither, the
// type comment or reply (a repost is the repost command).
func checkPostType(in *Input) error {
	if in.Has("type") != in.Has("parent") {
		return Usagef("--type and --parent go together")
	}
	if !in.Has("type") {
		return nil
	}
	if s := in.String("type"); !strings.EqualFold(s, "comment") && !strings.EqualFold(s, "reply") {
		return fmt.Errorf("%w: post type %q (want comment or reply; a repost is the repost command)", timeline.ErrInvalidOption, s)
	}
	return timeline.CheckID("parent", in.Uint("parent"))
}

// runRepost is repost's Run: one Repost, then the wait of post.
func runRepost(ctx context.Context, db *tallydb.DB, in *Input) (any, error) {
	tl, err := timelineOf(db)
	if err != nil {
		return nil, err
	}
	res, id, err := tl.Repost(in.Uint("user"), in.Uint("author"), in.Uint("post"), in.Uint("repost"))
	if err != nil {
		return nil, err
	}
	return waitPublished(ctx, db, tl, in, []uint64{id}, []timeline.PublishResult{res})
}

// waitPublished waits for the fan-outs of published posts unless the
// command is asynchronous, and returns post's and repost's result.
func waitPublished(ctx context.Context, db *tallydb.DB, tl *timeline.Timeline, in *Input, posts []uint64, res []timeline.PublishResult) (any, error) {
	wait := postWaits(in)
	out := make([]published, len(posts))
	for i, p := range posts {
		out[i] = published{post: p, res: res[i]}
		if !wait || res[i].Duplicate {
			continue
		}
		// The posts are durable: a failed wait is reported per post, and
		// the fan-out goes on in the job workers.
		out[i].waited = true
		if res[i].Job != 0 {
			if out[i].err = db.Store().WaitJob(ctx, res[i].Job); out[i].err != nil {
				continue
			}
		}
		info, _, err := tl.Post(p)
		out[i].delivered, out[i].err = info.Delivered, err
	}
	return out, nil
}

func textPost(w io.Writer, _ *Input, out any) error {
	var b strings.Builder
	var err error
	for _, p := range out.([]published) {
		switch {
		case p.res.Duplicate:
			fmt.Fprintf(&b, "%d duplicate\n", p.post)
		case !p.waited:
			// NB: "queued" also when there was nobody to push to: the
			// CLI's line since before RESP said "published" for that.
			fmt.Fprintf(&b, "%d queued\n", p.post)
		case p.err != nil:
			err = p.err
		default:
			fmt.Fprintf(&b, "%d delivered %d\n", p.post, p.delivered)
		}
		if err != nil {
			break // the lines up to the first failure, then the failure
		}
	}
	if _, werr := io.WriteString(w, b.String()); err == nil {
		err = werr
	}
	return err
}

func replyPost(w Replier, _ *Input, out any) {
	ps := out.([]published)
	w.WriteArray(len(ps))
	for _, p := range ps {
		status, delivered := "", false
		switch {
		case p.res.Duplicate:
			status = "duplicate"
		case !p.waited && p.res.Job != 0:
			status = "queued"
		case !p.waited:
			status = "published"
		case p.err != nil:
			status = "error: " + p.err.Error()
		default:
			status, delivered = "delivered", true
		}
		if delivered {
			w.WriteMap(3)
		} else {
			w.WriteMap(2)
		}
		w.WriteBulkString("post")
		w.WriteUint(p.post)
		w.WriteBulkString("status")
		w.WriteBulkString(status)
		if delivered {
			w.WriteBulkString("deliveries")
			w.WriteUint(p.delivered)
		}
	}
}

// homeLine is one entry of a home page in the CLI's words: POST AUTHOR,
// then for a typed entry its type and reference.
func homeLine(b *strings.Builder, e timeline.Entry) {
	if e.Type == timeline.TypePost {
		fmt.Fprintf(b, "%d %d\n", e.Post, e.Author)
		return
	}
	fmt.Fprintf(b, "%d %d %s %d %d\n", e.Post, e.Author, e.Type, e.Ref, e.RefAuthor)
}

// isFollowing is is-following's reply: one answer per followee.
type isFollowing []bool

// userInfos is user's reply: one per uid.
type userInfos []timeline.UserInfo

// configOptions are timeline config's options: --inbox-cap is INBOXCAP
// over RESP, and so on.
var configOptions = []Param{
	{Name: "inbox-cap", Kind: Int, Option: true,
		Help: fmt.Sprintf("entries an inbox keeps, 1..%d (default %d)", timeline.MaxInboxCap, timeline.DefaultInboxCap)},
	{Name: "active-window", Kind: String, Option: true,
		Help: "a duration in whole seconds, 1m or more, e.g. 168h (default 168h, 7 days)"},
	{Name: "pull-threshold", Kind: Uint, Option: true,
		Help: fmt.Sprintf("1 or more (default %d)", timeline.DefaultPullThreshold)},
	{Name: "chunk-size", Kind: Int, Option: true, Help: fmt.Sprintf("1..1000000 (default %d)", timeline.DefaultChunkSize)},
}

// checkConfig parses timeline config's options into the change they
// ask for. A zero field of timeline.Config means "keep", so an option
// given as 0 is refused here; every other range is Config.Validate's.
func checkConfig(in *Input) (timeline.Config, error) {
	var c timeline.Config
	zero := func(what string) error {
		return fmt.Errorf("%w: %s 0 (want 1 or more)", timeline.ErrInvalidOption, what)
	}
	if in.Has("inbox-cap") {
		if c.InboxCap = saturate(in.Int("inbox-cap")); c.InboxCap == 0 {
			return c, zero("inbox cap")
		}
	}
	if in.Has("active-window") {
		s := in.String("active-window")
		d, err := time.ParseDuration(s)
		if err != nil {
			return c, Usagef("bad active-window %s: want a duration such as 168h", quote.Input(s))
		}
		if c.ActiveWindow = d; d == 0 {
			return c, zero("active window")
		}
	}
	if in.Has("pull-threshold") {
		if c.PullThreshold = in.Uint("pull-threshold"); c.PullThreshold == 0 {
			return c, zero("pull threshold")
		}
	}
	if in.Has("chunk-size") {
		if c.ChunkSize = saturate(in.Int("chunk-size")); c.ChunkSize == 0 {
			return c, zero("chunk size")
		}
	}
	return c, c.Validate()
}

// saturate converts n to an int, clamping it to int32's range: a value
// past it is out of every option's range all the same, and on a 32-bit
// platform must not wrap into it.
func saturate(n int64) int {
	return int(max(min(n, math.MaxInt32), math.MinInt32))
}

func timelineCommands() []*Command {
	return []*Command{
		followCommand(true),
		followCommand(false),
		pairCommand(true, true),
		pairCommand(true, false),
		pairCommand(false, true),
		pairCommand(false, false),
		{
			CLI: "is-following", RESP: "TL.MISFOLLOWING", RESPOne: "TL.ISFOLLOWING", Group: timelineGroup, Mode: Read,
			Fast: true, Open: OpenWrite,
			Summary:    "whether a user follows accounts (yes or no)",
			Complexity: "O(log N) per followee in the user's followees",
			Params:     []Param{pUID, pFollowees},
			Check: func(in *Input) error {
				if err := timeline.CheckID("user", in.Uint("uid")); err != nil {
					return err
				}
				return timeline.CheckID("followee", in.Uints("followee")...)
			},
			Help: `Prints, per FOLLOWEE, whether user UID follows it:
  FOLLOWEE yes|no
Over RESP, TL.ISFOLLOWING uid followee replies 1 or 0; TL.MISFOLLOWING
(as Redis has SMISMEMBER beside SISMEMBER) an array of them, one per
followee.

Example:
  $ tally -d /var/lib/tally is-following 1 20 21
  20 yes
  21 no
`,
			Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
				tl, err := timelineOf(db)
				if err != nil {
					return nil, err
				}
				fs := in.Uints("followee")
				out := make(isFollowing, len(fs))
				for i, f := range fs {
					if out[i], err = tl.IsFollowing(in.Uint("uid"), f); err != nil {
						return nil, err
					}
				}
				return out, nil
			},
			Text: func(w io.Writer, in *Input, out any) error {
				var b strings.Builder
				for i, yes := range out.(isFollowing) {
					ans := "no"
					if yes {
						ans = "yes"
					}
					fmt.Fprintf(&b, "%d %s\n", in.Uints("followee")[i], ans)
				}
				_, err := io.WriteString(w, b.String())
				return err
			},
			Reply: func(w Replier, _ *Input, out any) {
				ys := out.(isFollowing)
				w.WriteArray(len(ys))
				for _, yes := range ys {
					if yes {
						w.WriteInt(1)
					} else {
						w.WriteInt(0)
					}
				}
			},
		},
		{
			CLI: "active", RESP: "TL.ACTIVE", Group: timelineGroup, Mode: Write, Open: OpenWrite,
			Summary:    "mark users active now (as a read of their home would)",
			Complexity: "O(N) users; a rebuild merges the user's followees' outboxes",
			Params:     []Param{pUIDs}, Check: checkUsers,
			Help: `Records that each UID read their home now, as a home read would: a user
whose inbox is not live (new, or expired after the active window) gets it
rebuilt by pull, and from then on new posts are pushed to them; a live
user's activity is renewed. Prints "active N rebuilt M". Over RESP the
reply is the integer M.

Example:
  $ tally -d /var/lib/tally active 1 2 3
  active 3 rebuilt 2
`,
			Run: func(ctx context.Context, db *tallydb.DB, in *Input) (any, error) {
				tl, err := timelineOf(db)
				if err != nil {
					return nil, err
				}
				return tl.MarkActiveMany(ctx, in.Uints("uid"))
			},
			Text: func(w io.Writer, in *Input, out any) error {
				_, err := fmt.Fprintf(w, "active %d rebuilt %d\n", in.Repeated(), out.(int))
				return err
			},
			Reply: func(w Replier, _ *Input, out any) { w.WriteInt(int64(out.(int))) },
		},
		{
			CLI: "post", RESP: "TL.POST", Group: timelineGroup, Mode: Write, Open: OpenWrite,
			Summary:    "publish posts (the CLI waits for their fan-out and prints deliveries)",
			Complexity: "O(N) posts; waiting adds the fan-outs",
			Params: []Param{pAuthor, pPosts,
				{Name: "wait", Kind: Flag, Option: true, Help: "wait for the fan-outs (the CLI's default)"},
				{Name: "async", Kind: Flag, Option: true, Help: "return once the posts are published (the default over RESP)"},
				{Name: "type", Kind: String, Option: true, Help: "comment or reply: the posts are entries of that type (with --parent)"},
				{Name: "parent", Kind: Uint, Option: true, Help: "the post commented on or replied to (with --type)"}},
			Check: func(in *Input) error {
				if in.Has("wait") && in.Has("async") {
					return Usagef("wait and async exclude each other")
				}
				if err := checkPostType(in); err != nil {
					return err
				}
				return checkAuthorPosts(in)
			},
			Help: `Publishes each POST for AUTHOR: appends it to the author's outbox, counts
it, and queues its fan-out to the inboxes of the author's active followers
(authors above the pull threshold are not pushed: readers merge their
posts at read time). Then it waits for the fan-outs and prints one line per
post:
  POST delivered N     the fan-out wrote N inboxes
  POST duplicate       AUTHOR had published POST already: nothing changed
With --async it returns once the posts are published, printing
"POST queued" (or "POST duplicate"); "tally jobs wait" finishes the
fan-outs. Post ids are unique across authors and time-ordered (snowflake
layout); timelines show them newest first. The command is all or nothing:
every id is checked, atomically with the publish, and a post of another
author refuses the whole command.

With --type comment (or reply) --parent P the posts are comments on (or
replies to) the published post P: home pages show them with their type
and P (filter them with home --types). A host that does not want
comments in homes does not post them here.

Over RESP the default is the other one: TL.POST replies once the posts
are durable, one record per post: [post ID status S] (name/value pairs),
S being queued (fan-out queued), published (no job: a small fan-out
went in the post's own commit, or nobody is pushed to) or duplicate; with WAIT the fan-outs finish first and a post reads [post ID
status delivered deliveries N].

Example:
  $ tally -d /var/lib/tally post 20 1861392847362048 1861392847362049
  1861392847362048 delivered 40211
  1861392847362049 delivered 40211
`,
			Run: runPost, Text: textPost, Reply: replyPost,
		},
		{
			CLI: "repost", RESP: "TL.REPOST", Group: timelineGroup, Mode: Write, Open: OpenWrite,
			Summary:    "repost a post: USER (the reposter) reposts AUTHOR's POST",
			Complexity: "O(1); waiting adds the fan-out",
			Params: []Param{{Name: "user", Kind: Uint, Key: true}, {Name: "author", Kind: Uint}, {Name: "post", Kind: Uint},
				{Name: "repost", Kind: Uint, Optional: true},
				{Name: "wait", Kind: Flag, Option: true, Help: "wait for the fan-out (the CLI's default)"},
				{Name: "async", Kind: Flag, Option: true, Help: "return once the repost is published (the default over RESP)"}},
			Check: func(in *Input) error {
				if in.Has("wait") && in.Has("async") {
					return Usagef("wait and async exclude each other")
				}
				if err := timeline.CheckID("user", in.Uint("user")); err != nil {
					return err
				}
				if err := timeline.CheckID("author", in.Uint("author")); err != nil {
					return err
				}
				if err := timeline.CheckID("post", in.Uint("post")); err != nil {
					return err
				}
				if in.Has("repost") {
					return timeline.CheckID("repost", in.Uint("repost"))
				}
				return nil
			},
			Help: `USER, the reposter, reposts POST, the original, which AUTHOR published.
The repost is a post of USER's with its own id, REPOST (a new time-ordered
id when left out): it counts in USER's posts and is fanned out to USER's
followers like a post (the CLI waits for the fan-out, as post does). Homes
show each original once, at its newest visible instance (the original, or
the newest repost by an account the reader follows and has not muted),
with the reposter as "reposted by"; home lines read
  REPOST USER repost POST AUTHOR
Unpublishing the original removes its reposts from every home at once;
"unpost USER REPOST" takes the repost back. Prints, like post:
  REPOST delivered N | REPOST queued | REPOST duplicate
Refused (nothing written): POST not published, not AUTHOR's, itself a
repost, or REPOST not above POST (ids are time-ordered). Over RESP:
TL.REPOST user author post [repost] [WAIT|ASYNC] replies
[post REPOST status S] as TL.POST does.

Example:
  $ tally -d /var/lib/tally repost 7 20 1861392847362048 1861392990000000
  1861392990000000 delivered 153
`,
			Run: runRepost, Text: textPost, Reply: replyPost,
		},
		{
			CLI: "unpost", RESP: "TL.UNPOST", Group: timelineGroup, Mode: Write, Open: OpenWrite,
			Summary:    "unpublish posts (they leave every home at once)",
			Complexity: "O(N) where N is the number of posts",
			Params:     []Param{pAuthor, pPosts}, Check: checkAuthorPosts,
			Help: `Unpublishes each POST of AUTHOR: removes it from the outbox and the count;
it leaves every home at once, and a background job frees its inbox slots.
Prints one line per post: "POST removed", or "POST absent" when it was
not published. A post of another author is refused, and nothing is
changed. Over RESP: an array of "removed" or "absent".

Example:
  $ tally -d /var/lib/tally unpost 20 1861392847362048
  1861392847362048 removed
`,
			Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
				tl, err := timelineOf(db)
				if err != nil {
					return nil, err
				}
				return tl.UnpublishMany(in.Uint("author"), in.Uints("post")...)
			},
			Text: func(w io.Writer, in *Input, out any) error {
				var b strings.Builder
				for i, r := range out.([]timeline.UnpublishResult) {
					if r.Removed {
						fmt.Fprintf(&b, "%d removed\n", in.Uints("post")[i])
					} else {
						fmt.Fprintf(&b, "%d absent\n", in.Uints("post")[i])
					}
				}
				_, err := io.WriteString(w, b.String())
				return err
			},
			Reply: func(w Replier, _ *Input, out any) {
				rs := out.([]timeline.UnpublishResult)
				w.WriteArray(len(rs))
				for _, r := range rs {
					if r.Removed {
						w.WriteBulkString("removed")
					} else {
						w.WriteBulkString("absent")
					}
				}
			},
		},
		{
			CLI: "home", RESP: "TL.HOME", Group: timelineGroup, Mode: Read, Open: OpenWrite,
			Summary:    "a page of a user's home timeline, newest first",
			Complexity: "O(limit) from the inbox; below its floor O(followees) seeks",
			Params: []Param{pUID, pTLLimit, pCur,
				{Name: "types", Kind: String, Option: true, Help: "entry types to show, comma-separated: post,repost,comment,reply (default all)"}},
			Check: func(in *Input) error {
				if in.Has("types") {
					if _, err := timeline.ParseTypes(in.String("types")); err != nil {
						return err
					}
				}
				return checkPage("uid")(in)
			},
			Help: `Prints a page of UID's home timeline, newest first, one line per entry:
  POST AUTHOR                         a post
  POST AUTHOR TYPE REF REFAUTHOR      a repost (POST by AUTHOR reposts REF
                                      by REFAUTHOR), comment or reply (on REF)
then a last line "next CURSOR" (pass it as --cursor for the next page) or
"end" when the timeline ends with this page. Posts published after a cursor
was printed never shift the pages after it. An unknown user has an empty
home ("end"). The first read of a user whose inbox is not live rebuilds it.
A post reposted by several followees shows once, at the newest repost.
--types post,repost shows only those types (TYPES over RESP); a cursor
continues with any types.
Over RESP: [next cursor (nil at the end), [[post, author] ...]], a typed
entry [post, author, type, ref, refauthor].

Example:
  $ tally -d /var/lib/tally home 1 --limit 2 --types post,repost
  1861392990000000 7 repost 1861392847362048 20
  1861392847362049 20
  next AWgAAAAAAAAAAQAGnPbMhYAB9Kz3mg
`,
			Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
				tl, err := timelineOf(db)
				if err != nil {
					return nil, err
				}
				var opts timeline.HomeOptions
				if in.Has("types") {
					if opts.Types, err = timeline.ParseTypes(in.String("types")); err != nil {
						return nil, err
					}
				}
				return tl.HomeWith(in.Uint("uid"), in.String("cursor"), int(in.Int("limit")), opts)
			},
			Text: func(w io.Writer, _ *Input, out any) error {
				p := out.(timeline.Page)
				var b strings.Builder
				for _, e := range p.Entries {
					homeLine(&b, e)
				}
				writeTLNext(&b, p.Cursor, p.NoMore)
				_, err := io.WriteString(w, b.String())
				return err
			},
			Reply: func(w Replier, _ *Input, out any) {
				p := out.(timeline.Page)
				w.WriteArray(2)
				replyTLCursor(w, p.Cursor, p.NoMore)
				w.WriteArray(len(p.Entries))
				for _, e := range p.Entries {
					if e.Type == timeline.TypePost {
						w.WriteArray(2)
						w.WriteUint(e.Post)
						w.WriteUint(e.Author)
						continue
					}
					w.WriteArray(5)
					w.WriteUint(e.Post)
					w.WriteUint(e.Author)
					w.WriteBulkString(e.Type.String())
					w.WriteUint(e.Ref)
					w.WriteUint(e.RefAuthor)
				}
			},
		},
		{
			CLI: "user", RESP: "TL.MUSER", RESPOne: "TL.USER", Group: timelineGroup, Mode: Read, Fast: true,
			Open:       OpenWrite,
			Summary:    "users' follower, followee and post counts",
			Complexity: "O(N) where N is the number of users",
			Params:     []Param{pUIDs}, Check: checkUsers,
			Help: `Prints one line per UID:
  UID followers=N followees=M posts=K
An unknown user has every count 0. Over RESP, TL.USER uid replies
[followers N followees M posts K] (field/value pairs); TL.MUSER an array
of them, one per uid.

Example:
  $ tally -d /var/lib/tally user 1 20
  1 followers=0 followees=3 posts=0
  20 followers=40211 followees=12 posts=2
`,
			Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
				tl, err := timelineOf(db)
				if err != nil {
					return nil, err
				}
				ids := in.Uints("uid")
				out := make(userInfos, len(ids))
				for i, u := range ids {
					if out[i], err = tl.User(u); err != nil {
						return nil, err
					}
				}
				return out, nil
			},
			Text: func(w io.Writer, _ *Input, out any) error {
				var b strings.Builder
				for _, u := range out.(userInfos) {
					fmt.Fprintf(&b, "%d followers=%d followees=%d posts=%d\n", u.ID, u.Followers, u.Followees, u.Posts)
				}
				_, err := io.WriteString(w, b.String())
				return err
			},
			Reply: func(w Replier, _ *Input, out any) {
				us := out.(userInfos)
				w.WriteArray(len(us))
				for _, u := range us {
					w.WriteMap(3)
					w.WriteBulkString("followers")
					w.WriteUint(u.Followers)
					w.WriteBulkString("followees")
					w.WriteUint(u.Followees)
					w.WriteBulkString("posts")
					w.WriteUint(u.Posts)
				}
			},
		},
		pageCommand("followers", "TL.FOLLOWERS", "uid", "a page of an account's followers", "O(limit)",
			`Prints a page of UID's followers, one id per line, in the order they first
joined the graph, then "next CURSOR" or "end". Over RESP: [next cursor
(nil at the end), [id ...]].

Example:
  $ tally -d /var/lib/tally followers 20 --limit 2
  1
  7
  next AXIAAAAAAAAAFAAAAAAAAAAC7ZUJ3A
`, (*timeline.Timeline).FollowersPage),
		pageCommand("followees", "TL.FOLLOWEES", "uid", "a page of the accounts a user follows, in id order", "O(followees)",
			`Prints a page of the accounts UID follows, one id per line in id order,
then "next CURSOR" or "end". Over RESP: [next cursor (nil at the end),
[id ...]].

Example:
  $ tally -d /var/lib/tally followees 1
  20
  21
  22
  end
`, (*timeline.Timeline).FolloweesPage),
		pageCommand("muted", "TL.MUTED", "uid", "a page of the accounts a user mutes, in id order", "O(limit)",
			`Prints a page of the accounts UID mutes, one id per line in id order,
then "next CURSOR" or "end". Over RESP: [next cursor (nil at the end),
[id ...]].

Example:
  $ tally -d /var/lib/tally muted 1
  20
  end
`, (*timeline.Timeline).MutedPage),
		pageCommand("hidden", "TL.HIDDEN", "uid", "a page of the accounts a user hides their posts from, in id order", "O(limit)",
			`Prints a page of the accounts UID hides their posts from, one id per line
in id order, then "next CURSOR" or "end". Over RESP: [next cursor (nil at
the end), [id ...]].

Example:
  $ tally -d /var/lib/tally hidden 20
  2
  end
`, (*timeline.Timeline).HiddenPage),
		pageCommand("posts", "TL.POSTS", "author", "a page of a user's own posts, newest first", "O(limit)",
			`Prints a page of AUTHOR's own posts (their outbox), one post id per line,
newest first, then "next CURSOR" or "end". Unpublished posts are not
listed. A cursor issued for another list is refused. Over RESP: [next
cursor (nil at the end), [post ...]].

Example:
  $ tally -d /var/lib/tally posts 21 --limit 2
  2003
  2001
  next AXAAAAAAAAAVAAAAAAAAB9Hn5W4j
`, (*timeline.Timeline).PostsPage),
		{
			CLI: "timeline config", RESP: "TL.CONFIG", Group: timelineGroup, Mode: Admin, Open: OpenCreate,
			Summary:    "show or change the timeline's options (creates the store if new)",
			Complexity: "O(1)",
			Params:     configOptions,
			Check: func(in *Input) error {
				_, err := checkConfig(in)
				return err
			},
			Help: `Changes the given options, persisted with the store, and prints every
option as "key value" lines (also shown by "tally stats" as timeline.KEY):
  inbox_cap        entries an inbox keeps (older ones are read by pull)
  active_window    how long after their last home read a user is pushed to
  pull_threshold   followers above which an author's posts are pulled at
                   read time instead of pushed
  chunk_size       inboxes one fan-out batch writes
Creates the store if DIR is new or empty. Over RESP: an array of every
key and its value.

Example:
  $ tally -d /var/lib/tally timeline config --inbox-cap 400
  inbox_cap 400
  active_window 168h0m0s
  pull_threshold 1000000
  chunk_size 1000
`,
			Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
				tl, err := timelineOf(db)
				if err != nil {
					return nil, err
				}
				c, err := checkConfig(in)
				if err != nil {
					return nil, err
				}
				return tl.SetConfig(c)
			},
			Text: func(w io.Writer, _ *Input, out any) error {
				c := out.(timeline.Config)
				_, err := fmt.Fprintf(w, "inbox_cap %d\nactive_window %v\npull_threshold %d\nchunk_size %d\n",
					c.InboxCap, c.ActiveWindow, c.PullThreshold, c.ChunkSize)
				return err
			},
			Reply: func(w Replier, _ *Input, out any) {
				c := out.(timeline.Config)
				w.WriteMap(4)
				w.WriteBulkString("inbox_cap")
				w.WriteInt(int64(c.InboxCap))
				w.WriteBulkString("active_window")
				w.WriteBulkString(c.ActiveWindow.String())
				w.WriteBulkString("pull_threshold")
				w.WriteUint(c.PullThreshold)
				w.WriteBulkString("chunk_size")
				w.WriteInt(int64(c.ChunkSize))
			},
		},
		{
			CLI: "timeline expire", RESP: "TL.EXPIRE", Group: timelineGroup, Mode: Admin, Open: OpenWrite,
			Summary:    "expire inactive users' inboxes now",
			Complexity: "O(active users)",
			Help: `Runs the expiry of inactive inboxes now (tally serve runs it hourly):
users whose last home read is older than the active window leave the push
set and lose their inbox (their next "home" rebuilds it). Prints the
number of users expired:
  expired N
Over RESP the reply is the integer N.

Example:
  $ tally -d /var/lib/tally timeline expire
  expired 1200
`,
			Run: func(ctx context.Context, db *tallydb.DB, _ *Input) (any, error) {
				tl, err := timelineOf(db)
				if err != nil {
					return nil, err
				}
				return tl.Expire(ctx)
			},
			Text: func(w io.Writer, _ *Input, out any) error {
				_, err := fmt.Fprintf(w, "expired %d\n", out.(int64))
				return err
			},
			Reply: func(w Replier, _ *Input, out any) { w.WriteInt(out.(int64)) },
		},
	}
}
