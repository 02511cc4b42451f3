package deltalog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/internal/localstore"
)

// A local table's commit, checkpoint or _last_checkpoint is durable
// before its write returns: the folders from _delta_log up to the table's
// are synced. A sync that fails is an error that says the file is there
// but not synced.
func TestLocalLogFilesAreSynced(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "table")
	if err := os.MkdirAll(root, 0o777); err != nil {
		t.Fatal(err)
	}
	var calls [][2]string
	var fail error
	l := &Log{URL: "file://" + root, Store: localstore.NewDir(root), LocalRoot: root,
		syncDirs: func(r, dir string) error {
			calls = append(calls, [2]string{r, dir})
			return fail
		}}
	logDir := filepath.Join(root, "_delta_log")
	if err := l.PutIfAbsent(ctx, LogDir+"00000000000000000000.json", []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	if err := l.writeLogFile(ctx, LogDir+"_last_checkpoint", []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{root, logDir}, {root, logDir}}
	if !reflect.DeepEqual(calls, want) {
		t.Errorf("synced %q, want %q", calls, want)
	}
	fail = errors.New("disk gone")
	err := l.PutIfAbsent(ctx, LogDir+"00000000000000000001.json", []byte("{}\n"))
	if !errors.Is(err, fail) || !strings.Contains(err.Error(), "00000000000000000001.json is written but not synced") {
		t.Errorf("PutIfAbsent with a failing sync returned %v", err)
	}
	if _, err := os.Stat(filepath.Join(logDir, "00000000000000000001.json")); err != nil {
		t.Errorf("the commit whose sync failed is not there: %v", err)
	}
	if err := l.writeLogFile(ctx, LogDir+"_last_checkpoint", []byte("{}\n")); !errors.Is(err, fail) {
		t.Errorf("writeLogFile with a failing sync returned %v", err)
	}
}
