package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	cmdtab "github.com/tallydb/tally/internal/commands"
	"github.com/tallydb/tally/internal/limits"
	"github.com/tallydb/tally/store"
)

// TestCounterAddLeavesNoStore is issue 12's reproduction: a failed "counter
// add" on a new directory still created an empty store. Everything is now
// checked before the store is opened, so a refused counter creates nothing:
// not the directory, not a file in an empty one.
func TestCounterAddLeavesNoStore(t *testing.T) {
	t.Setenv("TALLY_DIR", "")
	bad := [][]string{
		{"x", "--age", "500us"}, // the case: stored as 0 ms, then every Open failed
		{"x", "--age", "1500us"},
		{"x", "--age", "0s"},
		{"x", "--hot-ranges", "0"},
		{"x", "--range-bits", "7"},
		{"x", "--range-bits", "49"},
		{"x", "--age", "1h", "--id-time-shift", "41"},
		{"x", "--age", "1h", "--id-epoch-ms", "-1"},
		{"a.b"},
		{strings.Repeat("n", limits.MaxNameLen+1)},
		{"-d", "x"}, // -d given twice: the last wins, and NAME is missing
	}
	for _, args := range bad {
		for _, existed := range []bool{false, true} {
			dir := filepath.Join(t.TempDir(), "new")
			if existed {
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			_, errOut, code := tally(t, append([]string{"-d", dir, "counter", "add"}, args...)...)
			if code == exitOK {
				t.Fatalf("counter add %q accepted", args)
			}
			ents, err := os.ReadDir(dir)
			switch {
			case !existed && !os.IsNotExist(err):
				t.Errorf("counter add %q (exit %d, %q) created %s: %v %v", args, code, errOut, dir, ents, err)
			case existed && len(ents) != 0:
				t.Errorf("counter add %q (exit %d, %q) left %d entries in the empty %s", args, code, errOut, len(ents), dir)
			}
		}
	}
	// The sub-millisecond age says why.
	_, errOut, _ := tally(t, "-d", filepath.Join(t.TempDir(), "n"), "counter", "add", "x", "--age", "500us")
	if !strings.Contains(errOut, "not a whole number of milliseconds") {
		t.Errorf("sub-millisecond age: %q", errOut)
	}
	// Accepted ages (at the limit) read back as given, and the store opens.
	dir := filepath.Join(t.TempDir(), "ok")
	mustTally(t, "-d", dir, "counter", "add", "a", "--age", "1ms", "--id-time-shift", "40", "--id-epoch-ms", "0")
	mustTally(t, "-d", dir, "counter", "add", "b", "--age", "2562047h", "--id-epoch-ms", fmt.Sprint(int64(limits.MaxIDTimeMs)))
	want := fmt.Sprintf("a range_bits=32 policy=age:1ms:0:40 columns=\nb range_bits=32 policy=age:2562047h0m0s:%d:22 columns=\n", int64(limits.MaxIDTimeMs))
	if got := mustTally(t, "-d", dir, "counter", "list"); got != want {
		t.Errorf("counter list:\n%s\nwant:\n%s", got, want)
	}
}

// TestFreshDirRemove covers the clean-up of a store that a failed "counter
// add" created in a directory that was missing or empty: only what the
// command made goes.
func TestFreshDirRemove(t *testing.T) {
	parent := t.TempDir()
	missing := filepath.Join(parent, "missing")
	f, err := newStoreDir(missing)
	if err != nil || f == nil || f.existed {
		t.Fatalf("missing dir: %+v %v", f, err)
	}
	db, err := store.Open(missing, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := f.remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("new store dir still there: %v", err)
	}

	empty := filepath.Join(parent, "empty")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	if f, err = newStoreDir(empty); err != nil || f == nil || !f.existed {
		t.Fatalf("empty dir: %+v %v", f, err)
	}
	db, err = store.Open(empty, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := f.remove(); err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(empty); err != nil || len(ents) != 0 {
		t.Fatalf("empty dir after remove: %v %v", ents, err)
	}

	// A directory with something in it is never fresh.
	if err := os.WriteFile(filepath.Join(empty, "keep"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if f, err = newStoreDir(empty); f != nil || err != nil {
		t.Fatalf("non-empty dir: %+v %v", f, err)
	}
}

// TestCreatingCommandLeavesNoStore: a table command that may create the
// store (like, business add, counter add) and fails after opening it
// removes the store it made, as a refused "counter add" creates none.
func TestCreatingCommandLeavesNoStore(t *testing.T) {
	t.Setenv("TALLY_DIR", "")
	for _, existed := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "new")
		if existed {
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		_, errOut, code := tally(t, "-d", dir, "like", "video", "1", "2")
		if code != exitError || !strings.Contains(errOut, "unknown business") {
			t.Fatalf("like in a new store: exit %d, %q", code, errOut)
		}
		ents, err := os.ReadDir(dir)
		if !existed && !os.IsNotExist(err) || existed && len(ents) != 0 {
			t.Errorf("existed=%v: the failed like left %v %v", existed, ents, err)
		}
	}
}

// TestPanicExitCode is issue 12's reproduction: a panic exited with status
// 2, the documented code of a usage error. A panic on a command's goroutine
// or on one it starts exits 3 with the panic and a request to report it.
func TestPanicExitCode(t *testing.T) {
	if os.Getenv("TALLY_TEST_PANIC_CHILD") != "" {
		// The child: a command whose goroutine panics.
		boom := &command{name: "boom", run: func(e *env, _ []string) error {
			done := make(chan struct{})
			e.goSafe(func() { panic("boom in a goroutine") })
			<-done
			return nil
		}}
		commands = append(commands, boom)
		os.Exit(run([]string{"boom"}, os.Stdout, os.Stderr))
	}
	saved := commands
	t.Cleanup(func() { commands = saved })
	commands = append(slices.Clone(commands), &command{name: "boom", run: func(*env, []string) error { panic("boom") }})
	out, errOut, code := tally(t, "boom")
	if code != exitInternal || out != "" {
		t.Fatalf("panic: exit %d, stdout %q", code, out)
	}
	for _, s := range []string{"tally: internal error: boom\n", "goroutine", "please report it"} {
		if !strings.Contains(errOut, s) {
			t.Errorf("panic report lacks %q:\n%s", s, errOut)
		}
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestPanicExitCode$")
	cmd.Env = append(os.Environ(), "TALLY_TEST_PANIC_CHILD=1")
	b, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != exitInternal {
		t.Fatalf("goroutine panic: %v, output:\n%s", err, b)
	}
	if !strings.Contains(string(b), "internal error: boom in a goroutine") || !strings.Contains(string(b), "please report it") {
		t.Fatalf("goroutine panic report:\n%s", b)
	}
}

// TestLongInputNotEchoed is issue 12's reproduction: a 10 KB name was
// echoed back in full. Every error that echoes an argument shows at most
// its first 64 bytes and its length, and a refused name says the limit.
func TestLongInputNotEchoed(t *testing.T) {
	dir := newStore(t)
	d := "-d=" + dir
	long := strings.Repeat("n", 10<<10)
	digits := strings.Repeat("9", 10<<10)
	cases := []struct {
		args []string
		code int
		says string
	}{
		{[]string{d, "counter", "add", long}, exitError, "is 10240 bytes, limit 64"},
		{[]string{d, "column", "add", "posts", long}, exitError, "is 10240 bytes, limit 64"},
		{[]string{d, "column", "add", long, "c"}, exitError, "is 10240 bytes, limit 64"},
		{[]string{d, "get", long, "1"}, exitError, "is 10240 bytes, limit 64"},
		{[]string{d, "incr", "posts", "1", long}, exitError, "is 10240 bytes, limit 64"},
		{[]string{d, "get", "posts", digits}, exitUsage, "(10240 bytes)"},
		{[]string{d, "get", "posts", "1." + long}, exitError, "is 10240 bytes, limit 64"},
		{[]string{d, "set", "posts", "1", "2", digits}, exitUsage, "(10240 bytes)"},
		{[]string{d, "incr", "posts", "1", "likes", digits}, exitUsage, "(10240 bytes)"},
		{[]string{d, "counter", "add", "x", "--range-bits", digits}, exitUsage, "(10240 bytes)"},
		{[]string{d, "counter", "add", "x", "--" + long}, exitUsage, "(10240 bytes)"},
		{[]string{"--" + long, "get"}, exitUsage, "(10240 bytes)"},
		{[]string{d, long}, exitUsage, "(10240 bytes)"},
		{[]string{d, "counter", long}, exitUsage, "(10240 bytes)"},
		{[]string{d, "--durability", long, "get", "posts", "1"}, exitUsage, "(10240 bytes)"},
		{[]string{d, "stats", long}, exitUsage, "(10240 bytes)"},
	}
	for i, c := range cases {
		_, errOut, code := tally(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.says) {
			t.Errorf("case %d: exit %d, stderr %.300q; want exit %d saying %q", i, code, errOut, c.code, c.says)
		}
		if len(errOut) > 600 {
			t.Errorf("case %d: stderr is %d bytes: %.300q", i, len(errOut), errOut)
		}
	}
	if got := state(t, dir); got != initialState {
		t.Fatalf("store changed:\n%s\nwant:\n%s", got, initialState)
	}
}

// TestErrorsNameTheCause checks errors that used to name another cause: a
// wrong number of values is not "value out of range", a name that can never
// exist says why rather than only "not found", and bad flag values all get
// the same status whichever check refuses them.
func TestErrorsNameTheCause(t *testing.T) {
	dir := newStore(t)
	d := "-d=" + dir
	cases := []struct {
		args   []string
		code   int
		says   string
		notSay string
	}{
		{[]string{d, "set", "posts", "5", "1"}, exitError, "wrong number of values", "out of range"},
		{[]string{d, "set", "posts", "5", "1", "2", "3"}, exitError, "wrong number of values", "out of range"},
		{[]string{d, "get", "a.b", "1"}, exitError, "invalid name: counter name \"a.b\" has '.' at byte 1", ""},
		{[]string{d, "incr", "posts", "1", "x y"}, exitError, "invalid name: column name \"x y\" has ' '", ""},
		{[]string{d, "get", "nope", "1"}, exitError, `counter not found: "nope"`, "invalid"},
		{[]string{d, "column", "add", "posts", "x", "--hint", "12"}, exitError, "invalid option: column hint 12 bits (want 8, 16 or 32)", ""},
		{[]string{d, "column", "add", "posts", "x", "--hint", "300"}, exitError, "invalid option: column hint 300 bits (want 8, 16 or 32)", ""},
		{[]string{d, "counter", "add", "x", "--range-bits", "60"}, exitError, "invalid option: range bits 60 (want 8..48)", ""},
		{[]string{d, "counter", "add", "x", "--range-bits", "600"}, exitError, "invalid option: range bits 600 (want 8..48)", ""},
	}
	for _, c := range cases {
		_, errOut, code := tally(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.says) || c.notSay != "" && strings.Contains(errOut, c.notSay) {
			t.Errorf("tally %s: exit %d, stderr %q; want exit %d saying %q", strings.Join(c.args, " "), code, errOut, c.code, c.says)
		}
	}
	if got := state(t, dir); got != initialState {
		t.Fatalf("store changed:\n%s\nwant:\n%s", got, initialState)
	}
}

// TestHelpQuotesTheLimits checks the schema commands' help against what
// the store accepts, so help text cannot drift from internal/limits.
func TestHelpQuotesTheLimits(t *testing.T) {
	counterAddHelp := cmdtab.Find(cmdtab.All(), "counter add").CLIHelp()
	columnAddHelp := cmdtab.Find(cmdtab.All(), "column add").CLIHelp()
	rb := regexp.MustCompile(`\((\d+)\.\.(\d+)\); fixed once given`).FindStringSubmatch(counterAddHelp)
	if rb == nil || rb[1] != fmt.Sprint(limits.MinRangeBits) || rb[2] != fmt.Sprint(limits.MaxRangeBits) {
		t.Fatalf("counter add help gives range bits %v", rb)
	}
	for v := 0; v < 256; v++ {
		err := store.CounterOptions{RangeBits: uint8(v)}.Validate()
		inHelp := v >= limits.MinRangeBits && v <= limits.MaxRangeBits || v == 0 // 0: the default
		if (err == nil) != inHelp {
			t.Errorf("range bits %d: store says %v, help says ok=%v", v, err, inHelp)
		}
	}
	hints := regexp.MustCompile(`memory row: (\d+), (\d+) or (\d+)`).FindStringSubmatch(columnAddHelp)
	maxes := regexp.MustCompile(`2\^MAX-1: (\d+) or (\d+)`).FindStringSubmatch(columnAddHelp)
	if hints == nil || maxes == nil {
		t.Fatal("column add help lacks the --hint or --max sets")
	}
	for v := 1; v < 256; v++ {
		hintOK := store.ColumnOptions{HintBits: uint8(v), MaxBits: 64}.Validate() == nil
		maxOK := store.ColumnOptions{HintBits: 8, MaxBits: uint8(v)}.Validate() == nil
		if hintOK != slices.Contains(hints[1:], fmt.Sprint(v)) || maxOK != slices.Contains(maxes[1:], fmt.Sprint(v)) {
			t.Errorf("bits %d: store accepts hint=%v max=%v, help lists %v and %v", v, hintOK, maxOK, hints[1:], maxes[1:])
		}
	}
	for _, s := range []string{fmt.Sprintf("at most %d columns", limits.MaxColumns), fmt.Sprintf("1 to %d letters", limits.MaxNameLen)} {
		if !strings.Contains(columnAddHelp, s) {
			t.Errorf("column add help does not say %q", s)
		}
	}
	if err := (store.CounterOptions{Age: store.AgePolicy{Kind: store.AgeByTime, MaxAge: time.Hour, IDEpochMs: 1 << 50}}).Validate(); err != nil ||
		!strings.Contains(counterAddHelp, "(0..2^50, default") {
		t.Errorf("epoch limit: store says %v for 2^50; help: %s", err, counterAddHelp)
	}
	for _, s := range []string{fmt.Sprintf("0..%d, default 22", limits.MaxIDTimeShift), fmt.Sprintf("1 to %d letters", limits.MaxNameLen)} {
		if !strings.Contains(counterAddHelp, s) {
			t.Errorf("counter add help does not say %q", s)
		}
	}
}

// TestServeSnapshotFlags: --snapshot-timeout and --max-held-log are
// cluster flags (refused without --cluster), and a negative timeout is
// refused before anything is opened.
func TestServeSnapshotFlags(t *testing.T) {
	t.Setenv("TALLY_DIR", "")
	for _, args := range [][]string{
		{"--snapshot-timeout", "5s"},
		{"--max-held-log", "1048576"},
		{"--cluster", "--node-id", "1", "--raft-addr", "127.0.0.1:1", "--peers", "1=127.0.0.1:1/127.0.0.1:2",
			"--cluster-secret", "0123456789abcdef", "--snapshot-timeout", "-1s"},
	} {
		dir := filepath.Join(t.TempDir(), "new")
		_, errOut, code := tally(t, append([]string{"-d", dir, "serve", "--create", "--addr", "127.0.0.1:0"}, args...)...)
		if code != exitUsage {
			t.Errorf("serve %q: exit %d (%q), want %d", args, code, errOut, exitUsage)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("serve %q created %s: %v", args, dir, err)
		}
	}
}
