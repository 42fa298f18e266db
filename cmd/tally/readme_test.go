package main

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeExampleInSync checks that README.md shows the code that
// Example_readme compiles and runs.
func TestReadmeExampleInSync(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Skipf("no README: %v", err)
	}
	src, err := os.ReadFile("readme_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(src), "// README begin\n")
	body, _, ok2 := strings.Cut(body, "\t// README end\n")
	if !ok || !ok2 {
		t.Fatal("readme_example_test.go lacks its README begin/end markers")
	}
	if !strings.Contains(string(readme), body) {
		t.Errorf("README.md's Go example differs from readme_example_test.go; copy this into README.md's main:\n%s", body)
	}
}

// TestReadmeSetUp checks the README's "Set up" section has exactly the two
// commands of the brief.
func TestReadmeSetUp(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Skipf("no README: %v", err)
	}
	_, sec, _ := strings.Cut(string(readme), "## Set up\n")
	sec, _, _ = strings.Cut(sec, "\n## ")
	var cmds []string
	for _, l := range strings.Split(sec, "\n") {
		if strings.HasPrefix(l, "    ") {
			cmds = append(cmds, strings.TrimSpace(l))
		}
	}
	want := []string{"go run ./cmd/tally demo", "go test ./..."}
	if strings.Join(cmds, "|") != strings.Join(want, "|") {
		t.Errorf("README set-up commands %q, want %q", cmds, want)
	}
}

// TestReadmeGoVersion checks the README's "Needs only Go (X or newer)"
// agrees with go.mod's go line, so a user is not told a version the module
// refuses.
func TestReadmeGoVersion(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Skipf("no README: %v", err)
	}
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	var goLine string
	for _, l := range strings.Split(string(mod), "\n") {
		if v, ok := strings.CutPrefix(l, "go "); ok {
			goLine = strings.TrimSpace(v)
		}
	}
	if goLine == "" {
		t.Fatal("go.mod has no go line")
	}
	want := "Go (" + goLine + " or newer)"
	if !strings.Contains(string(readme), want) {
		t.Errorf("README.md does not say %q (go.mod's go line is %s)", want, goLine)
	}
}
