package deltalog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cdcsnap/cdcsnap/internal/localstore"
)

// Store holds a table's objects, keyed by their slash-separated paths
// relative to the table's root ("_delta_log/00000000000000000000.json").
// A missing object is an error matching fs.ErrNotExist (errors.Is), in
// every method. It is what sink/delta.Store documents, for this package.
type Store interface {
	// ReadAll returns the whole object.
	ReadAll(ctx context.Context, key string) ([]byte, error)
	// NewRangeReader reads length bytes of the object from offset (fewer
	// at its end).
	NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)
	// Size returns the object's size in bytes.
	Size(ctx context.Context, key string) (int64, error)
	// List returns, in ascending byte order, the keys that start with
	// prefix up to the next "/" after it: objects, and folders (any
	// object below them) as their key up to and including that "/".
	List(ctx context.Context, prefix string) ([]string, error)
	// NewWriter starts writing an object, which appears whole at Close
	// or not at all: not when ctx is cancelled before Close (Close then
	// returns an error), nor, with ifNotExist, when key exists (Close,
	// or NewWriter, then returns an error matching fs.ErrExist; the test
	// and the write are one atomic step).
	NewWriter(ctx context.Context, key string, ifNotExist bool) (io.WriteCloser, error)
	// Delete removes the object.
	Delete(ctx context.Context, key string) error
	// Close releases the store.
	Close() error
}

// WriteAll writes (or replaces) key with data in s.
func WriteAll(ctx context.Context, s Store, key string, data []byte) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.NewWriter(wctx, key, false)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		cancel()
		_ = w.Close()
		return err
	}
	return w.Close()
}

// Exists reports whether key is an object of s.
func Exists(ctx context.Context, s Store, key string) (bool, error) {
	_, err := s.Size(ctx, key)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// PutIfAbsent writes key only if it does not exist, atomically across
// processes: a local table links a finished temporary file to the final
// name (link fails if the name exists, and readers never see a partial
// file); other stores use the store's conditional write.
func (l *Log) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if l.LocalRoot != "" {
		tmpName, err := l.localTemp(data)
		if err != nil {
			return err
		}
		defer os.Remove(tmpName)
		final := filepath.Join(l.LocalRoot, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(final), 0o777); err != nil {
			return err
		}
		if err := os.Link(tmpName, final); err != nil {
			if errors.Is(err, os.ErrExist) {
				return ErrConflict
			}
			return err
		}
		// The commit is on the disk before the caller hands out what it
		// records; an error here leaves the commit visible, for a rerun
		// to find.
		return l.syncLocal(final)
	}
	if err := l.checkConditionalWrites(ctx); err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := l.Store.NewWriter(wctx, key, true)
	if err == nil {
		if _, err = w.Write(data); err != nil {
			cancel()
			_ = w.Close()
		} else {
			err = w.Close()
		}
	}
	if errors.Is(err, fs.ErrExist) {
		return ErrConflict
	}
	return err
}

// localTempPattern names a local table's temporary log files. They live in
// _delta_log itself, as Spark's and delta-rs's do (a dot-file of Spark's
// log store, _commit_<uuid>.json.tmp of delta-rs): the same file system for
// link and rename, nothing left beside the table, and a name no Delta
// reader takes for a commit or checkpoint.
const localTempPattern = ".cdcsnap-*.tmp"

// localTemp writes data to a synced temporary file in _delta_log, which
// becomes a commit or checkpoint by its link or rename (whose folders are
// then synced: localstore.SyncDirs).
func (l *Log) localTemp(data []byte) (string, error) {
	dir := filepath.Join(l.LocalRoot, "_delta_log")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return "", err
	}
	tmp, err := createTemp(dir)
	if err != nil {
		return "", err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return tmp.Name(), nil
}

// createTemp creates a new file named by localTempPattern in dir with
// mode 0666 less the process's umask, as the data files gocloud.dev's
// fileblob writes get (v0.49.0 blob/fileblob/fileblob.go, createTemp:
// os.CreateTemp's 0600 would keep the log from every other user who may
// read the table's data files: Spark, DuckDB, a person).
func createTemp(dir string) (*os.File, error) {
	for range 100 {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		name := filepath.Join(dir, strings.Replace(localTempPattern, "*", hex.EncodeToString(b[:]), 1))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if !errors.Is(err, os.ErrExist) {
			return f, err
		}
	}
	return nil, fmt.Errorf("delta: no unused temporary file name in %s", dir)
}

// writeLogFile writes (or replaces) a log file other than a commit
// (checkpoints, _last_checkpoint) atomically.
func (l *Log) writeLogFile(ctx context.Context, key string, data []byte) error {
	if l.LocalRoot == "" {
		return WriteAll(ctx, l.Store, key, data)
	}
	tmpName, err := l.localTemp(data)
	if err != nil {
		return err
	}
	final := filepath.Join(l.LocalRoot, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(final), 0o777); err != nil {
		os.Remove(tmpName)
		return err
	}
	if err := os.Rename(tmpName, final); err != nil {
		os.Remove(tmpName)
		return err
	}
	return l.syncLocal(final)
}

// syncLocal makes the name of the local log file final durable: the
// folders from its own up to the table's (localstore.SyncDirs; the
// table's own entry was synced when its folder was made,
// localstore.MkdirAll).
func (l *Log) syncLocal(final string) error {
	sync := l.syncDirs
	if sync == nil {
		sync = localstore.SyncDirs
	}
	if err := sync(l.LocalRoot, filepath.Dir(final)); err != nil {
		return fmt.Errorf("delta: table %s: %s is written but not synced to disk: %w", l.URL, filepath.Base(final), err)
	}
	return nil
}

// checkConditionalWrites makes sure, once per Log, that a bucket store
// honours put-if-absent before the table's first conditional write: it
// writes a probe object under _cdcsnap/probe/ twice with IfNotExist and
// refuses the store (ErrNoConditionalWrites) if the second write
// succeeds. S3 (since August 2024), GCS and Azure honour it; so do the
// emulators package reliability runs (moto, fake-gcs-server, Azurite).
// An S3-compatible store that ignores If-None-Match would let two writers
// of one version overwrite each other's commit.
func (l *Log) checkConditionalWrites(ctx context.Context) error {
	l.condMu.Lock()
	defer l.condMu.Unlock()
	if l.condChecked {
		return nil
	}
	key := "_cdcsnap/probe/" + NewUUID()
	put := func() error {
		w, err := l.Store.NewWriter(ctx, key, true)
		if err != nil {
			return err
		}
		if _, err := w.Write([]byte("cdcsnap checks that this store honours put-if-absent\n")); err != nil {
			_ = w.Close()
			return err
		}
		return w.Close()
	}
	if err := put(); err != nil {
		return fmt.Errorf("delta: table %s: checking the store's conditional writes (%s): %w", l.URL, key, err)
	}
	err := put()
	if derr := l.Store.Delete(ctx, key); derr != nil {
		l.logger().Warn("could not delete the conditional-write probe", "key", key, "error", derr)
	}
	switch {
	case err == nil:
		return fmt.Errorf("delta: table %s: a second put-if-absent of %s succeeded: %w", l.URL, key, ErrNoConditionalWrites)
	case errors.Is(err, fs.ErrExist):
		l.condChecked = true
		return nil
	default:
		return fmt.Errorf("delta: table %s: checking the store's conditional writes (%s): %w", l.URL, key, err)
	}
}

// NewUUID returns a random (version 4) UUID in its canonical text form:
// table ids, data file names, commitInfo txnIds.
func NewUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
