package commands

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/internal/quote"
	"github.com/tallydb/tally/likes"
	"github.com/tallydb/tally/store"
)

// Likes commands: package likes's API. A read of a store that holds no
// likes yet (the CLI opens only the packages whose data exists) answers
// as for an unknown item: zeros, empty pages, no ranks.

const likesGroup = "likes"

var (
	pBiz = Param{Name: "biz", Kind: String}
	// An item is the key of its likes (its counts, likers, states and
	// owner live on its slot's shard); biz is not part of it.
	pItem  = Param{Name: "item", Kind: Uint, Key: true}
	pUser  = Param{Name: "user", Kind: Uint}
	pItems = Param{Name: "item", Kind: Uint, Multiple: true, Key: true}
	// pRankItems are items ranked on a board: a rank sums every shard's
	// board, so no shard owns the call (no key).
	pRankItems = Param{Name: "item", Kind: Uint, Multiple: true}
	pDay       = Param{Name: "day", Kind: String, Option: true, Help: "YYYY-MM-DD: that UTC day's board instead of the all-time board"}
	pLimit     = Param{Name: "limit", Kind: Int, Option: true, Help: "entries per page, 1..1000 (default 100)"}
	pCur       = Param{Name: "cursor", Kind: String, Option: true, Help: `continue after the page that printed "next C"`}
)

// checkBusiness checks the biz parameter before anything is opened.
func checkBusiness(in *Input) error {
	s := in.String("biz")
	if len(s) > likes.MaxBusinessLen || store.ValidateName(s) != nil {
		return fmt.Errorf("%w: %s (want 1 to %d letters, digits, '_' or '-', not starting with '-')",
			likes.ErrInvalidBusiness, quote.Input(s), likes.MaxBusinessLen)
	}
	return nil
}

// checkItems checks the business and the number of items of a page read.
func checkItems(in *Input) error {
	if err := checkBusiness(in); err != nil {
		return err
	}
	if n := len(in.Uints("item")); n > likes.MaxStates {
		return fmt.Errorf("%w: %d items (limit %d)", likes.ErrLimit, n, likes.MaxStates)
	}
	return nil
}

// checkDay parses --day/DAY; the zero time when not given.
func checkDay(in *Input) (time.Time, error) {
	if !in.Has("day") {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.DateOnly, in.String("day"))
	if err != nil {
		return time.Time{}, Usagef("bad day %s: want YYYY-MM-DD", quote.Input(in.String("day")))
	}
	return t, nil
}

// topFields are the names of a LIKE.TOP record's fields.
var topFields = [3]string{"rank", "item", "likes"}

// counted is the reply of a transition: the item's counts after it.
type counted struct {
	item uint64
	res  likes.Result
}

func textCounted(w io.Writer, _ *Input, out any) error {
	r := out.(counted)
	_, err := fmt.Fprintf(w, "%d likes=%d dislikes=%d\n", r.item, r.res.Likes, r.res.Dislikes)
	return err
}

func replyCounted(w Replier, _ *Input, out any) {
	r := out.(counted)
	w.WriteMap(3)
	w.WriteBulkString("likes")
	w.WriteUint(r.res.Likes)
	w.WriteBulkString("dislikes")
	w.WriteUint(r.res.Dislikes)
	w.WriteBulkString("changed")
	if r.res.Changed {
		w.WriteInt(1)
	} else {
		w.WriteInt(0)
	}
}

