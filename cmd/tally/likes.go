package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/internal/quote"
	"github.com/tallydb/tally/likes"
	"github.com/tallydb/tally/store"
)

// Likes commands: like, unlike, dislike, undislike, likes, liked, likers,
// user-likes, top, and likes load (likes_load.go).

const likeWriteHelp = `Usage: tally -d DIR %[1]s BIZ ITEM USER%[2]s

%[3]s
BIZ names the business (videos, posts, comments: 1 to 58 letters, digits,
'_' or '-'); ITEM and USER are unsigned decimal ids. The item's counts
change in the same atomic write as the user's state. Repeating it changes
nothing. BIZ must have been declared ("tally business add BIZ", or by a
"likes load" that named it): a write to an unknown business is refused
and changes nothing. Prints the item's counts after the call:
  ITEM likes=N dislikes=M
%[4]s
Example:
  $ tally -d /var/lib/tally %[1]s video 1234 42%[5]s
  1234 likes=%[6]s
`

var (
	cmdLike = &command{
		name:     "like",
		synopsis: "USER likes ITEM of business BIZ (replaces a dislike)",
		help: fmt.Sprintf(likeWriteHelp, "like", " [--owner OWNER]",
			"Records that USER likes ITEM (a dislike is replaced by the like).",
			"\nFlags:\n  --owner OWNER   the item's owner, credited with its likes (tally\n                  received); set by the first like that names it\n",
			" --owner 7", "1 dislikes=0"),
	}
	cmdUnlike = &command{
		name:     "unlike",
		synopsis: "remove USER's like of ITEM",
		help:     fmt.Sprintf(likeWriteHelp, "unlike", "", "Removes USER's like of ITEM, if any.", "", "", "0 dislikes=0"),
	}
	cmdDislike = &command{
		name:     "dislike",
		synopsis: "USER dislikes ITEM (replaces a like)",
		help:     fmt.Sprintf(likeWriteHelp, "dislike", "", "Records that USER dislikes ITEM (a like is replaced by the dislike).", "", "", "0 dislikes=1"),
	}
	cmdUndislike = &command{
		name:     "undislike",
		synopsis: "remove USER's dislike of ITEM",
		help:     fmt.Sprintf(likeWriteHelp, "undislike", "", "Removes USER's dislike of ITEM, if any.", "", "", "0 dislikes=0"),
	}
	cmdLikes = &command{
		name:     "likes",
		synopsis: "like and dislike counts of items",
		help: `Usage: tally -d DIR likes BIZ ITEM...

Prints the counts of each ITEM of business BIZ, one line per argument:
  ITEM likes=N dislikes=M
Items nobody liked, and every item of a business that has no likes yet,
read 0. At most 1000 items.

Example:
  $ tally -d /var/lib/tally likes video 1234 1235
  1234 likes=1 dislikes=0
  1235 likes=0 dislikes=0
`,
	}
	cmdLiked = &command{
		name:     "liked",
		synopsis: "USER's state on items: like, dislike or none",
		help: `Usage: tally -d DIR liked BIZ USER ITEM...

Prints USER's state on each ITEM of business BIZ (the "did I like these"
read of a page), one line per argument:
  ITEM like|dislike|none
At most 1000 items.

Example:
  $ tally -d /var/lib/tally liked video 42 1234 1235
  1234 like
  1235 none
`,
	}
	cmdLikers = &command{
		name:     "likers",
		synopsis: "users who like ITEM, a page at a time",
		help: `Usage: tally -d DIR likers BIZ ITEM [--limit N] [--cursor C] [--dislikes]

Prints the users who like ITEM of business BIZ, one id per line, then
"next CURSOR" if there are more (pass it to --cursor for the next page) or
"end". Small sets list in user id order; sets of 4096 users and more are
roaring bitmaps and list in the order users first joined one; a cursor
issued before a set was converted is refused (start again without
--cursor). A cursor not issued by this store is refused.

Flags:
  --limit N     users per page, 1..1000 (default 100)
  --cursor C    continue after the page that printed "next C"
  --dislikes    list the users who dislike ITEM instead

Example:
  $ tally -d /var/lib/tally likers video 1234 --limit 2
  42
  77
  next AQEBAAAAAQAAAAAAAATSAAAAAAAAAE0AAAAAAAAAAH9Mh55bYlqtX_nHrw
`,
	}
	cmdUserLikes = &command{
		name:     "user-likes",
		synopsis: "items USER likes, newest first, a page at a time",
		help: `Usage: tally -d DIR user-likes BIZ USER [--limit N] [--cursor C]

Prints the items USER likes in business BIZ, newest like first, one id per
line, then "next CURSOR" if there are more or "end". A cursor not issued by
this store is refused.

Flags:
  --limit N     items per page, 1..1000 (default 100)
  --cursor C    continue after the page that printed "next C"

Example:
  $ tally -d /var/lib/tally user-likes video 42
  1234
  end
`,
	}
	cmdTop = &command{
		name:     "top",
		synopsis: "leaderboard: the N items of BIZ with the most likes",
		help: `Usage: tally -d DIR top BIZ [N] [--day YYYY-MM-DD]

Prints the N (1..1000, default 10) items of business BIZ with the most
likes, best first, one line each:
  RANK ITEM LIKES
Tied items share a rank (1, 2, 2, 4) and are listed by item id. With
--day, the board of that UTC day: items by the likes made that day (and
not undone since). The boards of the last 7 days, today included, are kept
(the store's setting; older days are refused).

Flags:
  --day YYYY-MM-DD   the day board instead of the all-time board

Example:
  $ tally -d /var/lib/tally top video 3
  1 1234 5120
  2 999 4000
  2 1001 4000
`,
	}
)

