package commands

import (
	"strconv"
	"strings"
)

// RESPArgs returns the RESP request that is the same command as in: the
// RESP name's words, the positionals in order, then each option given as
// its token (and value). A command line parsed by ParseCLI and the request
// RESPArgs makes of it parse to the same input; the tests of both front
// ends rely on it.
func (in *Input) RESPArgs() []string {
	out := strings.Fields(in.cmd.RESP)
	var opts []string
	for i, p := range in.cmd.Params {
		v := &in.vals[i]
		if !v.set {
			continue
		}
		var vals []string
		for _, u := range v.u {
			vals = append(vals, strconv.FormatUint(u, 10))
		}
		for _, n := range v.i {
			vals = append(vals, strconv.FormatInt(n, 10))
		}
		vals = append(vals, v.s...)
		switch {
		case p.Option && p.Kind == Flag:
			opts = append(opts, RESPOption(p.Name))
		case p.Option:
			opts = append(opts, RESPOption(p.Name), vals[0])
		default:
			out = append(out, vals...)
		}
	}
	return append(out, opts...)
}
