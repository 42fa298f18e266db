package main

import (
	"fmt"
	"strconv"
	"strings"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/internal/limits"
	"github.com/tallydb/tally/internal/quote"
	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/timeline"
	"github.com/tallydb/tally/unread"
)

// Unread commands: one-to-one counts ("unread ..."), red dots ("dot ...")
// and system notices ("notice ..."), and feed unread ("unread feed").

var cmdUnreadKindAdd = &command{
	name:     "unread kind add",
	synopsis: "add a kind of one-to-one unread count (creates the store if DIR is new)",
	help: fmt.Sprintf(`Usage: tally -d DIR unread kind add KIND [--hint BITS] [--max BITS]

Adds KIND (mention, comment, like...) to the one-to-one unread counts, live:
users' existing counts are not rewritten and read 0 for it. If DIR does not
exist or is empty, a new store is created in it. Prints nothing. KIND is 1
to %[1]d letters, digits, '_' or '-', not starting with '-'; there are at
most %[2]d kinds.

Flags:
  --hint BITS   width of a count in memory: 8, 16 or 32 (default 16);
                larger counts are still exact
  --max BITS    counts are bounded by 2^BITS-1: 32 or 64 (default 32)

Example:
  tally -d /var/lib/tally unread kind add mention
`, limits.MaxNameLen, limits.MaxColumns),
}

var cmdUnreadIncr = &command{
	name:     "unread incr",
	synopsis: "add to a user's unread count of one kind and print it",
	help: `Usage: tally -d DIR unread incr UID KIND [N]

Adds N (default 1; negative to take away) to user UID's unread count of
KIND and prints the new count. A count never goes below 0; one above the
kind's maximum is refused and changes nothing. Flags go before UID.

Example:
  $ tally -d /var/lib/tally unread incr 42 mention 3
  3
`,
}

var cmdUnreadReset = &command{
	name:     "unread reset",
	synopsis: "set a user's unread counts to 0 (named kinds, or all)",
	help: `Usage: tally -d DIR unread reset UID [KIND...]

Sets user UID's unread counts of each KIND to 0, atomically; with no KIND,
every kind. An unknown KIND fails the command before anything changes.
Prints nothing.

Example:
  tally -d /var/lib/tally unread reset 42 mention
`,
}

var cmdUnreadGet = &command{
	name:     "unread get",
	synopsis: "print users' unread counts of every kind",
	help: `Usage: tally -d DIR unread get UID...

Prints one line per UID, every kind in the order they were added, zeros
included:
  UID kind=n kind=n ...

Example:
  $ tally -d /var/lib/tally unread get 42 7
  42 mention=3 comment=0
  7 mention=0 comment=0
`,
}

var cmdUnreadFeed = &command{
	name:     "unread feed",
	synopsis: "print users' feed unread: new posts of the accounts they follow",
	help: `Usage: tally -d DIR unread feed UID...

Prints one line per UID, "UID N": the posts published by the accounts UID
follows since UID's last "unread feed-reset" or since UID followed them,
whichever is later (unpublished posts no longer count). Posting and
following are the timeline commands' (post, follow, unfollow).

Example:
  $ tally -d /var/lib/tally unread feed 42 7
  42 12
  7 0
`,
}

var cmdUnreadFeedReset = &command{
	name:     "unread feed-reset",
	synopsis: "mark a user's feed read (feed unread becomes 0)",
	help: `Usage: tally -d DIR unread feed-reset UID

Marks everything in user UID's feed read: the next "unread feed UID" counts
only posts published after this. Prints nothing.

Example:
  tally -d /var/lib/tally unread feed-reset 42
`,
}

var cmdUnreadForget = &command{
	name:     "unread forget",
	synopsis: "drop users' red-dot tags and last-read notices",
	help: `Usage: tally -d DIR unread forget UID...

Drops the red-dot tags and last-read notice ids of each user (an account
deleted, or an idle user the host chooses to forget), in one write: all
of them or none. A forgotten user then reads
as one who never cleared or read, on every channel (marked channels show
their dot; notices read 0 until the next "notice read"). Counts and feed
unread are not touched. Prints nothing.

Example:
  tally -d /var/lib/tally unread forget 42
`,
}

