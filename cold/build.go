package cold

import "fmt"

// BuildOptions tune how a range is cut into blocks. The zero value means
// defaults.
type BuildOptions struct {
	// TargetBlockSize is the decoded size in bytes a block grows to before
	// the next row starts a new one (rows x sum of column byte widths). A
	// block always holds at least one row. Larger blocks compress better but
	// cost more to decode on a cache miss. The default is
	// DefaultTargetBlockSize.
	TargetBlockSize int
	// ZstdLevel is the zstd level, 1..22; klauspost/compress maps it onto
	// four speeds (1-2 fastest, 3-5 default, 6-9 better, 10+ best). The
	// default is DefaultZstdLevel.
	ZstdLevel int
}

// Defaults chosen by BenchmarkBytesPerRow (see bench_test.go).
const (
	DefaultTargetBlockSize = 4 << 10
	DefaultZstdLevel       = 1
)

func (o BuildOptions) withDefaults() (BuildOptions, error) {
	if o.TargetBlockSize == 0 {
		o.TargetBlockSize = DefaultTargetBlockSize
	}
	if o.ZstdLevel == 0 {
		o.ZstdLevel = DefaultZstdLevel
	}
	var errs []string
	if o.TargetBlockSize < 0 || o.TargetBlockSize > maxBlockBytes {
		errs = append(errs, fmt.Sprintf("TargetBlockSize %d not in 1..%d", o.TargetBlockSize, maxBlockBytes))
	}
	if o.ZstdLevel < 1 || o.ZstdLevel > 22 {
		errs = append(errs, fmt.Sprintf("ZstdLevel %d not in 1..22", o.ZstdLevel))
	}
	if len(errs) > 0 {
		return o, fmt.Errorf("%w: %v", ErrBadArgument, errs)
	}
	return o, nil
}

// Row is one stored row.
type Row struct {
	Key  uint64
	Vals []uint64
}

// Build encodes rows (sorted by Key, strictly increasing, none all-zero)
// into blocks, calling emit once per block in order, and returns the
// encoded range descriptor. See Builder.
func Build(rows []Row, ncols int, opts BuildOptions, emit func(blockNo uint32, block []byte) error) ([]byte, error) {
	b, err := NewBuilder(ncols, opts, emit)
	if err != nil {
		return nil, err
	}
	for i := range rows {
		if err := b.Add(rows[i].Key, rows[i].Vals); err != nil {
			return nil, err
		}
	}
	return b.Finish()
}

// Builder encodes a range streamed row by row. It holds one block of rows
// and the descriptor's key stream (about 1.6 bytes a key) in memory.
//
// emit receives each block in order; the slice is reused after emit
// returns, so emit must copy it (a Pebble batch Set does). An error from
// emit, like any other, is sticky: later calls return it.
type Builder struct {
	ncols int
	opts  BuildOptions
	emit  func(uint32, []byte) error
	err   error

	keys []uint64
	cols [MaxColumns][]uint64
	maxv [MaxColumns]uint64
	rowW int // sum of column byte widths of the current block
	rows uint64
	prev uint64 // last key added

	dw  descWriter
	enc blockEncoder
	out []byte
}

// NewBuilder returns a Builder of rows with ncols columns (1..16).
func NewBuilder(ncols int, opts BuildOptions, emit func(blockNo uint32, block []byte) error) (*Builder, error) {
	if ncols < 1 || ncols > MaxColumns {
		return nil, fmt.Errorf("%w: ncols %d not in 1..%d", ErrBadArgument, ncols, MaxColumns)
	}
	if emit == nil {
		return nil, fmt.Errorf("%w: nil emit", ErrBadArgument)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Builder{ncols: ncols, opts: o, emit: emit}, nil
}

// Add appends a row. Keys must be strictly increasing (ErrUnsorted); vals
// must have ncols entries, not all zero (ErrBadRow). vals is not retained.
func (b *Builder) Add(key uint64, vals []uint64) error {
	if b.err != nil {
		return b.err
	}
	if len(vals) != b.ncols {
		return fmt.Errorf("%w: key %d has %d values, want %d", ErrBadRow, key, len(vals), b.ncols)
	}
	if b.rows > 0 && key <= b.prev {
		return fmt.Errorf("%w: key %d after %d", ErrUnsorted, key, b.prev)
	}
	var any uint64
	grow := false
	for c, v := range vals {
		any |= v
		if v > b.maxv[c] {
			grow = true
		}
	}
	if any == 0 {
		return fmt.Errorf("%w: key %d has all columns 0", ErrBadRow, key)
	}
	if grow {
		w := 0
		for c, v := range vals {
			w += int(byteWidth(max(v, b.maxv[c])))
		}
		if len(b.keys) > 0 && (len(b.keys)+1)*w > b.opts.TargetBlockSize {
			if err := b.flush(); err != nil {
				return err
			}
			w = 0
			for _, v := range vals {
				w += int(byteWidth(v))
			}
		}
		b.rowW = w
		for c, v := range vals {
			b.maxv[c] = max(b.maxv[c], v)
		}
	} else if (len(b.keys)+1)*b.rowW > b.opts.TargetBlockSize && len(b.keys) > 0 {
		if err := b.flush(); err != nil {
			return err
		}
		copy(b.maxv[:], vals)
		b.rowW = 0
		for _, v := range vals {
			b.rowW += int(byteWidth(v))
		}
	}
	b.keys = append(b.keys, key)
	for c, v := range vals {
		b.cols[c] = append(b.cols[c], v)
	}
	b.rows++
	b.prev = key
	return nil
}

func (b *Builder) flush() error {
	n := len(b.keys)
	if n == 0 {
		return nil
	}
	var err error
	b.out, err = b.enc.encode(b.out[:0], b.keys, b.cols[:b.ncols], b.opts.ZstdLevel)
	if err != nil {
		b.err = err
		return err
	}
	if err := b.emit(b.dw.nblocks, b.out); err != nil {
		b.err = err
		return err
	}
	b.dw.addBlock(b.keys)

	b.keys = b.keys[:0]
	for c := range b.ncols {
		b.cols[c] = b.cols[c][:0]
		b.maxv[c] = 0
	}
	b.rowW = 0
	return nil
}

// Finish writes the last block and returns the encoded range descriptor
// (format in encodeDesc). The Builder must not be used afterwards.
func (b *Builder) Finish() ([]byte, error) {
	if b.err != nil {
		return nil, b.err
	}
	if err := b.flush(); err != nil {
		return nil, err
	}
	desc := b.dw.finish(b.ncols)
	b.err = fmt.Errorf("%w: Builder used after Finish", ErrBadArgument)
	return desc, nil
}
