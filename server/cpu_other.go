//go:build !unix

package server

type cpuTime struct {
	k string
	v float64
}

// cpuTimes is empty where getrusage is not available.
func cpuTimes() []cpuTime { return nil }
