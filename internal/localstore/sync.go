package localstore

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
)

// Durability on a local disk. A file's bytes and its name reach the disk
// separately: Linux's fsync(2) "does not necessarily ensure that the
// entry in the directory containing the file has also reached disk. For
// that an explicit fsync() on a file descriptor for the directory is also
// needed." A commit that reaches the disk before the data files it names
// would, after a power loss, name files that are empty or missing. So a
// file is synced before it gets its name, and the folders holding the name
// after; a commit is written only once its files' writes have returned.

// SyncDirs makes the entries of folder dir, and of each folder above it up
// to root, durable: each is opened and synced in turn, dir first. The
// folders between them may have just been made (os.MkdirAll), so their
// own entries need syncing too. A file system that cannot sync a folder
// (EINVAL or EBADF, as CIFS and NetBSD answer; PostgreSQL's
// fsync_fname_ext and Dovecot's fdatasync_path ignore the same two) is not
// an error. On Windows folders are not synced: FlushFileBuffers needs a
// handle with GENERIC_WRITE access (learn.microsoft.com, FlushFileBuffers),
// and os.Open opens a folder for reading. A folder reached through a
// symbolic link is synced, not the folder holding the link.
func SyncDirs(root, dir string) error { return syncDirs(root, dir, (*os.File).Sync) }

func syncDirs(root, dir string, sync func(*os.File) error) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	root, dir = filepath.Clean(root), filepath.Clean(dir)
	for {
		if err := syncDir(dir, sync); err != nil {
			return err
		}
		up := filepath.Dir(dir)
		if dir == root || up == dir || !within(root, up) {
			return nil
		}
		dir = up
	}
}

// within reports whether dir is root or a folder below it.
func within(root, dir string) bool {
	rel, err := filepath.Rel(root, dir)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// syncDir opens folder dir and syncs it.
func syncDir(dir string, sync func(*os.File) error) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = sync(f)
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EBADF) {
		err = nil
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// MkdirAll makes folder dir and every missing folder above it, as
// os.MkdirAll does (mode 0777 less the umask), then syncs the folders
// holding the entries it added (SyncDirs), so a table's new folder
// survives a crash once its first commit has.
func MkdirAll(dir string) error { return mkdirAll(dir, (*os.File).Sync) }

func mkdirAll(dir string, sync func(*os.File) error) error {
	dir = filepath.Clean(dir)
	existing := dir
	for {
		if _, err := os.Stat(existing); err == nil {
			break
		}
		up := filepath.Dir(existing)
		if up == existing {
			break
		}
		existing = up
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	if existing == dir {
		return nil
	}
	return syncDirs(existing, dir, sync)
}
