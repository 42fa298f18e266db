package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestJSONEverywhere: --json prints data as JSON from every command that
// prints data (issue 20): table commands their RESP reply, the loads
// their key/value lines as one object, version an object; a command that
// prints no data refuses it.
func TestJSONEverywhere(t *testing.T) {
	t.Setenv("TALLY_DIR", "")
	dir := filepath.Join(t.TempDir(), "db")
	mustTally(t, "-d", dir, "counter", "add", "posts")
	mustTally(t, "-d", dir, "column", "add", "posts", "likes")
	csv := filepath.Join(t.TempDir(), "rows.csv")
	if err := os.WriteFile(csv, []byte("1,5\n2,0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var load map[string]any
	if err := json.Unmarshal([]byte(mustTally(t, "--json", "-d", dir, "load", "posts", csv)), &load); err != nil ||
		load["rows"] != float64(2) || load["zero_rows"] != float64(1) {
		t.Fatalf("load --json: %v %v", load, err)
	}
	var v map[string]string
	if err := json.Unmarshal([]byte(mustTally(t, "--json", "version")), &v); err != nil || v["version"] == "" || !strings.HasPrefix(v["go"], "go") {
		t.Fatalf("version --json: %v %v", v, err)
	}
	if got := mustTally(t, "-d", dir, "--json", "get", "posts", "1", "1.likes"); got != "[[5],5]\n" {
		t.Fatalf("get --json: %q", got)
	}
	if _, errOut, code := tally(t, "--json", "help"); code != exitOK {
		t.Fatalf("help --json: %d %s", code, errOut)
	}
	if _, errOut, code := tally(t, "--json", "-d", dir, "demo"); code != exitUsage || !strings.Contains(errOut, "has no JSON output") {
		t.Fatalf("demo --json: %d %s", code, errOut)
	}
}
