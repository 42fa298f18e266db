package tally_test

import (
	"fmt"
	"log"
	"os"

	"github.com/tallydb/tally"
	"github.com/tallydb/tally/likes"
)

// Open one database and use every package through it: the follow graph
// and unread counts stay in step because Open wires them.
func Example() {
	dir, err := os.MkdirTemp("", "tally-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := tally.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	tl := db.Timeline()
	if _, err := tl.Follow(1, 20); err != nil { // user 1 follows author 20
		log.Fatal(err)
	}
	for _, post := range []uint64{1001, 1002} {
		if _, err := tl.Publish(20, post); err != nil {
			log.Fatal(err)
		}
	}
	n, err := db.Unread().Feed(1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("unread posts in 1's feed:", n)

	// Businesses are declared, like counters: a typo is refused.
	if err := db.Likes().AddBusiness("video", likes.BusinessOptions{}); err != nil {
		log.Fatal(err)
	}
	if _, err := db.Likes().Like("video", 1001, 1, 0); err != nil {
		log.Fatal(err)
	}
	c, err := db.Likes().Counts("video", []uint64{1001}, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("likes of 1001:", c[0].Likes)
	// Output:
	// unread posts in 1's feed: 2
	// likes of 1001: 1
}