// page is a likes page reply.
func textPage(w io.Writer, _ *Input, out any) error {
	pg := out.(likes.Page)
	var b strings.Builder
	for _, id := range pg.IDs {
		b.WriteString(strconv.FormatUint(id, 10))
		b.WriteByte('\n')
	}
	writeNext(&b, pg.Next)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeNext ends a page's lines: "next CURSOR", or "end".
func writeNext(b *strings.Builder, next string) {
	if next != "" {
		fmt.Fprintf(b, "next %s\n", next)
	} else {
		b.WriteString("end\n")
	}
}

func replyPage(w Replier, _ *Input, out any) {
	pg := out.(likes.Page)
	w.WriteArray(2)
	replyCursor(w, pg.Next)
	w.WriteArray(len(pg.IDs))
	for _, id := range pg.IDs {
		w.WriteUint(id)
	}
}

// replyCursor writes a page's next cursor: nil at the end.
func replyCursor(w Replier, next string) {
	if next == "" {
		w.WriteNull()
	} else {
		w.WriteBulkString(next)
	}
}

// pageLimit returns the limit option, checked against the library's bound
// (its own error, as the library reports it).
func pageLimit(in *Input, def int64) (int, error) {
	n := in.IntOr("limit", def)
	if n < 1 || n > likes.MaxPage {
		return 0, fmt.Errorf("%w: limit %d (want 1..%d)", likes.ErrLimit, n, likes.MaxPage)
	}
	return int(n), nil
}

func likeWrite(cli, resp, summary, help string, create bool, owner bool,
	op func(l *likes.Likes, biz string, item, user, owner uint64) (likes.Result, error)) *Command {
	params := []Param{pBiz, pItem, pUser}
	if owner {
		params = append(params, Param{Name: "owner", Kind: Uint, Optional: true})
	}
	open := OpenExisting
	if create {
		open = OpenCreate
	}
	return &Command{
		CLI: cli, RESP: resp, Group: likesGroup, Mode: Write, Fast: true, Open: open,
		Summary: summary, Complexity: "O(1)", Params: params, Check: checkBusiness,
		Help: help + `
BIZ names the business (videos, posts, comments: 1 to 58 letters, digits,
'_' or '-'); ITEM and USER are unsigned decimal ids. The item's counts
change in the same atomic write as the user's state. Repeating it changes
nothing. BIZ must have been declared ("tally business add BIZ", or by a
"likes load" that named it): a write to an unknown business is refused
and changes nothing. Prints the item's counts after the call:
  ITEM likes=N dislikes=M
Over RESP the reply is a record: likes N dislikes M changed 1|0.
`,
		Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
			item := in.Uint("item")
			l := db.Likes()
			if l == nil { // unlike or undislike in a store without likes
				return counted{item: item, res: likes.Result{Item: item}}, nil
			}
			var o uint64
			if owner {
				o = in.Uint("owner")
			}
			res, err := op(l, in.String("biz"), item, in.Uint("user"), o)
			return counted{item: item, res: res}, err
		},
		Text: textCounted, Reply: replyCounted,
	}
}

func likesCommands() []*Command {
	return append(likesReadCommands(), likesPartCommands()...)
}

