package main

import (
	"fmt"
	"runtime"

	tallydb "github.com/tallydb/tally"
)

var cmdVersion = &command{
	name:     "version",
	local:    true,
	synopsis: "print tally's version",
	help: `Usage: tally version   (or tally --version)

Prints one line: "tally VERSION GO OS/ARCH". VERSION is the module version
of a binary built with go install github.com/tallydb/tally/cmd/tally@VERSION,
or "(devel)" and the source revision for a build from a working tree.

Example:
  $ tally version
  tally v0.4.0 go1.26.8 linux/amd64
`,
}

func init() { cmdVersion.run = runVersion }

func runVersion(e *env, args []string) error {
	if err := parseNoArgs(e, cmdVersion, args); err != nil {
		return err
	}
	if e.json {
		return writeJSON(e.stdout, map[string]string{"version": tallydb.Version(), "go": runtime.Version(),
			"platform": runtime.GOOS + "/" + runtime.GOARCH})
	}
	_, err := fmt.Fprintf(e.stdout, "tally %s %s %s/%s\n", tallydb.Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}
