//go:build unix

package server

import "syscall"

type cpuTime struct {
	k string
	v float64
}

// cpuTimes returns INFO's CPU section: the process's and its children's
// system and user CPU seconds (getrusage), as Redis reports them.
func cpuTimes() []cpuTime {
	var self, kids syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &self) != nil || syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids) != nil {
		return nil
	}
	sec := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return []cpuTime{
		{"used_cpu_sys", sec(self.Stime)},
		{"used_cpu_user", sec(self.Utime)},
		{"used_cpu_sys_children", sec(kids.Stime)},
		{"used_cpu_user_children", sec(kids.Utime)},
	}
}
