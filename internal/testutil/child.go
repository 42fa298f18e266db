package testutil

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
)

// Kill-child crash tests re-execute their own test binary so that a real
// process dies with SIGKILL mid-write, with no chance to flush, close or
// run a deferred call. The shape, shared by every such test:
//
//	func TestKillX(t *testing.T) {
//		if dir := os.Getenv("TALLY_X_DIR"); dir != "" {
//			xChild(dir) // works, printing progress with ChildPrintf; never returns
//		}
//		...set up dir...
//		for round := range 3 {
//			res := testutil.RunChild(t, "TestKillX", []string{"TALLY_X_DIR=" + dir},
//				func(line string) bool { ...record the acknowledgement; return kill-now })
//			...reopen dir, compare with what was acknowledged, Check...
//		}
//	}
//
// The environment variable is the marker: the parent never sets it for
// itself, so the child branch runs only in the child.

// ChildResult is how a child run by RunChild ended.
type ChildResult struct {
	// Lines is the number of lines the child printed on stdout, all of them
	// passed to the callback, including those after the kill decision (a
	// line printed before the child died is an acknowledgement like any
	// other).
	Lines int
	// Killed says the callback asked for the kill and SIGKILL was sent.
	Killed bool
	// Err is the error of exec.Cmd.Wait: nil when the child exited 0 by
	// itself, an *exec.ExitError when it failed or was killed.
	Err error
}

// RunChild runs the test binary again with only test name selected
// (-test.run=^name$ -test.count=1) and env (KEY=VALUE entries) added to
// this process's environment. The child's stderr goes to this process's
// stderr; each line of its stdout is passed to onLine, in order. The first
// time onLine returns true the child is sent SIGKILL; the lines it printed
// before it died are still passed on. RunChild returns once the child has
// exited and its stdout is drained; it fails t only if the child cannot be
// started. Whether the child had to be killed, or had to exit cleanly, is
// the caller's to check from the result.
func RunChild(t testing.TB, name string, env []string, onLine func(line string) (kill bool)) ChildResult {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var res ChildResult
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		res.Lines++
		if onLine(sc.Text()) && !res.Killed {
			// A child that exited but is not yet waited for still takes
			// the signal; only a failure of kill(2) itself ends up here.
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatalf("kill %s child: %v", name, err)
			}
			res.Killed = true
		}
	}
	res.Err = cmd.Wait()
	return res
}

var childOut struct {
	sync.Mutex
	w *bufio.Writer
}

// ChildPrintf prints one line (format and args, a newline added) on
// stdout for the parent's RunChild callback, flushed before it returns, so
// the parent has seen every line printed before a kill. Safe for
// concurrent use by the child's goroutines; lines never interleave.
func ChildPrintf(format string, args ...any) {
	childOut.Lock()
	defer childOut.Unlock()
	if childOut.w == nil {
		childOut.w = bufio.NewWriter(os.Stdout)
	}
	fmt.Fprintf(childOut.w, format+"\n", args...)
	childOut.w.Flush()
}

// ChildFatal reports err (what failed) on stderr and exits the child with
// status 2, which the parent sees in ChildResult.Err. A child has no
// testing.T of its own to fail.
func ChildFatal(what string, err error) {
	fmt.Fprintln(os.Stderr, what+":", err)
	os.Exit(2)
}
