package replica

// CheckpointSnapshotter: snapshots of real stores, as Pebble checkpoints
// streamed from the sender over the TCP transport (issue 22 item 5).
//
// # Create (the leader)
//
// Create(index) writes store.DB.CheckpointTo(DIR/raft-snapshots/<index>.tmp),
// lists the files of its db/ directory with their sizes and CRC-32C
// (Castagnoli), writes that list as the descriptor to DESC in it, and
// renames the directory to DIR/raft-snapshots/<index>: a directory under
// that name is complete. The newest Keep checkpoints are kept (default 2),
// older ones removed. DIR is the store's directory; the checkpoints live
// beside DIR/db, not in it. The descriptor is what travels in the raft
// snapshot message:
//
//	field    width  meaning
//	-------  -----  ------------------------------------------------
//	version  1      descVersion
//	sender   8      the sender's replica id
//	index    8      the snapshot's index
//	addrLen  2      length of addr
//	addr     n      the sender's raft address, where the files are
//	count    4      number of files (at most maxSnapFiles)
//	files    ...    each: nameLen (1), name, size (8), crc32c (4)
//
// A name is a plain file name (no separator, not "." or ".."), a size at
// most maxSnapFileSize: a descriptor that breaks these is refused
// (ErrBadSnapshot) before anything is fetched or written.
//
// # Fetch protocol
//
// The receiver dials the sender's transport with a connection of kind
// kindFetch (the same authenticated handshake as raft connections) and
// sends requests, one at a time, each a frame (4-byte length, payload):
//
//	index u64 | offset u64 | length u32 | name
//
// The answer is a status byte: 0 then the data (u32 length, bytes, u32
// CRC-32C of the bytes); 1 (the sender no longer keeps that checkpoint:
// ErrSnapshotGone, retryable: raft sends a newer snapshot); 2 (a bad
// request: a name not in that checkpoint's descriptor, a range beyond the
// file or a length over maxChunk; the connection is closed). A status
// other than 0 is followed by a u16 length and a message. The sender
// serves only the files its own descriptor of that index lists, so a
// request cannot reach any other file.
//
// Both sides take TCPConfig.SnapshotRate tokens per chunk from their
// transport's token bucket (the sender for all it serves, the receiver for
// all it fetches).
//
// # Prepare and Install (the receiver)
//
// Prepare (run by Node.Step before raft sees the snapshot message) stages
// the files in DIR/db.install (store.StagedPath), each fetched into
// <name>.part in chunks of ChunkSize, fsynced and renamed to <name> once
// its CRC matches. The descriptor being fetched is kept in
// DIR/db.install.desc: a restarted receiver given the same descriptor
// keeps the files already complete (their CRC checked again) and the
// prefix of a .part (its CRC is carried on from the bytes on disk, so a
// damaged prefix, say a torn write of a power loss, fails the file's check
// and that file is fetched again from the start); another descriptor
// wipes the staging first. Install (from the node's loop, once raft took
// the snapshot) runs Prepare if that was not done, marks the staged copy
// complete (store.CompleteStaged), and calls Reopen, the host's hook that
// closes everything on the old store, lets store.InstallStaged swap the
// copy in (crash-safe: store/snapshot.go) and opens the store again.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tallydb/tally/store"
)

// Errors of checkpoint snapshots, for errors.Is.
var (
	// ErrSnapshotGone: the sender no longer keeps the checkpoint a
	// snapshot names (a newer one replaced it). Retryable: raft sends the
	// snapshot again.
	ErrSnapshotGone = errors.New("replica: snapshot checkpoint no longer kept by the sender")
	// ErrBadSnapshot: a snapshot descriptor or fetch request that breaks
	// the protocol's rules, or a fetched file whose CRC does not match.
	ErrBadSnapshot = errors.New("replica: bad snapshot")
)

