package tally

import (
	"runtime/debug"
	"testing"
)

func TestVersionOf(t *testing.T) {
	for _, c := range []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v0.4.0"}}, "v0.4.0"},
		{debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "4bfc69412ab3c0ffee"}, {Key: "vcs.modified", Value: "true"}}},
			"(devel) 4bfc69412ab3+dirty"},
		{debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v0.0.0-20261124063041-4bfc69412ab3"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "4bfc69412ab3c0ffee"}}},
			"v0.0.0-20261124063041-4bfc69412ab3"},
		{debug.BuildInfo{Main: debug.Module{Path: "example.com/host"},
			Deps:     []*debug.Module{{Path: modulePath, Version: "v0.3.1"}},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "ffff"}}},
			"v0.3.1"},
		{debug.BuildInfo{Main: debug.Module{Path: "example.com/host"}}, "(devel)"},
	} {
		if got := versionOf(&c.bi); got != c.want {
			t.Errorf("versionOf(%+v) = %q, want %q", c.bi.Main, got, c.want)
		}
	}
	if Version() == "" {
		t.Fatal("empty version")
	}
}
