package delta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/cdcsnap/cdcsnap/internal/deltalog"
	"github.com/cdcsnap/cdcsnap/internal/localstore"
	"github.com/cdcsnap/cdcsnap/internal/storehints"
	"github.com/cdcsnap/cdcsnap/sink"
)

// Options tune a Table. The zero value is ready to use. Writes run in
// parallel as the caller's partitions do: each WritePartition call is one
// Parquet writer.
type Options struct {
	// TargetFileSize is the compressed size at which a data file is closed
	// and the next one started. Zero means 128 MiB.
	TargetFileSize int64
	// RowGroupRows is the most rows in a Parquet row group; a row group is
	// buffered in memory until it is full (or reaches 8 MiB compressed),
	// which bounds each writer's memory. Zero means 1,048,576.
	RowGroupRows int
	// CheckpointInterval writes a classic Parquet checkpoint after every
	// commit whose version is a multiple of it. Zero means 10; a negative
	// value disables checkpoints.
	CheckpointInterval int
	// Logger receives debug and warning messages. Nil means silent.
	Logger *slog.Logger
	// Create shapes the table when this package creates it (partition
	// columns, properties, features); the zero value creates an
	// unpartitioned table at protocol (1, 2).
	Create CreateOptions
}

func (o Options) targetFileSize() int64 {
	if o.TargetFileSize <= 0 {
		return 128 << 20
	}
	return o.TargetFileSize
}

func (o Options) rowGroupRows() int {
	if o.RowGroupRows <= 0 {
		return 1 << 20
	}
	return o.RowGroupRows
}

func (o Options) checkpointInterval() int64 {
	if o.CheckpointInterval == 0 {
		return 10
	}
	return int64(o.CheckpointInterval)
}

// Table is a Delta Lake table in a Store. It implements sink.Sink and is
// safe for concurrent use; several processes may write the same table
// (commits are put-if-absent).
type Table struct {
	url       string
	store     deltalog.Store
	localRoot string // the table's folder for a local table, else ""
	opts      Options
	log       *slog.Logger
	dlog      *deltalog.Log // the table's transaction log

	mu     sync.Mutex
	cache  *deltalog.State
	closed bool
}

var _ sink.Sink = (*Table)(nil)

// Open opens the Delta table at rawURL, which need not exist yet (the
// first write creates it). rawURL is a local folder (a plain path or
// file:///path) or mem:// (a new, empty table in memory per Open). A
// table in a cloud store (s3://, gs://, azblob://) opens with package
// sink/delta/blobstore and the store's driver imported, which keeps the
// cloud SDKs out of programs that write to a folder; Open refuses such a
// URL with an error naming that call and import.
func Open(ctx context.Context, rawURL string, opts Options) (*Table, error) {
	if err := opts.Create.validate(); err != nil {
		return nil, err
	}
	u, local, mem := storehints.LocalOrMem(rawURL)
	if local {
		dir := rawURL
		if u != nil && u.Scheme == "file" {
			dir = u.Path
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, fmt.Errorf("delta: table path %q: %w", rawURL, err)
		}
		if err := localstore.MkdirAll(abs); err != nil {
			return nil, fmt.Errorf("delta: creating table folder %s: %w", abs, err)
		}
		return newTable(rawURL, localstore.NewDir(abs), abs, opts), nil
	}
	if mem {
		return newTable(rawURL, localstore.NewMem(), "", opts), nil
	}
	return nil, storeURLError(rawURL, u.Scheme)
}

// storeURLError refuses a URL Open does not take, naming the call and the
// driver import that open it.
func storeURLError(rawURL, scheme string) error {
	if storehints.IsADLS(scheme) {
		return storehints.ADLSURLError(rawURL)
	}
	if imp := storehints.DriverImport(scheme); imp != "" {
		return fmt.Errorf("delta: table %s: Open takes a folder, file:// or mem://; open a %s:// table with %s and the import _ %q in your program (or _ %q for every cloud store)", rawURL, scheme, storehints.OpenCall, imp, storehints.AllDrivers)
	}
	return fmt.Errorf("delta: table %s: Open takes a folder, file:// or mem://; open a table in another store with %s and the import of that store's gocloud.dev/blob driver, or with OpenStore", rawURL, storehints.OpenCall)
}

