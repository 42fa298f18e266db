package commands

import (
	"context"
	"fmt"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/likes"
)

// Business commands: likes businesses are declared, like counters and
// unread kinds, so a like in a business nobody declared (a typo) is
// refused instead of creating one.

func businessCommands() []*Command {
	return []*Command{
		{
			CLI: "business add", RESP: "LIKE.BUSINESS ADD", Group: likesGroup, Mode: Admin, Open: OpenCreate,
			Summary:    "declare a likes business (creates the store if DIR is new)",
			Complexity: "O(1)",
			// The counter's shape as "counter add" takes it, but for
			// keep-hot: a business's counter is keyed by item ids, which
			// keep coming, so its ranges must age.
			Params: []Param{pBiz, pRangeBits, pHotRanges, pAge, pEpochMs, pTimeShift},
			Check: func(in *Input) error {
				if err := checkBusiness(in); err != nil {
					return err
				}
				_, err := counterShape(in)
				return err
			},
			Help: `Declares business BIZ (1 to 58 letters, digits, '_' or '-'), so that
like, dislike and their RESP forms accept it: a like in a business nobody
declared is refused ("likes: unknown business"), so a typo never creates
one. "likes load" declares the businesses its file names. Declaring an
existing business changes nothing. The flags shape the counter of the
business's like and dislike counts, keyed by item id, as "counter add"'s
do (--keep-hot is not a business policy); the defaults are --range-bits 48
and --hot-ranges 64. Prints nothing (over RESP: OK).

Example:
  $ tally -d /var/lib/tally business add video --age 720h
`,
			Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
				co, err := counterShape(in)
				if err != nil {
					return nil, err
				}
				l := db.Likes()
				if l == nil { // not on a writable database; kept for safety
					return nil, fmt.Errorf("%w: the database was opened without likes", likes.ErrInvalidOption)
				}
				return nil, l.AddBusiness(in.String("biz"), likes.BusinessOptions{RangeBits: co.RangeBits, Age: co.Age})
			},
			Text: counterNoText, Reply: counterOK,
		},
		{
			CLI: "business list", RESP: "LIKE.BUSINESS LIST", Group: likesGroup, Mode: Read, Open: OpenExisting,
			Summary:    "list the likes businesses",
			Complexity: "O(B) where B is the number of businesses",
			Help: `Prints the declared businesses, one per line, sorted. Over RESP: an array
of their names.

Example:
  $ tally -d /var/lib/tally business list
  video
`,
			Run: func(_ context.Context, db *tallydb.DB, _ *Input) (any, error) {
				if l := db.Likes(); l != nil {
					return l.Businesses(), nil
				}
				return []string{}, nil
			},
			Text: counterTextLines, Reply: counterReplyLines,
		},
	}
}