const (
	descVersion     = 1
	maxSnapFiles    = 1 << 20
	maxSnapFileSize = 1 << 42
	maxSnapName     = 255
	maxChunk        = 4 << 20
	defaultChunk    = 1 << 20
	snapshotsDir    = "raft-snapshots"
	descFile        = "DESC"
	stagedDescFile  = "db.install.desc"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type snapFile struct {
	name string
	size int64
	crc  uint32
}

type snapDesc struct {
	sender uint64
	index  uint64
	addr   string
	files  []snapFile
}

func (d *snapDesc) encode() []byte {
	b := []byte{descVersion}
	b = binary.BigEndian.AppendUint64(b, d.sender)
	b = binary.BigEndian.AppendUint64(b, d.index)
	b = binary.BigEndian.AppendUint16(b, uint16(len(d.addr)))
	b = append(b, d.addr...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(d.files)))
	for _, f := range d.files {
		b = append(b, byte(len(f.name)))
		b = append(b, f.name...)
		b = binary.BigEndian.AppendUint64(b, uint64(f.size))
		b = binary.BigEndian.AppendUint32(b, f.crc)
	}
	return b
}

func decodeDesc(b []byte) (*snapDesc, error) {
	bad := func(f string, a ...any) (*snapDesc, error) {
		return nil, fmt.Errorf("%w: descriptor: %s", ErrBadSnapshot, fmt.Sprintf(f, a...))
	}
	if len(b) < 1+8+8+2 || b[0] != descVersion {
		return bad("%d bytes", len(b))
	}
	d := &snapDesc{sender: binary.BigEndian.Uint64(b[1:]), index: binary.BigEndian.Uint64(b[9:])}
	n := int(binary.BigEndian.Uint16(b[17:]))
	b = b[19:]
	if n > maxAddrLen || len(b) < n+4 {
		return bad("address of %d bytes", n)
	}
	d.addr = string(b[:n])
	count := binary.BigEndian.Uint32(b[n:])
	b = b[n+4:]
	if count > maxSnapFiles {
		return bad("%d files", count)
	}
	seen := map[string]bool{}
	for range count {
		if len(b) < 1 {
			return bad("truncated")
		}
		ln := int(b[0])
		if len(b) < 1+ln+12 {
			return bad("truncated")
		}
		f := snapFile{name: string(b[1 : 1+ln]), size: int64(binary.BigEndian.Uint64(b[1+ln:])), crc: binary.BigEndian.Uint32(b[9+ln:])}
		b = b[13+ln:]
		if !plainName(f.name) || seen[f.name] {
			return bad("file name %q", f.name)
		}
		if f.size < 0 || f.size > maxSnapFileSize {
			return bad("file %s of %d bytes", f.name, f.size)
		}
		seen[f.name] = true
		d.files = append(d.files, f)
	}
	if len(b) != 0 {
		return bad("%d bytes after the files", len(b))
	}
	return d, nil
}

// plainName reports whether name is a file name with no directory part.
func plainName(name string) bool {
	return name != "" && len(name) <= maxSnapName && name != "." && name != ".." &&
		!strings.ContainsAny(name, "/\\\x00") && !strings.HasSuffix(name, ".part")
}

// CheckpointConfig configures a CheckpointSnapshotter.
type CheckpointConfig struct {
	// ID is this replica's id.
	ID uint64
	// Dir is the store's directory (on the OS filesystem); checkpoints go
	// to Dir/raft-snapshots, a received copy is staged at
	// store.StagedPath(Dir).
	Dir string
	// DB is the open store (Install replaces it by Reopen's).
	DB *store.DB
	// Transport serves this replica's checkpoints and fetches others'.
	Transport *TCPTransport
	// Addr is the raft address other replicas fetch from; the default is
	// Transport.Addr().
	Addr string
	// Reopen is called by Install once a received copy is staged and
	// complete: the host closes what runs on the old store and the store
	// itself, calls store.InstallStaged(dir) (or store.Open, which does
	// the same), opens the store on dir again and returns it.
	Reopen func(dir string) (*store.DB, error)
	// Keep is the number of checkpoints kept; the default is 2.
	Keep int
	// ChunkSize is the bytes asked per fetch request; the default is
	// 1 MiB, the most maxChunk.
	ChunkSize int
	// Logger receives progress; the default discards it.
	Logger *slog.Logger
}

