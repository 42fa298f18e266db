package tally

import (
	"runtime/debug"
	"strings"
)

// Version returns tally's version from the build information: the module
// version ("v0.4.0" for a binary built by go install ...@v0.4.0), or
// "(devel)" for a build from a working tree, then the VCS revision (12
// characters, "+dirty" when the tree had changes) when the build recorded
// one: "(devel) 4bfc69412ab3+dirty". A program that imports tally gets the
// version of the tally module it was built with.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	return versionOf(bi)
}

func versionOf(bi *debug.BuildInfo) string {
	v := ""
	if bi.Main.Path == modulePath {
		v = bi.Main.Version
	} else {
		for _, d := range bi.Deps {
			if d.Path == modulePath {
				v = d.Version
				if d.Replace != nil && d.Replace.Version != "" {
					v = d.Replace.Version
				}
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	if bi.Main.Path != modulePath {
		return v // a host's build: its VCS settings are the host's, not tally's
	}
	var rev string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" || strings.Contains(v, rev[:min(12, len(rev))]) {
		return v // a pseudo-version names the revision already
	}
	rev = rev[:min(12, len(rev))]
	if dirty {
		rev += "+dirty"
	}
	return v + " " + rev
}

const modulePath = "github.com/tallydb/tally"
