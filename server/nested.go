package server

import (
	"errors"
	"fmt"
)

// ErrNotApplying is returned by RunNested on a connection that is not
// applying a replicated entry.
var ErrNotApplying = errors.New("tally: nested command outside a replicated apply")

// ErrInternal is the error of a client's (or a client's entry's) command
// marked FlagInternal: only another shard sends it.
var ErrInternal = errors.New("tally: internal command")

// RunNested runs argv as one more command of the replicated entry c is
// applying (Server.Apply's connection, c.Replicated()), as if the entry had
// carried it, and returns its RESP reply. The caller's pending reply is
// kept apart: the nested command's reply is returned, not added to c's.
//
// It is the hook of package xshard: a shard applying a cross-shard message
// (TALLY.XRECV) runs the message's command inside its own apply, so the
// command's commits are numbered as commits of the entry (store.ApplyEntry)
// and a re-apply after a crash skips the ones already made.
//
// The command must be a replicated write (ClassOf on the apply path), as a
// command of an entry must; anything else (unknown command, wrong arity, a
// read, a node-local command) gets the same error reply Apply gives it,
// deterministically on every replica, and runs nothing. The reply bytes are
// the caller's (a copy). It returns ErrNotApplying, and runs nothing, on a
// connection that is not applying.
func (c *Conn) RunNested(argv [][]byte) ([]byte, error) {
	if !c.applying {
		return nil, ErrNotApplying
	}
	if len(argv) == 0 {
		return nil, fmt.Errorf("%w: empty command", ErrNotReplicated)
	}
	saved, savedErr := c.out, c.errReply
	c.out = nil
	c.nested = true
	defer func() { c.out, c.errReply, c.nested = saved, savedErr, false }()
	cmd, msg, _ := c.find(argv)
	if msg != "" {
		c.reject(cmd, msg)
		return c.out, nil
	}
	if class, err := cmd.applyClass(argv); class != ClassWrite || err != nil {
		c.errReply = false
		c.writeError(fmt.Sprintf("ERR %s: '%.128s'", ErrNotReplicated.Error(), sanitize([]byte(cmd.fullName))))
		c.account(cmd, 0)
		return c.out, nil
	}
	c.run(cmd, argv)
	return c.out, nil
}