func init() {
	cmdLike.run = func(e *env, args []string) error { return runLikeWrite(e, cmdLike, args) }
	cmdUnlike.run = func(e *env, args []string) error { return runLikeWrite(e, cmdUnlike, args) }
	cmdDislike.run = func(e *env, args []string) error { return runLikeWrite(e, cmdDislike, args) }
	cmdUndislike.run = func(e *env, args []string) error { return runLikeWrite(e, cmdUndislike, args) }
	cmdLikes.run = runLikes
	cmdLiked.run = runLiked
	cmdLikers.run = runLikers
	cmdUserLikes.run = runUserLikes
	cmdTop.run = runTop
}

// openLikes opens the database through tally.Open. A command that only
// reads passes create=false: the packages whose data exists are opened,
// and l is nil when the store holds no likes (so reading creates
// nothing); one that writes creates the store and the packages if needed.
func (e *env) openLikes(create bool) (db *tallydb.DB, l *likes.Likes, err error) {
	mode := openExisting
	if create {
		mode = openCreate
	}
	if db, err = e.openDB(mode); err != nil {
		return nil, nil, err
	}
	return db, db.Likes(), nil
}

// parseBizItems parses "BIZ ITEM...".
func parseBizItems(pos []string) (string, []uint64, error) {
	if len(pos) < 2 {
		return "", nil, usagef("want BIZ ITEM..., got %d arguments", len(pos))
	}
	biz, err := parseBusiness(pos[0])
	if err != nil {
		return "", nil, err
	}
	items, err := parseItems(pos[1:])
	return biz, items, err
}

// parseDay parses a --day flag (YYYY-MM-DD, a UTC day); "" is none.
func parseDay(day string) (time.Time, error) {
	if day == "" {
		return time.Time{}, nil
	}
	when, err := time.Parse(time.DateOnly, day)
	if err != nil {
		return time.Time{}, usagef("bad --day %s: want YYYY-MM-DD", quote.Input(day))
	}
	return when, nil
}

// parseBusiness checks a business name before anything is opened.
func parseBusiness(s string) (string, error) {
	if len(s) > likes.MaxBusinessLen || store.ValidateName(s) != nil {
		return "", fmt.Errorf("%w: %s (want 1 to %d letters, digits, '_' or '-', not starting with '-')",
			likes.ErrInvalidBusiness, quote.Input(s), likes.MaxBusinessLen)
	}
	return s, nil
}

