package likes

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/tallydb/tally/internal/checksum"
	"github.com/tallydb/tally/internal/testutil"
	"github.com/tallydb/tally/store"
)

var goldenKey = bytes.Repeat([]byte{7}, secretLen)

// goldenCases are every encoding with a fixed input.
func goldenCases() []struct {
	name string
	got  []byte
	want string
} {
	return []struct {
		name string
		got  []byte
		want string
	}{
		{"state like", appendState(nil, stateRec{Liked, 1741608000000}), "1180b4b4ffd732"},
		{"state dislike", appendState(nil, stateRec{Disliked, 1}), "1201"},
		{"item", appendItem(nil, itemRec{owner: 300, roaring: true}), "0101ac02"},
		{"item without owner", appendItem(nil, itemRec{roaring: true}), "010100"},
		{"ordinal", appendOrd(nil, 0x10203), "0100010203"},
		{"ordinal user", appendOrdUser(nil, 42), "01000000000000002a"},
		{"config", appendConfig(nil, config{boardDays: 7, roaringThreshold: 4096, format: formatHistMem}), "02078020588e7808"},
		{"config format 1", appendConfig(nil, config{boardDays: 7, roaringThreshold: 4096, format: formatHistKeys}), "010780203aacf131"},
		{"business", appendBiz(nil, bizRec{id: 3, created: 5}), "010000000305b90cab16"},
		{"secret", appendSecret(nil, goldenKey), "0107070707070707070707070707070707070707070707070707070707070707079d93144d"},
		{"load intent", appendLoadIntent(nil, 9), "01099a713469"},
		{"likers cursor", appendCursor(nil, goldenKey, cursor{kind: curLikersList, setKind: kindLike, biz: 1, subject: 2, a: 3}), "AQEBAAAAAQAAAAAAAAACAAAAAAAAAAMAAAAAAAAAAH9Mh55bYlqtX_nHrw"},
		{"user likes cursor", appendCursor(nil, goldenKey, cursor{kind: curUserLikes, biz: 1, subject: 2, a: 3, b: 4}), "AQMAAAAAAQAAAAAAAAACAAAAAAAAAAMAAAAAAAAABMt5Rqha-X53nRh4Xw"},
		{"state key", appendStateKey(nil, 1, 2, 3), "410000000100000000000000020000000000000003"},
		{"item key", appendItemKey(nil, 1, 2), "42000000010000000000000002"},
		{"set key", appendSetKey(nil, 1, 2, kindDislike, 3), "43000000010000000000000002020000000000000003"},
		{"bitmap key", appendBitmapKey(nil, 1, 2, kindLike, 5), "440000000100000000000000020100000005"},
		{"user key", appendUserKey(nil, 1, 2, 3, 4), "4500000001000000000000000200000000000000030000000000000004"},
		{"board key", appendBoardKey(nil, 1, 20000, bucketOf(5000), 6), "460000000100004e20fe310000000000000006"},
		{"all-time board key", appendBoardKey(nil, 1, dayAll, bucketOf(1), 6), "4600000001fffffffffffe0000000000000006"},
		{"day score key", appendDayScoreKey(nil, 1, 20000, 6), "470000000100004e200000000000000006"},
		{"histogram key", appendHistKey(nil, 1, 20000, bucketOf(5), histOut), "480000000100004e20fffa01"},
		{"ordinal key", appendOrdKey(nil, 9), "490000000000000009"},
		{"ordinal user key", appendOrdRevKey(nil, 9), "4a00000009"},
		{"meta key", appendMetaKey(nil, metaConfig), "40636f6e666967"},
		{"load intent key", appendLoadIntentKey(nil, 3), "406c6f61642f00000003"},
	}
}

