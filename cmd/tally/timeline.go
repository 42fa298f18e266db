package main

// Timeline commands: follow graph, posts, homes and the timeline's
// configuration (package timeline).

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tallydb/tally/internal/quote"
	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/timeline"
)

var cmdFollow = &command{
	name:     "follow",
	synopsis: "make a user follow accounts (their recent posts show at once)",
	help: `Usage: tally -d DIR follow UID FOLLOWEE...

Makes user UID follow each FOLLOWEE and prints "followed N", the number of
new follows (following an account already followed changes nothing). The
followees' recent posts, including older ones, show in UID's home at once;
a background job then merges them into UID's inbox ("tally jobs wait" runs
it now). The command is all or nothing: a malformed id is a usage error; an
id of 0 or above 2^63-1, UID among the FOLLOWEEs, or new follows that would
take UID past 100,000 followees are refused, and nothing is changed.

Example:
  $ tally -d /var/lib/tally follow 1 20 21 22
  followed 3
`,
}

var cmdUnfollow = &command{
	name:     "unfollow",
	synopsis: "make a user stop following accounts",
	help: `Usage: tally -d DIR unfollow UID FOLLOWEE...

Makes user UID stop following each FOLLOWEE and prints "unfollowed N", the
number of follows removed. Their posts leave UID's home at once. Ids are
checked as for "follow" before anything changes.

Example:
  $ tally -d /var/lib/tally unfollow 1 21
  unfollowed 1
`,
}

var cmdFollowsLoad = &command{
	name:     "follows load",
	synopsis: "bulk-load follows from a CSV file of follower,followee lines",
	help: `Usage: tally -d DIR follows load FILE [--skip-bad]

Loads the follows of FILE, CSV without a header, one per line:
  FOLLOWER,FOLLOWEE
"-" reads standard input. Blank lines and lines starting with # are ignored.
Follows that exist already and repeated lines count once. Active followers'
inboxes are dropped and rebuilt on their next read (one rebuild instead of
one backfill per follow).

Bad lines (not two fields, an id that is not a decimal number, 0 or above
2^63-1, a self-follow) are reported on stderr as "tally: FILE:LINE: what is
wrong", the first 20 of them, then a count. Without --skip-bad any bad line
means nothing is loaded (exit 1); with it the good lines are loaded. A load
that would take a user past 100,000 followees is refused (exit 1) and
loads nothing, with or without --skip-bad.

On a terminal a progress bar shows the load. Prints "key value" lines:
  edges        good lines read
  added        new follows
  existing     follows already present, or repeated
  users        users who joined the graph
  expired      active followers whose inbox will be rebuilt
  bad_lines    lines skipped as bad
  seconds      wall time, 3 decimals

Flags:
  --skip-bad   load the good lines even if some are bad

Example:
  $ tally -d /var/lib/tally follows load follows.csv
  edges 2000000
  added 1999210
  existing 790
  users 100000
  expired 0
  bad_lines 0
  seconds 3.512
`,
}

var cmdActive = &command{
	name:     "active",
	synopsis: "mark users active now (as a read of their home would)",
	help: `Usage: tally -d DIR active UID...

Records that each UID read their home now, as a home read would: a user
whose inbox is not live (new, or expired after the active window) gets it
rebuilt by pull, and from then on new posts are pushed to them; a live
user's activity is renewed. Prints "active N rebuilt M".

Example:
  $ tally -d /var/lib/tally active 1 2 3
  active 3 rebuilt 2
`,
}

