package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
)

// The folder layout of a FolderSink.
const (
	stagingDir   = "_staging"
	snapshotsDir = "_snapshots"
)

// FolderSink is a sink.Sink that keeps snapshots in a local folder: the
// rows as Parquet files, each snapshot as a JSON manifest listing them.
//
//	_staging/<planID>/part-<partition>-<random>.parquet        written by WritePartition
//	_snapshots/<capture instance, lowercased>/<version>.json  created by CommitSnapshot
//
// A Parquet file belongs to a snapshot only when a manifest lists it:
// staged files are invisible until then, and the manifest's creation is the
// commit. An instance's manifests are numbered 0, 1, 2, ... (the newest
// wins, as after a resnapshot); a commit creates the number after the
// newest it saw, with os.Link from a fully written and synced temporary
// file, which fails if the name exists. So two processes committing the
// same capture instance cannot both succeed (put-if-absent across
// processes on a local file system), and a resnapshot commits only while
// the snapshot it replaces is still the newest.
//
// Snapshot.Version is the manifest's number. It is safe for concurrent use
// by goroutines and processes.
type FolderSink struct {
	dir string
	mem memory.Allocator
}

// NewFolderSink returns a sink over the folder dir, creating it if needed.
// mem allocates the records ReadSnapshotRows returns; nil means
// memory.DefaultAllocator.
func NewFolderSink(dir string, mem memory.Allocator) (*FolderSink, error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	for _, d := range []string{dir, filepath.Join(dir, stagingDir), filepath.Join(dir, snapshotsDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("folder sink %s: %w", dir, err)
		}
	}
	return &FolderSink{dir: dir, mem: mem}, nil
}

// Manifest is a committed snapshot: the file _snapshots/<ci>.json.
type Manifest struct {
	// CaptureInstance is the name as the snapshot's Info gave it.
	CaptureInstance string `json:"capture_instance"`
	// LSN is the snapshot's LSN.
	LSN lsn.LSN `json:"lsn"`
	// CommitTS is the commit time of LSN at the source, UTC.
	CommitTS time.Time `json:"commit_ts"`
	// PlanID is the plan whose parts the snapshot holds.
	PlanID string `json:"plan_id"`
	// Rows is the number of rows in Files.
	Rows int64 `json:"rows"`
	// Files are the snapshot's Parquet files, relative to the folder.
	Files []ManifestFile `json:"files"`
	// CommittedAt is when CommitSnapshot ran, UTC.
	CommittedAt time.Time `json:"committed_at"`
	// UserMetadata is what a Delta commit would carry in
	// commitInfo.userMetadata.
	UserMetadata sink.UserMetadata `json:"user_metadata"`
	// Version is the manifest's number (from its file name).
	Version int64 `json:"-"`
}

// ManifestFile is one Parquet file of a snapshot; it is also the Data of
// the sink.Part that WritePartition returns.
type ManifestFile struct {
	// Path is the file's path relative to the folder, slash-separated.
	Path string `json:"path"`
	// Partition is the partition the file holds.
	Partition int `json:"partition"`
	// Rows and Bytes are the file's row count and size.
	Rows  int64 `json:"rows"`
	Bytes int64 `json:"bytes"`
}

// ManifestPath returns the path of version v of captureInstance's
// manifests (which may not exist).
func (s *FolderSink) ManifestPath(captureInstance string, v int64) string {
	return filepath.Join(s.instanceDir(captureInstance), fmt.Sprintf("%020d.json", v))
}

func (s *FolderSink) instanceDir(ci string) string {
	return filepath.Join(s.dir, snapshotsDir, instanceFile(ci))
}

