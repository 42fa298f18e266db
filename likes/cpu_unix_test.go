//go:build unix

package likes

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time the process has used (user and system,
// every thread: Pebble's flushes and compactions too). Per like it is the
// figure to compare on a shared machine, where likes/s moves with what
// other processes run.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
