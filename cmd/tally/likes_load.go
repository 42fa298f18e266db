package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/tallydb/tally/internal/quote"
	"github.com/tallydb/tally/likes"
)

var cmdLikesLoad = &command{
	keyValues: true,
	name:      "likes load",
	synopsis:  "bulk-load historical likes from a CSV file",
	help: `Usage: tally -d DIR likes load FILE [--skip-bad]

Loads historical likes: each line of FILE (CSV without a header; "-" reads
standard input) is
  BUSINESS,ITEM,USER[,TIME]
and is applied like "tally like" without an owner, at TIME: Unix seconds
or RFC 3339 (2024-05-01T12:00:00Z), now if absent. A like already there
(or repeated in FILE) changes nothing; a like replaces a dislike. Sets,
counts, user lists and leaderboards (all-time and the kept days) are built
in large batches, and the counts loaded without the counter log. Blank
lines and lines starting with # are ignored. Likes stop while it runs.
Creates the store if DIR is new or empty, and each business that is new.

Bad lines (wrong number of fields, a business name that is not 1 to 58
letters, digits, '_' or '-', an id that is not an unsigned decimal below
2^64, a time that does not parse, is before 1970 or more than a day ahead)
are reported on stderr as "tally: FILE:LINE: what is wrong", the first 20,
then a count. Without --skip-bad any bad line means nothing is loaded
(exit 1); with it the good lines are loaded.

On a terminal a progress bar shows parsing, then loading. At the end prints
"key value" lines:
  input_likes     good lines read
  businesses      businesses loaded
  added           new likes
  replaced        likes that replaced a dislike
  unchanged       likes already there, or repeated in FILE
  items           items whose counts changed
  converted       like sets that became roaring bitmaps
  bad_lines       lines skipped as bad
  seconds         wall time from the first byte read to durable, 3 decimals
  likes_per_sec   input_likes / seconds

Flags:
  --skip-bad    load the good lines even if some are bad

Example:
  $ tally -d /var/lib/tally likes load likes.csv
  input_likes 3
  businesses 1
  added 3
  replaced 0
  unchanged 0
  items 2
  converted 0
  bad_lines 0
  seconds 0.021
  likes_per_sec 142
`,
}

func init() { cmdLikesLoad.run = runLikesLoad }

func runLikesLoad(e *env, args []string) error {
	fs := e.flags(cmdLikesLoad)
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
	in, size, shown := src.r, src.size, src.name
	if _, err := e.options(); err != nil {
		return err
	}
	ctx, stop := e.interruptContext()
	defer stop()

	start := time.Now()
	p := newLikesParser(start)
	bar := newProgress(e.stdout, "parsing", "bytes", size)
	err = p.parse(in, bar.update)
	bar.finish()
	if err != nil {
		return fmt.Errorf("read %s: %w", shown, err)
	}
	if err := p.report(e, shown, "likes load", *skipBad); err != nil {
		return err
	}
	var total likes.LoadStats
	if p.input > 0 {
		db, l, err := e.openLikes(true)
		if err != nil {
			return err
		}
		names := make([]string, 0, len(p.byBiz))
		for name := range p.byBiz {
			names = append(names, name)
		}
		slices.Sort(names)
		bar = newProgress(e.stdout, "loading", "likes", int64(p.input))
		done := 0
		for _, name := range names {
			st, err := l.Load(ctx, name, p.byBiz[name], func(n int) { bar.update(int64(done + n)) })
			if err != nil {
				bar.finish()
				return closeTally(db, fmt.Errorf("likes load %s: %w", name, err))
			}
			done += len(p.byBiz[name])
			total.Added += st.Added
			total.Replaced += st.Replaced
			total.Unchanged += st.Unchanged
			total.Items += st.Items
			total.Converted += st.Converted
			p.byBiz[name] = nil
		}
		bar.finish()
		if err := closeTally(db, nil); err != nil {
			return err
		}
	}
	el := time.Since(start).Seconds()
	w := e.stdout
	fmt.Fprintf(w, "input_likes %d\n", p.input)
	fmt.Fprintf(w, "businesses %d\n", len(p.byBiz))
	fmt.Fprintf(w, "added %d\n", total.Added)
	fmt.Fprintf(w, "replaced %d\n", total.Replaced)
	fmt.Fprintf(w, "unchanged %d\n", total.Unchanged)
	fmt.Fprintf(w, "items %d\n", total.Items)
	fmt.Fprintf(w, "converted %d\n", total.Converted)
	fmt.Fprintf(w, "bad_lines %d\n", p.nbad)
	fmt.Fprintf(w, "seconds %.3f\n", el)
	fmt.Fprintf(w, "likes_per_sec %.0f\n", float64(p.input)/max(el, 1e-9))
	return nil
}