// instanceFile is the manifest's file name: the name lowercased (instances
// match ignoring case), every byte but [a-z0-9_-] escaped as %XX, so any
// sysname is a safe, distinct file name.
func instanceFile(ci string) string {
	var b strings.Builder
	for _, c := range []byte(strings.ToLower(ci)) {
		if 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// FindSnapshot reads captureInstance's manifest.
func (s *FolderSink) FindSnapshot(ctx context.Context, captureInstance string) (sink.Snapshot, error) {
	m, err := s.readManifest(captureInstance)
	if err != nil {
		return sink.Snapshot{}, err
	}
	return m.snapshot(), nil
}

func (m *Manifest) snapshot() sink.Snapshot {
	return sink.Snapshot{CaptureInstance: m.CaptureInstance, LSN: m.LSN, CommitTS: m.CommitTS, Version: m.Version, Rows: m.Rows}
}

// readManifest reads the newest manifest of ci.
func (s *FolderSink) readManifest(ci string) (*Manifest, error) {
	entries, err := os.ReadDir(s.instanceDir(ci))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("folder sink: snapshot of %q: %w", ci, err)
	}
	newest := int64(-1)
	for _, e := range entries {
		var v int64
		if n, _ := fmt.Sscanf(e.Name(), "%020d.json", &v); n == 1 && v > newest {
			newest = v
		}
	}
	if newest < 0 {
		return nil, fmt.Errorf("folder sink: snapshot of %q: %w", ci, sink.ErrNotFound)
	}
	p := s.ManifestPath(ci, newest)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("folder sink: snapshot of %q: %w", ci, err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("folder sink: manifest %s: %w", p, err)
	}
	m.Version = newest
	return &m, nil
}

// validPlanID refuses a plan id that is not a safe single path element.
func validPlanID(id string) error {
	if id == "" {
		return errors.New("empty plan id")
	}
	for _, c := range id {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("plan id %q: only letters, digits, _ and - are allowed", id)
		}
	}
	return nil
}

// WritePartition writes rr to one Parquet file under _staging/<planID>/.
// On any error it removes the file, so nothing of it can be committed.
func (s *FolderSink) WritePartition(ctx context.Context, info sink.Info, partition int, rr array.RecordReader) (sink.Part, error) {
	if err := validPlanID(info.PlanID); err != nil {
		return sink.Part{}, fmt.Errorf("folder sink: partition %d: %w", partition, err)
	}
	if info.Schema == nil || !rr.Schema().Equal(info.Schema) {
		return sink.Part{}, fmt.Errorf("folder sink: partition %d: the records' schema %s is not the snapshot's %s", partition, rr.Schema(), info.Schema)
	}
	dir := filepath.Join(s.dir, stagingDir, info.PlanID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return sink.Part{}, fmt.Errorf("folder sink: partition %d: %w", partition, err)
	}
	suffix := make([]byte, 8)
	_, _ = rand.Read(suffix) // crypto/rand.Read never returns an error.
	rel := path.Join(stagingDir, info.PlanID, fmt.Sprintf("part-%05d-%s.parquet", partition, hex.EncodeToString(suffix)))
	full := filepath.Join(s.dir, filepath.FromSlash(rel))
	rows, size, err := writeParquet(ctx, full, info.Schema, rr)
	if err != nil {
		_ = os.Remove(full) // best effort: an unlisted file is never visible anyway
		return sink.Part{}, fmt.Errorf("folder sink: partition %d: %w", partition, err)
	}
	file := ManifestFile{Path: rel, Partition: partition, Rows: rows, Bytes: size}
	data, err := json.Marshal(file)
	if err != nil {
		return sink.Part{}, fmt.Errorf("folder sink: partition %d: %w", partition, err)
	}
	return sink.Part{Partition: partition, PlanID: info.PlanID, Rows: rows, Bytes: size, Data: data}, nil
}