func likesReadCommands() []*Command {
	return []*Command{
		likeWrite("like", "LIKE.LIKE", "USER likes ITEM of business BIZ (replaces a dislike)",
			`Records that USER likes ITEM (a dislike is replaced by the like). OWNER,
when given, is the item's owner, credited with its likes ("received"); the
first like that names one sets it (set-owner changes it).

Example:
  $ tally -d /var/lib/tally like video 1234 42 7
  1234 likes=1 dislikes=0
`, true, true, func(l *likes.Likes, b string, i, u, o uint64) (likes.Result, error) { return l.Like(b, i, u, o) }),
		likeWrite("unlike", "LIKE.UNLIKE", "remove USER's like of ITEM", `Removes USER's like of ITEM, if any.

Example:
  $ tally -d /var/lib/tally unlike video 1234 42
  1234 likes=0 dislikes=0
`, false, false, func(l *likes.Likes, b string, i, u, _ uint64) (likes.Result, error) { return l.Unlike(b, i, u) }),
		likeWrite("dislike", "LIKE.DISLIKE", "USER dislikes ITEM (replaces a like)",
			`Records that USER dislikes ITEM (a like is replaced by the dislike).

Example:
  $ tally -d /var/lib/tally dislike video 1234 42
  1234 likes=0 dislikes=1
`, true, false, func(l *likes.Likes, b string, i, u, _ uint64) (likes.Result, error) { return l.Dislike(b, i, u) }),
		likeWrite("undislike", "LIKE.UNDISLIKE", "remove USER's dislike of ITEM", `Removes USER's dislike of ITEM, if any.

Example:
  $ tally -d /var/lib/tally undislike video 1234 42
  1234 likes=0 dislikes=0
`, false, false, func(l *likes.Likes, b string, i, u, _ uint64) (likes.Result, error) { return l.Undislike(b, i, u) }),
		{
			CLI: "set-owner", RESP: "LIKE.SETOWNER", Group: likesGroup, Mode: Write, Fast: true, Open: OpenExisting,
			Summary:    "change an item's owner, moving its likes to the new owner's total",
			Complexity: "O(1)", Params: []Param{pBiz, pItem, {Name: "owner", Kind: Uint}}, Check: checkBusiness,
			Help: `Makes OWNER the owner of ITEM of business BIZ: the item's likes move from
the previous owner's received total to OWNER's, atomically. Prints the
item's counts:
  ITEM likes=N dislikes=M

Example:
  $ tally -d /var/lib/tally set-owner video 1234 8
  1234 likes=5120 dislikes=3
`,
			Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
				biz, item := in.String("biz"), in.Uint("item")
				l := db.Likes()
				if l == nil {
					return nil, fmt.Errorf("%w %s (businesses: none yet)", likes.ErrUnknownBusiness, quote.Input(biz))
				}
				res, err := l.SetOwner(biz, item, in.Uint("owner"))
				return counted{item: item, res: res}, err
			},
			Text: textCounted, Reply: replyCounted,
		},
		{
			CLI: "likes", RESP: "LIKE.COUNTS", Group: likesGroup, Mode: Read, Fast: true, Open: OpenExisting,
			Summary:    "like and dislike counts of items",
			Complexity: "O(N) where N is the number of items", Params: []Param{pBiz, pItems}, Check: checkItems,
			Help: `Prints the counts of each ITEM of business BIZ, one line per argument:
  ITEM likes=N dislikes=M
Items nobody liked, and every item of a business that has no likes yet,
read 0. At most 1000 items. Over RESP: an array of records (likes N
dislikes M).

Example:
  $ tally -d /var/lib/tally likes video 1234 1235
  1234 likes=1 dislikes=0
  1235 likes=0 dislikes=0
`,
			Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
				items := in.Uints("item")
				counts := make([]likes.Counts, len(items))
				if l := db.Likes(); l != nil {
					return l.Counts(in.String("biz"), items, counts)
				}
				return counts, nil
			},
			Text: func(w io.Writer, in *Input, out any) error {
				var b strings.Builder
				for i, n := range out.([]likes.Counts) {
					fmt.Fprintf(&b, "%d likes=%d dislikes=%d\n", in.Uints("item")[i], n.Likes, n.Dislikes)
				}
				_, err := io.WriteString(w, b.String())
				return err
			},
			Reply: func(w Replier, _ *Input, out any) {
				counts := out.([]likes.Counts)
				w.WriteArray(len(counts))
				for _, n := range counts {
					w.WriteMap(2)
					w.WriteBulkString("likes")
					w.WriteUint(n.Likes)
					w.WriteBulkString("dislikes")
					w.WriteUint(n.Dislikes)
				}
			},
		},
		{
			CLI: "liked", RESP: "LIKE.STATES", Group: likesGroup, Mode: Read, Fast: true, Open: OpenExisting,
			Summary:    "USER's state on items: like, dislike or none",
			Complexity: "O(N) where N is the number of items", Params: []Param{pBiz, pUser, pItems}, Check: checkItems,
			Help: `Prints USER's state on each ITEM of business BIZ (the "did I like these"
read of a page), one line per argument:
  ITEM like|dislike|none
At most 1000 items. Over RESP: an array of "like", "dislike" or "none".

Example:
  $ tally -d /var/lib/tally liked video 42 1234 1235
  1234 like
  1235 none
`,
			Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
				items := in.Uints("item")
				states := make([]likes.State, len(items))
				if l := db.Likes(); l != nil {
					return l.States(in.String("biz"), in.Uint("user"), items, states)
				}
				return states, nil
			},
			Text: func(w io.Writer, in *Input, out any) error {
				var b strings.Builder
				for i, s := range out.([]likes.State) {
					fmt.Fprintf(&b, "%d %s\n", in.Uints("item")[i], s)
				}
				_, err := io.WriteString(w, b.String())
				return err
			},
			Reply: func(w Replier, _ *Input, out any) {
				states := out.([]likes.State)
				w.WriteArray(len(states))
				for _, s := range states {
					w.WriteBulkString(s.String())
				}
			},
		},
		{
			CLI: "likers", RESP: "LIKE.LIKERS", Group: likesGroup, Mode: Read, Open: OpenExisting,
			Summary:    "users who like ITEM, a page at a time",
			Complexity: "O(N) where N is the page size",
			Params: []Param{pBiz, pItem, pLimit, pCur,
				{Name: "dislikes", Kind: Flag, Option: true, Help: "list the users who dislike ITEM instead"}},
			Check: checkBusiness,
			Help: `Prints the users who like ITEM of business BIZ, one id per line, then
"next CURSOR" if there are more (pass it to --cursor for the next page) or
"end". Small sets list in user id order; sets of 4096 users and more are
roaring bitmaps and list in the order users first joined one; a cursor
issued before a set was converted is refused (start again without
--cursor). A cursor not issued by this store is refused. Over RESP: [next
cursor (nil at the end), [user ...]].

Example:
  $ tally -d /var/lib/tally likers video 1234 --limit 2
  42
  77
  next AQEBAAAAAQAAAAAAAATSAAAAAAAAAE0AAAAAAAAAAH9Mh55bYlqtX_nHrw
`,
			Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
				return likesPage(db, in, func(l *likes.Likes, biz string, limit int, cursor string) (likes.Page, error) {
					if in.Has("dislikes") {
						return l.Dislikers(biz, in.Uint("item"), cursor, limit)
					}
					return l.Likers(biz, in.Uint("item"), cursor, limit)
				})
			},
			Text: textPage, Reply: replyPage,
		},
		{
			CLI: "user-likes", RESP: "LIKE.USERLIKES", Group: likesGroup, Mode: Read, Open: OpenExisting,
			Summary:    "items USER likes, newest first, a page at a time",
			Complexity: "O(N) where N is the page size", Params: []Param{pBiz, pUser, pLimit, pCur}, Check: checkBusiness,
			Help: `Prints the items USER likes in business BIZ, newest like first, one id per
line, then "next CURSOR" if there are more or "end". A cursor not issued by
this store is refused. Over RESP: [next cursor (nil at the end), [item ...]].

Example:
  $ tally -d /var/lib/tally user-likes video 42
  1234
  end
`,
			Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
				return likesPage(db, in, func(l *likes.Likes, biz string, limit int, cursor string) (likes.Page, error) {
					return l.UserLikes(biz, in.Uint("user"), cursor, limit)
				})
			},
			Gather: gatherUserLikes,
			Text:   textPage, Reply: replyPage,
		},
		{
			CLI: "top", RESP: "LIKE.TOP", Group: likesGroup, Mode: Read, Open: OpenExisting,
			Summary:    "leaderboard: the N items of BIZ with the most likes",
			Complexity: "O(N)", Params: []Param{pBiz, {Name: "n", Kind: Int, Optional: true}, pDay},
			Check: func(in *Input) error {
				if err := checkBusiness(in); err != nil {
					return err
				}
				if n := in.IntOr("n", 10); n < 1 || n > likes.MaxTop {
					return fmt.Errorf("%w: top %d (want 1..%d)", likes.ErrLimit, n, likes.MaxTop)
				}
				_, err := checkDay(in)
				return err
			},
			Help: `Prints the N (1..1000, default 10) items of business BIZ with the most
likes, best first, one line each:
  RANK ITEM LIKES
Tied items share a rank (1, 2, 2, 4) and are listed by item id. With
--day, the board of that UTC day: items by the likes made that day (and
not undone since). The boards of the last 7 days, today included, are kept
(the store's setting; older days are refused). Over RESP: an array of
records (rank R item I likes N).

Example:
  $ tally -d /var/lib/tally top video 3
  1 1234 5120
  2 999 4000
  2 1001 4000
`,
			Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
				l := db.Likes()
				if l == nil {
					return []likes.Entry(nil), nil
				}
				n := int(in.IntOr("n", 10))
				if in.Has("day") {
					day, _ := checkDay(in)
					return l.TopDay(in.String("biz"), day, n)
				}
				return l.Top(in.String("biz"), n)
			},
			Gather: gatherTop,
			Text: func(w io.Writer, _ *Input, out any) error {
				var b strings.Builder
				for _, t := range out.([]likes.Entry) {
					fmt.Fprintf(&b, "%d %d %d\n", t.Rank, t.Item, t.Likes)
				}
				_, err := io.WriteString(w, b.String())
				return err
			},
			Reply: func(w Replier, _ *Input, out any) {
				top := out.([]likes.Entry)
				w.WriteArray(len(top))
				for _, e := range top {
					writeRecord3(w, &topFields, [3]uint64{uint64(e.Rank), e.Item, e.Likes})
				}
			},
		},
		{
			CLI: "rank", RESP: "LIKE.MRANK", RESPOne: "LIKE.RANK", Group: likesGroup, Mode: Read, Open: OpenExisting,
			Summary:    "items' rank and likes on a business's board",
			Complexity: "O(S) per item where S is the number of distinct scores above the item's",
			Params:     []Param{pBiz, pRankItems, pDay},
			Check: func(in *Input) error {
				if err := checkItems(in); err != nil {
					return err
				}
				_, err := checkDay(in)
				return err
			},
			Help: `Prints, per ITEM, its rank on the all-time board of business BIZ (or, with
--day, on that UTC day's board) and its likes there, as "top" ranks them
(ties share a rank):
  ITEM RANK LIKES
or "ITEM none" for an item with no likes on that board. The boards of the
last 7 days, today included, are kept. Over RESP, LIKE.RANK biz item
replies a record (rank R likes N) or nil; LIKE.MRANK an array of those,
one per item.

Example:
  $ tally -d /var/lib/tally rank video 1234 999
  1234 1 5120
  999 2 4000
`,
			Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
				items := in.Uints("item")
				out := make([]rankEntry, len(items))
				l := db.Likes()
				if l == nil {
					return out, nil
				}
				day, _ := checkDay(in)
				for i, item := range items {
					var err error
					if in.Has("day") {
						out[i].Entry, out[i].ranked, err = l.RankDay(in.String("biz"), day, item)
					} else {
						out[i].Entry, out[i].ranked, err = l.Rank(in.String("biz"), item)
					}
					if err != nil {
						return nil, err
					}
				}
				return out, nil
			},
			Gather: gatherRank,
			Text: func(w io.Writer, in *Input, out any) error {
				var b strings.Builder
				for i, e := range out.([]rankEntry) {
					if e.ranked {
						fmt.Fprintf(&b, "%d %d %d\n", in.Uints("item")[i], e.Rank, e.Likes)
					} else {
						fmt.Fprintf(&b, "%d none\n", in.Uints("item")[i])
					}
				}
				_, err := io.WriteString(w, b.String())
				return err
			},
			Reply: func(w Replier, _ *Input, out any) {
				es := out.([]rankEntry)
				w.WriteArray(len(es))
				for _, e := range es {
					if !e.ranked {
						w.WriteNull()
						continue
					}
					w.WriteMap(2)
					w.WriteBulkString("rank")
					w.WriteInt(int64(e.Rank))
					w.WriteBulkString("likes")
					w.WriteUint(e.Likes)
				}
			},
		},
		{
			CLI: "received", RESP: "LIKE.MRECEIVED", RESPOne: "LIKE.RECEIVED", Group: likesGroup, Mode: Read, Fast: true,
			Open:       OpenExisting,
			Summary:    "the likes owners' items received, over every business",
			Complexity: "O(N) where N is the number of owners",
			Params:     []Param{{Name: "owner", Kind: Uint, Multiple: true, Max: likes.MaxStates}},
			Help: `Prints, per OWNER, the likes received by the items it owns (the owner
named by "like ... OWNER"), over every business:
  OWNER N
Over RESP, LIKE.RECEIVED owner replies the integer; LIKE.MRECEIVED an
array of them, one per owner.

Example:
  $ tally -d /var/lib/tally received 7
  7 5120
`,
			Run:    receivedHere,
			Gather: gatherReceived,
			Text:   textPerID("owner"), Reply: replyUints,
		},
	}
}

