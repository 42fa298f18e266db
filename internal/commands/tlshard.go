package commands

// Cross-shard timeline messages (issue 23; timeline/remote.go): commands
// one shard sends another through the cross-shard streams, run on the
// target through the normal replicated command path. They are INTERNAL:
// clients must not send them (a client's TL.XPUBLISH would put a post in
// a shard's copy of an author's outbox that the author's shard does not
// have). The table cannot tell a stream's apply from a client, so the
// host must refuse them from clients (a cluster's router accepts them only
// inside a replicated apply of TALLY.XRECV); every argument is validated
// here and by the library whoever sends it, and a refused message changes
// nothing.
//
//	RESP                                                       runs
//	---------------------------------------------------------  ------------------------------------
//	TL.XFOLLOWER author follower shard 1|0                     Timeline.RemoteFollower (author's shard)
//	TL.XBACKFILL author posts [post type ref refauthor ...]    Timeline.InstallCopy (follower's shard)
//	TL.XPUBLISH author type ref refauthor post [post ...]      Timeline.PublishCopy
//	TL.XUNPUBLISH author post [post ...]                       Timeline.UnpublishCopy
//	TL.XHIDE author follower 1|0                               Timeline.RemoteHide (follower's shard)
//	TL.XSUBSCRIBE author post shard                            Timeline.RemoteSubscribe (author's shard)
//	TL.XGONE author post                                       Timeline.OriginalGone (a reposter's shard)
//
// type is an EntryType's number (0 post, 1 repost, 2 comment, 3 reply);
// ref and refauthor are 0 for a post. Replies: an integer (1 or 0 for
// "changed", the posts added or removed for the copies; XBACKFILL's OK).

import (
	"context"
	"fmt"
	"io"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/timeline"
)

// tlshardHelp is a message's help: what it does, then an example.
func tlshardHelp(what, example string) string {
	return "Internal: sent by one shard of a cluster to another through the cross-shard\n" +
		"streams, never by clients (timeline/remote.go). " + what + "\n\nExample:\n  " + example + "\n"
}

// checkFlag validates a 1|0 argument.
func checkFlag(in *Input, name string) error {
	if v := in.Uint(name); v > 1 {
		return fmt.Errorf("%w: %s %d (want 1 or 0)", timeline.ErrBadMessage, name, v)
	}
	return nil
}

// checkShard validates a shard argument.
func checkShard(in *Input) error {
	if s := in.Uint("shard"); s == 0 || s > 1<<32-1 {
		return fmt.Errorf("%w: shard %d (want 1..%d)", timeline.ErrBadMessage, s, uint64(1<<32-1))
	}
	return nil
}

// backfillEntries turns TL.XBACKFILL's repeated quadruples into entries.
func backfillEntries(in *Input) ([]timeline.Entry, error) {
	author := in.Uint("author")
	var vs []uint64
	if in.Has("entry") {
		vs = in.Uints("entry")
	}
	if len(vs)%4 != 0 {
		return nil, Usagef("TL.XBACKFILL: %d entry values (want post type ref refauthor per entry)", len(vs))
	}
	es := make([]timeline.Entry, 0, len(vs)/4)
	for i := 0; i < len(vs); i += 4 {
		if vs[i+1] > 255 {
			return nil, fmt.Errorf("%w: entry type %d", timeline.ErrBadMessage, vs[i+1])
		}
		es = append(es, timeline.Entry{Post: vs[i], Author: author, Type: timeline.EntryType(vs[i+1]), Ref: vs[i+2], RefAuthor: vs[i+3]})
	}
	return es, nil
}

func tlshardCommand(cli, resp, summary, help string, params []Param, check func(*Input) error,
	run func(tl *timeline.Timeline, in *Input) (int64, error)) *Command {
	return &Command{
		CLI: cli, RESP: resp, Group: timelineGroup, Mode: Write, Internal: true, Open: OpenWrite,
		Summary: summary, Complexity: "O(N) where N is the number of ids", Help: help,
		Params: params, Check: check,
		Run: func(_ context.Context, db *tallydb.DB, in *Input) (any, error) {
			tl, err := timelineOf(db)
			if err != nil {
				return nil, err
			}
			return run(tl, in)
		},
		Text: func(w io.Writer, _ *Input, out any) error {
			_, err := fmt.Fprintf(w, "%d\n", out.(int64))
			return err
		},
		Reply: func(w Replier, _ *Input, out any) { w.WriteInt(out.(int64)) },
	}
}

func changed(ok bool, err error) (int64, error) {
	if ok {
		return 1, err
	}
	return 0, err
}

