package testutil

import (
	"runtime"
	"strings"
	"time"
)

// BlockedIn returns a channel that receives the stack of the first
// goroutine found whose stack holds every frame of frames (a goroutine
// parked in a lock, say), or never if done receives first (it is not
// consumed: the caller reads it). Reopen tests use it to see that a
// package's job or check waits for the reload instead of running in the
// window between a reopen and the package's After.
func BlockedIn(done <-chan error, frames ...string) <-chan string {
	ch := make(chan string, 1)
	go func() {
		buf := make([]byte, 1<<20)
		for len(done) == 0 {
			n := runtime.Stack(buf, true)
			for _, g := range strings.Split(string(buf[:n]), "\n\n") {
				all := true
				for _, f := range frames {
					all = all && strings.Contains(g, f)
				}
				if all {
					ch <- g
					return
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return ch
}
