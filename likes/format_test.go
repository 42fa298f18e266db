package likes

import (
	"bytes"
	"encoding/hex"
	"testing"
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