func TestGolden(t *testing.T) {
	for _, c := range goldenCases() {
		got := hex.EncodeToString(c.got)
		if c.name == "likers cursor" || c.name == "user likes cursor" {
			got = string(c.got) // already text
		}
		if got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	for _, s := range []stateRec{{Liked, 0}, {Disliked, maxTimeMs}, {Liked, 1741608000000}} {
		v := appendState([]byte("x"), s)[1:]
		got, err := decodeState(v)
		if err != nil || got != s {
			t.Fatalf("state %v: %v %v", s, got, err)
		}
		if _, err := decodeState(append(v, 0)); err == nil {
			t.Fatal("trailing byte accepted")
		}
	}
	for _, r := range []itemRec{{}, {owner: 1}, {owner: ^uint64(0), roaring: true}} {
		got, err := decodeItem(appendItem(nil, r))
		if err != nil || got != r {
			t.Fatalf("item %v: %v %v", r, got, err)
		}
	}
	for _, c := range []config{{0, MinRoaringThreshold, formatHistMem}, {MaxBoardDays, MaxRoaringThreshold, formatHistKeys}} {
		got, err := decodeConfig(appendConfig(nil, c))
		if err != nil || got != c {
			t.Fatalf("config %v: %v %v", c, got, err)
		}
	}
	got, err := decodeBiz(appendBiz(nil, bizRec{id: 1 << 31, created: 17}))
	if err != nil || got != (bizRec{id: 1 << 31, created: 17}) {
		t.Fatal(got, err)
	}
	for _, c := range []cursor{
		{kind: curLikersRoaring, setKind: kindDislike, biz: 9, subject: 1 << 60, a: 1<<32 - 1},
		{kind: curUserLikes, biz: 1, subject: 2, a: maxTimeMs, b: ^uint64(0)},
	} {
		got, err := decodeCursor(goldenKey, string(appendCursor(nil, goldenKey, c)))
		if err != nil || got != c {
			t.Fatalf("cursor %+v: %+v %v", c, got, err)
		}
	}
	// A checksum catches a flipped bit of a meta record.
	v := appendConfig(nil, config{7, 4096, formatHistMem})
	v[1] ^= 1
	if _, err := decodeConfig(v); err == nil {
		t.Fatal("flipped config accepted")
	}
}

// FuzzDecodeRecords feeds arbitrary bytes to every value decoder: none may
// panic, and whatever one accepts must encode back to the same bytes (one
// encoding per value).
func FuzzDecodeRecords(f *testing.F) {
	for _, c := range goldenCases() {
		f.Add(c.got)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, err := decodeState(b); err == nil && !bytes.Equal(appendState(nil, s), b) {
			t.Fatalf("state %x decodes to %v, encodes to %x", b, s, appendState(nil, s))
		}
		if r, err := decodeItem(b); err == nil && !bytes.Equal(appendItem(nil, r), b) {
			t.Fatalf("item %x", b)
		}
		if o, err := decodeOrd(b); err == nil && !bytes.Equal(appendOrd(nil, o), b) {
			t.Fatalf("ordinal %x", b)
		}
		if u, err := decodeOrdUser(b); err == nil && !bytes.Equal(appendOrdUser(nil, u), b) {
			t.Fatalf("ordinal user %x", b)
		}
		if c, err := decodeConfig(b); err == nil && !bytes.Equal(appendConfig(nil, c), b) {
			t.Fatalf("config %x", b)
		}
		if r, err := decodeBiz(b); err == nil && !bytes.Equal(appendBiz(nil, r), b) {
			t.Fatalf("business %x", b)
		}
		if k, err := decodeSecret(b); err == nil && !bytes.Equal(appendSecret(nil, k), b) {
			t.Fatalf("secret %x", b)
		}
		if ms, err := decodeLoadIntent(b); err == nil && !bytes.Equal(appendLoadIntent(nil, ms), b) {
			t.Fatalf("load intent %x", b)
		}
		checkMeta(append([]byte{prefixMeta}, b...), b)
		if len(b) > 0 {
			checkMeta(append([]byte{prefixMeta}, metaBizPre+string(b[:len(b)/2])...), b[len(b)/2:])
		}
		checkChunk(appendBitmapKey(nil, 1, 2, kindLike, 0), b)
	})
}

// FuzzCursor feeds arbitrary text to the cursor decoder: it may not panic,
// and a cursor it accepts must be one appendCursor makes.
func FuzzCursor(f *testing.F) {
	for _, c := range goldenCases() {
		if len(c.got) == 58 {
			f.Add(string(c.got))
		}
	}
	f.Add("")
	f.Add("garbage")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := decodeCursor(goldenKey, s)
		if err != nil {
			return
		}
		if again := string(appendCursor(nil, goldenKey, c)); again != s {
			t.Fatalf("cursor %q decodes to %+v, encodes to %q", s, c, again)
		}
	})
}