var cmdPost = &command{
	name:     "post",
	synopsis: "publish posts and wait for their fan-out (prints deliveries)",
	help: `Usage: tally -d DIR post AUTHOR POSTID... [--async]

Publishes each POSTID for AUTHOR: appends it to the author's outbox, counts
it, and queues its fan-out to the inboxes of the author's active followers
(authors above the pull threshold are not pushed: readers merge their
posts at read time). Then it waits for the fan-outs and prints one line per
post:
  POSTID delivered N     the fan-out wrote N inboxes
  POSTID duplicate       AUTHOR had published POSTID already: nothing changed
With --async it returns once the posts are published, printing
"POSTID queued" (or "POSTID duplicate"); "tally jobs wait" finishes the
fan-outs. Post ids are unique across authors and time-ordered (snowflake
layout); timelines show them newest first. The command is all or nothing:
every id is checked, atomically with the publish, and a post of another
author refuses the whole command.

Flags:
  --async   do not wait for the fan-outs

Example:
  $ tally -d /var/lib/tally post 20 1861392847362048 1861392847362049
  1861392847362048 delivered 40211
  1861392847362049 delivered 40211
`,
}

var cmdUnpost = &command{
	name:     "unpost",
	synopsis: "unpublish posts (they leave every home at once)",
	help: `Usage: tally -d DIR unpost AUTHOR POSTID...

Unpublishes each POSTID of AUTHOR: removes it from the outbox and the
count; it leaves every home at once, and a background job frees its inbox
slots. Prints one line per post: "POSTID removed", or "POSTID absent" when
it was not published. A post of another author is refused, and nothing is
changed.

Example:
  $ tally -d /var/lib/tally unpost 20 1861392847362048
  1861392847362048 removed
`,
}

var cmdHome = &command{
	name:     "home",
	synopsis: "print a page of a user's home timeline",
	help: `Usage: tally -d DIR home UID [--limit N] [--cursor C]

Prints a page of UID's home timeline, newest first, one line per entry:
  POSTID AUTHOR
then a last line "next CURSOR" (pass it as --cursor for the next page) or
"end" when the timeline ends with this page. Posts published after a cursor
was printed never shift the pages after it. An unknown user has an empty
home ("end"). The first read of a user whose inbox is not live rebuilds it.

Flags:
  --limit N    entries per page, 1..1000 (default 20)
  --cursor C   continue after the page that printed "next C"

Example:
  $ tally -d /var/lib/tally home 1 --limit 2
  1861392847362049 20
  1861392847362048 20
  next AWgAAAAAAAAAAQAGnPbMhYAB9Kz3mg
`,
}

var cmdUser = &command{
	name:     "user",
	synopsis: "print users' follower, followee and post counts",
	help: `Usage: tally -d DIR user UID...

Prints one line per UID:
  UID followers=N followees=M posts=K
An unknown user has every count 0.

Example:
  $ tally -d /var/lib/tally user 1 20
  1 followers=0 followees=3 posts=0
  20 followers=40211 followees=12 posts=2
`,
}

var cmdFollowers = &command{
	name:     "followers",
	synopsis: "print a page of an account's followers",
	help: `Usage: tally -d DIR followers UID [--limit N] [--cursor C]

Prints a page of UID's followers, one id per line, in the order they first
joined the graph, then "next CURSOR" or "end".

Flags:
  --limit N    ids per page, 1..1000 (default 20)
  --cursor C   continue after the page that printed "next C"

Example:
  $ tally -d /var/lib/tally followers 20 --limit 2
  1
  7
  next AXIAAAAAAAAAFAAAAAAAAAAC7ZUJ3A
`,
}

var cmdFollowees = &command{
	name:     "followees",
	synopsis: "print a page of the accounts a user follows",
	help: `Usage: tally -d DIR followees UID [--limit N] [--cursor C]

Prints a page of the accounts UID follows, one id per line in id order,
then "next CURSOR" or "end".

Flags:
  --limit N    ids per page, 1..1000 (default 20)
  --cursor C   continue after the page that printed "next C"

Example:
  $ tally -d /var/lib/tally followees 1
  20
  21
  22
  end
`,
}

