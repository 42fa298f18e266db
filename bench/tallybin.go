package bench

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// TallyPackage is the import path of the tally command, which BuildTally
// builds.
const TallyPackage = "github.com/tallydb/tally/cmd/tally"

// BuildTally builds the tally command with "go build" into bin. It names the
// command by its import path, so it works from any directory inside the
// module (the runners' module root, the package directory of a test). The
// compiler's output goes to log (nil: discarded unless the build fails, when
// it is part of the error).
func BuildTally(bin string, log io.Writer) error {
	cmd := exec.Command("go", "build", "-o", bin, TallyPackage)
	var out []byte
	var err error
	if log != nil {
		cmd.Stdout, cmd.Stderr = log, log
		err = cmd.Run()
	} else {
		out, err = cmd.CombinedOutput()
	}
	if err != nil {
		return fmt.Errorf("go build %s (run inside the module, or pass --tally BIN): %w: %s", TallyPackage, err, lastLines(string(out), 10))
	}
	return nil
}

// TallyBinary returns bin when it is set; otherwise it builds the tally
// command once into a new temporary directory under dir (the system
// temporary directory when dir is empty) and returns the binary's path and
// a cleanup that removes the directory. The runners that start "tally
// serve" processes (servebench, shardbench, clusterbench, and tallybench's
// and likebench's tally-serve targets) share it for their --tally flag.
func TallyBinary(bin, dir string, log io.Writer) (string, func(), error) {
	if bin != "" {
		return bin, func() {}, nil
	}
	tmp, err := os.MkdirTemp(dir, "tally-bin-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(tmp) }
	bin = filepath.Join(tmp, "tally")
	if err := BuildTally(bin, log); err != nil {
		cleanup()
		return "", nil, err
	}
	return bin, cleanup, nil
}

// Wanted is the set of target names a runner's comma-separated --targets
// list names (empty: every target), and whether name is in it.
type Wanted map[string]bool

// ParseTargets returns the set of names in list.
func ParseTargets(list string) Wanted {
	want := Wanted{}
	for _, name := range strings.Split(list, ",") {
		if name = strings.TrimSpace(name); name != "" {
			want[name] = true
		}
	}
	return want
}

// Has reports whether target name is to run.
func (w Wanted) Has(name string) bool { return len(w) == 0 || w[name] }

// ServedBinary is TallyBinary for a runner with tally-serve targets: it
// builds or returns the binary only when want has them, and returns "" and
// a no-op cleanup otherwise.
func ServedBinary(want Wanted, bin, dir string, log io.Writer) (string, func(), error) {
	if !want.Has("tally-serve") {
		return "", func() {}, nil
	}
	return TallyBinary(bin, dir, log)
}
