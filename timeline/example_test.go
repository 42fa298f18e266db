package timeline_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/tallydb/tally"
)

// Follow, publish and read a home timeline, newest first, a page at a
// time. The timeline is opened through tally.Open, which wires unread's
// feed counts to the follow graph.
func Example() {
	dir, err := os.MkdirTemp("", "timeline-example")
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

	if _, err := tl.FollowMany(1, 20, 21); err != nil { // user 1 follows 20 and 21
		log.Fatal(err)
	}
	for _, p := range []struct{ author, post uint64 }{{20, 1001}, {21, 1002}, {20, 1003}} {
		res, err := tl.Publish(p.author, p.post)
		if err != nil {
			log.Fatal(err)
		}
		if res.Job != 0 { // the fan-out, when it runs as a job
			if err := db.Store().WaitJob(context.Background(), res.Job); err != nil {
				log.Fatal(err)
			}
		}
	}
	page, err := tl.Home(1, "", 2)
	for err == nil {
		for _, e := range page.Entries {
			fmt.Println(e.Post, "by", e.Author)
		}
		if page.NoMore {
			break
		}
		page, err = tl.Home(1, page.Cursor, 2)
	}
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// 1003 by 20
	// 1002 by 21
	// 1001 by 20
}