func runLikeWrite(e *env, c *command, args []string) error {
	fs := e.flags(c)
	owner := "0"
	if c == cmdLike {
		fs.StringVar(&owner, "owner", "0", "")
	}
	pos, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(pos) != 3 {
		return usagef("want BIZ ITEM USER, got %d arguments", len(pos))
	}
	biz, err := parseBusiness(pos[0])
	if err != nil {
		return err
	}
	item, err := parseUint("item", pos[1])
	if err != nil {
		return err
	}
	user, err := parseUint("user", pos[2])
	if err != nil {
		return err
	}
	own, err := parseUint("owner", owner)
	if err != nil {
		return err
	}
	db, l, err := e.openLikes(c == cmdLike || c == cmdDislike)
	if err != nil {
		return err
	}
	var res likes.Result
	switch {
	case l == nil: // unlike or undislike in a store without likes
		res = likes.Result{Item: item}
	case c == cmdLike:
		res, err = l.Like(biz, item, user, own)
	case c == cmdUnlike:
		res, err = l.Unlike(biz, item, user)
	case c == cmdDislike:
		res, err = l.Dislike(biz, item, user)
	default:
		res, err = l.Undislike(biz, item, user)
	}
	if err != nil {
		return closeTally(db, err)
	}
	fmt.Fprintf(e.stdout, "%d likes=%d dislikes=%d\n", item, res.Likes, res.Dislikes)
	return closeTally(db, nil)
}

// parseItems parses the ITEM arguments of likes and liked.
func parseItems(args []string) ([]uint64, error) {
	if len(args) == 0 {
		return nil, usagef("want at least one ITEM")
	}
	if len(args) > likes.MaxStates {
		return nil, fmt.Errorf("%w: %d items (limit %d)", likes.ErrLimit, len(args), likes.MaxStates)
	}
	items := make([]uint64, len(args))
	for i, a := range args {
		v, err := parseUint("item", a)
		if err != nil {
			return nil, err
		}
		items[i] = v
	}
	return items, nil
}

func runLikes(e *env, args []string) error {
	pos, err := parse(e.flags(cmdLikes), args, true)
	if err != nil {
		return err
	}
	biz, items, err := parseBizItems(pos)
	if err != nil {
		return err
	}
	db, l, err := e.openLikes(false)
	if err != nil {
		return err
	}
	counts := make([]likes.Counts, len(items))
	if l != nil {
		if counts, err = l.Counts(biz, items, counts); err != nil {
			return closeTally(db, err)
		}
	}
	for i, item := range items {
		fmt.Fprintf(e.stdout, "%d likes=%d dislikes=%d\n", item, counts[i].Likes, counts[i].Dislikes)
	}
	return closeTally(db, nil)
}

func runLiked(e *env, args []string) error {
	pos, err := parse(e.flags(cmdLiked), args, true)
	if err != nil {
		return err
	}
	if len(pos) < 3 {
		return usagef("want BIZ USER ITEM..., got %d arguments", len(pos))
	}
	biz, err := parseBusiness(pos[0])
	if err != nil {
		return err
	}
	user, err := parseUint("user", pos[1])
	if err != nil {
		return err
	}
	items, err := parseItems(pos[2:])
	if err != nil {
		return err
	}
	db, l, err := e.openLikes(false)
	if err != nil {
		return err
	}
	states := make([]likes.State, len(items))
	if l != nil {
		if states, err = l.States(biz, user, items, states); err != nil {
			return closeTally(db, err)
		}
	}
	for i, item := range items {
		fmt.Fprintf(e.stdout, "%d %s\n", item, states[i])
	}
	return closeTally(db, nil)
}

// likesPageFlags adds --limit and --cursor to fs.
func likesPageFlags(e *env, c *command) (*flag.FlagSet, *int, *string) {
	fs := e.flags(c)
	limit := fs.Int("limit", 100, "")
	cursor := fs.String("cursor", "", "")
	return fs, limit, cursor
}