var cmdPosts = &command{
	name:     "posts",
	synopsis: "print a page of a user's own posts, newest first",
	help: `Usage: tally -d DIR posts AUTHOR [--limit N] [--cursor C]

Prints a page of AUTHOR's own posts (their outbox; the CLI form of
TL.POSTS), one post id per line, newest first, then "next CURSOR" or
"end". Unpublished posts are not listed. A cursor issued for another
list is refused.

Flags:
  --limit N    ids per page, 1..1000 (default 20)
  --cursor C   continue after the page that printed "next C"

Example:
  $ tally -d /var/lib/tally posts 21 --limit 2
  2003
  2001
  next AXAAAAAAAAAVAAAAAAAAB9Hn5W4j
`,
}

var cmdIsFollowing = &command{
	name:     "is-following",
	synopsis: "whether a user follows accounts (yes or no)",
	help: `Usage: tally -d DIR is-following UID FOLLOWEE...

Prints, per FOLLOWEE, whether user UID follows it (the CLI form of
TL.ISFOLLOWING):
  FOLLOWEE yes|no

Example:
  $ tally -d /var/lib/tally is-following 1 20 21
  20 yes
  21 no
`,
}

var cmdTimelineExpire = &command{
	name:     "timeline expire",
	synopsis: "expire inactive users' inboxes now",
	help: `Usage: tally -d DIR timeline expire

Runs the expiry of inactive inboxes now (tally serve runs it hourly; the
CLI form of TL.EXPIRE): users whose last home read is older than the
active window leave the push set and lose their inbox (their next "home"
rebuilds it). Prints the number of users expired:
  expired N

Example:
  $ tally -d /var/lib/tally timeline expire
  expired 1200
`,
}

var cmdTimelineConfig = &command{
	name:     "timeline config",
	synopsis: "show or change the timeline's options (creates the store if new)",
	help: `Usage: tally -d DIR timeline config [--inbox-cap N] [--active-window D]
           [--pull-threshold N] [--chunk-size N]

Changes the given options, persisted with the store, and prints every
option as "key value" lines (also shown by "tally stats" as timeline.KEY):
  inbox_cap        entries an inbox keeps (older ones are read by pull)
  active_window    how long after their last home read a user is pushed to
  pull_threshold   followers above which an author's posts are pulled at
                   read time instead of pushed
  chunk_size       inboxes one fan-out batch writes
Creates the store if DIR is new or empty.

Flags:
  --inbox-cap N        1..100000 (default 800)
  --active-window D    a duration in whole seconds, 1m or more, e.g. 168h
                       (default 168h, 7 days)
  --pull-threshold N   1 or more (default 1000000)
  --chunk-size N       1..1000000 (default 1000)

Example:
  $ tally -d /var/lib/tally timeline config --inbox-cap 400
  inbox_cap 400
  active_window 168h0m0s
  pull_threshold 1000000
  chunk_size 1000
`,
}

func init() {
	cmdFollow.run = func(e *env, args []string) error { return runFollow(e, cmdFollow, args, true) }
	cmdUnfollow.run = func(e *env, args []string) error { return runFollow(e, cmdUnfollow, args, false) }
	cmdFollowsLoad.run = runFollowsLoad
	cmdActive.run = runActive
	cmdPost.run = runPost
	cmdUnpost.run = runUnpost
	cmdHome.run = runHome
	cmdUser.run = runUser
	cmdFollowers.run = func(e *env, args []string) error { return runIDPage(e, cmdFollowers, args) }
	cmdFollowees.run = func(e *env, args []string) error { return runIDPage(e, cmdFollowees, args) }
	cmdTimelineConfig.run = runTimelineConfig
	cmdTimelineExpire.run = runTimelineExpire
	cmdIsFollowing.run = runIsFollowing
	cmdPosts.run = func(e *env, args []string) error { return runIDPage(e, cmdPosts, args) }
}