// rankEntry is an item's place on a board; ranked is false when it has no
// likes there.
type rankEntry struct {
	likes.Entry
	ranked bool
}

// likesPage checks the page options and reads a page; a store without
// likes has empty lists and refuses any cursor, since it issued none.
func likesPage(db *tallydb.DB, in *Input, read func(l *likes.Likes, biz string, limit int, cursor string) (likes.Page, error)) (any, error) {
	limit, err := pageLimit(in, 100)
	if err != nil {
		return nil, err
	}
	l := db.Likes()
	if l == nil {
		if in.Has("cursor") {
			return nil, fmt.Errorf("%w: the store holds no likes", likes.ErrBadCursor)
		}
		return likes.Page{}, nil
	}
	return read(l, in.String("biz"), limit, in.String("cursor"))
}

// textPerID prints a []uint64 result as "ID N" lines, one per value of
// the repeated parameter param.
func textPerID(param string) func(w io.Writer, in *Input, out any) error {
	return func(w io.Writer, in *Input, out any) error {
		var b strings.Builder
		for i, n := range out.([]uint64) {
			fmt.Fprintf(&b, "%d %d\n", in.Uints(param)[i], n)
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
}

// replyUints replies a []uint64 result as an array of integers.
func replyUints(w Replier, _ *Input, out any) {
	ns := out.([]uint64)
	w.WriteArray(len(ns))
	for _, n := range ns {
		w.WriteUint(n)
	}
}

// Per-shard parts of the gathered likes reads (LIKE.PART ...): what one
// shard holds of a business's board, a user's likes and an owner's
// received total. A sharded cluster's node sends them to every shard and
// merges the replies (the Gather functions below; likes/merge.go); on one
// node they answer the node's own part. Their replies are flat arrays of
// integers, the same over RESP2 and RESP3.

const partContainer = "LIKE.PART"

var (
	pPartDay      = Param{Name: "day", Kind: String, Option: true, Help: "YYYY-MM-DD: that UTC day's board instead of the all-time board"}
	pAfterMs      = Param{Name: "after-ms", Kind: Int, Option: true, Help: "with --after-item: list after that like, made at this time (Unix ms)"}
	pAfterItem    = Param{Name: "after-item", Kind: Uint, Option: true, Help: "with --after-ms: list after the like of this item"}
	checkPartDays = func(in *Input) error {
		if err := checkBusiness(in); err != nil {
			return err
		}
		_, err := checkDay(in)
		return err
	}
)

func likesPartCommands() []*Command {
	return []*Command{
		{
			CLI: "likes-part top", RESP: partContainer + " TOP", Group: likesGroup, Mode: Read, Open: OpenExisting,
			Summary:    "this shard's part of a leaderboard: its N items with the most likes",
			Complexity: "O(N)", Params: []Param{pBiz, {Name: "n", Kind: Int}, pPartDay},
			Check: func(in *Input) error {
				if n := in.Int("n"); n < 1 || n > likes.MaxTop {
					return fmt.Errorf("%w: top %d (want 1..%d)", likes.ErrLimit, n, likes.MaxTop)
				}
				return checkPartDays(in)
			},
			Help: `Prints this store's (one shard's) N items of business BIZ with the most
likes, best first (ties by item id), one "ITEM LIKES" line each; with
--day, that UTC day's board. A sharded cluster's LIKE.TOP merges every
shard's part. Over RESP: a flat array ITEM LIKES ITEM LIKES ...

Example:
  $ tally -d /var/lib/tally likes-part top video 2
  1234 5120
  999 4000
`,
			Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
				l := db.Likes()
				if l == nil {
					return []likes.Entry(nil), nil
				}
				if in.Has("day") {
					day, _ := checkDay(in)
					return l.TopDay(in.String("biz"), day, int(in.Int("n")))
				}
				return l.Top(in.String("biz"), int(in.Int("n")))
			},
			Text: func(w io.Writer, _ *Input, out any) error {
				var b strings.Builder
				for _, e := range out.([]likes.Entry) {
					fmt.Fprintf(&b, "%d %d\n", e.Item, e.Likes)
				}
				_, err := io.WriteString(w, b.String())
				return err
			},
			Reply: func(w Replier, _ *Input, out any) {
				es := out.([]likes.Entry)
				w.WriteArray(2 * len(es))
				for _, e := range es {
					w.WriteUint(e.Item)
					w.WriteUint(e.Likes)
				}
			},
		},
		{
			CLI: "likes-part above", RESP: partContainer + " ABOVE", Group: likesGroup, Mode: Read, Open: OpenExisting,
			Summary:    "this shard's number of items with more likes than each score",
			Complexity: "O(S) per score where S is the number of distinct scores above it",
			Params:     []Param{pBiz, {Name: "score", Kind: Uint, Multiple: true, Max: likes.MaxStates}, pPartDay},
			Check:      checkPartDays,
			Help: `Prints, per SCORE, the number of this store's (one shard's) items of
business BIZ with strictly more likes than SCORE on the all-time board
(or, with --day, that UTC day's board): "SCORE N". An item's rank in a
sharded cluster is 1 + the sum of every shard's count above its likes.
Over RESP: an array of integers, one per score.

Example:
  $ tally -d /var/lib/tally likes-part above video 4000
  4000 1
`,
			Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
				scores := in.Uints("score")
				l := db.Likes()
				if l == nil {
					return make([]uint64, len(scores)), nil
				}
				if in.Has("day") {
					day, _ := checkDay(in)
					return l.AboveDay(in.String("biz"), day, scores, nil)
				}
				return l.Above(in.String("biz"), scores, nil)
			},
			Text: textPerID("score"), Reply: replyUints,
		},
		{
			CLI: "likes-part scores", RESP: partContainer + " SCORES", Group: likesGroup, Mode: Read, Open: OpenExisting,
			Summary:    "items' scores on this shard's board",
			Complexity: "O(N) where N is the number of items",
			Params:     []Param{pBiz, {Name: "item", Kind: Uint, Multiple: true, Max: likes.MaxStates}, pPartDay},
			Check:      checkPartDays,
			Help: `Prints, per ITEM, its score on this store's (one shard's) all-time board
of business BIZ (its likes) or, with --day, on that UTC day's board (its
likes made that day and still standing): "ITEM N", 0 for an item with
none here. Over RESP: an array of integers, one per item.

Example:
  $ tally -d /var/lib/tally likes-part scores video 1234 5
  1234 5120
  5 0
`,
			Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
				items := in.Uints("item")
				l := db.Likes()
				if l == nil {
					return make([]uint64, len(items)), nil
				}
				if in.Has("day") {
					day, _ := checkDay(in)
					return l.ScoresDay(in.String("biz"), day, items, nil)
				}
				return l.Scores(in.String("biz"), items, nil)
			},
			Text: textPerID("item"), Reply: replyUints,
		},
		{
			CLI: "likes-part user-likes", RESP: partContainer + " USERLIKES", Group: likesGroup, Mode: Read, Open: OpenExisting,
			Summary:    "this shard's part of a user's likes, newest first, after a position",
			Complexity: "O(N) where N is the page size",
			Params:     []Param{pBiz, pUser, pLimit, pAfterMs, pAfterItem},
			Check: func(in *Input) error {
				if in.Has("after-ms") != in.Has("after-item") {
					return Usagef("--after-ms and --after-item go together")
				}
				if in.Has("after-ms") && in.Int("after-ms") < 0 {
					return fmt.Errorf("%w: position time %d", likes.ErrBadCursor, in.Int("after-ms"))
				}
				return checkBusiness(in)
			},
			Help: `Prints the items USER likes in business BIZ on this store (one shard),
newest like first, after the like at --after-ms of --after-item (both or
neither), one "ITEM MS" line each (MS: the like's time, Unix ms), then
"more" if more follow or "end". A sharded cluster's LIKE.USERLIKES merges
every shard's part by like time. Over RESP: [more 1|0, [ITEM MS ...]].

Example:
  $ tally -d /var/lib/tally likes-part user-likes video 42 --limit 1
  1234 1741608000000
  more
`,
			Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
				limit, err := pageLimit(in, 100)
				if err != nil {
					return nil, err
				}
				l := db.Likes()
				if l == nil {
					return likes.ShardLikes{}, nil
				}
				var pos *likes.Position
				if in.Has("after-ms") {
					pos = &likes.Position{Ms: in.Int("after-ms"), Item: in.Uint("after-item")}
				}
				pg, more, err := l.UserLikesBefore(in.String("biz"), in.Uint("user"), pos, limit)
				return likes.ShardLikes{Page: pg, More: more}, err
			},
			Text: func(w io.Writer, _ *Input, out any) error {
				p := out.(likes.ShardLikes)
				var b strings.Builder
				for i, id := range p.Page.IDs {
					fmt.Fprintf(&b, "%d %d\n", id, p.Page.Times[i])
				}
				if p.More {
					b.WriteString("more\n")
				} else {
					b.WriteString("end\n")
				}
				_, err := io.WriteString(w, b.String())
				return err
			},
			Reply: func(w Replier, _ *Input, out any) {
				p := out.(likes.ShardLikes)
				w.WriteArray(2)
				if p.More {
					w.WriteInt(1)
				} else {
					w.WriteInt(0)
				}
				w.WriteArray(2 * len(p.Page.IDs))
				for i, id := range p.Page.IDs {
					w.WriteUint(id)
					w.WriteInt(p.Page.Times[i])
				}
			},
		},
		{
			CLI: "likes-part received", RESP: partContainer + " RECEIVED", Group: likesGroup, Mode: Read, Fast: true, Open: OpenExisting,
			Summary:    "this shard's part of the likes owners' items received",
			Complexity: "O(N) where N is the number of owners",
			Params:     []Param{{Name: "owner", Kind: Uint, Multiple: true, Max: likes.MaxStates}},
			Help: `Prints, per OWNER, the likes received by the items it owns that this store
(one shard) holds: "OWNER N". A sharded cluster's LIKE.RECEIVED sums every
shard's part. Over RESP: an array of integers, one per owner.

Example:
  $ tally -d /var/lib/tally likes-part received 7
  7 5120
`,
			Run:  receivedHere,
			Text: textPerID("owner"), Reply: replyUints,
		},
	}
}

