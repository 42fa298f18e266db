package workload

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"time"
)

// Defaults of LikesConfig.
const (
	DefaultLikeItems = 1_000_000
	DefaultLikeUsers = 1_000_000
	// DefaultLikeZipf is the exponent of item popularity: the item of rank
	// r (from 1) gets likes in proportion to r^-s. With 1.1 over a million
	// items, half the likes go to the top ~1,000 items and most items get a
	// handful: "most items have few likes".
	DefaultLikeZipf = 1.1
	DefaultLikeSpan = 30 * 24 * time.Hour
)

// LikesConfig describes a likes workload: items of one business, users,
// and a stream of like, unlike, dislike and undislike operations.
type LikesConfig struct {
	// Seed fixes every id and operation. The default is 0.
	Seed uint64
	// Items is the number of items. The default is DefaultLikeItems.
	Items uint64
	// Users is the number of users. The default is DefaultLikeUsers.
	Users uint64
	// Zipf is the exponent of item popularity (> 1). The default is
	// DefaultLikeZipf.
	Zipf float64
	// End and Span place item creation times (snowflake item ids,
	// Layout): the newest item just before End, the oldest at End-Span.
	// The defaults are DefaultEnd and DefaultLikeSpan.
	End  time.Time
	Span time.Duration
	// Mix is the fraction of each operation kind: like, unlike, dislike,
	// undislike. The default is 0.80, 0.10, 0.07, 0.03.
	Mix [4]float64
}

// LikeKind is the kind of a likes operation.
type LikeKind uint8

const (
	Like LikeKind = iota
	Unlike
	Dislike
	Undislike
)

// String returns the operation's name.
func (k LikeKind) String() string {
	return [...]string{"like", "unlike", "dislike", "undislike"}[k]
}

// LikeOp is one likes operation.
type LikeOp struct {
	Kind       LikeKind
	Item, User uint64
}

// Likes is a generated likes workload, immutable and safe for concurrent
// use.
type Likes struct {
	cfg  LikesConfig
	ids  idSpace
	cut  [4]uint64 // cumulative mix thresholds over 2^53
	perm uint64    // multiplier of the rank → item index permutation
}

// NewLikes checks cfg and fills its defaults.
func NewLikes(cfg LikesConfig) (*Likes, error) {
	if cfg.Items == 0 {
		cfg.Items = DefaultLikeItems
	}
	if cfg.Users == 0 {
		cfg.Users = DefaultLikeUsers
	}
	if cfg.Zipf == 0 {
		cfg.Zipf = DefaultLikeZipf
	}
	if cfg.End.IsZero() {
		cfg.End = DefaultEnd
	}
	if cfg.Span == 0 {
		cfg.Span = DefaultLikeSpan
	}
	if cfg.Mix == ([4]float64{}) {
		cfg.Mix = [4]float64{0.80, 0.10, 0.07, 0.03}
	}
	if !(cfg.Zipf > 1) {
		return nil, fmt.Errorf("workload: zipf exponent %v must be above 1", cfg.Zipf)
	}
	sum := 0.0
	for _, f := range cfg.Mix {
		if !(f >= 0) {
			return nil, fmt.Errorf("workload: bad operation mix %v", cfg.Mix)
		}
		sum += f
	}
	if !(sum > 0) {
		return nil, fmt.Errorf("workload: bad operation mix %v", cfg.Mix)
	}
	ids, err := newIDSpace(DefaultLayout(), cfg.End.Add(-cfg.Span), cfg.Span, cfg.Items)
	if err != nil {
		return nil, err
	}
	w := &Likes{cfg: cfg, ids: ids}
	acc := 0.0
	for i, f := range cfg.Mix {
		acc += f / sum
		w.cut[i] = uint64(acc * (1 << 53))
	}
	w.cut[3] = 1 << 53
	// An odd multiplier coprime with Items scatters popular ranks over
	// creation time.
	w.perm = 0x9E3779B97F4A7C15 % cfg.Items
	for gcd(w.perm, cfg.Items) != 1 {
		w.perm++
	}
	return w, nil
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// Config returns the workload's configuration, defaults filled.
func (w *Likes) Config() LikesConfig { return w.cfg }

// Item returns the id of the item of popularity rank r (0: the most
// popular).
func (w *Likes) Item(r uint64) uint64 {
	hi, lo := bits.Mul64(r%w.cfg.Items, w.perm)
	return w.ids.id(bits.Rem64(hi, lo, w.cfg.Items))
}

// User returns the id of user k (0 ≤ k < Users): spread over 40 bits, as
// ids of a large site are, below 2^48 so a keep-hot counter keyed by them
// is one range.
func (w *Likes) User(k uint64) uint64 {
	return 1 + mix(w.cfg.Seed^0x75736572, k)>>24
}

// Owner returns the user who owns the item of popularity rank r.
func (w *Likes) Owner(r uint64) uint64 {
	return w.User(mix(w.cfg.Seed^0x6f776e, r) % w.cfg.Users)
}

// LikeStream is one client's operation stream. It is not safe for
// concurrent use.
type LikeStream struct {
	w   *Likes
	rng *rand.Rand
	z   *rand.Zipf
}

// Stream returns client's operation stream.
func (w *Likes) Stream(client int) *LikeStream {
	rng := rand.New(rand.NewPCG(w.cfg.Seed, uint64(client)+1))
	return &LikeStream{w: w, rng: rng, z: rand.NewZipf(rng, w.cfg.Zipf, 1, w.cfg.Items-1)}
}

// Rank draws an item popularity rank.
func (s *LikeStream) Rank() uint64 { return s.z.Uint64() }

// UserIndex draws a user uniformly.
func (s *LikeStream) UserIndex() uint64 { return s.rng.Uint64N(s.w.cfg.Users) }

// Next returns the next operation: a kind by the mix, an item by
// popularity, a user uniformly.
func (s *LikeStream) Next() LikeOp {
	x := s.rng.Uint64() >> 11
	k := Like
	for k < Undislike && x >= s.w.cut[k] {
		k++
	}
	return LikeOp{Kind: k, Item: s.w.Item(s.Rank()), User: s.w.User(s.UserIndex())}
}

// History returns n historical likes (item by popularity, user uniformly,
// times uniform over the last Span before End) for a bulk load.
func (w *Likes) History(n int, fn func(item, user uint64, ms int64)) {
	s := w.Stream(-1)
	end := w.cfg.End.UnixMilli()
	span := w.cfg.Span.Milliseconds()
	for range n {
		r := s.Rank()
		fn(w.Item(r), w.User(s.UserIndex()), end-1-s.rng.Int64N(span))
	}
}