func checkLimit(n int) error {
	if n < 1 || n > likes.MaxPage {
		return fmt.Errorf("%w: --limit %d (want 1..%d)", likes.ErrLimit, n, likes.MaxPage)
	}
	return nil
}

func printPage(e *env, pg likes.Page) {
	var b strings.Builder
	for _, id := range pg.IDs {
		b.WriteString(strconv.FormatUint(id, 10))
		b.WriteByte('\n')
	}
	if pg.Next != "" {
		fmt.Fprintf(&b, "next %s\n", pg.Next)
	} else {
		b.WriteString("end\n")
	}
	fmt.Fprint(e.stdout, b.String())
}

func runLikers(e *env, args []string) error {
	fs, limit, cursor := likesPageFlags(e, cmdLikers)
	dislikes := fs.Bool("dislikes", false, "")
	return runLikesPage(e, fs, args, "ITEM", limit, cursor, func(l *likes.Likes, biz string, item uint64) (likes.Page, error) {
		if *dislikes {
			return l.Dislikers(biz, item, *limit, *cursor)
		}
		return l.Likers(biz, item, *limit, *cursor)
	})
}

func runUserLikes(e *env, args []string) error {
	fs, limit, cursor := likesPageFlags(e, cmdUserLikes)
	return runLikesPage(e, fs, args, "USER", limit, cursor, func(l *likes.Likes, biz string, user uint64) (likes.Page, error) {
		return l.UserLikes(biz, user, *limit, *cursor)
	})
}

// runLikesPage parses BIZ ID (ID named by what), checks --limit, and prints
// the page read reads. A store without likes has empty lists, and refuses
// any cursor, since it issued none.
func runLikesPage(e *env, fs *flag.FlagSet, args []string, what string, limit *int, cursor *string,
	read func(l *likes.Likes, biz string, id uint64) (likes.Page, error)) error {
	pos, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("want BIZ %s, got %d arguments", what, len(pos))
	}
	biz, err := parseBusiness(pos[0])
	if err != nil {
		return err
	}
	id, err := parseUint(strings.ToLower(what), pos[1])
	if err != nil {
		return err
	}
	if err := checkLimit(*limit); err != nil {
		return err
	}
	db, l, err := e.openLikes(false)
	if err != nil {
		return err
	}
	var pg likes.Page
	switch {
	case l == nil && *cursor != "":
		err = fmt.Errorf("%w: the store holds no likes", likes.ErrBadCursor)
	case l != nil:
		pg, err = read(l, biz, id)
	}
	if err != nil {
		return closeTally(db, err)
	}
	printPage(e, pg)
	return closeTally(db, nil)
}

func runTop(e *env, args []string) error {
	fs := e.flags(cmdTop)
	day := fs.String("day", "", "")
	pos, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 2 {
		return usagef("want BIZ [N], got %d arguments", len(pos))
	}
	biz, err := parseBusiness(pos[0])
	if err != nil {
		return err
	}
	n := 10
	if len(pos) == 2 {
		v, err := strconv.Atoi(pos[1])
		if err != nil {
			return usagef("bad N %s: want a number 1..%d", quote.Input(pos[1]), likes.MaxTop)
		}
		if v < 1 || v > likes.MaxTop {
			return fmt.Errorf("%w: top %d (want 1..%d)", likes.ErrLimit, v, likes.MaxTop)
		}
		n = v
	}
	when, err := parseDay(*day)
	if err != nil {
		return err
	}
	db, l, err := e.openLikes(false)
	if err != nil {
		return err
	}
	var top []likes.Entry
	switch {
	case l == nil:
	case *day != "":
		top, err = l.TopDay(biz, when, n)
	default:
		top, err = l.Top(biz, n)
	}
	if err != nil {
		return closeTally(db, err)
	}
	var b strings.Builder
	for _, t := range top {
		fmt.Fprintf(&b, "%d %d %d\n", t.Rank, t.Item, t.Likes)
	}
	fmt.Fprint(e.stdout, b.String())
	return closeTally(db, nil)
}