// withTimeline opens the store and the timeline, runs fn, and closes both.
// Unread is opened on the timeline too (openGraph), so its observer sees
// the follows and unfollows fn makes: the feed snapshots must agree with
// the graph.
func (e *env) withTimeline(create bool, fn func(*store.DB, *timeline.Timeline) error) error {
	g, err := e.openGraph(create)
	if err != nil {
		return err
	}
	return g.close(fn(g.db, g.tl))
}

// parseIDs parses decimal user or post ids (a malformed one is a usage
// error; the range is the timeline's to check).
func parseIDs(what string, args []string) ([]uint64, error) {
	out := make([]uint64, len(args))
	for i, a := range args {
		v, err := parseUint(what, a)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// parseUserFollowees parses "UID FOLLOWEE..." and checks the ids by the
// timeline's rule: UID first.
func parseUserFollowees(e *env, c *command, args []string) ([]uint64, error) {
	pos, err := parse(e.flags(c), args, true)
	if err != nil {
		return nil, err
	}
	if len(pos) < 2 {
		return nil, usagef("want UID and at least one FOLLOWEE, got %d arguments", len(pos))
	}
	ids, err := parseIDs("id", pos)
	if err != nil {
		return nil, err
	}
	return ids, timeline.CheckID("user", ids...)
}

func runFollow(e *env, c *command, args []string, follow bool) error {
	ids, err := parseUserFollowees(e, c, args)
	if err != nil {
		return err
	}
	for _, f := range ids[1:] { // refused before the store opens, by the library's rule
		if err := (timeline.Edge{Follower: ids[0], Followee: f}).Check(); err != nil {
			return err
		}
	}
	// One FollowMany (UnfollowMany): every followee is checked, the
	// followee limit included, and the command commits in one batch or
	// not at all.
	return e.withTimeline(false, func(_ *store.DB, tl *timeline.Timeline) error {
		if follow {
			n, err := tl.FollowMany(ids[0], ids[1:]...)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "followed %d\n", n)
			return nil
		}
		n, err := tl.UnfollowMany(ids[0], ids[1:]...)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "unfollowed %d\n", n)
		return nil
	})
}

func runFollowsLoad(e *env, args []string) error {
	fs := e.flags(cmdFollowsLoad)
	skipBad := fs.Bool("skip-bad", false, "")
	pos, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want FILE (or - for stdin), got %d arguments", len(pos))
	}
	src, err := e.openInput(pos[0])
	if err != nil {
		return err
	}
	defer src.Close()
	in, shown := src.r, src.name
	if _, err := e.options(); err != nil {
		return err
	}
	start := time.Now()
	res, err := parseFollows(in)
	if err != nil {
		return fmt.Errorf("read %s: %w", shown, err)
	}
	if err := res.report(e, shown, "follows load", *skipBad); err != nil {
		return err
	}
	ctx, stop := e.interruptContext()
	defer stop()
	return e.withTimeline(false, func(_ *store.DB, tl *timeline.Timeline) error {
		bar := newProgress(e.stdout, "loading", "edges", int64(len(res.edges)))
		st, err := tl.LoadFollows(ctx, res.edges, func(done int) { bar.update(int64(done)) })
		bar.finish()
		if err != nil {
			return err
		}
		w := e.stdout
		fmt.Fprintf(w, "edges %d\n", st.Edges)
		fmt.Fprintf(w, "added %d\n", st.Added)
		fmt.Fprintf(w, "existing %d\n", st.Existing)
		fmt.Fprintf(w, "users %d\n", st.Users)
		fmt.Fprintf(w, "expired %d\n", st.Expired)
		fmt.Fprintf(w, "bad_lines %d\n", res.nbad)
		fmt.Fprintf(w, "seconds %.3f\n", time.Since(start).Seconds())
		return nil
	})
}

// followsInput is a parsed follows CSV.
type followsInput struct {
	edges []timeline.Edge
	badLines
}

