package commands

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/internal/limits"
	"github.com/tallydb/tally/internal/quote"
	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/unread"
)

// Unread commands: package unread's API, the CLI's "unread", "dot" and
// "notice" commands and, over RESP:
//
//	command                                        reply
//	---------------------------------------------  -----------------------------------------------
//	UNREAD.KIND ADD kind [HINT 8|16|32] [MAX 32|64]  OK
//	UNREAD.KIND LIST                               array of kind names, in UNREAD.GET order
//	UNREAD.INCR uid kind [n]                       integer: the new count
//	UNREAD.RESET uid [kind ...]                    OK (no kind: every kind)
//	UNREAD.GET uid                                 record: kind, count pairs, every kind
//	UNREAD.MGET uid [uid ...]                      array of such records, one per uid
//	UNREAD.FEED uid                                integer: feed unread
//	UNREAD.MFEED uid [uid ...]                     array of integers, one per uid
//	UNREAD.FEEDRESET uid                           OK
//	UNREAD.FORGET uid [uid ...]                    OK: the users' tags dropped, in one write
//	DOT.MARK channel                               integer: the channel's new tag
//	DOT.CLEAR uid channel                          OK
//	DOT.HAS uid channel                            integer 1 or 0
//	NOTICE.POST channel id                         integer 1, or 0 for a re-post
//	NOTICE.READ uid channel                        OK
//	NOTICE.UNREAD uid channel                      integer: notices not read
//
// The CLI prints what the RESP reply says where it is a read (a count,
// "yes"/"no", "UID kind=n ..."), the new count of "unread incr", and
// nothing for the other writes.
//
// Reads never write: DOT.HAS, NOTICE.UNREAD, UNREAD.GET and UNREAD.KIND
// LIST of a channel or kind nobody declared read as a missing Redis key
// does (no dot, 0 unread, no kinds), and the CLI opens only the packages
// whose data exists for them. Writes to a channel nobody declared (DOT.CLEAR,
// NOTICE.READ) are refused with unread.ErrUnknownChannel; DOT.MARK and
// NOTICE.POST declare it. A name that could never be a channel or kind,
// and notice id 0, are refused before anything is opened. A refused
// command changes nothing.

const unreadGroup = "unread"

var (
	// pUID and pUIDs are timeline.go's.
	pChannel = Param{Name: "channel", Kind: String}
	pKind    = Param{Name: "kind", Kind: String}
)

// checkChannel checks the channel parameter as unread does, before
// anything is opened: a read of an invalid name is an error, not "no dot".
func checkChannel(in *Input) error {
	name := in.String("channel")
	if err := store.ValidateName(name); err != nil {
		return fmt.Errorf("%w %s: %v", unread.ErrInvalidChannel, quote.Input(name), err)
	}
	return nil
}

// checkKindOptions checks unread kind add's name and options and returns
// the column options (store's defaults, 16 and 32, when not given).
func checkKindOptions(in *Input) (store.ColumnOptions, error) {
	kind := in.String("kind")
	if err := store.ValidateName(kind); err != nil {
		return store.ColumnOptions{}, fmt.Errorf("unread: kind %s: %w", quote.Input(kind), err)
	}
	opts := store.ColumnOptions{HintBits: 16, MaxBits: 32}
	for _, o := range []struct {
		name string
		dst  *uint8
		want string
	}{{"hint", &opts.HintBits, "8, 16 or 32"}, {"max", &opts.MaxBits, "32 or 64"}} {
		if !in.Has(o.name) {
			continue
		}
		// NB: 0 would be store's default, and 264 would wrap to 8.
		v := in.Uint(o.name)
		if v == 0 || v > 255 {
			return store.ColumnOptions{}, fmt.Errorf("%w: %s %d (want %s)", store.ErrInvalidOption, o.name, v, o.want)
		}
		*o.dst = uint8(v)
	}
	if err := opts.Validate(); err != nil {
		return store.ColumnOptions{}, err
	}
	return opts, nil
}

// textNothing prints nothing: a write whose CLI output is its exit status.
func textNothing(io.Writer, *Input, any) error { return nil }

