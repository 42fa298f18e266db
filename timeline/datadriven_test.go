package timeline

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestDataDriven runs the transcripts in testdata/: follow, publish,
// unfollow, re-follow, expire, return and home pages, as a reader of the
// issue would tell the story. Commands (one per block; input lines are
// "USER ID..." or "AUTHOR POST..." as the command says):
//
//	config [cap=N] [window=D] [pull=N] [chunk=N]   set and print the config
//	follow / unfollow                             lines "USER FOLLOWEE..."
//	publish / unpublish                           lines "AUTHOR POST..."
//	active USER...                                MarkActive
//	home user=U [limit=N] [continue] [all]        a page (or every page)
//	inbox user=U                                  the stored inbox: floor, entries
//	user ID...                                    counts and state
//	followers|followees id=U [limit=N] [all]      a page of the list
//	jobs / run / advance by=D / expire / reopen / check
//	fanouts [inline=N] [shared=N]                 reopen with Options.InlineFanout, SharedFanout
//
// Transcripts run with InlineFanout and SharedFanout -1 (every fan-out a
// job of its own) unless they say otherwise with fanouts.
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		e := newEnv(t, Config{})
		cursors := map[uint64]string{}
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			return runCommand(t, e, cursors, td)
		})
	})
}

func lineIDs(t *testing.T, line string) []uint64 {
	t.Helper()
	var out []uint64
	for _, f := range strings.Fields(line) {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			t.Fatalf("bad id %q", f)
		}
		out = append(out, v)
	}
	return out
}

func argIDs(t *testing.T, td *datadriven.TestData) []uint64 {
	var out []uint64
	for _, a := range td.CmdArgs {
		v, err := strconv.ParseUint(a.Key, 10, 64)
		if err != nil {
			t.Fatalf("bad id %q", a.Key)
		}
		out = append(out, v)
	}
	return out
}