func TestBuckets(t *testing.T) {
	prev := uint16(0)
	for s := uint64(1); s < 1<<20; s++ {
		b := bucketOf(s)
		lo, w := bucketRange(b)
		if s < lo || s-lo >= w {
			t.Fatalf("score %d in bucket %d [%d, +%d)", s, b, lo, w)
		}
		if b < prev || b > prev+1 {
			t.Fatalf("score %d: bucket %d after %d", s, b, prev)
		}
		if s < 128 && (b != uint16(s) || w != 1) {
			t.Fatalf("score %d: bucket %d width %d, want exact", s, b, w)
		}
		if w > 1 && w*64 > s {
			t.Fatalf("score %d: width %d over 1/64", s, w)
		}
		prev = b
	}
	for _, s := range []uint64{1 << 63, ^uint64(0), 1<<40 + 12345} {
		lo, w := bucketRange(bucketOf(s))
		if s < lo || s-lo >= w {
			t.Fatalf("score %d outside its bucket [%d, +%d)", s, lo, w)
		}
	}
	if b := bucketOf(^uint64(0)); b != 3775 {
		t.Fatalf("top bucket %d", b)
	}
}

// format1Answers is what the store of testdata/format1-store.tar.gz
// answered when it was made (answers.json beside it).
type format1Answers struct {
	NowMs    int64                               `json:"now_ms"`
	HistKeys int                                 `json:"hist_keys"`
	Top      map[string][]Entry                  `json:"top"`     // business -> Top(1000)
	TopDay   map[string]map[int][]Entry          `json:"top_day"` // business -> days ago -> TopDay(1000)
	Rank     map[string]map[uint64]Entry         `json:"rank"`    // business -> item -> Rank (absent: not ok)
	RankDay  map[string]map[int]map[uint64]Entry `json:"rank_day"`
	Above    map[string][]uint64                 `json:"above"` // business -> Above(format1Scores)
}

var format1Scores = []uint64{0, 1, 2, 3, 5, 10, 63, 64, 127, 128, 129, 130, 150, 199, 200, 201, 250, 300, 301, 1000}