// SnapshotStats counts a CheckpointSnapshotter's work.
type SnapshotStats struct {
	Created, Installed int64
	FilesFetched       int64 // files completed by fetching
	BytesFetched       int64 // bytes received from senders
	BytesResumed       int64 // bytes kept from an earlier, interrupted fetch
	BytesServed        int64 // bytes sent to receivers
}

// CheckpointSnapshotter is a Snapshotter (and SnapshotPreparer) for stores
// on disk: a snapshot is a Pebble checkpoint of the sender's store that the
// receiver fetches over the TCP transport (see the file comment).
type CheckpointSnapshotter struct {
	cfg CheckpointConfig
	log *slog.Logger

	mu       sync.Mutex
	db       *store.DB
	prepared []byte // descriptor whose files are staged and verified

	created, installed, filesFetched, bytesFetched, bytesResumed, bytesServed atomic.Int64

	// fetched records when each checkpoint last served a file or a
	// chunk: prune
	// keeps one a replica is fetching (fetchGrace), so making a newer
	// checkpoint for another probe does not fail a fetch under way.
	fetched struct {
		sync.Mutex
		at map[uint64]time.Time
	}
}

// fetchGrace is how long after serving a file a checkpoint is kept past
// Keep: a receiver fetching it asks for its next chunk well within it.
const fetchGrace = 30 * time.Second

// NewCheckpointSnapshotter returns a snapshotter for the store in cfg.Dir
// and registers it with cfg.Transport to serve its checkpoints.
func NewCheckpointSnapshotter(cfg CheckpointConfig) (*CheckpointSnapshotter, error) {
	var errs []error
	if cfg.ID == 0 {
		errs = append(errs, errors.New("ID 0"))
	}
	if cfg.Dir == "" || cfg.DB == nil || cfg.Transport == nil || cfg.Reopen == nil {
		errs = append(errs, errors.New("Dir, DB, Transport and Reopen are required"))
	}
	if cfg.Keep < 0 || cfg.ChunkSize < 0 || cfg.ChunkSize > maxChunk {
		errs = append(errs, fmt.Errorf("Keep %d, ChunkSize %d (most %d)", cfg.Keep, cfg.ChunkSize, maxChunk))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if cfg.Keep == 0 {
		cfg.Keep = 2
	}
	if cfg.ChunkSize == 0 {
		cfg.ChunkSize = defaultChunk
	}
	if cfg.Addr == "" {
		cfg.Addr = cfg.Transport.Addr()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &CheckpointSnapshotter{cfg: cfg, log: cfg.Logger, db: cfg.DB}
	cfg.Transport.setSource(s)
	return s, nil
}

// Stats returns the snapshotter's counters.
func (s *CheckpointSnapshotter) Stats() SnapshotStats {
	return SnapshotStats{
		Created: s.created.Load(), Installed: s.installed.Load(),
		FilesFetched: s.filesFetched.Load(), BytesFetched: s.bytesFetched.Load(),
		BytesResumed: s.bytesResumed.Load(), BytesServed: s.bytesServed.Load(),
	}
}

// DB returns the store the snapshotter works on now.
func (s *CheckpointSnapshotter) DB() *store.DB {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.db
}

func (s *CheckpointSnapshotter) snapDir(index uint64) string {
	return filepath.Join(s.cfg.Dir, snapshotsDir, strconv.FormatUint(index, 10))
}

// Create implements Snapshotter: a checkpoint of the store at index (see
// the file comment). A checkpoint already made at index is reused.
func (s *CheckpointSnapshotter) Create(ctx context.Context, index uint64) ([]byte, error) {
	dir := s.snapDir(index)
	if b, err := os.ReadFile(filepath.Join(dir, descFile)); err == nil {
		if _, err := decodeDesc(b); err == nil {
			return b, nil
		}
	}
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, err
	}
	if err := s.DB().CheckpointTo(tmp); err != nil {
		return nil, fmt.Errorf("replica: checkpoint at %d: %w", index, err)
	}
	d := &snapDesc{sender: s.cfg.ID, index: index, addr: s.cfg.Addr}
	pdir := filepath.Join(tmp, store.PebbleDirName)
	ents, err := os.ReadDir(pdir)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !e.Type().IsRegular() || !plainName(e.Name()) {
			return nil, fmt.Errorf("replica: checkpoint at %d holds %q, not a plain file", index, e.Name())
		}
		size, crc, err := fileCRC(filepath.Join(pdir, e.Name()), -1)
		if err != nil {
			return nil, err
		}
		d.files = append(d.files, snapFile{name: e.Name(), size: size, crc: crc})
	}
	b := d.encode()
	if err := writeFileSynced(filepath.Join(tmp, descFile), b); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, err
	}
	if err := syncDir(filepath.Dir(dir)); err != nil {
		return nil, err
	}
	s.created.Add(1)
	s.prune(index)
	return b, nil
}

