package main

import (
	"strings"

	"github.com/tallydb/tally/internal/quote"
	"github.com/tallydb/tally/store"
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

func bytesPerRow(mem int64, rows int) float64 {
	if rows == 0 {
		return 0
	}
	return float64(mem) / float64(rows)
}

// tierBytes sums, over counters, hot-table memory (of hot ranges only) and
// the cold tier's encoded payload, for the demo's bytes-per-row figures.
func tierBytes(s store.Stats) (hotMem, coldPayload int64) {
	for _, c := range s.Counters {
		for _, r := range c.Ranges {
			if r.Tier == "hot" {
				hotMem += r.MemBytes
			}
		}
		coldPayload += c.ColdPayloadBytes
	}
	return hotMem, coldPayload
}
