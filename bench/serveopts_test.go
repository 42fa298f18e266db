package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestNewServeOptions: --serve-flags splits on white space, --serve-log
// appends to its file (a second runner's log goes after the first), and
// no log path means no log.
func TestNewServeOptions(t *testing.T) {
	o, closeLog, err := NewServeOptions("  --metrics-addr 127.0.0.1:0\t--pprof ", "")
	if err != nil {
		t.Fatal(err)
	}
	closeLog()
	if want := []string{"--metrics-addr", "127.0.0.1:0", "--pprof"}; !slices.Equal(o.Flags, want) || o.Log != nil {
		t.Fatalf("got %q log %v, want %q and no log", o.Flags, o.Log, want)
	}
	path := filepath.Join(t.TempDir(), "serve.log")
	for _, line := range []string{"first", "second"} {
		o, closeLog, err := NewServeOptions("", path)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(o.Log, line)
		closeLog()
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "first\nsecond\n" {
		t.Fatalf("log %q, %v", b, err)
	}
	if _, _, err := NewServeOptions("", filepath.Join(t.TempDir(), "no", "such", "dir", "log")); err == nil {
		t.Fatal("a log in a missing directory: no error")
	}
}
