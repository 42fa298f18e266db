package procmem

import (
	"runtime"
	"testing"
)

// TestMeasureSeesGrowth: 32 MiB kept alive shows in both figures.
func TestMeasureSeesGrowth(t *testing.T) {
	base := Measure()
	keep := make([]byte, 32<<20)
	for i := range keep {
		keep[i] = byte(i)
	}
	d := Measure().Sub(base)
	if d.Heap < 30<<20 || d.Heap > 40<<20 {
		t.Errorf("heap grew %d bytes for 32 MiB", d.Heap)
	}
	if runtime.GOOS == "linux" && d.RSS < 28<<20 {
		t.Errorf("rss grew %d bytes for 32 MiB", d.RSS)
	}
	runtime.KeepAlive(keep)
}