// parseFollows reads "follower,followee" lines.
func parseFollows(r io.Reader) (*followsInput, error) {
	res := &followsInput{}
	err := res.scan(bufio.NewReaderSize(r, 1<<20), func(int64) {}, func(b []byte) {
		s := bytes.TrimSpace(b)
		if len(s) == 0 || s[0] == '#' {
			return
		}
		a, c, ok := bytes.Cut(s, []byte{','})
		if !ok || bytes.IndexByte(c, ',') >= 0 {
			res.badf("want 2 fields: FOLLOWER,FOLLOWEE")
			return
		}
		u, err1 := strconv.ParseUint(string(bytes.TrimSpace(a)), 10, 64)
		f, err2 := strconv.ParseUint(string(bytes.TrimSpace(c)), 10, 64)
		switch {
		case err1 != nil || err2 != nil:
			res.badf("bad id in %s: want decimal ids", quote.Input(string(s)))
		case u == 0 || f == 0 || u > timeline.MaxID || f > timeline.MaxID:
			res.badf("id out of range in %s: want 1..%d", quote.Input(string(s)), uint64(timeline.MaxID))
		case u == f:
			res.badf("user %d cannot follow themselves", u)
		default:
			res.edges = append(res.edges, timeline.Edge{Follower: u, Followee: f})
		}
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func runActive(e *env, args []string) error {
	pos, err := parse(e.flags(cmdActive), args, true)
	if err != nil {
		return err
	}
	ids, err := parseUsers(pos)
	if err != nil {
		return err
	}
	return e.withTimeline(false, func(_ *store.DB, tl *timeline.Timeline) error {
		n, err := tl.MarkActiveMany(context.Background(), ids)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "active %d rebuilt %d\n", len(ids), n)
		return nil
	})
}

// parseUsers parses UID... (at least one) of active and user.
func parseUsers(pos []string) ([]uint64, error) {
	if len(pos) == 0 {
		return nil, usagef("want at least one UID")
	}
	ids, err := parseIDs("user id", pos)
	if err != nil {
		return nil, err
	}
	return ids, timeline.CheckID("user", ids...)
}

// parseAuthorPosts parses AUTHOR POSTID... of post and unpost.
func parseAuthorPosts(pos []string) (author uint64, posts []uint64, err error) {
	if len(pos) < 2 {
		return 0, nil, usagef("want AUTHOR and at least one POSTID, got %d arguments", len(pos))
	}
	ids, err := parseIDs("id", pos)
	if err != nil {
		return 0, nil, err
	}
	author, posts = ids[0], ids[1:]
	if err := timeline.CheckID("author", author); err != nil {
		return 0, nil, err
	}
	if err := timeline.CheckID("post", posts...); err != nil {
		return 0, nil, err
	}
	return author, posts, nil
}

func runPost(e *env, args []string) error {
	fs := e.flags(cmdPost)
	async := fs.Bool("async", false, "")
	pos, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	author, posts, err := parseAuthorPosts(pos)
	if err != nil {
		return err
	}
	return e.withTimeline(false, func(db *store.DB, tl *timeline.Timeline) error {
		// One PublishMany: another author's post refuses the whole
		// command, checked atomically with the publish.
		res, err := tl.PublishMany(author, posts...)
		if err != nil {
			return err
		}
		type pub struct {
			post uint64
			res  timeline.PublishResult
		}
		done := make([]pub, len(posts))
		for i, p := range posts {
			done[i] = pub{p, res[i]}
		}
		ctx, stop := e.interruptContext()
		defer stop()
		for _, d := range done {
			switch {
			case d.res.Duplicate:
				fmt.Fprintf(e.stdout, "%d duplicate\n", d.post)
				continue
			case *async:
				fmt.Fprintf(e.stdout, "%d queued\n", d.post)
				continue
			}
			if d.res.Job != 0 {
				if err := db.WaitJob(ctx, d.res.Job); err != nil {
					return err
				}
			}
			info, _, err := tl.Post(d.post)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "%d delivered %d\n", d.post, info.Delivered)
		}
		return nil
	})
}

func runUnpost(e *env, args []string) error {
	pos, err := parse(e.flags(cmdUnpost), args, true)
	if err != nil {
		return err
	}
	author, posts, err := parseAuthorPosts(pos)
	if err != nil {
		return err
	}
	return e.withTimeline(false, func(_ *store.DB, tl *timeline.Timeline) error {
		res, err := tl.UnpublishMany(author, posts...)
		if err != nil {
			return err
		}
		for i, p := range posts {
			if res[i].Removed {
				fmt.Fprintf(e.stdout, "%d removed\n", p)
			} else {
				fmt.Fprintf(e.stdout, "%d absent\n", p)
			}
		}
		return nil
	})
}

// pageFlags parses UID [--limit N] [--cursor C].
func pageFlags(e *env, c *command, args []string) (uint64, int, string, error) {
	fs := e.flags(c)
	limit := fs.Int("limit", timeline.DefaultLimit, "")
	cursor := fs.String("cursor", "", "")
	pos, err := parse(fs, args, true)
	if err != nil {
		return 0, 0, "", err
	}
	if len(pos) != 1 {
		return 0, 0, "", usagef("want one UID, got %d arguments", len(pos))
	}
	u, err := parseUint("user id", pos[0])
	if err != nil {
		return 0, 0, "", err
	}
	if err := timeline.CheckID("user", u); err != nil {
		return 0, 0, "", err
	}
	if *limit <= 0 || *limit > timeline.MaxLimit {
		return 0, 0, "", fmt.Errorf("%w: --limit %d (want 1..%d)", timeline.ErrBadLimit, *limit, timeline.MaxLimit)
	}
	return u, *limit, *cursor, nil
}

func runHome(e *env, args []string) error {
	u, limit, cursor, err := pageFlags(e, cmdHome, args)
	if err != nil {
		return err
	}
	return e.withTimeline(false, func(_ *store.DB, tl *timeline.Timeline) error {
		p, err := tl.Home(u, cursor, limit)
		if err != nil {
			return err
		}
		w := bufio.NewWriter(e.stdout)
		for _, en := range p.Entries {
			fmt.Fprintf(w, "%d %d\n", en.Post, en.Author)
		}
		if p.NoMore {
			fmt.Fprintln(w, "end")
		} else {
			fmt.Fprintf(w, "next %s\n", p.Cursor)
		}
		return w.Flush()
	})
}

func runIDPage(e *env, c *command, args []string) error {
	u, limit, cursor, err := pageFlags(e, c, args)
	if err != nil {
		return err
	}
	return e.withTimeline(false, func(_ *store.DB, tl *timeline.Timeline) error {
		var p timeline.IDPage
		var err error
		switch c {
		case cmdFollowers:
			p, err = tl.FollowersPage(u, cursor, limit)
		case cmdPosts:
			p, err = tl.PostsPage(u, cursor, limit)
		default:
			p, err = tl.FolloweesPage(u, cursor, limit)
		}
		if err != nil {
			return err
		}
		w := bufio.NewWriter(e.stdout)
		for _, id := range p.IDs {
			fmt.Fprintln(w, id)
		}
		if p.NoMore {
			fmt.Fprintln(w, "end")
		} else {
			fmt.Fprintf(w, "next %s\n", p.Cursor)
		}
		return w.Flush()
	})
}

func runUser(e *env, args []string) error {
	pos, err := parse(e.flags(cmdUser), args, true)
	if err != nil {
		return err
	}
	ids, err := parseUsers(pos)
	if err != nil {
		return err
	}
	return e.withTimeline(false, func(_ *store.DB, tl *timeline.Timeline) error {
		for _, u := range ids {
			info, err := tl.User(u)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "%d followers=%d followees=%d posts=%d\n", u, info.Followers, info.Followees, info.Posts)
		}
		return nil
	})
}