// prune removes all but the newest Keep checkpoints (never index's) and
// leftovers of interrupted Creates.
func (s *CheckpointSnapshotter) prune(index uint64) {
	root := filepath.Join(s.cfg.Dir, snapshotsDir)
	ents, err := os.ReadDir(root)
	if err != nil {
		return
	}
	var idx []uint64
	for _, e := range ents {
		if i, err := strconv.ParseUint(e.Name(), 10, 64); err == nil {
			idx = append(idx, i)
		} else if strings.HasSuffix(e.Name(), ".tmp") {
			_ = os.RemoveAll(filepath.Join(root, e.Name()))
		}
	}
	slices.Sort(idx)
	if len(idx) <= s.cfg.Keep {
		return
	}
	s.fetched.Lock()
	defer s.fetched.Unlock()
	for _, i := range idx[:len(idx)-s.cfg.Keep] {
		if i == index || time.Since(s.fetched.at[i]) < fetchGrace {
			continue // being fetched: kept until the receiver is done
		}
		delete(s.fetched.at, i)
		if err := os.RemoveAll(s.snapDir(i)); err != nil {
			s.log.Warn("replica: remove old checkpoint", "index", i, "err", err)
		}
	}
}

// servedFrom records that the checkpoint at index served a file.
func (s *CheckpointSnapshotter) servedFrom(index uint64) {
	s.fetched.Lock()
	defer s.fetched.Unlock()
	if s.fetched.at == nil {
		s.fetched.at = map[uint64]time.Time{}
	}
	s.fetched.at[index] = time.Now()
}

// openSnapshotFile implements snapshotSource: a file of the checkpoint at
// index, if its descriptor lists it.
func (s *CheckpointSnapshotter) openSnapshotFile(index uint64, name string) (*os.File, int64, error) {
	s.servedFrom(index)
	dir := s.snapDir(index)
	b, err := os.ReadFile(filepath.Join(dir, descFile))
	if err != nil {
		return nil, 0, fmt.Errorf("%w: checkpoint %d", ErrSnapshotGone, index)
	}
	d, err := decodeDesc(b)
	if err != nil {
		return nil, 0, err
	}
	for _, f := range d.files {
		if f.name == name {
			fh, err := os.Open(filepath.Join(dir, store.PebbleDirName, name))
			if err != nil {
				return nil, 0, fmt.Errorf("%w: checkpoint %d: %w", ErrSnapshotGone, index, err)
			}
			return fh, f.size, nil
		}
	}
	return nil, 0, fmt.Errorf("%w: %q is not a file of checkpoint %d", ErrBadSnapshot, name, index)
}

// served implements snapshotSource: n bytes of the checkpoint at index
// were sent.
func (s *CheckpointSnapshotter) served(index uint64, n int) {
	s.bytesServed.Add(int64(n))
	s.servedFrom(index)
}

// LastServed implements SnapshotActivity: when the checkpoint at index
// last served a file or a chunk of one.
func (s *CheckpointSnapshotter) LastServed(index uint64) time.Time {
	s.fetched.Lock()
	defer s.fetched.Unlock()
	return s.fetched.at[index]
}

