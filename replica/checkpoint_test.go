package replica

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tallydb/tally/store"
)

func TestDescriptorValidation(t *testing.T) {
	good := &snapDesc{sender: 1, index: 9, addr: "127.0.0.1:1", files: []snapFile{{name: "000001.sst", size: 10, crc: 3}}}
	d, err := decodeDesc(good.encode())
	if err != nil || d.index != 9 || len(d.files) != 1 || d.files[0] != good.files[0] {
		t.Fatalf("round trip: %+v, %v", d, err)
	}
	for _, name := range []string{"", ".", "..", "../TALLY", "a/b", `a\b`, "x.part", "nul\x00"} {
		bad := &snapDesc{sender: 1, index: 9, files: []snapFile{{name: name, size: 1}}}
		if _, err := decodeDesc(bad.encode()); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("name %q: %v", name, err)
		}
	}
	dup := &snapDesc{sender: 1, index: 9, files: []snapFile{{name: "a", size: 1}, {name: "a", size: 1}}}
	big := &snapDesc{sender: 1, index: 9, files: []snapFile{{name: "a", size: maxSnapFileSize + 1}}}
	for _, b := range [][]byte{dup.encode(), big.encode(), good.encode()[:20], append(good.encode(), 0), nil, {descVersion + 1}} {
		if _, err := decodeDesc(b); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("descriptor %x: %v", b, err)
		}
	}
}

// TestFetchRequests: a sender serves only the files its descriptor of an
// index lists; a checkpoint it no longer keeps is ErrSnapshotGone.
func TestFetchRequests(t *testing.T) {
	dir := t.TempDir()
	db, err := store.Open(dir, tcpStoreOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tr := newTestTransport(t, 1, "127.0.0.1:0", testSecret, nil, newInbox())
	s, err := NewCheckpointSnapshotter(CheckpointConfig{ID: 1, Dir: dir, DB: db, Transport: tr, Keep: 1,
		Reopen: func(string) (*store.DB, error) { return nil, errors.New("not here") }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b, err := s.Create(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	d, err := decodeDesc(b)
	if err != nil || d.sender != 1 || d.index != 5 || len(d.files) == 0 {
		t.Fatalf("descriptor %+v, %v", d, err)
	}
	client := newTestTransport(t, 2, "127.0.0.1:0", testSecret, nil, newInbox())
	fc, err := client.openFetch(ctx, 1, tr.Addr())
	if err != nil {
		t.Fatal(err)
	}
	f := d.files[0]
	data, err := fc.get(5, f.name, 0, int(min(f.size, 100)))
	if err != nil || len(data) != int(min(f.size, 100)) {
		t.Fatalf("get: %d bytes, %v", len(data), err)
	}
	if _, err := fc.get(6, f.name, 0, 1); !errors.Is(err, ErrSnapshotGone) {
		t.Fatalf("unknown index: %v", err)
	}
	fc.close()
	for _, req := range []struct {
		name string
		off  int64
		n    int
	}{{"../TALLY", 0, 1}, {"TALLY.LOCK", 0, 1}, {f.name, f.size, 1}, {f.name, 0, maxChunk + 1}} {
		fc, err := client.openFetch(ctx, 1, tr.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fc.get(5, req.name, req.off, req.n); err == nil || errors.Is(err, ErrSnapshotGone) {
			t.Errorf("request %+v: %v", req, err)
		}
		fc.close()
	}
	// A newer checkpoint does not remove one a receiver is fetching (it
	// served a file within fetchGrace), past Keep 1.
	if _, err := s.Create(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, snapshotsDir, strconv.Itoa(5))); err != nil {
		t.Fatalf("a checkpoint being fetched was removed: %v", err)
	}
	// Once nobody fetched it for fetchGrace, a newer one replaces it
	// (and 7, never fetched, goes too): a Prepare of it fails retryably.
	s.fetched.Lock()
	s.fetched.at[5] = time.Now().Add(-fetchGrace)
	s.fetched.Unlock()
	if _, err := s.Create(ctx, 9); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []int{5, 7} {
		if _, err := os.Stat(filepath.Join(dir, snapshotsDir, strconv.Itoa(gone))); !os.IsNotExist(err) {
			t.Fatalf("old checkpoint %d kept: %v", gone, err)
		}
	}
	rdir := t.TempDir()
	r, err := NewCheckpointSnapshotter(CheckpointConfig{ID: 2, Dir: rdir, DB: db, Transport: client,
		Reopen: func(string) (*store.DB, error) { return nil, errors.New("not here") }})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Prepare(ctx, 1, 5, b); !errors.Is(err, ErrSnapshotGone) {
		t.Fatalf("prepare of a removed checkpoint: %v", err)
	}
	if err := r.Prepare(ctx, 1, 6, b); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("descriptor of another index: %v", err)
	}
}