func runTimelineConfig(e *env, args []string) error {
	fs := e.flags(cmdTimelineConfig)
	capFlag := fs.Int("inbox-cap", 0, "")
	window := fs.String("active-window", "", "")
	pull := fs.Uint64("pull-threshold", 0, "")
	chunk := fs.Int("chunk-size", 0, "")
	pos, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("takes no arguments, got %s", quote.Input(strings.Join(pos, " ")))
	}
	var c timeline.Config
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["inbox-cap"] {
		if *capFlag <= 0 {
			return fmt.Errorf("%w: --inbox-cap %d (want 1..%d)", timeline.ErrInvalidOption, *capFlag, timeline.MaxInboxCap)
		}
		c.InboxCap = *capFlag
	}
	if set["active-window"] {
		d, err := time.ParseDuration(*window)
		if err != nil {
			return usagef("bad --active-window %s: want a duration such as 168h", quote.Input(*window))
		}
		if d <= 0 {
			return fmt.Errorf("%w: --active-window %v (want 1m or more)", timeline.ErrInvalidOption, d)
		}
		c.ActiveWindow = d
	}
	if set["pull-threshold"] {
		if *pull == 0 {
			return fmt.Errorf("%w: --pull-threshold 0 (want 1 or more)", timeline.ErrInvalidOption)
		}
		c.PullThreshold = *pull
	}
	if set["chunk-size"] {
		if *chunk <= 0 {
			return fmt.Errorf("%w: --chunk-size %d (want 1..1000000)", timeline.ErrInvalidOption, *chunk)
		}
		c.ChunkSize = *chunk
	}
	if err := c.Validate(); err != nil {
		return err
	}
	if _, err := e.options(); err != nil {
		return err
	}
	return e.withTimeline(true, func(_ *store.DB, tl *timeline.Timeline) error {
		got, err := tl.SetConfig(c)
		if err != nil {
			return err
		}
		w := e.stdout
		fmt.Fprintf(w, "inbox_cap %d\n", got.InboxCap)
		fmt.Fprintf(w, "active_window %v\n", got.ActiveWindow)
		fmt.Fprintf(w, "pull_threshold %d\n", got.PullThreshold)
		fmt.Fprintf(w, "chunk_size %d\n", got.ChunkSize)
		return nil
	})
}

