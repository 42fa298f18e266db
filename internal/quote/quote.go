// Package quote formats user input for error messages. An error names what
// was wrong with an input, and echoes enough of it to find it, never all of
// it: a 10 KB argument echoed in full buries the reason. Every message of
// store and cmd/tally that echoes a name, argument or field goes through
// Input.
package quote

import (
	"strconv"
	"unicode/utf8"

	"github.com/tallydb/tally/internal/limits"
)

// MaxEcho is the most bytes of an input an error echoes. It is the name
// limit, so every valid name is echoed whole.
const MaxEcho = limits.MaxNameLen

// Clip returns s as it is if it has at most MaxEcho bytes, else cut like
// Input but without quotes: for fields known to be plain (digits).
func Clip(s string) string {
	if len(s) <= MaxEcho {
		return s
	}
	return s[:cutAt(s)] + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

// Input returns s Go-quoted, as %q would. Input longer than MaxEcho bytes is
// cut at a character boundary at or before MaxEcho bytes and followed by
// "…" and its full length, e.g. "aaaa"… (10240 bytes).
func Input(s string) string {
	if len(s) <= MaxEcho {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:cutAt(s)]) + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

// cutAt returns the largest character boundary ≤ MaxEcho of s, which is
// longer than MaxEcho.
func cutAt(s string) int {
	cut := MaxEcho
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return cut
}