// receivedHere is the received totals of in's owners in db.
func receivedHere(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
	owners := in.Uints("owner")
	out := make([]uint64, len(owners))
	if l := db.Likes(); l != nil {
		for i, o := range owners {
			n, err := l.Received(o)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
	}
	return out, nil
}

// dayArgs is the DAY option of a part, if in has --day.
func dayArgs(argv []string, in *Input) []string {
	if in.Has("day") {
		argv = append(argv, "DAY", in.String("day"))
	}
	return argv
}

// uintArgs appends ids in decimal.
func uintArgs(argv []string, ids []uint64) []string {
	for _, id := range ids {
		argv = append(argv, strconv.FormatUint(id, 10))
	}
	return argv
}

// gatherTop is LIKE.TOP over every shard: the merge of each shard's top N
// (likes.MergeTop), ranked over the merge.
func gatherTop(ctx context.Context, g Gatherer, in *Input) (any, error) {
	n := int(in.IntOr("n", 10))
	argv := dayArgs([]string{partContainer, "TOP", in.String("biz"), strconv.Itoa(n)}, in)
	replies, err := callAll(ctx, g, argv)
	if err != nil {
		return nil, err
	}
	parts := make([][]likes.Entry, len(replies))
	for i, r := range replies {
		vals, err := partUints(g.Shards()[i], r, -1)
		if err != nil {
			return nil, err
		}
		if len(vals)%2 != 0 || len(vals) > 2*n {
			return nil, fmt.Errorf("tally: shard %d's top part has %d values for a top %d", g.Shards()[i], len(vals), n)
		}
		for j := 0; j < len(vals); j += 2 {
			parts[i] = append(parts[i], likes.Entry{Item: vals[j], Likes: vals[j+1]})
		}
	}
	return likes.MergeTop(parts, n), nil
}

// gatherRank is LIKE.MRANK over every shard: the items' scores (each
// lives on one shard; the others read 0), then 1 + the sum of every
// shard's count of items scoring more.
func gatherRank(ctx context.Context, g Gatherer, in *Input) (any, error) {
	items := in.Uints("item")
	biz := in.String("biz")
	out := make([]rankEntry, len(items))
	replies, err := callAll(ctx, g, dayArgs(uintArgs([]string{partContainer, "SCORES", biz}, items), in))
	if err != nil {
		return nil, err
	}
	for i, r := range replies {
		scores, err := partUints(g.Shards()[i], r, len(items))
		if err != nil {
			return nil, err
		}
		for j, s := range scores {
			out[j].Likes += s
		}
	}
	var scores []uint64 // distinct non-zero scores
	for j := range out {
		out[j].Item = items[j]
		if s := out[j].Likes; s > 0 && !slices.Contains(scores, s) {
			scores = append(scores, s)
		}
	}
	if len(scores) == 0 {
		return out, nil
	}
	replies, err = callAll(ctx, g, dayArgs(uintArgs([]string{partContainer, "ABOVE", biz}, scores), in))
	if err != nil {
		return nil, err
	}
	above := make([]uint64, len(scores))
	for i, r := range replies {
		ns, err := partUints(g.Shards()[i], r, len(scores))
		if err != nil {
			return nil, err
		}
		for k, n := range ns {
			above[k] += n
		}
	}
	for j := range out {
		if k := slices.Index(scores, out[j].Likes); k >= 0 {
			out[j].Rank, out[j].ranked = int(1+above[k]), true
		}
	}
	return out, nil
}

// gatherUserLikes is LIKE.USERLIKES over every shard: a k-way merge of
// each shard's page by like time, its cursor holding every shard's
// position (likes.GatherCursor).
func gatherUserLikes(ctx context.Context, g Gatherer, in *Input) (any, error) {
	limit, err := pageLimit(in, 100)
	if err != nil {
		return nil, err
	}
	biz, user, shards := in.String("biz"), in.Uint("user"), g.Shards()
	cur := likes.GatherCursor{Business: biz, User: user}
	if in.Has("cursor") {
		if cur, err = likes.DecodeGatherCursor(in.String("cursor")); err != nil {
			return nil, err
		}
		if err := cur.Check(biz, user, shards); err != nil {
			return nil, err
		}
	} else {
		for _, id := range shards {
			cur.Shards = append(cur.Shards, likes.ShardPos{Shard: id})
		}
	}
	argvs := make([][]string, len(shards))
	base := []string{partContainer, "USERLIKES", biz, strconv.FormatUint(user, 10), "LIMIT", strconv.Itoa(limit)}
	for i, s := range cur.Shards {
		switch {
		case s.Done:
		case s.After != nil:
			argvs[i] = append(slices.Clip(base), "AFTERMS", strconv.FormatInt(s.After.Ms, 10), "AFTERITEM", strconv.FormatUint(s.After.Item, 10))
		default:
			argvs[i] = base
		}
	}
	replies, err := g.Call(ctx, argvs)
	if err != nil {
		return nil, err
	}
	parts := make([]likes.ShardLikes, len(shards))
	for i, r := range replies {
		if argvs[i] == nil {
			continue
		}
		a, err := partArray(shards[i], r, 2)
		if err != nil {
			return nil, err
		}
		more, err := partUint(shards[i], a[0])
		if err != nil {
			return nil, err
		}
		vals, err := partUints(shards[i], a[1], -1)
		if err != nil {
			return nil, err
		}
		if len(vals)%2 != 0 || len(vals) > 2*limit {
			return nil, fmt.Errorf("tally: shard %d's user likes part has %d values for a page of %d", shards[i], len(vals), limit)
		}
		p := likes.ShardLikes{More: more != 0}
		for j := 0; j < len(vals); j += 2 {
			p.Page.IDs = append(p.Page.IDs, vals[j])
			p.Page.Times = append(p.Page.Times, int64(vals[j+1]))
		}
		parts[i] = p
	}
	return likes.MergeUserLikes(cur, parts, limit)
}

// gatherReceived is LIKE.MRECEIVED over every shard: the sum of the
// shards' totals.
func gatherReceived(ctx context.Context, g Gatherer, in *Input) (any, error) {
	owners := in.Uints("owner")
	replies, err := callAll(ctx, g, uintArgs([]string{partContainer, "RECEIVED"}, owners))
	if err != nil {
		return nil, err
	}
	out := make([]uint64, len(owners))
	for i, r := range replies {
		ns, err := partUints(g.Shards()[i], r, len(owners))
		if err != nil {
			return nil, err
		}
		for j, n := range ns {
			out[j] += n
		}
	}
	return out, nil
}
