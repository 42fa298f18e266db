package main

import (
	"fmt"
	"strings"

	"github.com/tallydb/tally/likes"
)

// Likes businesses are declared, like counters and unread kinds: a like
// in a business nobody declared (a typo) is refused instead of creating
// one.

var cmdBusinessAdd = &command{
	name:     "business add",
	synopsis: "declare a likes business (creates the store if DIR is new)",
	help: `Usage: tally -d DIR business add BIZ [--range-bits N]
           [--hot-ranges K | --age DURATION [--id-epoch-ms MS] [--id-time-shift BITS]]

Declares business BIZ (1 to 58 letters, digits, '_' or '-'), so that
like, dislike and their RESP forms accept it: a like in a business nobody
declared is refused ("likes: unknown business"), so a typo never creates
one. "likes load" declares the businesses its file names. Declaring an
existing business changes nothing. The flags shape the counter of the
business's like and dislike counts, keyed by item id, as "counter add"'s
do; the defaults are --range-bits 48 and --hot-ranges 64. Prints nothing.

Example:
  $ tally -d /var/lib/tally business add video --age 720h
`,
}

var cmdBusinessList = &command{
	name:     "business list",
	synopsis: "list the likes businesses",
	help: `Usage: tally -d DIR business list

Prints the declared businesses, one per line, sorted.

Example:
  $ tally -d /var/lib/tally business list
  video
`,
}

func init() {
	cmdBusinessAdd.run = runBusinessAdd
	cmdBusinessList.run = runBusinessList
}

func runBusinessAdd(e *env, args []string) error {
	fs := e.flags(cmdBusinessAdd)
	shape := counterShapeFlags(fs)
	pos, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want exactly one BIZ, got %d arguments", len(pos))
	}
	co, err := shape()
	if err != nil {
		return err
	}
	if f := fs.Lookup("keep-hot"); f != nil && f.Value.String() == "true" {
		return usagef("--keep-hot is not a business policy: use --hot-ranges K or --age DURATION")
	}
	// Checked before the store is opened (and maybe created).
	biz, err := parseBusiness(pos[0])
	if err != nil {
		return err
	}
	opts := likes.BusinessOptions{RangeBits: co.RangeBits, Age: co.Age}
	if err := (co).Validate(); err != nil {
		return err
	}
	db, l, err := e.openLikes(true)
	if err != nil {
		return err
	}
	return closeTally(db, l.AddBusiness(biz, opts))
}

func runBusinessList(e *env, args []string) error {
	if err := parseNoArgs(e, cmdBusinessList, args); err != nil {
		return err
	}
	db, l, err := e.openLikes(false)
	if err != nil {
		return err
	}
	if l != nil {
		fmt.Fprint(e.stdout, strings.Join(append(l.Businesses(), ""), "\n"))
	}
	return closeTally(db, nil)
}