var cmdDotMark = &command{
	name:     "dot mark",
	synopsis: "put a red dot on a channel for every user at once",
	help: `Usage: tally -d DIR dot mark CHANNEL

Marks CHANNEL: every user who has read or cleared it before sees its dot
until they clear it. One write, whatever the number of users. The first
mark (or notice post) declares the channel. Prints nothing.

Example:
  tally -d /var/lib/tally dot mark activity
`,
}

var cmdDotClear = &command{
	name:     "dot clear",
	synopsis: "clear a channel's red dot for a user",
	help: `Usage: tally -d DIR dot clear UID CHANNEL

Clears CHANNEL's dot for user UID. Prints nothing.

Example:
  tally -d /var/lib/tally dot clear 42 activity
`,
}

var cmdDotHas = &command{
	name:     "dot has",
	synopsis: "print whether a user has a channel's red dot (yes or no)",
	help: `Usage: tally -d DIR dot has UID CHANNEL

Prints "yes" if CHANNEL was marked since user UID last cleared it, else
"no". A user who never cleared the channel has the dot once it was marked
(the first mark included); a channel nobody declared has no dot. Records
nothing: asking never changes the answer.

Example:
  $ tally -d /var/lib/tally dot has 42 activity
  yes
`,
}

var cmdNoticePost = &command{
	name:     "notice post",
	synopsis: "post a system notice to a channel",
	help: `Usage: tally -d DIR notice post CHANNEL ID

Adds notice ID (1 or more; higher ids are newer) to CHANNEL, declaring the
channel if new. Posting an ID the channel has is a no-op. Prints nothing.

Example:
  tally -d /var/lib/tally notice post system 1001
`,
}

var cmdNoticeRead = &command{
	name:     "notice read",
	synopsis: "mark a channel's notices read for a user",
	help: `Usage: tally -d DIR notice read UID CHANNEL

Marks every notice of CHANNEL read for user UID. Prints nothing.

Example:
  tally -d /var/lib/tally notice read 42 system
`,
}

var cmdNoticeUnread = &command{
	name:     "notice unread",
	synopsis: "print how many of a channel's notices a user has not read",
	help: `Usage: tally -d DIR notice unread UID CHANNEL

Prints the number of CHANNEL's notices newer than the last one user UID
read. A user who never read the channel is new and has 0 until "notice
read"; so does every user of a channel nobody declared. Records nothing:
asking never changes the answer.

Example:
  $ tally -d /var/lib/tally notice unread 42 system
  2
`,
}

// unreadCommands are registered in the command table, in help order.
var unreadCommands = []*command{
	cmdUnreadKindAdd, cmdUnreadIncr, cmdUnreadReset, cmdUnreadGet,
	cmdUnreadFeed, cmdUnreadFeedReset, cmdUnreadForget,
	cmdDotMark, cmdDotClear, cmdDotHas,
	cmdNoticePost, cmdNoticeRead, cmdNoticeUnread,
}

func init() {
	cmdUnreadKindAdd.run = runUnreadKindAdd
	cmdUnreadIncr.run = runUnreadIncr
	cmdUnreadReset.run = runUnreadReset
	cmdUnreadGet.run = runUnreadGet
	cmdUnreadFeed.run = runUnreadFeed
	cmdUnreadFeedReset.run = runUnreadFeedReset
	cmdDotMark.run = runDotMark
	cmdDotClear.run = runDotClear
	cmdDotHas.run = runDotHas
	cmdUnreadForget.run = runUnreadForget
	cmdNoticePost.run = runNoticePost
	cmdNoticeRead.run = runNoticeRead
	cmdNoticeUnread.run = runNoticeUnread
}