// Prepare implements SnapshotPreparer: it fetches the files data names
// into the staging directory, resuming an interrupted fetch of the same
// descriptor (see the file comment).
func (s *CheckpointSnapshotter) Prepare(ctx context.Context, from, index uint64, data []byte) error {
	d, err := decodeDesc(data)
	if err != nil {
		return err
	}
	if d.index != index {
		return fmt.Errorf("%w: descriptor of index %d in a snapshot at %d", ErrBadSnapshot, d.index, index)
	}
	s.mu.Lock()
	done := bytes.Equal(s.prepared, data)
	s.mu.Unlock()
	if done {
		return nil
	}
	staged := store.StagedPath(s.cfg.Dir)
	descPath := filepath.Join(s.cfg.Dir, stagedDescFile)
	if old, err := os.ReadFile(descPath); err != nil || !bytes.Equal(old, data) {
		// Another snapshot's files (or none): start over.
		if err := os.RemoveAll(staged); err != nil {
			return err
		}
		if err := os.MkdirAll(staged, 0o755); err != nil {
			return err
		}
		if err := writeFileSynced(descPath, data); err != nil {
			return err
		}
		if err := syncDir(s.cfg.Dir); err != nil {
			return err
		}
	}
	f := &fetcher{s: s, ctx: ctx, d: d}
	defer f.close()
	want := map[string]bool{}
	for _, file := range d.files {
		want[file.name] = true
		want[file.name+".part"] = true
		if err := f.file(staged, file); err != nil {
			return err
		}
	}
	// Files of nothing this descriptor names (an earlier attempt's).
	if ents, err := os.ReadDir(staged); err == nil {
		for _, e := range ents {
			if !want[e.Name()] {
				_ = os.RemoveAll(filepath.Join(staged, e.Name()))
			}
		}
	}
	s.mu.Lock()
	s.prepared = bytes.Clone(data)
	s.mu.Unlock()
	return nil
}

// Install implements Snapshotter: Prepare (unless done), then mark the
// staged copy complete and have the host reopen the store on it.
func (s *CheckpointSnapshotter) Install(ctx context.Context, index uint64, data []byte) (*store.DB, error) {
	d, err := decodeDesc(data)
	if err != nil {
		return nil, err
	}
	if err := s.Prepare(ctx, d.sender, index, data); err != nil {
		return nil, err
	}
	// This replica's own term, vote and boot counter go into the copy
	// before it is marked complete: a crash after the swap must not leave
	// the sender's as this replica's.
	if kvs := ownStateKVs(ctx); kvs != nil {
		if err := store.PutStaged(s.cfg.Dir, kvs); err != nil {
			return nil, err
		}
	}
	if err := store.CompleteStaged(s.cfg.Dir); err != nil {
		return nil, err
	}
	db, err := s.cfg.Reopen(s.cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("replica: reopen the store on snapshot %d: %w", index, err)
	}
	_ = os.Remove(filepath.Join(s.cfg.Dir, stagedDescFile))
	s.mu.Lock()
	s.db = db
	s.prepared = nil
	s.mu.Unlock()
	s.installed.Add(1)
	s.log.Info("replica: installed snapshot", "index", index, "from", d.sender, "files", len(d.files))
	return db, nil
}

// fetcher fetches one descriptor's files over one connection.
type fetcher struct {
	s    *CheckpointSnapshotter
	ctx  context.Context
	d    *snapDesc
	conn *fetchConn
}

func (f *fetcher) close() {
	if f.conn != nil {
		f.conn.close()
	}
}

