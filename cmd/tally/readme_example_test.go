package main_test

// This file holds the Go example of /README.md; keep the two identical
// (between the "README begin" and "README end" lines).

import (
	"fmt"
	"log"
	"os"

	"github.com/tallydb/tally/store"
)

func Example_readme() {
	dir, _ := os.MkdirTemp("", "tally-example-")
	defer os.RemoveAll(dir)

	// README begin
	db, err := store.Open(dir, &store.Options{Durability: store.SyncInterval})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	// Once, when setting up: a counter and its columns.
	if err := db.CreateCounter("posts", store.CounterOptions{RangeBits: 40}); err != nil {
		log.Fatal(err)
	}
	for _, col := range []string{"reposts", "comments", "likes"} {
		if err := db.AddColumn("posts", col, store.ColumnOptions{HintBits: 16, MaxBits: 32}); err != nil {
			log.Fatal(err)
		}
	}

	posts, err := db.Counter("posts")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := posts.Incr(1001, "likes", 1); err != nil {
		log.Fatal(err)
	}
	n, err := posts.Incr(1002, "comments", 5)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("comments of 1002:", n)

	// A feed page: every column of several posts in one call, row-major.
	ids := []uint64{1001, 1002, 1003}
	vals, err := posts.MultiGet(ids, nil)
	if err != nil {
		log.Fatal(err)
	}
	for i, id := range ids {
		fmt.Println(id, vals[i*posts.NumColumns():(i+1)*posts.NumColumns()])
	}
	// README end

	// Output:
	// comments of 1002: 5
	// 1001 [0 0 1]
	// 1002 [0 5 0]
	// 1003 [0 0 0]
}
