// Package zpool holds the module's zstd encoders and decoder. They are
// expensive to construct (hundreds of KiB of tables), so the process keeps
// one encoder per level and one decoder, shared by every package that
// compresses (cold blocks, unread's feed snapshots). Both are safe for
// concurrent EncodeAll/DecodeAll calls; the concurrency option bounds how
// many run at once without blocking.
package zpool

import (
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// MaxDecoded bounds what the shared decoder will decode from one frame (its
// window and memory). Callers bound each DecodeAll further by the capacity
// of the destination they pass, which they size from the length their own
// format declares, so a hostile frame cannot make it allocate more than the
// header promised.
const MaxDecoded = 64 << 20

var (
	encMu   sync.Mutex
	encoder = map[zstd.EncoderLevel]*zstd.Encoder{}

	decOnce sync.Once
	decoder *zstd.Decoder
	decErr  error
)

// Encoder returns the shared encoder for a zstd level (1..22, mapped onto
// klauspost's four speeds). Frames carry no zstd checksum (every tally
// format carries its own CRC-32C) and are single-segment with their
// content size declared.
func Encoder(level int) (*zstd.Encoder, error) {
	l := zstd.EncoderLevelFromZstd(level)
	encMu.Lock()
	defer encMu.Unlock()
	if e, ok := encoder[l]; ok {
		return e, nil
	}
	e, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(l),
		zstd.WithEncoderCRC(false),
		zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
		zstd.WithSingleSegment(true),
		zstd.WithZeroFrames(true),
	)
	if err != nil {
		return nil, err
	}
	encoder[l] = e
	return e, nil
}

// Decoder returns the process-wide decoder. DecodeAll is capped at the
// capacity of the destination slice (WithDecodeAllCapLimit).
func Decoder() (*zstd.Decoder, error) {
	decOnce.Do(func() {
		decoder, decErr = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithDecodeAllCapLimit(true),
			zstd.WithDecoderMaxMemory(MaxDecoded),
			zstd.WithDecoderMaxWindow(MaxDecoded),
		)
	})
	return decoder, decErr
}
