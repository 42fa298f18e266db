package cold

import (
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// zstd encoders and decoders are expensive to construct (hundreds of KiB of
// tables), so the package keeps one encoder per level and one decoder for the
// whole process. Both are safe for concurrent EncodeAll/DecodeAll calls; the
// concurrency option bounds how many run at once without blocking.

var (
	encMu   sync.Mutex
	encoder = map[zstd.EncoderLevel]*zstd.Encoder{}

	decOnce sync.Once
	decoder *zstd.Decoder
	decErr  error
)

// encoderFor returns the shared encoder for a zstd level (1..22, mapped onto
// klauspost's four speeds).
func encoderFor(level int) (*zstd.Encoder, error) {
	l := zstd.EncoderLevelFromZstd(level)
	encMu.Lock()
	defer encMu.Unlock()
	if e, ok := encoder[l]; ok {
		return e, nil
	}
	e, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(l),
		zstd.WithEncoderCRC(false), // blocks carry their own crc32c
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

// sharedDecoder returns the process-wide decoder. DecodeAll is capped at the
// capacity of the destination slice, so a hostile frame cannot make it
// allocate more than the block header promised.
func sharedDecoder() (*zstd.Decoder, error) {
	decOnce.Do(func() {
		decoder, decErr = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithDecodeAllCapLimit(true),
			zstd.WithDecoderMaxMemory(maxBlockBytes),
			zstd.WithDecoderMaxWindow(maxBlockBytes),
		)
	})
	return decoder, decErr
}
