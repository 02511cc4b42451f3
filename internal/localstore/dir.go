// Package localstore holds the two stores of a Delta table that need no
// cloud SDK, with the standard library only: a folder (Dir) and a map in
// memory (Mem, for mem:// tables). Both have the methods of
// sink/delta.Store; keys are slash-separated paths below the table root.
//
// Dir writes the same files gocloud.dev's fileblob (v0.49.0) wrote for
// sink/delta before (Options{Metadata: MetadataDontWrite, NoTempDir:
// true}), so tables written through either read through the other, but
// for a key holding text of the form "__0x<hex>__": fileblob stored that
// file under an escaped name (see Dir.path), which Spark and delta-rs
// do not read either, and Dir does not find it.
package localstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Dir is a store in a local folder. It is safe for concurrent use, also
// by several processes.
type Dir struct {
	root string
	// sync is (*os.File).Sync; tests watch or fail it.
	sync func(*os.File) error
}

// NewDir returns the store of the folder root, which must exist.
func NewDir(root string) *Dir { return &Dir{root: filepath.Clean(root), sync: (*os.File).Sync} }

// path returns key's file. Keys are written as they are, not escaped:
// fileblob (blob/fileblob/fileblob.go, escapeKey) hex-escapes control
// characters, the "/" of "../", "//" and a trailing "/", and any text
// of the form "__0x<hex>__". Those keys are refused here instead (the
// first three never name a Delta file: sink/delta's partition folders
// hex-escape control characters as Hive does), and "__0x<hex>__" is
// kept as it is, which is the name Spark and delta-rs give the file of a
// partition value holding that text.
func (d *Dir) path(op, key string) (string, error) {
	if !validKey(key) {
		return "", &fs.PathError{Op: op, Path: key, Err: fs.ErrInvalid}
	}
	return filepath.Join(d.root, filepath.FromSlash(key)), nil
}

// validKey: a relative slash-separated path with no empty, "." or ".."
// element and no control character.
func validKey(key string) bool {
	if key == "" || (os.PathSeparator != '/' && strings.ContainsRune(key, os.PathSeparator)) {
		return false
	}
	for _, r := range key {
		if r < 32 {
			return false
		}
	}
	for el := range strings.SplitSeq(key, "/") {
		if el == "" || el == "." || el == ".." {
			return false
		}
	}
	return true
}