// graphStore is the database opened through tally.Open for a command
// that changes the follow graph or reads unread counts (every package
// wired: unread's observer sees every follow).
type graphStore struct {
	all *tallydb.DB
	db  *store.DB
	tl  *timeline.Timeline
	x   *unread.Unread
}

// openGraph opens the database named by -d with every package.
func (e *env) openGraph(create bool) (*graphStore, error) {
	mode := openWrite
	if create {
		mode = openCreate
	}
	db, err := e.openDB(mode)
	if err != nil {
		return nil, err
	}
	return &graphStore{all: db, db: db.Store(), tl: db.Timeline(), x: db.Unread()}, nil
}

// close closes the database; err (fn's error) wins.
func (g *graphStore) close(err error) error { return closeTally(g.all, err) }

// withGraph opens the graph store, runs fn and closes it.
func (e *env) withGraph(fn func(g *graphStore) error) error {
	g, err := e.openGraph(false)
	if err != nil {
		return err
	}
	return g.close(fn(g))
}

func runUnreadKindAdd(e *env, args []string) error {
	fs := e.flags(cmdUnreadKindAdd)
	colOpts := columnFlags(fs)
	pos, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want exactly one KIND, got %d arguments", len(pos))
	}
	opts, err := colOpts()
	if err != nil {
		return err
	}
	// Check everything before a store may be created.
	if err := store.ValidateName(pos[0]); err != nil {
		return fmt.Errorf("unread: kind %s: %w", quote.Input(pos[0]), err)
	}
	if err := opts.Validate(); err != nil {
		return err
	}
	if _, err := e.options(); err != nil {
		return err
	}
	fresh, err := newStoreDir(e.dir)
	if err != nil {
		return err
	}
	g, err := e.openGraph(true)
	if err == nil {
		err = g.close(g.x.AddKind(pos[0], opts))
	}
	if err != nil && fresh != nil {
		if rerr := fresh.remove(); rerr != nil {
			err = fmt.Errorf("%w (and %v)", err, rerr)
		}
	}
	return err
}

func runUnreadIncr(e *env, args []string) error {
	pos, err := parse(e.flags(cmdUnreadIncr), args, false)
	if err != nil {
		return err
	}
	if len(pos) < 2 || len(pos) > 3 {
		return usagef("want UID KIND [N]")
	}
	uid, err := parseUint("UID", pos[0])
	if err != nil {
		return err
	}
	n := int64(1)
	if len(pos) == 3 {
		if n, err = parseInt("N", pos[2]); err != nil {
			return err
		}
	}
	return e.withGraph(func(g *graphStore) error {
		v, err := g.x.Incr(uid, pos[1], n)
		if err == nil {
			fmt.Fprintln(e.stdout, v)
		}
		return err
	})
}

func runUnreadReset(e *env, args []string) error {
	pos, err := parse(e.flags(cmdUnreadReset), args, false)
	if err != nil {
		return err
	}
	if len(pos) < 1 {
		return usagef("want UID [KIND...]")
	}
	uid, err := parseUint("UID", pos[0])
	if err != nil {
		return err
	}
	return e.withGraph(func(g *graphStore) error { return g.x.Reset(uid, pos[1:]...) })
}

func runUnreadGet(e *env, args []string) error {
	pos, err := parse(e.flags(cmdUnreadGet), args, false)
	if err != nil {
		return err
	}
	if len(pos) < 1 {
		return usagef("want UID...")
	}
	uids, err := parseIDs("UID", pos)
	if err != nil {
		return err
	}
	return e.withGraph(func(g *graphStore) error {
		kinds := g.x.Kinds()
		vals, err := g.x.GetMany(uids, nil)
		if err != nil {
			return err
		}
		if len(vals) != len(uids)*len(kinds) {
			return fmt.Errorf("unread get: %d counts for %d users of %d kinds", len(vals), len(uids), len(kinds))
		}
		var b strings.Builder
		for i, u := range uids {
			b.WriteString(strconv.FormatUint(u, 10))
			for j, k := range kinds {
				fmt.Fprintf(&b, " %s=%d", k, vals[i*len(kinds)+j])
			}
			b.WriteByte('\n')
		}
		_, err = fmt.Fprint(e.stdout, b.String())
		return err
	})
}

