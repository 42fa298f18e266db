package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAppendSection: two sections append in order to one file, each with
// its heading, body and machine description.
func TestAppendSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "RESULTS.md")
	if err := os.WriteFile(path, []byte("# Results\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := AppendSection(path, "Run", false, "first body\n"); err != nil {
		t.Fatal(err)
	}
	if err := AppendSection(path, "Likes run", true, "second body\n"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.HasPrefix(s, "# Results\n") {
		t.Fatalf("existing text replaced:\n%s", s)
	}
	i, j := strings.Index(s, "\n## Run "), strings.Index(s, "\n## Likes run ")
	if i < 0 || j < i || !strings.Contains(s[i:j], "(full)") || !strings.Contains(s[j:], "(quick)") {
		t.Fatalf("headings missing or out of order:\n%s", s)
	}
	if strings.Count(s, "Machine:\n") != 2 || !strings.Contains(s[i:j], "first body") || !strings.Contains(s[j:], "second body") {
		t.Fatalf("bodies or machine descriptions missing:\n%s", s)
	}
	if err := AppendSection(filepath.Join(path, "not-a-dir", "x.md"), "Run", false, ""); err == nil {
		t.Fatal("appending under a file: no error")
	}
}

func TestMuteCost(t *testing.T) {
	if got := muteCost(2*time.Microsecond, 100, 90); !strings.Contains(got, "costs 2.0µs per page") || !strings.Contains(got, "10% of throughput") {
		t.Errorf("a slower page with mutes: %q", got)
	}
	for _, c := range []struct {
		diff          time.Duration
		before, after float64
		want          string
	}{
		{-3 * time.Microsecond, 100, 110, "p50 -3.0µs, pages/s +10%"},
		{time.Microsecond, 100, 105, "p50 +1.0µs, pages/s +5%"},
		{-time.Microsecond, 100, 95, "p50 -1.0µs, pages/s -5%"},
	} {
		got := muteCost(c.diff, c.before, c.after)
		if !strings.Contains(got, "no mute filter cost above the runs' noise") || !strings.Contains(got, c.want) || strings.Contains(got, "costs") {
			t.Errorf("muteCost(%v, %v, %v) = %q, want %q without a cost", c.diff, c.before, c.after, got, c.want)
		}
	}
}
