package server

import (
	"errors"

	"github.com/tallydb/tally/store"
)

var (
	// ErrServerClosed is returned by Serve and ListenAndServe after
	// Shutdown or Close.
	ErrServerClosed = errors.New("tally: server closed")
	// ErrServing is returned by Register once the server serves: the
	// command table is frozen.
	ErrServing = errors.New("tally: server is serving; register commands before Serve")
	// ErrInvalidOption is returned by Options.Validate and New for a value
	// outside its allowed set.
	ErrInvalidOption = errors.New("tally: invalid server option")
	// ErrInvalidCommand is returned by Register for a malformed or
	// duplicate command.
	ErrInvalidCommand = errors.New("tally: invalid command")
	// ErrRemoteNotAllowed is returned by CheckAddr and ListenAndServe for a
	// non-loopback address without a password or AllowRemote.
	ErrRemoteNotAllowed = errors.New("tally: a non-loopback address needs a password or AllowRemote")
)

// replyFor turns a store error into an error reply. The store's messages
// are kept ("ERR tally: counter not found: ..."), so a client sees the
// same text the CLI prints.
func replyFor(err error) string {
	switch {
	case errors.Is(err, store.ErrClosed):
		return "ERR tally: the store is closed (the server is shutting down)"
	default:
		return "ERR " + err.Error()
	}
}
