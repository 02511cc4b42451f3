package delta

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/memblob" // mem:// tables: pure Go, no SDK

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/cdcsnap/cdcsnap/internal/deltalog"
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

// Table is a Delta Lake table in a blob bucket. It implements sink.Sink
// and is safe for concurrent use; several processes may write the same
// table (commits are put-if-absent).
type Table struct {
	url       string
	bucket    *blob.Bucket
	ownBucket bool
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
// file:///path), mem:// (a new, empty in-memory bucket per Open), or a
// cloud URL whose path is the table's folder in the bucket:
// s3://bucket/path, gs://bucket/path, azblob://container/path, with the
// query parameters of the gocloud.dev driver (region=..., and so on). A
// cloud URL needs its driver imported by the program, as gocloud.dev's
// drivers are: _ "gocloud.dev/blob/s3blob", gcsblob or azureblob, or
// _ "github.com/cdcsnap/cdcsnap/sink/delta/alldrivers" for all three;
// without it Open returns an error naming the import.
func Open(ctx context.Context, rawURL string, opts Options) (*Table, error) {
	if err := opts.Create.validate(); err != nil {
		return nil, err
	}
	u, err := url.Parse(rawURL)
	local := err != nil || u.Scheme == "" || len(u.Scheme) == 1 // "C:\..." on Windows
	if !local && u.Scheme == "file" {
		local = true
	}
	if local {
		dir := rawURL
		if err == nil && u.Scheme == "file" {
			dir = u.Path
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, fmt.Errorf("delta: table path %q: %w", rawURL, err)
		}
		if err := os.MkdirAll(abs, 0o777); err != nil {
			return nil, fmt.Errorf("delta: creating table folder %s: %w", abs, err)
		}
		b, err := fileblob.OpenBucket(abs, &fileblob.Options{Metadata: fileblob.MetadataDontWrite, NoTempDir: true})
		if err != nil {
			return nil, fmt.Errorf("delta: opening table folder %s: %w", abs, err)
		}
		t := newTable(rawURL, b, abs, opts)
		t.ownBucket = true
		return t, nil
	}
	if !blob.DefaultURLMux().ValidBucketScheme(u.Scheme) {
		return nil, noDriverError(rawURL, u.Scheme)
	}
	burl := bucketURL(u)
	b, err := blob.OpenBucket(ctx, burl)
	if err != nil {
		return nil, withStoreHint(rawURL, fmt.Errorf("delta: opening bucket for table %s: %w", rawURL, err))
	}
	t := newTable(rawURL, b, "", opts)
	t.ownBucket = true
	return t, nil
}

// allDrivers is the package that registers every cloud store's driver.
const allDrivers = "github.com/cdcsnap/cdcsnap/sink/delta/alldrivers"

// noDriverError says which import registers the driver of scheme: the
// program links only the drivers it imports (gocloud.dev's convention),
// so a folder or mem:// table pulls in no cloud SDK.
func noDriverError(rawURL, scheme string) error {
	var imp string
	switch scheme {
	case "s3":
		imp = "gocloud.dev/blob/s3blob"
	case "gs":
		imp = "gocloud.dev/blob/gcsblob"
	case "azblob":
		imp = "gocloud.dev/blob/azureblob"
	case "abfss", "abfs", "wasbs", "wasb":
		return adlsURLError(rawURL)
	default:
		return fmt.Errorf("delta: table %s: no gocloud.dev/blob driver is registered for %s://: import the driver of that store", rawURL, scheme)
	}
	return fmt.Errorf("delta: table %s: no gocloud.dev/blob driver is registered for %s://: add the import _ %q to your program (or _ %q for every cloud store)", rawURL, scheme, imp, allDrivers)
}

// bucketURL turns a table URL into the gocloud bucket URL: the path
// becomes the bucket's prefix (mem:// keeps no path).
func bucketURL(u *url.URL) string {
	c := *u
	if c.Scheme == "mem" {
		return "mem://"
	}
	p := strings.Trim(c.Path, "/")
	if p == "" {
		return c.String()
	}
	q := c.Query()
	if q.Get("prefix") == "" {
		q.Set("prefix", p+"/")
	}
	c.Path, c.RawPath, c.RawQuery = "", "", q.Encode()
	return c.String()
}

// OpenBucket opens the Delta table at the root of an open bucket (use
// blob.PrefixedBucket for a folder in it). Close leaves the bucket open.
// Commits use the bucket's IfNotExist writes, which are atomic across
// processes on S3, GCS and Azure but only within one process on fileblob:
// use Open for a local folder shared by processes.
func OpenBucket(b *blob.Bucket, name string, opts Options) *Table {
	return newTable(name, b, "", opts)
}

func newTable(name string, b *blob.Bucket, localRoot string, opts Options) *Table {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("table", name)
	return &Table{url: name, bucket: b, localRoot: localRoot, opts: opts, log: log,
		dlog: &deltalog.Log{URL: name, Bucket: b, LocalRoot: localRoot, Logger: log, CheckTxn: checkRecordTxn, CheckCommit: checkSnapshotRows}}
}

// Close releases the bucket Open opened. The table's methods fail with
// ErrClosed afterwards.
func (t *Table) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	if t.ownBucket {
		return t.bucket.Close()
	}
	return nil
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
		// fails.
		return nil, withStoreHint(t.url, err)
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
