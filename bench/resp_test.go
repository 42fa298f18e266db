package bench

import (
	"bufio"
	"errors"
	"strings"
	"testing"
)

// TestReadOKSkipsNested: readOK consumes a whole reply, arrays of arrays
// (LIKE.TOP's maps) included, so the next reply is read from its start.
func TestReadOKSkipsNested(t *testing.T) {
	in := "*2\r\n*4\r\n$4\r\nrank\r\n:1\r\n$4\r\nitem\r\n$1\r\n7\r\n*2\r\n$4\r\nrank\r\n:2\r\n" + // [[rank 1 item 7] [rank 2]]
		":42\r\n" + // the next reply
		"*1\r\n-ERR nope\r\n" + // an error inside an array
		strings.Repeat("*1\r\n", respMaxDepth+1) + ":0\r\n" // nested past the bound
	c := &respConn{r: bufio.NewReader(strings.NewReader(in)), pending: 4}
	if err := c.readOK(); err != nil {
		t.Fatalf("nested reply: %v", err)
	}
	v, err := c.readValue()
	if err != nil || v != int64(42) {
		t.Fatalf("the reply after a nested one: %v, %v; want 42", v, err)
	}
	var re redisError
	if err := c.readOK(); !errors.As(err, &re) {
		t.Fatalf("an error element: %v, want a redisError", err)
	}
	if err := c.readOK(); !errors.Is(err, errRESPProtocol) {
		t.Fatalf("nesting past %d: %v, want errRESPProtocol", respMaxDepth, err)
	}
}
