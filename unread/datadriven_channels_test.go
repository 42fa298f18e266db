package unread

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestChannelScripts runs the transcripts in testdata/channels: the
// broadcast red dot and system notice rules of the published design (a
// user with no tag is older than every mark; a user who never read notices
// has 0 unread; reads never write; an undeclared channel reads as nothing).
// Commands (u=U is a user, c=C a channel):
//
//	mark c=C            Mark: "tag N"
//	clear u=U c=C       Clear
//	has u=U[,U...] c=C  Has: "U: yes|no" per user
//	post c=C id=N       Post: "posted" or "duplicate"
//	read u=U c=C        Read
//	unread u=U[,U...] c=C  Unread: "U: N" per user
//	forget u=U          ForgetTags
//	tags u=U            the user's stored tags: "C dot=N notice=N" (to show
//	                    that reads record nothing)
//	channels            every channel: "C tag=N notices=N newest=N"
//	restart | crash     reopen, or drop what was not synced and reopen
//
// An error prints "error: ...".
func TestChannelScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/channels", func(t *testing.T, path string) {
		e := newEnv(t, nil, nil)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return runChannelCmd(t, e, d)
		})
	})
}

func runChannelCmd(t *testing.T, e *env, d *datadriven.TestData) string {
	arg := func(key string) string {
		for _, a := range d.CmdArgs {
			if a.Key == key {
				return strings.Join(a.Vals, ",")
			}
		}
		t.Fatalf("%s: missing %s=", d.Cmd, key)
		return ""
	}
	users := func() []uint64 {
		var out []uint64
		for _, s := range strings.Split(arg("u"), ",") {
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				t.Fatalf("%s: u=%s: %v", d.Cmd, s, err)
			}
			out = append(out, n)
		}
		return out
	}
	result := func(s string, err error) string {
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		return s + "\n"
	}
	switch d.Cmd {
	case "mark":
		tag, err := e.x.Mark(arg("c"))
		return result(fmt.Sprintf("tag %d", tag), err)
	case "clear":
		return result("ok", e.x.Clear(users()[0], arg("c")))
	case "has":
		var b strings.Builder
		for _, u := range users() {
			has, err := e.x.Has(u, arg("c"))
			if err != nil {
				return result("", err)
			}
			fmt.Fprintf(&b, "%d: %s\n", u, map[bool]string{true: "yes", false: "no"}[has])
		}
		return b.String()
	case "post":
		id, err := strconv.ParseUint(arg("id"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		posted, err := e.x.Post(arg("c"), id)
		return result(map[bool]string{true: "posted", false: "duplicate"}[posted], err)
	case "read":
		return result("ok", e.x.Read(users()[0], arg("c")))
	case "unread":
		var b strings.Builder
		for _, u := range users() {
			n, err := e.x.Unread(u, arg("c"))
			if err != nil {
				return result("", err)
			}
			fmt.Fprintf(&b, "%d: %d\n", u, n)
		}
		return b.String()
	case "forget":
		return result("ok", e.x.ForgetTags(users()[0]))
	case "tags":
		u := users()[0]
		var b strings.Builder
		for _, ch := range e.x.channelList() {
			dot, dok, err := e.x.readTag(u, ch, tagDot)
			must(t, err)
			n, nok, err := e.x.readTag(u, ch, tagNotice)
			must(t, err)
			if !dok && !nok {
				continue
			}
			fmt.Fprintf(&b, "%s", ch.name)
			if dok {
				fmt.Fprintf(&b, " dot=%d", dot)
			}
			if nok {
				fmt.Fprintf(&b, " notice=%d", n)
			}
			b.WriteString("\n")
		}
		if b.Len() == 0 {
			return "none\n"
		}
		return b.String()
	case "channels":
		var b strings.Builder
		for _, c := range e.x.Channels() {
			fmt.Fprintf(&b, "%s tag=%d notices=%d newest=%d\n", c.Name, c.Tag, c.Notices, c.Newest)
		}
		if b.Len() == 0 {
			return "none\n"
		}
		return b.String()
	case "restart":
		e.reopen()
		return "ok\n"
	case "crash":
		e.crash(0, nil)
		return "ok\n"
	}
	t.Fatalf("unknown command %q", d.Cmd)
	return ""
}
