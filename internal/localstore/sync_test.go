package localstore

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// syncCall is one sync a test saw: the file or folder, and whether the
// object's final name existed then.
type syncCall struct {
	path  string
	named bool
}

// watchSyncs makes d record its syncs of files and folders, failing
// those fail says.
func watchSyncs(d *Dir, final string, fail func(path string) error) *[]syncCall {
	var calls []syncCall
	d.sync = func(f *os.File) error {
		_, err := os.Lstat(final)
		calls = append(calls, syncCall{f.Name(), err == nil})
		if fail != nil {
			return fail(f.Name())
		}
		return f.Sync()
	}
	return &calls
}

func put(d *Dir, key string, ifNotExist bool) error {
	w, err := d.NewWriter(context.Background(), key, ifNotExist)
	if err != nil {
		return err
	}
	if _, err := w.Write([]byte("rows")); err != nil {
		return err
	}
	return w.Close()
}

// A written object's bytes are synced while it has no name yet, then
// every folder from its own up to the store's root, once it has.
func TestWriterSyncsBytesThenName(t *testing.T) {
	for _, ifNotExist := range []bool{false, true} {
		root := t.TempDir()
		d := NewDir(root)
		final := filepath.Join(root, "part=1", "sub", "f.parquet")
		calls := watchSyncs(d, final, nil)
		if err := put(d, "part=1/sub/f.parquet", ifNotExist); err != nil {
			t.Fatal(err)
		}
		got := *calls
		if len(got) != 4 || !strings.HasPrefix(got[0].path, final+".") || !strings.HasSuffix(got[0].path, ".tmp") || got[0].named {
			t.Fatalf("ifNotExist %v: syncs %+v, want the temporary file first, before the name exists", ifNotExist, got)
		}
		want := []syncCall{{filepath.Join(root, "part=1", "sub"), true}, {filepath.Join(root, "part=1"), true}, {root, true}}
		if !reflect.DeepEqual(got[1:], want) {
			t.Errorf("ifNotExist %v: folder syncs %+v, want %+v", ifNotExist, got[1:], want)
		}
	}
}

// A file whose bytes cannot be synced gets no name: Close fails with the
// sync's error and leaves nothing behind.
func TestWriterWhoseSyncFailsLeavesNothing(t *testing.T) {
	errDisk := errors.New("disk gone")
	for _, ifNotExist := range []bool{false, true} {
		root := t.TempDir()
		d := NewDir(root)
		final := filepath.Join(root, "d", "f.parquet")
		watchSyncs(d, final, func(string) error { return errDisk })
		if err := put(d, "d/f.parquet", ifNotExist); !errors.Is(err, errDisk) {
			t.Fatalf("ifNotExist %v: Close returned %v, want the sync's error", ifNotExist, err)
		}
		if es, err := os.ReadDir(filepath.Join(root, "d")); err != nil || len(es) != 0 {
			t.Errorf("ifNotExist %v: left %v (%v)", ifNotExist, es, err)
		}
	}
}

// A folder that cannot be synced fails the write (its name may not
// survive a crash), unless the file system says it cannot sync folders
// at all (EINVAL, EBADF).
func TestFolderSyncErrors(t *testing.T) {
	errDisk := errors.New("disk gone")
	for _, c := range []struct {
		err  error
		want error
	}{
		{errDisk, errDisk},
		{&fs.PathError{Op: "sync", Path: "d", Err: syscall.EINVAL}, nil},
		{&fs.PathError{Op: "sync", Path: "d", Err: syscall.EBADF}, nil},
	} {
		root := t.TempDir()
		d := NewDir(root)
		final := filepath.Join(root, "d", "f.parquet")
		watchSyncs(d, final, func(p string) error {
			if info, err := os.Stat(p); err == nil && info.IsDir() {
				return c.err
			}
			return nil
		})
		if err := put(d, "d/f.parquet", false); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("folder sync error %v: Close returned %v, want %v", c.err, err, c.want)
		}
	}
}

// SyncDirs stops at the root, and syncs only the folder itself when it is
// not below the root.
func TestSyncDirsStopsAtRoot(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(deep, 0o777); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	for _, c := range []struct {
		dir  string
		want []string
	}{
		{deep, []string{deep, filepath.Join(root, "a"), root}},
		{root, []string{root}},
		{other, []string{other}},
	} {
		var got []string
		err := syncDirs(root, c.dir, func(f *os.File) error {
			got = append(got, f.Name())
			return nil
		})
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("syncDirs(%s): synced %q (%v), want %q", c.dir, got, err, c.want)
		}
	}
}

// MkdirAll syncs every folder from the new one up to the deepest one that
// was there before, and nothing when the folder was there.
func TestMkdirAllSyncsWhatItMade(t *testing.T) {
	base := t.TempDir()
	deep := filepath.Join(base, "a", "b", "table")
	for _, want := range [][]string{
		{deep, filepath.Join(base, "a", "b"), filepath.Join(base, "a"), base},
		nil,
	} {
		var got []string
		err := mkdirAll(deep, func(f *os.File) error {
			got = append(got, f.Name())
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if info, err := os.Stat(deep); err != nil || !info.IsDir() {
			t.Fatalf("%s not made: %v", deep, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("synced %q, want %q", got, want)
		}
	}
}