// writeParquet writes every record of rr to a new file at name and syncs
// it, returning the rows and bytes written. It fails if rr.Err() does.
func writeParquet(ctx context.Context, name string, schema *arrow.Schema, rr array.RecordReader) (rows, size int64, err error) {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy))
	// The writer closes a sink that is an io.Closer: hide Close, so the file
	// can be synced after the footer.
	w, err := pqarrow.NewFileWriter(schema, struct{ io.Writer }{f}, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return 0, 0, fmt.Errorf("parquet writer: %w", err)
	}
	for rr.Next() {
		if err := ctx.Err(); err != nil {
			_ = w.Close()
			return 0, 0, err
		}
		rec := rr.RecordBatch()
		if err := w.WriteBuffered(rec); err != nil {
			_ = w.Close()
			return 0, 0, fmt.Errorf("writing %d rows: %w", rec.NumRows(), err)
		}
		rows += rec.NumRows()
	}
	if err := rr.Err(); err != nil {
		_ = w.Close()
		return 0, 0, fmt.Errorf("reading the partition's records: %w", err)
	}
	if err := w.Close(); err != nil {
		return 0, 0, fmt.Errorf("writing the parquet footer: %w", err)
	}
	if err := f.Sync(); err != nil {
		return 0, 0, fmt.Errorf("sync: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	return rows, st.Size(), nil
}

// CommitSnapshot checks the parts, then publishes the manifest: written to
// a temporary file, synced, and linked to the number after the newest
// manifest of the instance, which fails if another commit took that
// number. If the newest snapshot is not info.Replaces (none, for the zero
// LSN), or another commit won the number, it returns the newest snapshot
// and an error wrapping sink.ErrSnapshotExists.
func (s *FolderSink) CommitSnapshot(ctx context.Context, info sink.Info, parts []sink.Part) (sink.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return sink.Snapshot{}, fmt.Errorf("folder sink: commit of %q: %w", info.CaptureInstance, err)
	}
	if err := validPlanID(info.PlanID); err != nil {
		return sink.Snapshot{}, fmt.Errorf("folder sink: commit of %q: %w", info.CaptureInstance, err)
	}
	version := int64(0)
	if m, err := s.readManifest(info.CaptureInstance); err == nil {
		if m.LSN != info.Replaces {
			return m.snapshot(), fmt.Errorf("folder sink: commit of %q (LSN %s): %w (LSN %s)", info.CaptureInstance, info.LSN, sink.ErrSnapshotExists, m.LSN)
		}
		version = m.Version + 1
	} else if !errors.Is(err, sink.ErrNotFound) {
		return sink.Snapshot{}, err
	}
	files, rows, err := s.checkParts(info, parts)
	if err != nil {
		return sink.Snapshot{}, fmt.Errorf("folder sink: commit of %q: %w", info.CaptureInstance, err)
	}
	m := Manifest{
		CaptureInstance: info.CaptureInstance,
		LSN:             info.LSN,
		CommitTS:        info.CommitTS.UTC().Truncate(time.Microsecond),
		PlanID:          info.PlanID,
		Rows:            rows,
		Files:           files,
		CommittedAt:     time.Now().UTC(),
		UserMetadata:    sink.NewUserMetadata(info),
		Version:         version,
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return sink.Snapshot{}, fmt.Errorf("folder sink: commit of %q: %w", info.CaptureInstance, err)
	}
	if err := os.MkdirAll(s.instanceDir(info.CaptureInstance), 0o755); err != nil {
		return sink.Snapshot{}, fmt.Errorf("folder sink: commit of %q: %w", info.CaptureInstance, err)
	}
	final := s.ManifestPath(info.CaptureInstance, version)
	if err := createExclusive(final, b); errors.Is(err, fs.ErrExist) {
		// Another commit won the race since the check above.
		won, rerr := s.readManifest(info.CaptureInstance)
		if rerr != nil {
			return sink.Snapshot{}, fmt.Errorf("folder sink: commit of %q lost a race, reading the winner: %w", info.CaptureInstance, rerr)
		}
		return won.snapshot(), fmt.Errorf("folder sink: commit of %q (LSN %s): %w (LSN %s)", info.CaptureInstance, info.LSN, sink.ErrSnapshotExists, won.LSN)
	} else if err != nil {
		return sink.Snapshot{}, fmt.Errorf("folder sink: commit of %q: %w", info.CaptureInstance, err)
	}
	return m.snapshot(), nil
}

