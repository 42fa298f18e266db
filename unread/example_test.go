package unread_test

import (
	"fmt"
	"log"
	"os"

	"github.com/tallydb/tally"
	"github.com/tallydb/tally/store"
)

// One-to-one counts by kind, a broadcast red dot and feed unread, on a
// database opened by tally.Open (feed unread observes its follow graph).
func Example() {
	dir, err := os.MkdirTemp("", "unread-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := tally.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	x := db.Unread()

	// Kinds are declared, like counter columns.
	if err := x.AddKind("mention", store.ColumnOptions{}); err != nil {
		log.Fatal(err)
	}
	if _, err := x.Incr(7, "mention", 2); err != nil {
		log.Fatal(err)
	}
	counts, err := x.Get(7, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("kinds", x.Kinds(), "counts", counts)

	// A mark puts the dot on every user at once; a clear takes one off.
	if _, err := x.Mark("activity"); err != nil {
		log.Fatal(err)
	}
	if err := x.Clear(7, "activity"); err != nil {
		log.Fatal(err)
	}
	has7, _ := x.Has(7, "activity")
	has8, _ := x.Has(8, "activity")
	fmt.Println("dot 7:", has7, "dot 8:", has8)

	// Feed unread: posts of the accounts a user follows since the user
	// last read the feed.
	if _, err := db.Timeline().Follow(7, 20); err != nil {
		log.Fatal(err)
	}
	if _, err := db.Timeline().Publish(20, 1001); err != nil {
		log.Fatal(err)
	}
	n, err := x.Feed(7)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("feed unread:", n)
	// Output:
	// kinds [mention] counts [2]
	// dot 7: false dot 8: true
	// feed unread: 1
}