// file makes staged/<name> the complete, verified file.
func (f *fetcher) file(staged string, sf snapFile) error {
	final := filepath.Join(staged, sf.name)
	if st, err := os.Stat(final); err == nil {
		if st.Size() == sf.size {
			if _, crc, err := fileCRC(final, -1); err == nil && crc == sf.crc {
				f.s.bytesResumed.Add(sf.size)
				return nil
			}
		}
		if err := os.Remove(final); err != nil {
			return err
		}
	}
	part := final + ".part"
	fh, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return err
	}
	chunk := int64(f.s.cfg.ChunkSize)
	// The prefix on disk is kept as it is: the file's CRC, carried on from
	// its bytes, catches any damage in it (then the file starts over).
	off := min(st.Size(), sf.size)
	if err := fh.Truncate(off); err != nil {
		return err
	}
	_, crc, err := fileCRC(part, off)
	if err != nil {
		return err
	}
	f.s.bytesResumed.Add(off)
	for off < sf.size {
		n := int(min(chunk, sf.size-off))
		if err := f.s.cfg.Transport.limiter.wait(f.ctx, n); err != nil {
			return err
		}
		if f.conn == nil {
			if f.conn, err = f.s.cfg.Transport.openFetch(f.ctx, f.d.sender, f.d.addr); err != nil {
				return err
			}
		}
		data, err := f.conn.get(f.d.index, sf.name, off, n)
		if err != nil {
			return err
		}
		if _, err := fh.WriteAt(data, off); err != nil {
			return err
		}
		crc = crc32.Update(crc, castagnoli, data)
		off += int64(len(data))
		f.s.bytesFetched.Add(int64(len(data)))
	}
	if crc != sf.crc {
		fh.Close()
		_ = os.Remove(part)
		return fmt.Errorf("%w: %s: CRC %08x, descriptor says %08x", ErrBadSnapshot, sf.name, crc, sf.crc)
	}
	if err := fh.Sync(); err != nil {
		return err
	}
	if err := os.Rename(part, final); err != nil {
		return err
	}
	f.s.filesFetched.Add(1)
	return nil
}

// fileCRC returns the size and CRC-32C of path's first n bytes (all when
// n < 0).
func fileCRC(path string, n int64) (int64, uint32, error) {
	fh, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer fh.Close()
	var r io.Reader = fh
	if n >= 0 {
		r = io.LimitReader(fh, n)
	}
	h := crc32.New(castagnoli)
	size, err := io.Copy(h, bufio.NewReaderSize(r, 256<<10))
	if err != nil {
		return 0, 0, err
	}
	if n >= 0 && size != n {
		return 0, 0, fmt.Errorf("replica: %s has %d bytes, want %d", path, size, n)
	}
	return size, h.Sum32(), nil
}

func writeFileSynced(path string, b []byte) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := fh.Write(b); err != nil {
		fh.Close()
		return err
	}
	if err := fh.Sync(); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// snapshotSource serves checkpoint files to fetching replicas.
type snapshotSource interface {
	openSnapshotFile(index uint64, name string) (*os.File, int64, error)
	served(index uint64, n int)
}

func (t *TCPTransport) setSource(src snapshotSource) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.src = src
}

// Fetch answer statuses.
const (
	fetchOK   = 0
	fetchGone = 1
	fetchBad  = 2
)

// serveFetch answers an authenticated replica's file requests.
func (t *TCPTransport) serveFetch(conn net.Conn) error {
	t.mu.Lock()
	src := t.src
	t.mu.Unlock()
	r := bufio.NewReader(conn)
	w := bufio.NewWriterSize(conn, 64<<10)
	var (
		buf     []byte
		open    *os.File
		openKey string
		size    int64
	)
	defer func() {
		if open != nil {
			open.Close()
		}
	}()
	fail := func(status byte, err error) error {
		msg := err.Error()
		if len(msg) > 1024 {
			msg = msg[:1024]
		}
		w.WriteByte(status)
		w.Write(binary.BigEndian.AppendUint16(nil, uint16(len(msg))))
		w.WriteString(msg)
		w.Flush()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-t.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		req, err := readFrame(r, 8+8+4+maxSnapName, &buf)
		if err != nil {
			if errors.Is(err, ErrFrame) {
				return fail(fetchBad, err)
			}
			return err
		}
		if len(req) < 21 {
			return fail(fetchBad, fmt.Errorf("%w: fetch request of %d bytes", ErrFrame, len(req)))
		}
		index := binary.BigEndian.Uint64(req)
		off := int64(binary.BigEndian.Uint64(req[8:]))
		n := int(binary.BigEndian.Uint32(req[16:]))
		name := string(req[20:])
		if !plainName(name) || n <= 0 || n > maxChunk || off < 0 {
			return fail(fetchBad, fmt.Errorf("%w: fetch of %q at %d+%d", ErrFrame, name, off, n))
		}
		if src == nil {
			return fail(fetchGone, fmt.Errorf("%w: this replica serves no snapshots", ErrSnapshotGone))
		}
		key := strconv.FormatUint(index, 10) + "/" + name
		if key != openKey {
			if open != nil {
				open.Close()
				open = nil
			}
			fh, sz, err := src.openSnapshotFile(index, name)
			if err != nil {
				if errors.Is(err, ErrSnapshotGone) {
					fail(fetchGone, err)
					continue
				}
				return fail(fetchBad, fmt.Errorf("%w: %w", ErrFrame, err))
			}
			open, openKey, size = fh, key, sz
		}
		if off+int64(n) > size {
			return fail(fetchBad, fmt.Errorf("%w: fetch of %s at %d+%d beyond %d bytes", ErrFrame, name, off, n, size))
		}
		if err := t.limiter.wait(ctx, n); err != nil {
			return err
		}
		data := make([]byte, n)
		if _, err := open.ReadAt(data, off); err != nil {
			// The checkpoint was removed under us (or the disk failed).
			open.Close()
			open, openKey = nil, ""
			fail(fetchGone, fmt.Errorf("%w: read %s: %v", ErrSnapshotGone, name, err))
			continue
		}
		w.WriteByte(fetchOK)
		w.Write(binary.BigEndian.AppendUint32(nil, uint32(n)))
		w.Write(data)
		w.Write(binary.BigEndian.AppendUint32(nil, crc32.Checksum(data, castagnoli)))
		if err := w.Flush(); err != nil {
			return err
		}
		src.served(index, n)
	}
}