// open opens key's file for reading; a folder is no object (as in
// fileblob's forKey).
func (d *Dir) open(op, key string) (*os.File, fs.FileInfo, error) {
	p, err := d.path(op, key)
	if err != nil {
		return nil, nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, nil, err
	}
	info, err := f.Stat()
	if err == nil && info.IsDir() {
		err = &fs.PathError{Op: op, Path: p, Err: fs.ErrNotExist}
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, info, nil
}

// ReadAll returns the whole object.
func (d *Dir) ReadAll(_ context.Context, key string) ([]byte, error) {
	f, _, err := d.open("read", key)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// NewRangeReader reads length bytes of the object from offset.
func (d *Dir) NewRangeReader(_ context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	f, _, err := d.open("read", key)
	if err != nil {
		return nil, err
	}
	return &sectionReader{Reader: io.NewSectionReader(f, offset, length), f: f}, nil
}

type sectionReader struct {
	io.Reader
	f *os.File
}

func (r *sectionReader) Close() error { return r.f.Close() }

// Size returns the object's size in bytes.
func (d *Dir) Size(_ context.Context, key string) (int64, error) {
	p, err := d.path("stat", key)
	if err != nil {
		return 0, err
	}
	info, err := os.Stat(p)
	if err != nil {
		return 0, err
	}
	if info.IsDir() {
		return 0, &fs.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
	}
	return info.Size(), nil
}

// attrsExt ends the names of fileblob's attribute files, which its
// listings skip (sink/delta never had them written).
const attrsExt = ".attrs"

// List returns the keys under prefix up to the next "/", sorted: files,
// and each folder holding a file somewhere below it, as fileblob's
// listing with the delimiter "/" has them (ListPaged: it walks the
// folders and collapses each into one key ending in "/"; an empty folder
// is no key).
func (d *Dir) List(_ context.Context, prefix string) ([]string, error) {
	dir, name := path.Split(prefix)
	fsDir := d.root
	if dir != "" {
		p, err := d.path("list", strings.TrimSuffix(dir, "/"))
		if err != nil {
			return nil, err
		}
		fsDir = p
	}
	es, err := readDir(fsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, e := range es {
		n := e.Name()
		switch {
		case !strings.HasPrefix(n, name):
		case e.IsDir():
			if hasFile(filepath.Join(fsDir, n)) {
				keys = append(keys, dir+n+"/")
			}
		case !strings.HasSuffix(n, attrsExt):
			keys = append(keys, dir+n)
		}
	}
	slices.Sort(keys)
	return keys, nil
}

// readDir returns dir's entries as the directory has them: List sorts
// the keys. A file that vanishes meanwhile (another writer's temporary
// file, a partial snapshot being dropped) is no error, where fileblob's
// listing fails.
func readDir(dir string) ([]fs.DirEntry, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// hasFile reports whether the folder holds a file (not an attributes
// file) at any depth.
func hasFile(dir string) bool {
	es, _ := readDir(dir) // unreadable: skipped, as fileblob skips it
	for _, e := range es {
		if !e.IsDir() && !strings.HasSuffix(e.Name(), attrsExt) {
			return true
		}
	}
	for _, e := range es {
		if e.IsDir() && hasFile(filepath.Join(dir, e.Name())) {
			return true
		}
	}
	return false
}

// NewWriter writes the object to a temporary file beside it, renamed (or,
// with ifNotExist, linked: atomic across processes, where fileblob's
// check holds a lock in its process only) to key's name at Close. Close
// returns once the file and its name are on the disk (SyncDirs).
func (d *Dir) NewWriter(ctx context.Context, key string, ifNotExist bool) (io.WriteCloser, error) {
	p, err := d.path("write", key)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o777); err != nil { // fileblob's DirFileMode
		return nil, err
	}
	f, err := createTemp(p)
	if err != nil {
		return nil, err
	}
	return &dirWriter{File: f, ctx: ctx, path: p, ifNotExist: ifNotExist, root: d.root, sync: d.sync}, nil
}

// createTemp creates path.<hex nanoseconds>.tmp with mode 0666 less the
// umask, as fileblob's createTemp does with NoTempDir.
func createTemp(path string) (*os.File, error) {
	for range 10000 {
		name := path + "." + strconv.FormatInt(time.Now().UnixNano(), 16) + ".tmp"
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
	return nil, &fs.PathError{Op: "createtemp", Path: path + ".*.tmp", Err: fs.ErrExist}
}

// dirWriter is a file with a temporary name until Close.
type dirWriter struct {
	*os.File
	ctx        context.Context
	path       string
	ifNotExist bool
	root       string
	sync       func(*os.File) error
}

// Close gives the file its name, unless the write's context is done: its
// bytes synced before, the folders holding the name after (SyncDirs).
func (w *dirWriter) Close() error {
	tmp := w.File.Name()
	defer os.Remove(tmp) // a no-op after Rename; Link leaves tmp behind
	err := w.ctx.Err()
	if err == nil {
		err = w.sync(w.File)
	}
	if cerr := w.File.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := w.ctx.Err(); err != nil {
		return err
	}
	if w.ifNotExist {
		if err := os.Link(tmp, w.path); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("%s already exists: %w", w.path, fs.ErrExist)
			}
			return err
		}
		// Gone before the folder is synced, so a crash leaves no
		// temporary name beside the object.
		_ = os.Remove(tmp)
	} else if err := os.Rename(tmp, w.path); err != nil {
		return err
	}
	return syncDirs(w.root, filepath.Dir(w.path), w.sync)
}

// Delete removes the object's file.
func (d *Dir) Delete(_ context.Context, key string) error {
	p, err := d.path("remove", key)
	if err != nil {
		return err
	}
	return os.Remove(p)
}

// Close does nothing: the folder stays.
func (d *Dir) Close() error { return nil }