func replyOK(w Replier, _ *Input, _ any) { w.WriteOK() }

// textLine prints out as one line.
func textLine(w io.Writer, _ *Input, out any) error {
	_, err := fmt.Fprintln(w, out)
	return err
}

func replyUint(w Replier, _ *Input, out any) { w.WriteUint(out.(uint64)) }

func replyBool(w Replier, _ *Input, out any) {
	if out.(bool) {
		w.WriteInt(1)
	} else {
		w.WriteInt(0)
	}
}

// unreadWrite is a command that writes through x and replies what op
// returns (nil: OK).
func unreadWrite(c *Command, op func(x *unread.Unread, in *Input) (any, error)) *Command {
	c.Group, c.Mode = unreadGroup, Write
	c.Run = func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
		x := db.Unread()
		if x == nil { // OpenWrite opens every package: not reached
			return nil, fmt.Errorf("unread: not open")
		}
		return op(x, in)
	}
	if c.Text == nil {
		c.Text = textNothing
	}
	if c.Reply == nil {
		c.Reply = replyOK
	}
	return c
}

// unreadCounts is "unread get"'s result: n counts per user, row-major,
// and the names of the first n kinds.
type unreadCounts struct {
	kinds []string
	n     int
	vals  []uint64
}

func unreadCommands() []*Command {
	return []*Command{
		{
			CLI: "unread kind add", RESP: "UNREAD.KIND ADD", Group: unreadGroup, Mode: Admin, Fast: true, Open: OpenCreate,
			Summary:    "add a kind of one-to-one unread count (creates the store if DIR is new)",
			Complexity: "O(1)",
			Params: []Param{pKind,
				{Name: "hint", Kind: Uint, Option: true, Help: "bits of a count in memory: 8, 16 or 32 (default 16)"},
				{Name: "max", Kind: Uint, Option: true, Help: "counts are bounded by 2^MAX-1: 32 or 64 (default 32)"}},
			Check: func(in *Input) error { _, err := checkKindOptions(in); return err },
			Help: fmt.Sprintf(`Adds KIND (mention, comment, like...) to the one-to-one unread counts, live:
users' existing counts are not rewritten and read 0 for it. If DIR does not
exist or is empty, a new store is created in it. Prints nothing (over RESP:
OK). KIND is 1 to %[1]d letters, digits, '_' or '-', not starting with '-';
there are at most %[2]d kinds. --hint is only a width in memory: larger
counts are still exact, up to --max.

Example:
  tally -d /var/lib/tally unread kind add mention
`, limits.MaxNameLen, limits.MaxColumns),
			Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
				opts, _ := checkKindOptions(in)
				x := db.Unread()
				if x == nil { // OpenCreate opens every package: not reached
					return nil, fmt.Errorf("unread: not open")
				}
				return nil, x.AddKind(in.String("kind"), opts)
			},
			Text: textNothing, Reply: replyOK,
		},
		{
			CLI: "unread kind list", RESP: "UNREAD.KIND LIST", Group: unreadGroup, Mode: Read, Fast: true, Open: OpenExisting,
			Summary:    "list the kinds of one-to-one unread counts",
			Complexity: "O(N) where N is the number of kinds",
			Help: `Prints the kinds, one per line, in the order "unread get" prints them (the
order they were added). Over RESP: an array of the names.

Example:
  $ tally -d /var/lib/tally unread kind list
  mention
  comment
`,
			Run: func(_ context.Context, db *tallydb.DB, _ *Input) (any, error) {
				if x := db.Unread(); x != nil {
					return x.Kinds(), nil
				}
				return []string(nil), nil
			},
			Text: func(w io.Writer, _ *Input, out any) error {
				var b strings.Builder
				for _, k := range out.([]string) {
					b.WriteString(k)
					b.WriteByte('\n')
				}
				_, err := io.WriteString(w, b.String())
				return err
			},
			Reply: func(w Replier, _ *Input, out any) {
				kinds := out.([]string)
				w.WriteArray(len(kinds))
				for _, k := range kinds {
					w.WriteBulkString(k)
				}
			},
		},
		unreadWrite(&Command{
			CLI: "unread incr", RESP: "UNREAD.INCR", Fast: true, Open: OpenWrite,
			Summary:    "add to a user's unread count of one kind and print it",
			Complexity: "O(1)",
			Params:     []Param{pUID, pKind, {Name: "n", Kind: Int, Optional: true}},
			Help: `Adds N (default 1; negative to take away) to user UID's unread count of
KIND and prints the new count (over RESP: the integer). A count never goes
below 0; one above the kind's maximum is refused and changes nothing.

Example:
  $ tally -d /var/lib/tally unread incr 42 mention 3
  3
`,
			Text: textLine, Reply: replyUint,
		}, func(x *unread.Unread, in *Input) (any, error) {
			return x.Incr(in.Uint("uid"), in.String("kind"), in.IntOr("n", 1))
		}),
		unreadWrite(&Command{
			CLI: "unread reset", RESP: "UNREAD.RESET", Fast: true, Open: OpenWrite,
			Summary:    "set a user's unread counts to 0 (named kinds, or all)",
			Complexity: "O(N) where N is the number of kinds",
			Params:     []Param{pUID, {Name: "kind", Kind: String, Optional: true, Multiple: true}},
			Help: `Sets user UID's unread counts of each KIND to 0, atomically; with no KIND,
every kind. An unknown KIND fails the command before anything changes.
Prints nothing (over RESP: OK).

Example:
  tally -d /var/lib/tally unread reset 42 mention
`,
		}, func(x *unread.Unread, in *Input) (any, error) {
			return nil, x.Reset(in.Uint("uid"), in.Strings("kind")...)
		}),
		{
			CLI: "unread get", RESP: "UNREAD.MGET", RESPOne: "UNREAD.GET", Group: unreadGroup, Mode: Read, Fast: true,
			Open:       OpenExisting,
			Summary:    "print users' unread counts of every kind",
			Complexity: "O(N) where N is the number of users",
			Params:     []Param{pUIDs},
			Help: `Prints one line per UID, every kind in the order they were added, zeros
included:
  UID kind=n kind=n ...
Over RESP, UNREAD.GET uid replies a record of kind, count pairs (as
HGETALL), every kind in UNREAD.KIND LIST order (one memory read);
UNREAD.MGET an array of those, one per uid.

Example:
  $ tally -d /var/lib/tally unread get 42 7
  42 mention=3 comment=0
  7 mention=0 comment=0
`,
			Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
				x := db.Unread()
				if x == nil {
					return unreadCounts{}, nil
				}
				uids := in.Uints("uid")
				vals, err := x.GetMany(uids, nil)
				if err != nil {
					return nil, err
				}
				// NB: kinds are read after the counts: a kind added
				// meanwhile is appended, so the first n names are the
				// counts' kinds.
				n := len(vals) / len(uids)
				kinds := x.Kinds()
				if len(vals) != n*len(uids) || len(kinds) < n {
					return nil, fmt.Errorf("unread get: %d counts for %d users of %d kinds", len(vals), len(uids), len(kinds))
				}
				return unreadCounts{kinds: kinds[:n], n: n, vals: vals}, nil
			},
			Text: func(w io.Writer, in *Input, out any) error {
				r := out.(unreadCounts)
				var b strings.Builder
				for i, u := range in.Uints("uid") {
					b.WriteString(strconv.FormatUint(u, 10))
					for j, k := range r.kinds {
						fmt.Fprintf(&b, " %s=%d", k, r.vals[i*r.n+j])
					}
					b.WriteByte('\n')
				}
				_, err := io.WriteString(w, b.String())
				return err
			},
			Reply: func(w Replier, in *Input, out any) {
				r := out.(unreadCounts)
				users := len(in.Uints("uid"))
				w.WriteArray(users)
				for i := 0; i < users; i++ {
					w.WriteMap(r.n)
					for j, v := range r.vals[i*r.n : (i+1)*r.n] {
						w.WriteBulkString(r.kinds[j])
						w.WriteUint(v)
					}
				}
			},
		},
		{
			CLI: "unread feed", RESP: "UNREAD.MFEED", RESPOne: "UNREAD.FEED", Group: unreadGroup, Mode: Read,
			// NB: OpenWrite, not OpenExisting: the first read of a user
			// whose follows predate unread initializes their snapshot (at
			// the current post counts), from which later posts count.
			Open:       OpenWrite,
			Summary:    "print users' feed unread: new posts of the accounts they follow",
			Complexity: "O(N×F) where N is the number of users and F of the accounts each follows",
			Params:     []Param{pUIDs},
			Help: `Prints one line per UID, "UID N": the posts published by the accounts UID
follows since UID's last "unread feed-reset" or since UID followed them,
whichever is later (unpublished posts no longer count). Posting and
following are the timeline commands' (post, follow, unfollow). Over RESP,
UNREAD.FEED uid replies the integer; UNREAD.MFEED an array of them, one
per uid.

Example:
  $ tally -d /var/lib/tally unread feed 42 7
  42 12
  7 0
`,
			Run: func(ctx context.Context, db *tallydb.DB, in *Input) (any, error) {
				x := db.Unread()
				if x == nil { // OpenWrite opens every package: not reached
					return nil, fmt.Errorf("unread: not open")
				}
				uids := in.Uints("uid")
				out := make([]uint64, len(uids))
				for i, u := range uids {
					if err := ctx.Err(); err != nil {
						return nil, err // the client went: stop reading
					}
					n, err := x.Feed(u)
					if err != nil {
						return nil, err
					}
					out[i] = n
				}
				return out, nil
			},
			Text: textPerID("uid"), Reply: replyUints,
		},
		unreadWrite(&Command{
			CLI: "unread feed-reset", RESP: "UNREAD.FEEDRESET", Open: OpenWrite,
			Summary:    "mark a user's feed read (feed unread becomes 0)",
			Complexity: "O(N) where N is the number of accounts the user follows",
			Params:     []Param{pUID},
			Help: `Marks everything in user UID's feed read: the next "unread feed UID" counts
only posts published after this. Prints nothing (over RESP: OK).

Example:
  tally -d /var/lib/tally unread feed-reset 42
`,
		}, func(x *unread.Unread, in *Input) (any, error) {
			return nil, x.FeedReset(in.Uint("uid"))
		}),
		unreadWrite(&Command{
			CLI: "unread forget", RESP: "UNREAD.FORGET", Open: OpenWrite,
			Summary:    "drop users' red-dot tags and last-read notices",
			Complexity: "O(N×C) where N is the number of users and C of channels",
			Params:     []Param{pUIDs},
			Help: `Drops the red-dot tags and last-read notice ids of each user (an account
deleted, or an idle user the host chooses to forget), in one write: all of
them or none. A forgotten user then reads as one who never cleared or read,
on every channel (marked channels show their dot; notices read 0 until the
next "notice read"). Counts and feed unread are not touched. Prints nothing
(over RESP: OK).

Example:
  tally -d /var/lib/tally unread forget 42
`,
		}, func(x *unread.Unread, in *Input) (any, error) {
			return nil, x.ForgetTags(in.Uints("uid")...)
		}),
		unreadWrite(&Command{
			CLI: "dot mark", RESP: "DOT.MARK", Fast: true, Open: OpenWrite,
			Summary:    "put a red dot on a channel for every user at once",
			Complexity: "O(1)",
			Params:     []Param{pChannel}, Check: checkChannel,
			Help: `Marks CHANNEL: every user who has not cleared it since sees its dot until
they clear it (a user who never cleared it included). One write, whatever
the number of users. The first mark (or notice post) declares the channel.
Prints nothing; over RESP the reply is the channel's new tag (the number
of marks so far).

Example:
  tally -d /var/lib/tally dot mark activity
`,
			Reply: replyUint,
		}, func(x *unread.Unread, in *Input) (any, error) {
			return x.Mark(in.String("channel"))
		}),
		unreadWrite(&Command{
			CLI: "dot clear", RESP: "DOT.CLEAR", Fast: true, Open: OpenWrite,
			Summary:    "clear a channel's red dot for a user",
			Complexity: "O(1)",
			Params:     []Param{pUID, pChannel}, Check: checkChannel,
			Help: `Clears CHANNEL's dot for user UID. A channel nobody declared (by "dot mark"
or "notice post") is refused. Prints nothing (over RESP: OK).

Example:
  tally -d /var/lib/tally dot clear 42 activity
`,
		}, func(x *unread.Unread, in *Input) (any, error) {
			return nil, x.Clear(in.Uint("uid"), in.String("channel"))
		}),
		{
			CLI: "dot has", RESP: "DOT.HAS", Group: unreadGroup, Mode: Read, Fast: true, Open: OpenExisting,
			Summary:    "print whether a user has a channel's red dot (yes or no)",
			Complexity: "O(1)",
			Params:     []Param{pUID, pChannel}, Check: checkChannel,
			Help: `Prints "yes" if CHANNEL was marked since user UID last cleared it, else
"no" (over RESP: 1 or 0). A user who never cleared the channel has the dot
once it was marked (the first mark included); a channel nobody declared has
no dot. Records nothing: asking never changes the answer.

Example:
  $ tally -d /var/lib/tally dot has 42 activity
  yes
`,
			Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
				if x := db.Unread(); x != nil {
					return x.Has(in.Uint("uid"), in.String("channel"))
				}
				return false, nil // no unread data: no channel declared
			},
			Text: func(w io.Writer, _ *Input, out any) error {
				s := "no\n"
				if out.(bool) {
					s = "yes\n"
				}
				_, err := io.WriteString(w, s)
				return err
			},
			Reply: replyBool,
		},
		unreadWrite(&Command{
			CLI: "notice post", RESP: "NOTICE.POST", Fast: true, Open: OpenWrite,
			Summary:    "post a system notice to a channel",
			Complexity: "O(1)",
			Params:     []Param{pChannel, {Name: "id", Kind: Uint}},
			Check: func(in *Input) error {
				if err := checkChannel(in); err != nil {
					return err
				}
				if in.Uint("id") == 0 {
					return fmt.Errorf("%w: 0 (notice ids start at 1)", unread.ErrInvalidNotice)
				}
				return nil
			},
			Help: `Adds notice ID (1 or more; higher ids are newer) to CHANNEL, declaring the
channel if new. Posting an ID the channel has is a no-op. Prints nothing;
over RESP the reply is 1, or 0 for a re-post.

Example:
  tally -d /var/lib/tally notice post system 1001
`,
			Reply: replyBool,
		}, func(x *unread.Unread, in *Input) (any, error) {
			return x.Post(in.String("channel"), in.Uint("id"))
		}),
		unreadWrite(&Command{
			CLI: "notice read", RESP: "NOTICE.READ", Fast: true, Open: OpenWrite,
			Summary:    "mark a channel's notices read for a user",
			Complexity: "O(1)",
			Params:     []Param{pUID, pChannel}, Check: checkChannel,
			Help: `Marks every notice of CHANNEL read for user UID. A channel nobody declared
is refused. Prints nothing (over RESP: OK).

Example:
  tally -d /var/lib/tally notice read 42 system
`,
		}, func(x *unread.Unread, in *Input) (any, error) {
			return nil, x.Read(in.Uint("uid"), in.String("channel"))
		}),
		{
			CLI: "notice unread", RESP: "NOTICE.UNREAD", Group: unreadGroup, Mode: Read, Fast: true, Open: OpenExisting,
			Summary:    "print how many of a channel's notices a user has not read",
			Complexity: "O(log N) where N is the number of notices of the channel",
			Params:     []Param{pUID, pChannel}, Check: checkChannel,
			Help: `Prints the number of CHANNEL's notices newer than the last one user UID
read (over RESP: the integer). A user who never read the channel is new
and has 0 until "notice read"; so does every user of a channel nobody
declared. Records nothing: asking never changes the answer.

Example:
  $ tally -d /var/lib/tally notice unread 42 system
  2
`,
			Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
				if x := db.Unread(); x != nil {
					return x.Unread(in.Uint("uid"), in.String("channel"))
				}
				return uint64(0), nil
			},
			Text: textLine, Reply: replyUint,
		},
	}
}
