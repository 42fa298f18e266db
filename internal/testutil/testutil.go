// Package testutil is the module's one test-support package, shared by
// the tests of every package so that each does not keep its own copy with
// its own semantics:
//
//   - EnvInt: a test's size from an environment variable (unset: the
//     default; set: a positive integer or the test fails).
//   - RunChild, ChildPrintf, ChildFatal: the kill-child harness of crash
//     tests, which re-execute their own binary and SIGKILL it mid-write.
//   - OpenStore and Store: a test's store opened through Hooks, reopened
//     and crashed (Pebble's crashable memory filesystem) in one place,
//     with Check and Close at cleanup.
//   - Untar: store fixtures kept as tarballs under testdata.
//
// It imports nothing of tally (Pebble's vfs only), so the tests of any
// package, store's own included, can use it. It is imported by _test
// files only.
package testutil

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// Untar unpacks the gzipped tarball at path (a store written by an older
// build, kept under testdata) into dir, failing t on any error.
func Untar(t testing.TB, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, filepath.Clean(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			out, err := os.Create(dst)
			if err != nil {
				t.Fatal(err)
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}