// fetchConn is a receiver's connection for file requests.
type fetchConn struct {
	conn net.Conn
	r    *bufio.Reader
	done chan struct{} // closed by close
}

func (t *TCPTransport) openFetch(ctx context.Context, id uint64, addr string) (*fetchConn, error) {
	conn, err := t.dial(ctx, id, addr, kindFetch)
	if err != nil {
		return nil, err
	}
	// Cancelling ctx (the node stops) or closing the transport closes
	// the connection, which ends a request in flight.
	done := make(chan struct{})
	go func() {
		select {
		case <-t.closing:
		case <-ctx.Done():
		case <-done:
		}
		conn.Close()
	}()
	return &fetchConn{conn: conn, r: bufio.NewReaderSize(conn, 256<<10), done: done}, nil
}

func (c *fetchConn) close() { close(c.done) }

// get fetches n bytes of name at off in checkpoint index.
func (c *fetchConn) get(index uint64, name string, off int64, n int) ([]byte, error) {
	req := make([]byte, 4, 4+20+len(name))
	req = binary.BigEndian.AppendUint64(req, index)
	req = binary.BigEndian.AppendUint64(req, uint64(off))
	req = binary.BigEndian.AppendUint32(req, uint32(n))
	req = append(req, name...)
	binary.BigEndian.PutUint32(req, uint32(len(req)-4))
	if _, err := c.conn.Write(req); err != nil {
		return nil, err
	}
	status, err := c.r.ReadByte()
	if err != nil {
		return nil, err
	}
	if status != fetchOK {
		var l [2]byte
		if _, err := io.ReadFull(c.r, l[:]); err != nil {
			return nil, err
		}
		msg := make([]byte, binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(c.r, msg); err != nil {
			return nil, err
		}
		if status == fetchGone {
			return nil, fmt.Errorf("%w: %s", ErrSnapshotGone, msg)
		}
		return nil, fmt.Errorf("%w: sender refused the request: %s", ErrBadSnapshot, msg)
	}
	var l [4]byte
	if _, err := io.ReadFull(c.r, l[:]); err != nil {
		return nil, err
	}
	if got := int(binary.BigEndian.Uint32(l[:])); got != n {
		return nil, fmt.Errorf("%w: asked %d bytes, got %d", ErrBadSnapshot, n, got)
	}
	data := make([]byte, n+4)
	if _, err := io.ReadFull(c.r, data); err != nil {
		return nil, err
	}
	if crc32.Checksum(data[:n], castagnoli) != binary.BigEndian.Uint32(data[n:]) {
		return nil, fmt.Errorf("%w: chunk of %s at %d: CRC mismatch", ErrBadSnapshot, name, off)
	}
	return data[:n], nil
}
