package server_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/tallydb/tally"
	"github.com/tallydb/tally/server"
)

// Serve a database to Redis clients, as "tally serve" does: Redis's hash
// commands on counter rows (COUNTER:ID), and the one command table
// (TALLY.*, TL.*, UNREAD.*, LIKE.*).
func Example() {
	dir, err := os.MkdirTemp("", "server-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := tally.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close() // after Shutdown: Close checkpoints
	srv, err := server.New(db.Store(), nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := srv.RegisterDB(db); err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())

	ctx := context.Background()
	rc := redis.NewClient(&redis.Options{Addr: ln.Addr().String()})
	defer rc.Close()
	rc.Do(ctx, "TALLY.COUNTER", "ADD", "posts")
	rc.Do(ctx, "TALLY.COLUMN", "ADD", "posts", "likes")
	rc.HIncrBy(ctx, "posts:1001", "likes", 2)
	likes, err := rc.HGet(ctx, "posts:1001", "likes").Result()
	if err != nil {
		log.Fatal(err)
	}
	rc.Do(ctx, "TL.FOLLOW", 1, 20)
	rc.Do(ctx, "TL.POST", 20, 1001, "WAIT")
	home, err := rc.Do(ctx, "TL.HOME", 1).Result()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("likes:", likes)
	fmt.Println("home of 1:", home)
	// Output:
	// likes: 2
	// home of 1: [<nil> [[1001 20]]]
}
