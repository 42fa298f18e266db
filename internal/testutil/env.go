package testutil

import (
	"os"
	"strconv"
	"testing"
)

// EnvInt returns the integer in environment variable name, which scales a
// test (steps, seeds, rounds, sizes). Unset or empty, it returns def. Set,
// it must be a positive decimal integer: anything else (0, negative, not a
// number) fails t with a message naming the variable, so a typo never runs
// the default size silently.
func EnvInt(t testing.TB, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return v
}

// EnvSeed returns the seed in environment variable name, which repeats a
// randomized test's run, and true; unset or empty, it returns def and
// false. Set, it must be a decimal uint64 (0 included), or t fails with a
// message naming the variable.
func EnvSeed(t testing.TB, name string, def uint64) (uint64, bool) {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def, false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: want a seed, a decimal uint64", name, s)
	}
	return v, true
}
