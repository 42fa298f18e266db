package main

import (
	"strings"

	"github.com/tallydb/tally/internal/quote"
)

// parseNoArgs checks that a command got no arguments (its flags only).
func parseNoArgs(e *env, c *command, args []string) error {
	pos, err := parse(e.flags(c), args, true)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("takes no arguments, got %s", quote.Input(strings.Join(pos, " ")))
	}
	return nil
}
