package unread

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestFeedScripts runs the transcripts in testdata/feed: follow after
// reset, unfollow, re-follow, unpublish, eviction, restart, crash, and
// follows that predate unread. Commands:
//
//	new [lazy]                  a new store; with lazy, the input lines
//	                            (follow/publish) run on the graph before
//	                            unread opens
//	follow u=U f=F[,F...]       U follows each F
//	unfollow u=U f=F[,F...]
//	publish f=F [n=N]           N posts by F (default 1)
//	unpublish f=F [n=N]
//	reset u=U[,U...]            FeedReset
//	feed u=U[,U...]             "U: N" per user
//	snapshot u=U                the stored snapshot: followee:base ...
//	evict                       empty the snapshot cache
//	restart                     close and reopen the store
//	crash                       drop everything not synced, reopen
//	race u=U                    the input lines run between the reset of U's
//	                            read and its commit, then its feed
func TestFeedScripts(t *testing.T) {
	for _, gk := range graphKinds {
		t.Run(gk.name, func(t *testing.T) {
			datadriven.Walk(t, "testdata/feed", func(t *testing.T, path string) {
				e := &env{real: gk.real}
				datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
					if e.db == nil && d.Cmd != "new" {
						e = newEnvOn(t, gk.real, nil, nil)
					}
					return runFeedCmd(t, &e, d.Cmd, d.CmdArgs, d.Input)
				})
			})
		})
	}
}

func runFeedCmd(t *testing.T, ep **env, cmd string, args []datadriven.CmdArg, input string) string {
	ids := func(key string) []uint64 {
		for _, a := range args {
			if a.Key == key {
				var out []uint64
				for _, v := range a.Vals {
					for _, s := range strings.Split(v, ",") {
						n, err := strconv.ParseUint(s, 10, 64)
						if err != nil {
							t.Fatalf("%s %s: %v", cmd, key, err)
						}
						out = append(out, n)
					}
				}
				return out
			}
		}
		if key == "n" {
			return []uint64{1}
		}
		t.Fatalf("%s: missing %s=", cmd, key)
		return nil
	}
	e := *ep
	switch cmd {
	case "new":
		var before func(g testGraph)
		if len(args) > 0 && args[0].Key == "lazy" {
			before = func(g testGraph) {
				tmp := &env{t: t, g: g}
				for _, line := range strings.Split(strings.TrimSpace(input), "\n") {
					if line == "" {
						continue
					}
					c, a := parseLine(t, line)
					runGraphCmd(t, tmp, c, a)
				}
			}
		}
		*ep = newEnvOn(t, e.real, nil, before)
		mode := "complete"
		if !(*ep).x.complete {
			mode = "lazy"
		}
		return mode + "\n"
	case "follow", "unfollow", "publish", "unpublish":
		return runGraphCmd(t, e, cmd, args)
	case "reset":
		for _, u := range ids("u") {
			must(t, e.x.FeedReset(u))
		}
		return "ok\n"
	case "feed":
		var b strings.Builder
		for _, u := range ids("u") {
			fmt.Fprintf(&b, "%d: %d\n", u, e.feed(u))
		}
		return b.String()
	case "snapshot":
		u := ids("u")[0]
		fs, ok, err := e.x.Snapshot(u)
		must(t, err)
		if !ok {
			return "none\n"
		}
		var b strings.Builder
		if fs.Initialized {
			b.WriteString("initialized")
		} else {
			b.WriteString("not initialized")
		}
		fmt.Fprintf(&b, ", %d ops:", fs.Ops)
		for i, f := range fs.Followees {
			fmt.Fprintf(&b, " %d:%d", f, fs.Bases[i])
		}
		return b.String() + "\n"
	case "evict":
		e.x.cache.clear()
		return "ok\n"
	case "restart":
		e.reopen()
		return "ok\n"
	case "crash":
		e.crash(0, nil)
		return "ok\n"
	case "race":
		u := ids("u")[0]
		fired := false
		e.x.testHook = func(uint64) {
			if fired {
				return
			}
			fired = true
			for _, line := range strings.Split(strings.TrimSpace(input), "\n") {
				c, a := parseLine(t, line)
				runFeedCmd(t, ep, c, a, "")
			}
		}
		must(t, e.x.FeedReset(u))
		e.x.testHook = nil
		if !fired {
			return "the reset wrote nothing\n"
		}
		return fmt.Sprintf("%d: %d\n", u, e.feed(u))
	}
	t.Fatalf("unknown command %q", cmd)
	return ""
}

func runGraphCmd(t *testing.T, e *env, cmd string, args []datadriven.CmdArg) string {
	get := func(key string, def uint64) []uint64 {
		for _, a := range args {
			if a.Key == key {
				var out []uint64
				for _, v := range a.Vals {
					for _, s := range strings.Split(v, ",") {
						n, err := strconv.ParseUint(s, 10, 64)
						must(t, err)
						out = append(out, n)
					}
				}
				return out
			}
		}
		return []uint64{def}
	}
	switch cmd {
	case "follow", "unfollow":
		u := get("u", 0)[0]
		var b strings.Builder
		for _, f := range get("f", 0) {
			var ok bool
			var err error
			if cmd == "follow" {
				ok, err = e.g.Follow(u, f)
			} else {
				ok, err = e.g.Unfollow(u, f)
			}
			must(t, err)
			if !ok {
				fmt.Fprintf(&b, "%s %d %d: no change\n", cmd, u, f)
			}
		}
		if b.Len() == 0 {
			return "ok\n"
		}
		return b.String()
	case "publish", "unpublish":
		f, n := get("f", 0)[0], get("n", 1)[0]
		var p uint64
		for range n {
			var err error
			if cmd == "publish" {
				p, err = e.g.Publish(f)
			} else {
				_, p, err = e.g.Unpublish(f)
			}
			must(t, err)
		}
		return fmt.Sprintf("posts %d: %d\n", f, p)
	}
	t.Fatalf("unknown graph command %q", cmd)
	return ""
}

// parseLine parses "cmd k=v k=v" as datadriven does.
func parseLine(t *testing.T, line string) (string, []datadriven.CmdArg) {
	fields := strings.Fields(line)
	var args []datadriven.CmdArg
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, "=")
		a := datadriven.CmdArg{Key: k}
		if v != "" {
			a.Vals = []string{v}
		}
		args = append(args, a)
	}
	return fields[0], args
}