// checkParts refuses parts of another plan, two parts of one partition,
// and files that are not this plan's staged files or are missing.
func (s *FolderSink) checkParts(info sink.Info, parts []sink.Part) ([]ManifestFile, int64, error) {
	prefix := path.Join(stagingDir, info.PlanID) + "/"
	seen := map[int]bool{}
	files := make([]ManifestFile, 0, len(parts))
	var rows int64
	for _, p := range parts {
		if p.PlanID != info.PlanID {
			return nil, 0, fmt.Errorf("part of partition %d belongs to plan %q, not %q", p.Partition, p.PlanID, info.PlanID)
		}
		if seen[p.Partition] {
			return nil, 0, fmt.Errorf("two parts of partition %d", p.Partition)
		}
		seen[p.Partition] = true
		var f ManifestFile
		if err := json.Unmarshal(p.Data, &f); err != nil {
			return nil, 0, fmt.Errorf("part of partition %d: data %s: %w", p.Partition, p.Data, err)
		}
		if path.Clean(f.Path) != f.Path || !strings.HasPrefix(f.Path, prefix) || f.Partition != p.Partition || f.Rows != p.Rows {
			return nil, 0, fmt.Errorf("part of partition %d: file %q (partition %d, %d rows) is not a staged file of this part of plan %q", p.Partition, f.Path, f.Partition, f.Rows, info.PlanID)
		}
		st, err := os.Stat(filepath.Join(s.dir, filepath.FromSlash(f.Path)))
		if err != nil {
			return nil, 0, fmt.Errorf("part of partition %d: %w", p.Partition, err)
		}
		if st.Size() != f.Bytes {
			return nil, 0, fmt.Errorf("part of partition %d: %s has %d bytes, the part says %d", p.Partition, f.Path, st.Size(), f.Bytes)
		}
		files = append(files, f)
		rows += f.Rows
	}
	return files, rows, nil
}

// createExclusive writes b to name only if name does not exist, atomically:
// a reader sees no file or the whole of it. It writes and syncs a
// temporary file in name's folder, then links it to name (link(2) fails
// with EEXIST when name exists, also against other processes).
func createExclusive(name string, b []byte) error {
	dir := filepath.Dir(name)
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), name); err != nil {
		return err // *LinkError wrapping EEXIST matches fs.ErrExist
	}
	// Make the new directory entry durable; not every system can sync a
	// folder, and the link itself is already atomic.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// ReadSnapshotRows returns the rows of captureInstance's snapshot, read
// from its Parquet files (it implements sinktest.RowReader). The caller
// releases the reader.
func (s *FolderSink) ReadSnapshotRows(ctx context.Context, captureInstance string) (array.RecordReader, error) {
	m, err := s.readManifest(captureInstance)
	if err != nil {
		return nil, err
	}
	var (
		schema *arrow.Schema
		recs   []arrow.RecordBatch
	)
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	for _, f := range m.Files {
		sc, err := s.readFile(ctx, f.Path, func(rec arrow.RecordBatch) {
			rec.Retain()
			recs = append(recs, rec)
		})
		if err != nil {
			return nil, fmt.Errorf("folder sink: snapshot of %q: %s: %w", captureInstance, f.Path, err)
		}
		if schema == nil {
			schema = sc
		} else if !schema.Equal(sc) {
			return nil, fmt.Errorf("folder sink: snapshot of %q: %s has schema %s, other files %s", captureInstance, f.Path, sc, schema)
		}
	}
	if schema == nil {
		return nil, fmt.Errorf("folder sink: snapshot of %q lists no file", captureInstance)
	}
	return array.NewRecordReader(schema, recs)
}

// readFile calls fn with each record of the Parquet file rel (the records
// are released after fn returns) and returns the file's schema.
func (s *FolderSink) readFile(ctx context.Context, rel string, fn func(arrow.RecordBatch)) (*arrow.Schema, error) {
	f, err := os.Open(filepath.Join(s.dir, filepath.FromSlash(rel)))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	tbl, err := pqarrow.ReadTable(ctx, f, parquet.NewReaderProperties(s.mem), pqarrow.ArrowReadProperties{}, s.mem)
	if err != nil {
		return nil, err
	}
	defer tbl.Release()
	tr := array.NewTableReader(tbl, 0)
	defer tr.Release()
	for tr.Next() {
		fn(tr.RecordBatch())
	}
	return tbl.Schema(), tr.Err()
}