// TestFormat1Store opens a store of likes format 1, written by the build
// before the histograms moved to memory (commit 9205fbf, with
// testdata/format1-store-gen.go.txt: two businesses, three days of likes,
// unlikes and dislikes, items past 128 likes so buckets are wide, a bulk
// load a day; 1,574 likes-hist keys), and checks that every Top, TopDay,
// Rank, RankDay and Above answer is the one that build gave: read-only
// (which ignores the likes-hist keys and writes nothing), then writable
// (which deletes them and moves the config to format 2), then after more
// likes and a reopen. Check passes at each step.
func TestFormat1Store(t *testing.T) {
	dir := t.TempDir()
	testutil.Untar(t, "testdata/format1-store.tar.gz", dir)
	raw, err := os.ReadFile(filepath.Join(dir, "answers.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want format1Answers
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return time.UnixMilli(want.NowMs) }
	open := func(readOnly bool) (*store.DB, *Likes) {
		t.Helper()
		db, err := store.Open(filepath.Join(dir, "store"), &store.Options{ReadOnly: readOnly, Families: Families(),
			Now: now, DisableBackground: true, JobWorkers: -1})
		if err != nil {
			t.Fatal(err)
		}
		l, err := New(db, &Options{Now: now})
		if err != nil {
			db.Close()
			t.Fatal(err)
		}
		return db, l
	}
	histKeys := func(l *Likes) int {
		t.Helper()
		it, err := l.fam.hist.NewIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for it.Next() {
			n++
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		return n
	}
	format := func(l *Likes) byte {
		t.Helper()
		v, ok, err := l.fam.meta.Get(appendMetaKey(nil, metaConfig), nil)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		c, err := decodeConfig(v)
		if err != nil {
			t.Fatal(err)
		}
		return c.format
	}
	answers := func(l *Likes) format1Answers {
		t.Helper()
		a := format1Answers{NowMs: want.NowMs, HistKeys: want.HistKeys, Top: map[string][]Entry{}, TopDay: map[string]map[int][]Entry{},
			Rank: map[string]map[uint64]Entry{}, RankDay: map[string]map[int]map[uint64]Entry{}, Above: map[string][]uint64{}}
		for _, biz := range []string{"video", "photo"} {
			top, err := l.Top(biz, 1000)
			mustOK(t, err)
			a.Top[biz] = top
			a.TopDay[biz] = map[int][]Entry{}
			a.Rank[biz] = map[uint64]Entry{}
			a.RankDay[biz] = map[int]map[uint64]Entry{}
			for item := uint64(1); item <= 75; item++ {
				e, ok, err := l.Rank(biz, item)
				mustOK(t, err)
				if ok {
					a.Rank[biz][item] = e
				}
			}
			for d := range 4 {
				day := now().Add(-time.Duration(d) * 24 * time.Hour)
				td, err := l.TopDay(biz, day, 1000)
				mustOK(t, err)
				a.TopDay[biz][d] = td
				a.RankDay[biz][d] = map[uint64]Entry{}
				for item := uint64(1); item <= 75; item++ {
					e, ok, err := l.RankDay(biz, day, item)
					mustOK(t, err)
					if ok {
						a.RankDay[biz][d][item] = e
					}
				}
			}
			ab, err := l.Above(biz, format1Scores, nil)
			mustOK(t, err)
			a.Above[biz] = ab
		}
		return a
	}
	same := func(step string, got format1Answers) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			t.Fatalf("%s: answers differ from format 1's\ngot  %.2000s\nwant %.2000s", step, g, w)
		}
	}

	db, l := open(true)
	if n := histKeys(l); n != want.HistKeys || n == 0 {
		t.Fatalf("read-only: %d likes-hist keys, want the %d the store holds", n, want.HistKeys)
	}
	if f := format(l); f != formatHistKeys {
		t.Fatalf("read-only: config of format %d", f)
	}
	same("read-only", answers(l))
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
	db.Close()

	// A writable open whose upgrade cannot reach the WAL fails with the
	// store's error and leaves the store of format 1 as it was.
	fault := testutil.FullWAL(true)
	fdb, err := store.Open(filepath.Join(dir, "store"), &store.Options{FS: errorfs.Wrap(vfs.Default, fault),
		Families: Families(), Now: now, DisableBackground: true, JobWorkers: -1})
	if err != nil {
		t.Fatal(err)
	}
	fault.On()
	if _, err := New(fdb, &Options{Now: now}); !errors.Is(err, store.ErrDiskFull) && !errors.Is(err, store.ErrFailed) {
		t.Fatalf("New on a store whose WAL takes no writes: %v, want the store's write error", err)
	}
	fault.Off()
	fdb.Close()
	db, l = open(true)
	if n := histKeys(l); n != want.HistKeys {
		t.Fatalf("after a failed upgrade: %d likes-hist keys, want %d", n, want.HistKeys)
	}
	if f := format(l); f != formatHistKeys {
		t.Fatalf("after a failed upgrade: config of format %d", f)
	}
	same("after a failed upgrade", answers(l))
	db.Close()

	db, l = open(false)
	if n := histKeys(l); n != 0 {
		t.Fatalf("writable: %d likes-hist keys left", n)
	}
	if f := format(l); f != formatHistMem {
		t.Fatalf("writable: config of format %d", f)
	}
	same("writable", answers(l))
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
	// New likes move item 40 (a few likes) across buckets to the top, and
	// write no likes-hist key.
	for u := range uint64(400) {
		if _, err := l.Like("video", 40, 5000+u, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
	if n := histKeys(l); n != 0 {
		t.Fatalf("after likes: %d likes-hist keys", n)
	}
	db.Close()
	db, l = open(false)
	defer db.Close()
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
	e, ok, err := l.Rank("video", 40)
	if err != nil || !ok || e.Rank != 1 || e.Likes < 400 {
		t.Fatalf("item 40 after 400 more likes: %+v %v %v", e, ok, err)
	}
}

// TestConfigFormats: the config record's version byte is the likes
// format; 1 and 2 decode, any other is corruption (a later format this
// build cannot read), and a build of format 1 refused format 2 by its
// version check (the NB of appendConfig).
func TestConfigFormats(t *testing.T) {
	for _, f := range []byte{formatHistKeys, formatHistMem} {
		c := config{boardDays: 3, roaringThreshold: 64, format: f}
		got, err := decodeConfig(appendConfig(nil, c))
		if err != nil || got != c {
			t.Fatalf("format %d: %+v %v", f, got, err)
		}
	}
	v := appendConfig(nil, config{boardDays: 3, roaringThreshold: 64, format: 3})
	if _, err := decodeConfig(v); !errors.Is(err, errCorrupt) {
		t.Fatalf("format 3: %v", err)
	}
	// What a format-1 build did with a format-2 record.
	if _, err := checksum.CutRecord(appendConfig(nil, config{boardDays: 3, roaringThreshold: 64, format: formatHistMem}), 1); !errors.Is(err, checksum.ErrVersion) {
		t.Fatalf("a format 1 reader accepts format 2: %v", err)
	}
}
