package likes_test

import (
	"fmt"
	"log"
	"os"

	"github.com/tallydb/tally"
	"github.com/tallydb/tally/likes"
)

// Likes of a declared business: counts, a page's states, the board and an
// owner's received total.
func Example() {
	dir, err := os.MkdirTemp("", "likes-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := tally.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	l := db.Likes()

	if err := l.AddBusiness("video", likes.BusinessOptions{}); err != nil {
		log.Fatal(err)
	}
	const owner = 9
	for _, v := range []struct{ item, user uint64 }{{100, 1}, {100, 2}, {101, 1}} {
		if _, err := l.Like("video", v.item, v.user, owner); err != nil {
			log.Fatal(err)
		}
	}
	if _, err := l.Like("video", 100, 1, owner); err != nil { // again: nothing changes
		log.Fatal(err)
	}
	counts, err := l.Counts("video", []uint64{100, 101, 102}, nil)
	if err != nil {
		log.Fatal(err)
	}
	states, err := l.States("video", 2, []uint64{100, 101}, nil)
	if err != nil {
		log.Fatal(err)
	}
	top, err := l.Top("video", 10)
	if err != nil {
		log.Fatal(err)
	}
	received, err := l.Received(owner)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("likes:", counts[0].Likes, counts[1].Likes, counts[2].Likes)
	fmt.Println("user 2:", states[0], states[1])
	for _, e := range top {
		fmt.Printf("#%d item %d: %d likes\n", e.Rank, e.Item, e.Likes)
	}
	fmt.Println("received by", owner, ":", received)
	if _, err := l.Like("videos", 100, 1, 0); err != nil { // a typo is refused
		fmt.Println(err)
	}
	// Output:
	// likes: 2 1 0
	// user 2: like none
	// #1 item 100: 2 likes
	// #2 item 101: 1 likes
	// received by 9 : 3
	// likes: unknown business "videos" (businesses: video)
}
