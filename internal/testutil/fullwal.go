package testutil

import (
	"os"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// FullWAL returns a toggle (off until Activate) that answers ENOSPC to
// every sync of a WAL file and to every operation on the store's probe
// file (TALLY.PROBE): the disk-full case a store heals from in place
// (store.Options.ReopenOnFailure), since the probe fails while the toggle
// is on and passes once it is off. Wrap a filesystem with
// errorfs.Wrap(fs, FullWAL()). With writes too, WAL writes (and creates)
// fail as well, not only syncs.
func FullWAL(writes bool) *errorfs.Toggle {
	return &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, "TALLY.PROBE") {
			return full(op.Path)
		}
		if !strings.HasSuffix(op.Path, ".log") {
			return nil
		}
		switch op.Kind {
		case errorfs.OpFileSync, errorfs.OpFileSyncData:
			return full(op.Path)
		case errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpCreate:
			if writes {
				return full(op.Path)
			}
		}
		return nil
	})}
}

func full(path string) error { return &os.PathError{Op: "inject", Path: path, Err: syscall.ENOSPC} }
