package commands

import (
	"encoding/json"
	"fmt"
	"io"
)

// JSON writes a command's result as JSON: its RESP reply (Reply) with
// arrays as JSON arrays, integers as numbers, strings as strings and nil
// as null. The CLI prints it for --json, so a script reads exactly what a
// RESP client gets.
func JSON(w io.Writer, c *Command, in *Input, out any) error {
	var j jsonReplier
	c.Reply(&j, in, out)
	if j.root == nil {
		return nil
	}
	b, err := json.Marshal(j.root.value())
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// jsonNode is one value of a reply tree under construction.
type jsonNode struct {
	scalar any
	arr    []*jsonNode
	isArr  bool
	isMap  bool // arr holds name, value, name, value ...
	want   int  // elements the array still expects
}

func (n *jsonNode) value() any {
	if n.isMap {
		m := make(map[string]any, len(n.arr)/2)
		for i := 0; i+1 < len(n.arr); i += 2 {
			m[fmt.Sprint(n.arr[i].value())] = n.arr[i+1].value()
		}
		return m
	}
	if !n.isArr {
		return n.scalar
	}
	out := make([]any, len(n.arr))
	for i, e := range n.arr {
		out[i] = e.value()
	}
	return out
}

// jsonReplier builds the reply tree: an array takes the next n values.
type jsonReplier struct {
	root  *jsonNode
	stack []*jsonNode // arrays still filling
}

func (j *jsonReplier) add(n *jsonNode) {
	if len(j.stack) == 0 {
		if j.root == nil {
			j.root = n
		}
	} else {
		top := j.stack[len(j.stack)-1]
		top.arr = append(top.arr, n)
		top.want--
	}
	if n.isArr && n.want > 0 {
		j.stack = append(j.stack, n)
	}
	for len(j.stack) > 0 && j.stack[len(j.stack)-1].want == 0 {
		j.stack = j.stack[:len(j.stack)-1]
	}
}

func (j *jsonReplier) WriteArray(n int) {
	j.add(&jsonNode{isArr: true, want: n, arr: make([]*jsonNode, 0, n)})
}
func (j *jsonReplier) WriteMap(n int) {
	j.add(&jsonNode{isArr: true, isMap: true, want: 2 * n, arr: make([]*jsonNode, 0, 2*n)})
}
func (j *jsonReplier) WriteInt(v int64)         { j.add(&jsonNode{scalar: v}) }
func (j *jsonReplier) WriteUint(v uint64)       { j.add(&jsonNode{scalar: v}) }
func (j *jsonReplier) WriteBulkString(s string) { j.add(&jsonNode{scalar: s}) }
func (j *jsonReplier) WriteNull()               { j.add(&jsonNode{}) }
func (j *jsonReplier) WriteOK()                 { j.add(&jsonNode{scalar: "OK"}) }
func (j *jsonReplier) WriteSimple(s string)     { j.add(&jsonNode{scalar: s}) }