// Store holds a table's objects, keyed by their slash-separated paths
// relative to the table's root ("_delta_log/00000000000000000000.json",
// "part-00000-<uuid>-c000.snappy.parquet"). Open uses a folder's or
// memory's; package sink/delta/blobstore adapts any gocloud.dev bucket;
// a program may bring its own to OpenStore.
//
// A missing object is an error matching fs.ErrNotExist (errors.Is), in
// every method. An error with a method Hint() string, saying what fixes
// a store that is not set up, has that lead the table's error. Commits
// rely on NewWriter's put-if-absent being atomic
// across every writer of the table: the table refuses a store whose
// second put-if-absent of one key succeeds (ErrNoConditionalWrites).
type Store interface {
	// ReadAll returns the whole object.
	ReadAll(ctx context.Context, key string) ([]byte, error)
	// NewRangeReader reads length bytes of the object from offset
	// (fewer at its end).
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
	// or NewWriter, then returns an error matching fs.ErrExist).
	NewWriter(ctx context.Context, key string, ifNotExist bool) (io.WriteCloser, error)
	// Delete removes the object.
	Delete(ctx context.Context, key string) error
	// Close releases the store; Table.Close calls it.
	Close() error
}

// OpenStore opens the Delta table at the root of s, which need not exist
// yet; name names it in errors and logs. The table's Close closes s.
func OpenStore(s Store, name string, opts Options) (*Table, error) {
	if err := opts.Create.validate(); err != nil {
		return nil, err
	}
	return newTable(name, s, "", opts), nil
}

func newTable(name string, s deltalog.Store, localRoot string, opts Options) *Table {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("table", name)
	return &Table{url: name, store: s, localRoot: localRoot, opts: opts, log: log,
		dlog: &deltalog.Log{URL: name, Store: s, LocalRoot: localRoot, Logger: log, CheckTxn: checkRecordTxn, CheckCommit: checkSnapshotRows}}
}

// Close closes the table's store. The table's methods fail with
// ErrClosed afterwards.
func (t *Table) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	return t.store.Close()
}

// current returns the table's latest state, replaying only the commits
// after the cached one when it can.
func (t *Table) current(ctx context.Context) (*deltalog.State, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, ErrClosed
	}
	base := t.cache
	t.mu.Unlock()
	s, err := t.dlog.Load(ctx, base, -1)
	if err != nil {
		// The first operation on a table reads its log: where a store
		// that is not set up (region, account, credentials, bucket)
		// fails, and what fixes it leads the error.
		var h interface{ Hint() string }
		if errors.As(err, &h) && h.Hint() != "" {
			return nil, storehints.Lead(t.url, h.Hint(), err)
		}
		return nil, err
	}
	t.mu.Lock()
	if t.cache == nil || s.Version >= t.cache.Version {
		t.cache = s
	}
	t.mu.Unlock()
	return s, nil
}

// Version returns the table's latest version, -1 when it does not exist.
func (t *Table) Version(ctx context.Context) (int64, error) {
	s, err := t.current(ctx)
	if err != nil {
		return 0, err
	}
	return s.Version, nil
}

// DataFile is one of the table's live data files.
type DataFile struct {
	// Path is the file's path below the table's folder, as the Delta log
	// holds it (URL-encoded).
	Path string
	// Size is the file's size in bytes.
	Size int64
}

// Files returns the live data files ordered by path.
func (t *Table) Files(ctx context.Context) ([]DataFile, error) {
	s, err := t.current(ctx)
	if err != nil {
		return nil, err
	}
	adds := s.SortedFiles()
	out := make([]DataFile, len(adds))
	for i, a := range adds {
		out[i] = DataFile{Path: a.Path, Size: a.Size}
	}
	return out, nil
}

// ArrowSchema returns the Arrow schema the table's rows read back in, as
// ReadAll returns them (no fields when the table does not exist).
func (t *Table) ArrowSchema(ctx context.Context) (*arrow.Schema, error) {
	s, err := t.current(ctx)
	if err != nil {
		return nil, err
	}
	return s.Schema.ArrowSchema()
}
