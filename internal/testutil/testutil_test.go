package testutil

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// fatalTB records a Fatalf instead of failing the test, and stops the
// caller as Fatalf does.
type fatalTB struct {
	testing.TB
	msg string
}

var errFatal = errors.New("fatal")

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(errFatal)
}

func envIntFatal(t *testing.T, name string, def int) (v int, msg string) {
	f := &fatalTB{TB: t}
	defer func() {
		if r := recover(); r != nil {
			if r != errFatal {
				panic(r)
			}
			msg = f.msg
		}
	}()
	return EnvInt(f, name, def), ""
}

func TestEnvInt(t *testing.T) {
	const name = "TALLY_TESTUTIL_ENVINT"
	for _, c := range []struct {
		set, value string
		want       int
		fatal      bool
	}{
		{set: "unset", want: 7},
		{set: "empty", value: "", want: 7},
		{set: "valid", value: "12", want: 12},
		{set: "zero", value: "0", fatal: true},
		{set: "negative", value: "-3", fatal: true},
		{set: "word", value: "many", fatal: true},
		{set: "suffix", value: "10k", fatal: true},
	} {
		t.Run(c.set, func(t *testing.T) {
			if c.set != "unset" {
				t.Setenv(name, c.value)
			} else {
				t.Setenv(name, "")
				os.Unsetenv(name)
			}
			v, msg := envIntFatal(t, name, 7)
			if c.fatal {
				if msg == "" || !strings.Contains(msg, name) {
					t.Fatalf("%s=%q: got %d, fatal %q; want a fatal naming the variable", name, c.value, v, msg)
				}
				return
			}
			if msg != "" || v != c.want {
				t.Fatalf("%s=%q: got %d, fatal %q; want %d", name, c.value, v, msg, c.want)
			}
		})
	}
}

// TestRunChild runs this test again as a child that counts up forever (or
// to a given end), and checks both ends of the harness: a kill at a chosen
// line, after which the lines already printed still arrive, and a child
// that exits by itself.
func TestRunChild(t *testing.T) {
	if end := os.Getenv("TALLY_TESTUTIL_CHILD"); end != "" {
		n, _ := strconv.Atoi(end)
		for i := 1; n == 0 || i <= n; i++ {
			ChildPrintf("line %d", i)
		}
		os.Exit(0)
	}
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	last := 0
	res := RunChild(t, "TestRunChild", []string{"TALLY_TESTUTIL_CHILD=0"}, func(line string) bool {
		n, err := strconv.Atoi(strings.TrimPrefix(line, "line "))
		if err != nil || n != last+1 {
			t.Fatalf("line %q after %d", line, last)
		}
		last = n
		return n >= 50
	})
	var ee *exec.ExitError
	if !res.Killed || !errors.As(res.Err, &ee) || res.Lines < 50 || res.Lines != last {
		t.Fatalf("killed child: %+v, last line %d", res, last)
	}

	res = RunChild(t, "TestRunChild", []string{"TALLY_TESTUTIL_CHILD=20"}, func(string) bool { return false })
	if res.Killed || res.Err != nil || res.Lines != 20 {
		t.Fatalf("child that exits: %+v", res)
	}
}
