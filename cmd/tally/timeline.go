package main

// The timeline's bulk load of follows, a CLI-only file command (reached
// over RESP through TALLY.EXEC). The other timeline commands are entries
// of the one command table (internal/commands/timeline.go).

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/tallydb/tally/internal/quote"
	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/timeline"
)

var cmdFollowsLoad = &command{
	keyValues: true,
	name:      "follows load",
	synopsis:  "bulk-load follows from a CSV file of follower,followee lines",
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

func init() { cmdFollowsLoad.run = runFollowsLoad }

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