func runUnreadFeed(e *env, args []string) error {
	pos, err := parse(e.flags(cmdUnreadFeed), args, false)
	if err != nil {
		return err
	}
	if len(pos) < 1 {
		return usagef("want UID...")
	}
	uids, err := parseIDs("UID", pos)
	if err != nil {
		return err
	}
	return e.withGraph(func(g *graphStore) error {
		// Read everything before printing, so an error prints no partial
		// output.
		var b strings.Builder
		for _, u := range uids {
			n, err := g.x.Feed(u)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "%d %d\n", u, n)
		}
		_, err := fmt.Fprint(e.stdout, b.String())
		return err
	})
}

func runUnreadFeedReset(e *env, args []string) error {
	pos, err := parse(e.flags(cmdUnreadFeedReset), args, false)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want exactly one UID, got %d arguments", len(pos))
	}
	uid, err := parseUint("UID", pos[0])
	if err != nil {
		return err
	}
	return e.withGraph(func(g *graphStore) error { return g.x.FeedReset(uid) })
}

// userChannel parses "UID CHANNEL".
func userChannel(c *command, e *env, args []string) (uint64, string, error) {
	pos, err := parse(e.flags(c), args, false)
	if err != nil {
		return 0, "", err
	}
	if len(pos) != 2 {
		return 0, "", usagef("want UID CHANNEL, got %d arguments", len(pos))
	}
	uid, err := parseUint("UID", pos[0])
	return uid, pos[1], err
}

func runDotMark(e *env, args []string) error {
	pos, err := parse(e.flags(cmdDotMark), args, false)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want exactly one CHANNEL, got %d arguments", len(pos))
	}
	return e.withGraph(func(g *graphStore) error {
		_, err := g.x.Mark(pos[0])
		return err
	})
}

func runDotClear(e *env, args []string) error {
	uid, ch, err := userChannel(cmdDotClear, e, args)
	if err != nil {
		return err
	}
	return e.withGraph(func(g *graphStore) error { return g.x.Clear(uid, ch) })
}

func runDotHas(e *env, args []string) error {
	uid, ch, err := userChannel(cmdDotHas, e, args)
	if err != nil {
		return err
	}
	return e.withGraph(func(g *graphStore) error {
		has, err := g.x.Has(uid, ch)
		if err != nil {
			return err
		}
		if has {
			fmt.Fprintln(e.stdout, "yes")
		} else {
			fmt.Fprintln(e.stdout, "no")
		}
		return nil
	})
}

func runNoticePost(e *env, args []string) error {
	pos, err := parse(e.flags(cmdNoticePost), args, false)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("want CHANNEL ID, got %d arguments", len(pos))
	}
	id, err := parseUint("ID", pos[1])
	if err != nil {
		return err
	}
	return e.withGraph(func(g *graphStore) error {
		_, err := g.x.Post(pos[0], id)
		return err
	})
}

func runNoticeRead(e *env, args []string) error {
	uid, ch, err := userChannel(cmdNoticeRead, e, args)
	if err != nil {
		return err
	}
	return e.withGraph(func(g *graphStore) error { return g.x.Read(uid, ch) })
}

func runNoticeUnread(e *env, args []string) error {
	uid, ch, err := userChannel(cmdNoticeUnread, e, args)
	if err != nil {
		return err
	}
	return e.withGraph(func(g *graphStore) error {
		n, err := g.x.Unread(uid, ch)
		if err == nil {
			fmt.Fprintln(e.stdout, n)
		}
		return err
	})
}

func runUnreadForget(e *env, args []string) error {
	pos, err := parse(e.flags(cmdUnreadForget), args, false)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("want UID..., got no arguments")
	}
	uids, err := parseIDs("UID", pos)
	if err != nil {
		return err
	}
	return e.withGraph(func(g *graphStore) error { return g.x.ForgetTags(uids...) })
}
