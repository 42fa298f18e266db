package server

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"testing"
)

// Benchmarks of the server on loopback, in the shape of redis-benchmark
// -c 50 -P 16 -r 1000000: 50 connections, pipelines of 16 commands, ids
// drawn uniformly from a million. One op is one command. Client and
// server share the process and its cores, so the figures are lower bounds
// of the server alone; bench/cmd/servebench runs the real redis-benchmark.

const (
	benchConns    = 50
	benchPipeline = 16
	benchKeyspace = 1_000_000
)

func BenchmarkServer(b *testing.B) {
	for _, tc := range []struct {
		name string
		cmd  func(r *rand.Rand) []string
	}{
		{"HINCRBY", func(r *rand.Rand) []string {
			return []string{"HINCRBY", "posts:" + strconv.Itoa(r.IntN(benchKeyspace)), "likes", "1"}
		}},
		{"INCR", func(r *rand.Rand) []string { return []string{"INCR", "key:" + strconv.Itoa(r.IntN(benchKeyspace))} }},
		{"HGETALL", func(r *rand.Rand) []string {
			return []string{"HGETALL", "posts:" + strconv.Itoa(r.IntN(benchKeyspace))}
		}},
		{"TALLY.MGET-10", func(r *rand.Rand) []string {
			a := []string{"TALLY.MGET", "posts"}
			for i := 0; i < 10; i++ {
				a = append(a, strconv.Itoa(r.IntN(benchKeyspace)))
			}
			return a
		}},
		{"PING", func(r *rand.Rand) []string { return []string{"PING"} }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ts := newTestServer(b, nil)
			// Some rows, so reads find data.
			seed := ts.raw(b)
			r := rand.New(rand.NewPCG(1, 2))
			var load []byte
			for i := 0; i < 20000; i++ {
				load = append(load, resp("HINCRBY", fmt.Sprintf("posts:%d", r.IntN(benchKeyspace)), "likes", "3")...)
			}
			seed.send(string(load))
			for i := 0; i < 20000; i++ {
				seed.mustLine()
			}
			// Pre-built pipelines, cycled.
			pipes := make([][]byte, 512)
			for i := range pipes {
				for j := 0; j < benchPipeline; j++ {
					pipes[i] = append(pipes[i], resp(tc.cmd(r)...)...)
				}
			}
			runPipelines(b, ts.addr, pipes)
		})
	}
}

// runPipelines sends the pipelines, cycled, over benchConns connections
// to addr until b.N commands are answered.
func runPipelines(b *testing.B, addr string, pipes [][]byte) {
	b.SetParallelism((benchConns + 1) / 2)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			b.Error(err)
			return
		}
		defer nc.Close()
		br := bufio.NewReaderSize(nc, 64<<10)
		k := 0
		for {
			n := 0
			for n < benchPipeline && pb.Next() {
				n++
			}
			if n == 0 {
				return
			}
			// A partial last pipeline still sends 16 commands; read
			// them all.
			if _, err := nc.Write(pipes[k%len(pipes)]); err != nil {
				b.Error(err)
				return
			}
			k++
			for i := 0; i < benchPipeline; i++ {
				if err := skipReply(br); err != nil {
					b.Error(err)
					return
				}
			}
			if n < benchPipeline {
				return
			}
		}
	})
}

// skipReply reads one RESP reply; an error reply is an error.
func skipReply(r *bufio.Reader) error {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return err
	}
	switch line[0] {
	case '+', ':':
		return nil
	case '-':
		return fmt.Errorf("error reply %q", line)
	case '$':
		n, _ := strconv.Atoi(string(line[1 : len(line)-2]))
		if n < 0 {
			return nil
		}
		_, err := r.Discard(n + 2)
		return err
	case '*':
		n, _ := strconv.Atoi(string(line[1 : len(line)-2]))
		for i := 0; i < n; i++ {
			if err := skipReply(r); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("bad reply %q", line)
}
