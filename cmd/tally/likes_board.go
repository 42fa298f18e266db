package main

import (
	"fmt"
	"strings"

	"github.com/tallydb/tally/internal/quote"
	"github.com/tallydb/tally/likes"
)

// rank and received: the CLI forms of LIKE.RANK and LIKE.RECEIVED.

var cmdRank = &command{
	name:     "rank",
	synopsis: "an item's rank and likes on a business's board",
	help: `Usage: tally -d DIR rank BIZ ITEM... [--day YYYY-MM-DD]

Prints, per ITEM, its rank on the all-time board of business BIZ (or, with
--day, on that UTC day's board) and its likes there, as "top" ranks them
(ties share a rank):
  ITEM RANK LIKES
or "ITEM none" for an item with no likes on that board (LIKE.RANK's nil).
The boards of the last 7 days, today included, are kept.

Example:
  $ tally -d /var/lib/tally rank video 1234 999
  1234 1 5120
  999 2 4000
`,
}

var cmdReceived = &command{
	name:     "received",
	synopsis: "the likes an owner's items received, over every business",
	help: `Usage: tally -d DIR received OWNER...

Prints, per OWNER, the likes received by the items it owns (the owner
named by "like ... --owner"), over every business:
  OWNER N

Example:
  $ tally -d /var/lib/tally received 7
  7 5120
`,
}

func init() {
	cmdRank.run = runRank
	cmdReceived.run = runReceived
}

func runRank(e *env, args []string) error {
	fs := e.flags(cmdRank)
	day := fs.String("day", "", "")
	pos, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	biz, items, err := parseBizItems(pos)
	if err != nil {
		return err
	}
	when, err := parseDay(*day)
	if err != nil {
		return err
	}
	db, l, err := e.openLikes(false)
	if err != nil {
		return err
	}
	// Everything is read before anything is printed.
	var b strings.Builder
	for _, item := range items {
		var ent likes.Entry
		ranked := false
		switch {
		case l == nil:
		case *day != "":
			ent, ranked, err = l.RankDay(biz, when, item)
		default:
			ent, ranked, err = l.Rank(biz, item)
		}
		if err != nil {
			return closeTally(db, err)
		}
		if ranked {
			fmt.Fprintf(&b, "%d %d %d\n", item, ent.Rank, ent.Likes)
		} else {
			fmt.Fprintf(&b, "%d none\n", item)
		}
	}
	fmt.Fprint(e.stdout, b.String())
	return closeTally(db, nil)
}

func runReceived(e *env, args []string) error {
	pos, err := parse(e.flags(cmdReceived), args, true)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("want OWNER..., got no arguments")
	}
	owners, err := parseIDs("OWNER", pos)
	if err != nil {
		return err
	}
	db, l, err := e.openLikes(false)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, o := range owners {
		var n uint64
		if l != nil {
			if n, err = l.Received(o); err != nil {
				return closeTally(db, err)
			}
		}
		fmt.Fprintf(&b, "%d %d\n", o, n)
	}
	fmt.Fprint(e.stdout, b.String())
	return closeTally(db, nil)
}

var cmdSetOwner = &command{
	name:     "set-owner",
	synopsis: "change an item's owner, moving its likes to the new owner's total",
	help: `Usage: tally -d DIR set-owner BIZ ITEM OWNER

Makes OWNER the owner of ITEM of business BIZ (the CLI form of
LIKE.SETOWNER): the item's likes move from the previous owner's received
total to OWNER's, atomically. Prints the item's counts:
  ITEM likes=N dislikes=M

Example:
  $ tally -d /var/lib/tally set-owner video 1234 8
  1234 likes=5120 dislikes=3
`,
}

func init() { cmdSetOwner.run = runSetOwner }

func runSetOwner(e *env, args []string) error {
	pos, err := parse(e.flags(cmdSetOwner), args, true)
	if err != nil {
		return err
	}
	if len(pos) != 3 {
		return usagef("want BIZ ITEM OWNER, got %d arguments", len(pos))
	}
	biz, err := parseBusiness(pos[0])
	if err != nil {
		return err
	}
	ids, err := parseIDs("ITEM or OWNER", pos[1:])
	if err != nil {
		return err
	}
	db, l, err := e.openLikes(false)
	if err != nil {
		return err
	}
	if l == nil {
		return closeTally(db, fmt.Errorf("%w %s (businesses: none yet)", likes.ErrUnknownBusiness, quote.Input(biz)))
	}
	res, err := l.SetOwner(biz, ids[0], ids[1])
	if err == nil {
		fmt.Fprintf(e.stdout, "%d likes=%d dislikes=%d\n", ids[0], res.Likes, res.Dislikes)
	}
	return closeTally(db, err)
}