// hasTimeline reports whether the store holds a timeline: its users
// counter with the timeline's columns (another "users" counter, such as
// the demo's counters part makes, is not one).
func hasTimeline(db *store.DB) bool {
	c, err := db.Counter(timeline.UsersCounter)
	if err != nil {
		return false
	}
	cols := c.Columns()
	want := []string{timeline.ColFollowers, timeline.ColFollowees, timeline.ColPosts, timeline.ColOrd, timeline.ColRead}
	return len(cols) >= len(want) && slices.Equal(cols[:len(want)], want)
}

func runTimelineExpire(e *env, args []string) error {
	if err := parseNoArgs(e, cmdTimelineExpire, args); err != nil {
		return err
	}
	ctx, stop := e.interruptContext()
	defer stop()
	return e.withTimeline(false, func(_ *store.DB, tl *timeline.Timeline) error {
		n, err := tl.Expire(ctx)
		if err == nil {
			fmt.Fprintf(e.stdout, "expired %d\n", n)
		}
		return err
	})
}

func runIsFollowing(e *env, args []string) error {
	ids, err := parseUserFollowees(e, cmdIsFollowing, args)
	if err != nil {
		return err
	}
	return e.withTimeline(false, func(_ *store.DB, tl *timeline.Timeline) error {
		var b strings.Builder // read everything before printing
		for _, f := range ids[1:] {
			yes, err := tl.IsFollowing(ids[0], f)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "%d %s\n", f, map[bool]string{true: "yes", false: "no"}[yes])
		}
		_, err := fmt.Fprint(e.stdout, b.String())
		return err
	})
}