// likesParser reads BUSINESS,ITEM,USER[,TIME] lines, grouped by business.
type likesParser struct {
	maxMs int64 // a time past it is bad: more than a day ahead
	byBiz map[string][]likes.LoadLike
	input int
	badLines
}

func newLikesParser(now time.Time) *likesParser {
	return &likesParser{maxMs: now.Add(24 * time.Hour).UnixMilli(), byBiz: map[string][]likes.LoadLike{}}
}

func (p *likesParser) parse(r io.Reader, progress func(int64)) error {
	return p.scan(bufio.NewReaderSize(r, 1<<20), progress, p.parseLine)
}

// parseLine parses one line; it allocates only for a new business name
// and for bad lines.
func (p *likesParser) parseLine(line []byte) {
	text := bytes.TrimSpace(line)
	if len(text) == 0 || text[0] == '#' {
		return
	}
	var f [5][]byte
	n := 0
	for rest := text; ; n++ {
		i := bytes.IndexByte(rest, ',')
		if n == len(f) {
			break
		}
		if i < 0 {
			f[n] = bytes.TrimSpace(rest)
			n++
			break
		}
		f[n] = bytes.TrimSpace(rest[:i])
		rest = rest[i+1:]
	}
	if n < 3 || n > 4 {
		p.badf("want 3 or 4 fields (business,item,user[,time]), got %d", bytes.Count(text, []byte(","))+1)
		return
	}
	biz := f[0]
	likesOf, ok := p.byBiz[string(biz)]
	if !ok {
		if _, err := parseBusiness(string(biz)); err != nil {
			p.badf("business %s: want 1 to %d letters, digits, '_' or '-', not starting with '-'", quote.Input(string(biz)), likes.MaxBusinessLen)
			return
		}
	}
	item, ok1 := parseDec(f[1])
	user, ok2 := parseDec(f[2])
	switch {
	case !ok1:
		p.badf("item %s: want an unsigned decimal integer below 2^64", quote.Input(string(f[1])))
		return
	case !ok2:
		p.badf("user %s: want an unsigned decimal integer below 2^64", quote.Input(string(f[2])))
		return
	}
	var ms int64
	if n == 4 {
		var err error
		if ms, err = p.parseTime(f[3]); err != nil {
			p.badf("time %s: %v", quote.Input(string(f[3])), err)
			return
		}
	}
	if !ok {
		p.byBiz[string(biz)] = nil
	}
	p.byBiz[string(biz)] = append(likesOf, likes.LoadLike{Item: item, User: user, Ms: ms})
	p.input++
}

// parseTime parses Unix seconds or RFC 3339 into Unix milliseconds
// (at least 1: 0 means "now" to Load).
func (p *likesParser) parseTime(b []byte) (int64, error) {
	var ms int64
	if s, ok := parseDec(b); ok {
		if s > math.MaxInt64/1000 {
			return 0, errors.New("more than a day in the future")
		}
		ms = int64(s) * 1000
	} else {
		t, err := time.Parse(time.RFC3339Nano, string(b))
		if err != nil {
			return 0, errors.New("want Unix seconds or RFC 3339 (2024-05-01T12:00:00Z)")
		}
		if t.Before(time.Unix(0, 0)) {
			return 0, errors.New("before 1970")
		}
		ms = t.UnixMilli()
	}
	if ms > p.maxMs {
		return 0, errors.New("more than a day in the future")
	}
	return max(ms, 1), nil
}

// parseDec parses an unsigned decimal below 2^64.
func parseDec(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		d := c - '0'
		if d > 9 || v > (math.MaxUint64-uint64(d))/10 {
			return 0, false
		}
		v = v*10 + uint64(d)
	}
	return v, true
}