func runCommand(t *testing.T, e *env, cursors map[uint64]string, td *datadriven.TestData) string {
	var b strings.Builder
	tl := e.tl
	each := func(fn func(first uint64, rest []uint64)) {
		for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			ids := lineIDs(t, line)
			fn(ids[0], ids[1:])
		}
	}
	switch td.Cmd {
	case "config":
		var c Config
		for _, a := range td.CmdArgs {
			switch a.Key {
			case "cap":
				td.ScanArgs(t, "cap", &c.InboxCap)
			case "window":
				var s string
				td.ScanArgs(t, "window", &s)
				d, err := time.ParseDuration(s)
				must(t, err)
				c.ActiveWindow = d
			case "pull":
				td.ScanArgs(t, "pull", &c.PullThreshold)
			case "chunk":
				td.ScanArgs(t, "chunk", &c.ChunkSize)
			}
		}
		got, err := tl.SetConfig(c)
		if err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprintf("cap=%d window=%v pull=%d chunk=%d", got.InboxCap, got.ActiveWindow, got.PullThreshold, got.ChunkSize)
	case "follow", "unfollow":
		each(func(u uint64, as []uint64) {
			for _, a := range as {
				var ch bool
				var err error
				if td.Cmd == "follow" {
					ch, err = tl.Follow(u, a)
				} else {
					ch, err = tl.Unfollow(u, a)
				}
				switch {
				case err != nil:
					fmt.Fprintf(&b, "%d %s %d: error: %v\n", u, td.Cmd, a, err)
				case ch:
					fmt.Fprintf(&b, "%d %s %d: ok\n", u, td.Cmd, a)
				default:
					fmt.Fprintf(&b, "%d %s %d: no change\n", u, td.Cmd, a)
				}
			}
		})
	case "mute", "unmute", "hide", "unhide":
		each(func(u uint64, as []uint64) {
			var n int
			var err error
			switch td.Cmd {
			case "mute":
				n, err = tl.Mute(u, as...)
			case "unmute":
				n, err = tl.Unmute(u, as...)
			case "hide":
				n, err = tl.Hide(u, as...)
			default:
				n, err = tl.Unhide(u, as...)
			}
			if err != nil {
				fmt.Fprintf(&b, "%d %s %v: error: %v\n", u, td.Cmd, as, err)
			} else {
				fmt.Fprintf(&b, "%d %s %v: %d changed\n", u, td.Cmd, as, n)
			}
		})
	case "publish":
		each(func(a uint64, ps []uint64) {
			for _, p := range ps {
				r, err := tl.Publish(a, p)
				waiting := false
				if err == nil && r.Job != 0 {
					waiting, err = tl.sharedWaiting(p)
				}
				switch {
				case err != nil:
					fmt.Fprintf(&b, "%d publish %d: error: %v\n", a, p, err)
				case r.Duplicate:
					fmt.Fprintf(&b, "%d publish %d: duplicate\n", a, p)
				case waiting:
					fmt.Fprintf(&b, "%d publish %d: shared fan-out queued\n", a, p)
				case r.Job != 0:
					fmt.Fprintf(&b, "%d publish %d: fan-out queued\n", a, p)
				default:
					info, _, err := tl.Post(p)
					must(t, err)
					if info.Delivered > 0 {
						fmt.Fprintf(&b, "%d publish %d: delivered in the publish to %d\n", a, p, info.Delivered)
					} else {
						fmt.Fprintf(&b, "%d publish %d: no fan-out\n", a, p)
					}
				}
			}
		})
	case "repost", "comment":
		// repost: lines "USER AUTHOR POST REPOST"; comment: lines
		// "USER PARENT POST" (a comment on PARENT).
		for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
			var ids []uint64
			for _, f := range strings.Fields(line) {
				v, err := strconv.ParseUint(f, 10, 64)
				must(t, err)
				ids = append(ids, v)
			}
			var r PublishResult
			var err error
			var id uint64
			if td.Cmd == "repost" {
				r, id, err = tl.Repost(ids[0], ids[1], ids[2], ids[3])
			} else {
				id = ids[2]
				var rs []PublishResult
				if rs, err = tl.PublishWith(ids[0], PublishOptions{Type: TypeComment, Ref: ids[1]}, id); err == nil {
					r = rs[0]
				}
			}
			switch {
			case err != nil:
				fmt.Fprintf(&b, "%s: error: %v\n", line, err)
			case r.Duplicate:
				fmt.Fprintf(&b, "%d %s %d: duplicate\n", ids[0], td.Cmd, id)
			case r.Job != 0:
				fmt.Fprintf(&b, "%d %s %d: fan-out queued\n", ids[0], td.Cmd, id)
			default:
				fmt.Fprintf(&b, "%d %s %d: published\n", ids[0], td.Cmd, id)
			}
		}
	case "unpublish":
		each(func(a uint64, ps []uint64) {
			for _, p := range ps {
				ch, job, err := tl.Unpublish(a, p)
				switch {
				case err != nil:
					fmt.Fprintf(&b, "%d unpublish %d: error: %v\n", a, p, err)
				case !ch:
					fmt.Fprintf(&b, "%d unpublish %d: not published\n", a, p)
				case job != 0:
					fmt.Fprintf(&b, "%d unpublish %d: removal queued\n", a, p)
				default:
					fmt.Fprintf(&b, "%d unpublish %d: ok\n", a, p)
				}
			}
		})
	case "active":
		for _, u := range argIDs(t, td) {
			rebuilt, err := tl.MarkActive(u)
			switch {
			case err != nil:
				fmt.Fprintf(&b, "%d: error: %v\n", u, err)
			case rebuilt:
				fmt.Fprintf(&b, "%d: inbox rebuilt\n", u)
			default:
				fmt.Fprintf(&b, "%d: read mark renewed\n", u)
			}
		}
	case "home":
		var u uint64
		limit := 0
		td.ScanArgs(t, "user", &u)
		td.MaybeScanArgs(t, "limit", &limit)
		var opts HomeOptions
		if td.HasArg("types") {
			var s string
			td.ScanArgs(t, "types", &s)
			var err error
			if opts.Types, err = ParseTypes(s); err != nil {
				return "error: " + err.Error()
			}
		}
		cursor := ""
		if td.HasArg("continue") {
			cursor = cursors[u]
		}
		for page := 0; ; page++ {
			p, err := tl.HomeWith(u, cursor, limit, opts)
			if err != nil {
				return "error: " + err.Error()
			}
			if page > 0 {
				b.WriteString("--\n")
			}
			for _, en := range p.Entries {
				if en.Type == TypePost {
					fmt.Fprintf(&b, "%d by %d\n", en.Post, en.Author)
				} else {
					fmt.Fprintf(&b, "%d by %d: %s of %d by %d\n", en.Post, en.Author, en.Type, en.Ref, en.RefAuthor)
				}
			}
			if p.NoMore {
				b.WriteString("end\n")
				delete(cursors, u)
				break
			}
			fmt.Fprintf(&b, "next after %d\n", p.Entries[len(p.Entries)-1].Post)
			cursors[u] = p.Cursor
			if !td.HasArg("all") {
				break
			}
			cursor = p.Cursor
		}
	case "inbox":
		var u uint64
		td.ScanArgs(t, "user", &u)
		l := inbox(t, tl, u)
		if l == nil {
			return "no inbox"
		}
		fmt.Fprintf(&b, "floor %d:", l.Floor)
		for _, en := range l.Entries {
			fmt.Fprintf(&b, " %d/%d", en.Key, en.Value)
		}
		b.WriteString("\n")
	case "user":
		for _, u := range argIDs(t, td) {
			info, err := tl.User(u)
			if err != nil {
				fmt.Fprintf(&b, "%d: error: %v\n", u, err)
				continue
			}
			fmt.Fprintf(&b, "%d followers=%d followees=%d posts=%d active=%v pulled=%v\n",
				u, info.Followers, info.Followees, info.Posts, info.Active, info.Pulled)
		}
	case "followers", "followees", "muted", "hidden":
		var u uint64
		limit := 0
		td.ScanArgs(t, "id", &u)
		td.MaybeScanArgs(t, "limit", &limit)
		cursor := ""
		for {
			var p IDPage
			var err error
			switch td.Cmd {
			case "followers":
				p, err = tl.FollowersPage(u, cursor, limit)
			case "muted":
				p, err = tl.MutedPage(u, cursor, limit)
			case "hidden":
				p, err = tl.HiddenPage(u, cursor, limit)
			default:
				p, err = tl.FolloweesPage(u, cursor, limit)
			}
			if err != nil {
				return "error: " + err.Error()
			}
			fmt.Fprintf(&b, "%v", p.IDs)
			if p.NoMore {
				b.WriteString(" end\n")
				break
			}
			b.WriteString(" next\n")
			if !td.HasArg("all") {
				break
			}
			cursor = p.Cursor
		}
	case "jobs":
		for _, j := range e.db.QueuedJobs() {
			if j.Kind == jobShared {
				d, _ := tl.DescribeJob(j.Kind, j.Key)
				fmt.Fprintf(&b, "%s: %s\n", j.Kind, d)
				continue
			}
			fmt.Fprintf(&b, "%s %s\n", j.Kind, describeJobKey(j.Kind, j.Key))
		}
		if b.Len() == 0 {
			return "none"
		}
	case "run":
		n := len(e.db.QueuedJobs())
		if err := e.db.RunJobs(context.Background(), nil); err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprintf("ran %d jobs", n)
	case "advance":
		var s string
		td.ScanArgs(t, "by", &s)
		d, err := time.ParseDuration(s)
		must(t, err)
		e.clock.Advance(d)
		return "ok"
	case "expire":
		n, err := tl.Expire(context.Background())
		if err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprintf("expired %d", n)
	case "reopen":
		e.reopen()
		return "ok"
	case "fanouts":
		e.inline, e.shared = -1, -1
		td.MaybeScanArgs(t, "inline", &e.inline)
		td.MaybeScanArgs(t, "shared", &e.shared)
		e.reopen()
		return "ok"
	case "check":
		if err := tl.Check(); err != nil {
			return "error: " + err.Error()
		}
		return "ok"
	default:
		t.Fatalf("unknown command %q", td.Cmd)
	}
	return b.String()
}

// describeJobKey renders a job's coalescing key for transcripts.
func describeJobKey(kind string, k []byte) string {
	switch {
	case kind == jobFanout && len(k) == 9:
		return fmt.Sprintf("post %d", binary.BigEndian.Uint64(k[1:]))
	case kind == jobPair && len(k) == 17:
		return fmt.Sprintf("pair %d>%d", binary.BigEndian.Uint64(k[1:]), binary.BigEndian.Uint64(k[9:]))
	}
	return string(k)
}