// tlshardCommands returns the internal cross-shard timeline messages.
func tlshardCommands() []*Command {
	pAuthorKey := Param{Name: "author", Kind: Uint, Key: true}
	pFollower := Param{Name: "follower", Kind: Uint}
	pAdd := Param{Name: "add", Kind: Uint}
	return []*Command{
		tlshardCommand("timeline xfollower", timeline.CmdXFollower,
			"internal: a follower on another shard follows (1) or unfollows (0) a local author",
			tlshardHelp("Prints 1 if the follower set of AUTHOR changed, else 0.",
				"$ tally -d /var/lib/tally timeline xfollower 5 4 1 1   # 4, of shard 1, follows 5\n  1"),
			[]Param{pAuthorKey, pFollower, {Name: "shard", Kind: Uint}, pAdd},
			func(in *Input) error {
				if err := (timeline.Edge{Follower: in.Uint("follower"), Followee: in.Uint("author")}).Check(); err != nil {
					return err
				}
				if err := checkShard(in); err != nil {
					return err
				}
				return checkFlag(in, "add")
			},
			func(tl *timeline.Timeline, in *Input) (int64, error) {
				return changed(tl.RemoteFollower(in.Uint("author"), in.Uint("follower"), uint32(in.Uint("shard")), in.Uint("add") == 1))
			}),
		tlshardCommand("timeline xbackfill", timeline.CmdXBackfill,
			"internal: install this shard's copy of a remote author's newest posts",
			tlshardHelp("Each ENTRY is four numbers: post, type (0 post, 1 repost, 2 comment,\n3 reply), reference, its author. Prints the number of entries.",
				"$ tally -d /var/lib/tally timeline xbackfill 5 2 1002 0 0 0 1001 0 0 0\n  2"),
			[]Param{pAuthor, {Name: "posts", Kind: Uint}, {Name: "entry", Kind: Uint, Multiple: true, Optional: true}},
			func(in *Input) error {
				es, err := backfillEntries(in)
				if err != nil {
					return err
				}
				return timeline.CheckBackfill(in.Uint("author"), in.Uint("posts"), es)
			},
			func(tl *timeline.Timeline, in *Input) (int64, error) {
				es, err := backfillEntries(in)
				if err != nil {
					return 0, err
				}
				return int64(len(es)), tl.InstallCopy(in.Uint("author"), in.Uint("posts"), es)
			}),
		tlshardCommand("timeline xpublish", timeline.CmdXPublish,
			"internal: a remote author's posts join this shard's copy and fan out here",
			tlshardHelp("TYPE is 0 post, 1 repost, 2 comment, 3 reply. Prints the posts added.",
				"$ tally -d /var/lib/tally timeline xpublish 5 0 0 0 1003\n  1"),
			[]Param{pAuthor, {Name: "type", Kind: Uint}, {Name: "ref", Kind: Uint}, {Name: "refauthor", Kind: Uint}, pPosts},
			func(in *Input) error {
				if in.Uint("type") > 255 {
					return fmt.Errorf("%w: entry type %d", timeline.ErrBadMessage, in.Uint("type"))
				}
				return timeline.CheckCopyPublish(in.Uint("author"), timeline.EntryType(in.Uint("type")), in.Uint("ref"), in.Uint("refauthor"), in.Uints("post"))
			},
			func(tl *timeline.Timeline, in *Input) (int64, error) {
				n, err := tl.PublishCopy(in.Uint("author"), timeline.EntryType(in.Uint("type")), in.Uint("ref"), in.Uint("refauthor"), in.Uints("post")...)
				return int64(n), err
			}),
		tlshardCommand("timeline xunpublish", timeline.CmdXUnpublish,
			"internal: a remote author's posts leave this shard's copy",
			tlshardHelp("Prints the posts the copy held.",
				"$ tally -d /var/lib/tally timeline xunpublish 5 1003\n  1"),
			[]Param{pAuthor, pPosts}, checkAuthorPosts,
			func(tl *timeline.Timeline, in *Input) (int64, error) {
				n, err := tl.UnpublishCopy(in.Uint("author"), in.Uints("post")...)
				return int64(n), err
			}),
		tlshardCommand("timeline xhide", timeline.CmdXHide,
			"internal: a remote author hides (1) or unhides (0) their posts from a local follower",
			tlshardHelp("Prints 1 if the pair changed, else 0.",
				"$ tally -d /var/lib/tally timeline xhide 5 4 1\n  1"),
			[]Param{pAuthor, {Name: "follower", Kind: Uint, Key: true}, pAdd},
			func(in *Input) error {
				a, f := in.Uint("author"), in.Uint("follower")
				if err := timeline.CheckID("user", a, f); err != nil {
					return err
				}
				if a == f {
					return fmt.Errorf("%w: user %d", timeline.ErrSelfMute, a)
				}
				return checkFlag(in, "add")
			},
			func(tl *timeline.Timeline, in *Input) (int64, error) {
				return changed(tl.RemoteHide(in.Uint("author"), in.Uint("follower"), in.Uint("add") == 1))
			}),
		tlshardCommand("timeline xsubscribe", timeline.CmdXSubscribe,
			"internal: a shard holds reposts of a local author's post",
			tlshardHelp("Prints 1 if the subscription was recorded, 0 if the post is not\npublished (TL.XGONE is sent to SHARD instead).",
				"$ tally -d /var/lib/tally timeline xsubscribe 5 1003 2\n  1"),
			[]Param{pAuthorKey, {Name: "post", Kind: Uint}, {Name: "shard", Kind: Uint}},
			func(in *Input) error {
				if err := timeline.CheckID("author", in.Uint("author")); err != nil {
					return err
				}
				if err := timeline.CheckID("post", in.Uint("post")); err != nil {
					return err
				}
				return checkShard(in)
			},
			func(tl *timeline.Timeline, in *Input) (int64, error) {
				return changed(tl.RemoteSubscribe(in.Uint("author"), in.Uint("post"), uint32(in.Uint("shard"))))
			}),
		tlshardCommand("timeline xgone", timeline.CmdXGone,
			"internal: a remote author's post, reposted here, is not published",
			tlshardHelp("Prints 1 if the post was marked removed here, else 0.",
				"$ tally -d /var/lib/tally timeline xgone 5 1003\n  1"),
			[]Param{pAuthor, {Name: "post", Kind: Uint}},
			func(in *Input) error {
				if err := timeline.CheckID("author", in.Uint("author")); err != nil {
					return err
				}
				return timeline.CheckID("post", in.Uint("post"))
			},
			func(tl *timeline.Timeline, in *Input) (int64, error) {
				return changed(tl.OriginalGone(in.Uint("author"), in.Uint("post")))
			}),
	}
}
