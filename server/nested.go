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

// ErrNestedRange is returned by NestCommands and RunNested when a
// command's nested commands are declared twice, inside a nested command,
// or run outside the positions declared: a bug of the handler, never of
// input.
var ErrNestedRange = errors.New("tally: nested command outside its declared positions")

// NestCommands declares that the running command of a replicated entry
// will run n nested commands, RunNested(i, ...) with 0 <= i < n. Each
// nested position is numbered as a command of the entry of its own
// (store.DB.ApplyCommand), right after the running command, and the
// entry's later commands after them: a re-apply of the entry after a crash
// then numbers each nested command's commits as the first apply did, even
// when one before it commits the second time what it did not the first
// (a post found already published commits nothing). n must follow from
// the command's arguments alone (the number of messages it carries), so
// that every replica and every re-apply number alike; the handler calls
// it once, before its first RunNested, and makes no commit of its own
// after its first nested command (such a commit would count as that
// nested command's). It returns ErrNotApplying on a connection that is
// not applying an entry.
func (c *Conn) NestCommands(n int) error {
	switch {
	case !c.applying:
		return ErrNotApplying
	case c.nested || c.nestN != 0 || n < 0:
		return fmt.Errorf("%w: %d nested commands declared by command %d (declared %d already, nested %v)", ErrNestedRange, n, c.unit, c.nestN, c.nested)
	}
	c.nestN = n
	c.unitShift += n
	return nil
}

// RunNested runs argv as the nested command at position i (declared by
// NestCommands) of the command running in the replicated entry c is
// applying (Server.Apply's connection, c.Replicated()), as if the entry
// had carried it, and returns its RESP reply. The caller's pending reply
// is kept apart: the nested command's reply is returned, not added to
// c's. Positions must be run in increasing order; one may be skipped.
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
// connection that is not applying, and ErrNestedRange for a position
// outside the declared ones.
func (c *Conn) RunNested(i int, argv [][]byte) ([]byte, error) {
	if !c.applying {
		return nil, ErrNotApplying
	}
	if c.nested || i < 0 || i >= c.nestN {
		return nil, fmt.Errorf("%w: position %d of %d (nested %v)", ErrNestedRange, i, c.nestN, c.nested)
	}
	if len(argv) == 0 {
		return nil, fmt.Errorf("%w: empty command", ErrNotReplicated)
	}
	if err := c.s.db.ApplyCommand(uint64(min(c.unit+1+i, maxApplyCommand))); err != nil {
		// A position below one run before: the numbers would go down.
		return nil, fmt.Errorf("%w: position %d: %w", ErrNestedRange, i, err)
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
