package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/cdcsnap/cdcsnap/internal/parquetprops"
	"github.com/cdcsnap/cdcsnap/internal/pqfile"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

// measure is one timed run.
type measure struct {
	Rows     int64
	Seconds  float64
	OutBytes int64   // Parquet bytes written
	CPU      float64 // process CPU seconds (user + system) during the run
	// Allocs is the heap objects this process allocated during the run
	// (every goroutine's: run alone for a client's own figure).
	Allocs uint64
}

func (m measure) rowsPerSec() float64 { return float64(m.Rows) / m.Seconds }

// cpuPerRow is CPU microseconds per row.
func (m measure) cpuPerRow() float64 { return m.CPU * 1e6 / float64(m.Rows) }

// allocsPerRow is heap objects allocated per row.
func (m measure) allocsPerRow() float64 { return float64(m.Allocs) / float64(m.Rows) }

// withCPU runs f and records the process CPU time it took and the heap
// objects it allocated.
func withCPU(f func() (measure, error)) (measure, error) {
	a := heapAllocs()
	c := cpuNow()
	m, err := f()
	m.CPU = (cpuNow() - c).Seconds()
	m.Allocs = heapAllocs() - a
	return m, err
}

// heapAllocs is the heap objects this process has allocated so far, tiny
// ones (an int64 in an interface) included.
func heapAllocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

// ipcSink is a sink.Sink that writes the stamped bronze records of a
// snapshot into one Arrow IPC file (use one partition, so the file is in
// key order).
type ipcSink struct {
	path string
	mu   sync.Mutex
}

func (s *ipcSink) FindSnapshot(context.Context, string) (sink.Snapshot, error) {
	return sink.Snapshot{}, sink.ErrNotFound
}

func (s *ipcSink) WritePartition(_ context.Context, info sink.Info, partition int, rr array.RecordReader) (sink.Part, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := os.Create(s.path)
	if err != nil {
		return sink.Part{}, err
	}
	defer f.Close()
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(rr.Schema()))
	if err != nil {
		return sink.Part{}, err
	}
	var rows int64
	for rr.Next() {
		rec := rr.RecordBatch()
		if err := w.Write(rec); err != nil {
			return sink.Part{}, err
		}
		rows += rec.NumRows()
	}
	if err := rr.Err(); err != nil {
		return sink.Part{}, err
	}
	if err := w.Close(); err != nil {
		return sink.Part{}, err
	}
	return sink.Part{Partition: partition, PlanID: info.PlanID, Rows: rows}, f.Close()
}

func (s *ipcSink) CommitSnapshot(_ context.Context, info sink.Info, _ []sink.Part) (sink.Snapshot, error) {
	return sink.Snapshot{CaptureInstance: info.CaptureInstance, LSN: info.LSN, CommitTS: info.CommitTS}, nil
}

// discardSink reads every record and keeps nothing: the pipeline without
// the Parquet writer (generation + stamping).
type discardSink struct{}

func (discardSink) FindSnapshot(context.Context, string) (sink.Snapshot, error) {
	return sink.Snapshot{}, sink.ErrNotFound
}

func (discardSink) WritePartition(_ context.Context, info sink.Info, partition int, rr array.RecordReader) (sink.Part, error) {
	var rows int64
	for rr.Next() {
		rows += rr.RecordBatch().NumRows()
	}
	return sink.Part{Partition: partition, PlanID: info.PlanID, Rows: rows}, rr.Err()
}

func (discardSink) CommitSnapshot(_ context.Context, info sink.Info, _ []sink.Part) (sink.Snapshot, error) {
	return sink.Snapshot{CaptureInstance: info.CaptureInstance, LSN: info.LSN}, nil
}

// materialize writes g's bronze records (stamped by the real snapshot code)
// to an IPC file at path.
func materialize(ctx context.Context, g *Gen, path string) (measure, error) {
	start := time.Now()
	res, err := snapshot.Take(ctx, g, &ipcSink{path: path}, snapshot.Options{CaptureInstance: genCI, Partitions: 1})
	if err != nil {
		return measure{}, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return measure{}, err
	}
	return measure{Rows: res.Rows, Seconds: time.Since(start).Seconds(), OutBytes: st.Size()}, nil
}

// tuning holds the settings under test (flags -read-ahead,
// -row-group-rows, -parallelism); the zero value measures the library with
// its defaults. Memory children get it through the environment.
type tuning struct {
	ReadAhead    int `json:"read_ahead,omitempty"`
	RowGroupRows int `json:"row_group_rows,omitempty"`
	Parallelism  int `json:"parallelism,omitempty"`
	// LimitCodec and LimitPageBytes change the limit's Parquet codec and
	// data page size only (sink/delta keeps its own): what each would save.
	LimitCodec     string `json:"limit_codec,omitempty"`
	LimitPageBytes int    `json:"limit_page_bytes,omitempty"`
	// LimitEncoding "delta-int" gives every integer and timestamp column
	// of the limit that is not dictionary-encoded DELTA_BINARY_PACKED,
	// ascending or not (parquetprops gives it to the ascending ones).
	LimitEncoding string `json:"limit_encoding,omitempty"`
	// LimitWriter "pqarrow" makes the limit arrow-go's pqarrow.FileWriter
	// (the limit until issue 20's last round, and the one the issue names)
	// instead of internal/pqfile, with the same properties.
	LimitWriter string `json:"limit_writer,omitempty"`
}

var tune tuning

// tuningEnv carries tune to memory children.
const tuningEnv = "CDCSNAP_BENCH_TUNING"

func (t tuning) apply() error {
	if _, ok := limitCodecs[t.LimitCodec]; t.LimitCodec != "" && !ok {
		return fmt.Errorf("-limit-codec %q: want one of snappy, lz4_raw, zstd, zstd-fastest, uncompressed", t.LimitCodec)
	}
	if t.LimitEncoding != "" && t.LimitEncoding != "delta-int" {
		return fmt.Errorf("-limit-encoding %q: want delta-int", t.LimitEncoding)
	}
	if t.LimitPageBytes < 0 {
		return fmt.Errorf("-limit-page-bytes %d: must not be negative", t.LimitPageBytes)
	}
	if t.LimitWriter != "" && t.LimitWriter != "pqfile" && t.LimitWriter != "pqarrow" {
		return fmt.Errorf("-limit-writer %q: want pqfile or pqarrow", t.LimitWriter)
	}
	tune = t
	return nil
}

// limitWriterName names the limit's Parquet writer for the report.
func (t tuning) limitWriterName() string {
	if t.LimitWriter == "pqarrow" {
		return "arrow-go's pqarrow.FileWriter"
	}
	return "internal/pqfile"
}

func (t tuning) String() string {
	b, _ := json.Marshal(t)
	return string(b)
}

// runPipeline takes a snapshot of src into a new local Delta table in dir.
func runPipeline(ctx context.Context, src source.Source, partitions int, dir string) (measure, error) {
	if err := os.RemoveAll(dir); err != nil {
		return measure{}, err
	}
	tb, err := delta.Open(ctx, dir, delta.Options{RowGroupRows: tune.RowGroupRows})
	if err != nil {
		return measure{}, err
	}
	defer tb.Close()
	start := time.Now()
	res, err := snapshot.Take(ctx, src, tb, snapshot.Options{CaptureInstance: genCI, Partitions: partitions, Parallelism: tune.Parallelism, ReadOptions: snapshot.ReadOptions{ReadAhead: tune.ReadAhead}})
	if err != nil {
		return measure{}, err
	}
	secs := time.Since(start).Seconds()
	files, err := tb.Files(ctx)
	if err != nil {
		return measure{}, err
	}
	var size int64
	for _, f := range files {
		size += f.Size
	}
	return measure{Rows: res.Rows, Seconds: secs, OutBytes: size}, nil
}

// runGenOnly takes a snapshot of g into discardSink: source + stamping.
func runGenOnly(ctx context.Context, g *Gen, partitions int) (measure, error) {
	start := time.Now()
	res, err := snapshot.Take(ctx, g, discardSink{}, snapshot.Options{CaptureInstance: genCI, Partitions: partitions, ReadOptions: snapshot.ReadOptions{ReadAhead: tune.ReadAhead}})
	if err != nil {
		return measure{}, err
	}
	return measure{Rows: res.Rows, Seconds: time.Since(start).Seconds()}, nil
}

// mapped is an IPC file mapped into memory.
type mapped struct {
	data   []byte
	schema *arrow.Schema
	n      int
	starts []int64 // first row of each record, then the row count
}

func mapIPC(path string) (*mapped, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	r, err := ipc.NewMappedFileReader(data)
	if err != nil {
		_ = syscall.Munmap(data)
		return nil, err
	}
	defer r.Close()
	m := &mapped{data: data, schema: r.Schema(), n: r.NumRecords(), starts: make([]int64, 1, r.NumRecords()+1)}
	for k := range m.n {
		rec, err := r.RecordBatchAt(k)
		if err != nil {
			_ = syscall.Munmap(data)
			return nil, err
		}
		m.starts = append(m.starts, m.starts[k]+rec.NumRows())
		rec.Release()
	}
	return m, nil
}

func (m *mapped) close() error { return syscall.Munmap(m.data) }

// reader returns a record reader over records w, w+of, w+2*of, ... (one
// writer's share, round robin).
func (m *mapped) reader(w, of int) (array.RecordReader, error) {
	r, err := m.open(m.schema)
	if err != nil {
		return nil, err
	}
	return &shareReader{mappedReader: r, next: w, step: of}, nil
}

// open returns a mappedReader of m holding one reference, whose batches
// have the given schema (m's, or its first columns).
func (m *mapped) open(schema *arrow.Schema) (mappedReader, error) {
	r, err := ipc.NewMappedFileReader(m.data)
	if err != nil {
		return mappedReader{}, err
	}
	mr := mappedReader{r: r, schema: schema, refs: new(atomic.Int64)}
	mr.refs.Store(1)
	return mr, nil
}

// mappedReader is what the record readers of a mapped IPC file share: the
// file reader, the current batch, the error, and a reference count (the
// snapshot's stamper retains its input).
type mappedReader struct {
	r      *ipc.FileReader
	schema *arrow.Schema
	refs   *atomic.Int64
	cur    arrow.RecordBatch
	err    error
}

func (s *mappedReader) Retain()                        { s.refs.Add(1) }
func (s *mappedReader) Schema() *arrow.Schema          { return s.schema }
func (s *mappedReader) RecordBatch() arrow.RecordBatch { return s.cur }

// Deprecated: use RecordBatch.
func (s *mappedReader) Record() arrow.RecordBatch { return s.cur }
func (s *mappedReader) Err() error                { return s.err }

func (s *mappedReader) Release() {
	if s.refs.Add(-1) != 0 {
		return
	}
	s.drop()
	if s.r != nil {
		_ = s.r.Close()
		s.r = nil
	}
}

// drop releases the current batch: the start of every Next.
func (s *mappedReader) drop() {
	if s.cur != nil {
		s.cur.Release()
		s.cur = nil
	}
}

// shareReader reads every step-th record of a mapped IPC file.
type shareReader struct {
	mappedReader
	next, step int
}

func (s *shareReader) Next() bool {
	s.drop()
	if s.err != nil || s.r == nil || s.next >= s.r.NumRecords() {
		return false
	}
	s.cur, s.err = s.r.RecordBatchAt(s.next)
	s.next += s.step
	return s.err == nil
}

// replaySource is a Gen whose rows are read back from the IPC file of its
// bronze records (the limit's input) instead of computed. A snapshot from
// it costs what the library adds to the Parquet writer: planning, reading
// ahead, stamping, sink/delta's statistics and files, the commit, but no
// row generation, which on a machine whose cores all write competes with
// the writers for CPU.
type replaySource struct {
	*Gen
	m *mapped
}

var _ source.Source = replaySource{}

// newReplaySource checks that m holds g's captured columns first, as
// materialize writes them.
func newReplaySource(g *Gen, m *mapped) (replaySource, error) {
	for i, f := range g.schema.Fields() {
		if i >= m.schema.NumFields() || m.schema.Field(i).Name != f.Name || !arrow.TypeEqual(m.schema.Field(i).Type, f.Type) {
			return replaySource{}, fmt.Errorf("bench: the IPC file's column %d is not the generator's %q", i, f.Name)
		}
	}
	if total := m.starts[len(m.starts)-1]; total != g.rows {
		return replaySource{}, fmt.Errorf("bench: the IPC file has %d rows, the generator %d", total, g.rows)
	}
	return replaySource{Gen: g, m: m}, nil
}

// ReadRange implements source.Source: slices of the mapped records (no
// copy), captured columns only, at most opts.BatchRows rows each.
func (s replaySource) ReadRange(ctx context.Context, _ *source.CaptureInstance, r keyrange.Range, opts source.ReadOptions) (array.RecordReader, error) {
	lo, hi, err := s.Bounds(r)
	if err != nil {
		return nil, err
	}
	mr, err := s.m.open(s.schema) // the captured columns
	if err != nil {
		return nil, err
	}
	batch := opts.BatchRows
	if batch <= 0 {
		batch = defaultGenBatch
	}
	return &replayReader{mappedReader: mr, ctx: ctx, starts: s.m.starts, next: lo, end: hi, batch: int64(batch)}, nil
}

// replayReader reads the rows [next, end) of a mapped IPC file.
type replayReader struct {
	mappedReader
	ctx              context.Context
	starts           []int64
	next, end, batch int64
}

func (s *replayReader) Next() bool {
	s.drop()
	if s.err != nil || s.r == nil || s.next >= s.end {
		return false
	}
	if s.err = s.ctx.Err(); s.err != nil {
		return false
	}
	k, _ := slices.BinarySearch(s.starts, s.next+1) // the record holding row next
	k--
	rec, err := s.r.RecordBatchAt(k)
	if err != nil {
		s.err = err
		return false
	}
	defer rec.Release()
	off := s.next - s.starts[k]
	n := min(s.batch, s.end-s.next, s.starts[k+1]-s.next)
	cols := make([]arrow.Array, s.schema.NumFields())
	for c := range cols {
		cols[c] = array.NewSlice(rec.Column(c), off, off+n)
	}
	s.cur = array.NewRecordBatch(s.schema, cols, n)
	for _, c := range cols {
		c.Release()
	}
	s.next += n
	return true
}

// limitProps are sink/delta's writer properties (internal/parquetprops),
// with the row-group size, codec, page size and encodings under test.
func limitProps(rec arrow.RecordBatch) *parquet.WriterProperties {
	var extra []parquet.WriterProperty
	if c, ok := limitCodecs[tune.LimitCodec]; ok {
		extra = append(extra, parquet.WithCompression(c.codec), parquet.WithCompressionLevel(c.level))
	}
	if tune.LimitPageBytes > 0 {
		extra = append(extra, parquet.WithDataPageSize(int64(tune.LimitPageBytes)))
	}
	rows := cmp.Or(tune.RowGroupRows, 1<<20)
	props := parquetprops.ForBronze(rec, rows, "cdcsnap bench limit", extra...)
	if tune.LimitEncoding != "delta-int" {
		return props
	}
	// DELTA_BINARY_PACKED is defined for INT32 and INT64 only (the Parquet
	// format's Encodings.md); a dictionary-encoded column keeps its
	// dictionary.
	for _, f := range rec.Schema().Fields() {
		switch f.Type.ID() {
		case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.TIMESTAMP, arrow.DATE32:
			if !props.DictionaryEnabledFor(f.Name) {
				extra = append(extra, parquet.WithEncodingFor(f.Name, parquet.Encodings.DeltaBinaryPacked))
			}
		}
	}
	return parquetprops.ForBronze(rec, rows, "cdcsnap bench limit", extra...)
}

// limitCodec is a codec -limit-codec can name, at a compression level.
type limitCodec struct {
	codec compress.Compression
	level int
}

// limitCodecs are the codecs -limit-codec can name. "zstd" is arrow-go's
// default level, which it maps to klauspost/compress's zstd.SpeedDefault;
// "zstd-fastest" is level 1, which zstd.EncoderLevelFromZstd maps to
// SpeedFastest (arrow-go v18.9.0 parquet/compress/zstd.go EncodeLevel;
// klauspost/compress v1.20.3 zstd/encoder_options.go).
var limitCodecs = map[string]limitCodec{
	"snappy":       {compress.Codecs.Snappy, compress.DefaultCompressionLevel},
	"lz4_raw":      {compress.Codecs.Lz4Raw, compress.DefaultCompressionLevel},
	"zstd":         {compress.Codecs.Zstd, compress.DefaultCompressionLevel},
	"zstd-fastest": {compress.Codecs.Zstd, 1},
	"uncompressed": {compress.Codecs.Uncompressed, compress.DefaultCompressionLevel},
}

// runLimit writes the IPC file's records to Parquet with sink/delta's
// Parquet writer (internal/pqfile, arrow-go's column writers; pqarrow's
// with -limit-writer pqarrow) and nothing else, on writers goroutines (one
// file each, records round robin).
func runLimit(m *mapped, writers int, dir string) (measure, error) {
	if err := os.RemoveAll(dir); err != nil {
		return measure{}, err
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return measure{}, err
	}
	start := time.Now()
	rows := make([]int64, writers)
	sizes := make([]int64, writers)
	err := inParallel(writers, func(w int) (err error) {
		rows[w], sizes[w], err = limitWriter(m, w, writers, filepath.Join(dir, fmt.Sprintf("part-%05d.snappy.parquet", w)))
		return err
	})
	if err != nil {
		return measure{}, err
	}
	out := measure{Seconds: time.Since(start).Seconds()}
	for w := range writers {
		out.Rows += rows[w]
		out.OutBytes += sizes[w]
	}
	return out, nil
}

// inParallel runs f(0), ..., f(n-1) at once and joins their errors.
func inParallel(n int, f func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func limitWriter(m *mapped, w, of int, path string) (int64, int64, error) {
	rr, err := m.reader(w, of)
	if err != nil {
		return 0, 0, err
	}
	defer rr.Release()
	f, err := os.Create(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	var fw limitFile
	var rows int64
	for rr.Next() {
		rec := rr.RecordBatch()
		if fw == nil {
			if fw, err = newLimitFile(m.schema, f, limitProps(rec)); err != nil {
				return 0, 0, err
			}
		}
		if err := fw.Write(rec); err != nil {
			return 0, 0, err
		}
		if fw.RowGroupCompressedBytes() >= parquetprops.RowGroupBytes {
			if err := fw.Flush(); err != nil {
				return 0, 0, err
			}
		}
		rows += rec.NumRows()
	}
	if err := rr.Err(); err != nil {
		return 0, 0, err
	}
	if fw != nil {
		if err := fw.Close(); err != nil {
			return 0, 0, err
		}
	}
	if err := f.Close(); err != nil {
		return 0, 0, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0, 0, err
	}
	return rows, st.Size(), nil
}

// limitFile is the limit's Parquet writer (internal/pqfile's methods).
type limitFile interface {
	Write(arrow.RecordBatch) error
	RowGroupCompressedBytes() int64
	Flush() error
	Close() error
}

// newLimitFile returns internal/pqfile's writer, or pqarrow's with
// -limit-writer pqarrow.
func newLimitFile(schema *arrow.Schema, w io.Writer, props *parquet.WriterProperties) (limitFile, error) {
	if tune.LimitWriter != "pqarrow" {
		return pqfile.NewWriter(schema, w, props)
	}
	// The struct hides w's Close: pqarrow's Close would close the file,
	// which limitWriter closes itself.
	fw, err := pqarrow.NewFileWriter(schema, struct{ io.Writer }{w}, props, pqarrow.DefaultWriterProps())
	if err != nil {
		return nil, err
	}
	return pqarrowFile{fw}, nil
}

// pqarrowFile is pqarrow.FileWriter as a limitFile: buffered row groups,
// as the limit wrote them before internal/pqfile.
type pqarrowFile struct{ fw *pqarrow.FileWriter }

func (p pqarrowFile) Write(rec arrow.RecordBatch) error { return p.fw.WriteBuffered(rec) }
func (p pqarrowFile) RowGroupCompressedBytes() int64 {
	return p.fw.RowGroupTotalCompressedBytes()
}
func (p pqarrowFile) Flush() error { return p.fw.NewBufferedRowGroupChecked() }
func (p pqarrowFile) Close() error { return p.fw.Close() }

// runSinkFromIPC writes the IPC file's records with sink/delta (writers
// partitions, records round robin) and commits them.
func runSinkFromIPC(ctx context.Context, m *mapped, writers int, dir string) (measure, error) {
	if err := os.RemoveAll(dir); err != nil {
		return measure{}, err
	}
	tb, err := delta.Open(ctx, dir, delta.Options{RowGroupRows: tune.RowGroupRows})
	if err != nil {
		return measure{}, err
	}
	defer tb.Close()
	info := sink.Info{CaptureInstance: genCI, LSN: genLSN, CommitTS: genCommitTS, Schema: m.schema, PlanID: "bench"}
	start := time.Now()
	parts := make([]sink.Part, writers)
	err = inParallel(writers, func(w int) error {
		rr, err := m.reader(w, writers)
		if err != nil {
			return err
		}
		defer rr.Release()
		parts[w], err = tb.WritePartition(ctx, info, w, rr)
		return err
	})
	if err != nil {
		return measure{}, err
	}
	if _, err := tb.CommitSnapshot(ctx, info, parts); err != nil {
		return measure{}, err
	}
	out := measure{Seconds: time.Since(start).Seconds()}
	for _, p := range parts {
		out.Rows += p.Rows
		out.OutBytes += p.Bytes
	}
	return out, nil
}

// peerResult is what peer.py prints.
type peerResult struct {
	Rows       int64   `json:"rows"`
	Seconds    float64 `json:"seconds"`
	Bytes      int64   `json:"bytes"`
	Deltalake  string  `json:"deltalake"`
	Pyarrow    string  `json:"pyarrow"`
	WallSecond float64 `json:"wall_seconds"`
	CPU        float64 `json:"cpu_seconds"` // the child's user + system time
}

// runPeer runs delta-rs (peer.py) on the IPC file.
func runPeer(ctx context.Context, python, script, ipcPath, dir string) (peerResult, error) {
	if err := os.RemoveAll(dir); err != nil {
		return peerResult{}, err
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, python, script, ipcPath, dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return peerResult{}, fmt.Errorf("delta-rs peer: %w", err)
	}
	var r peerResult
	if err := json.Unmarshal(out, &r); err != nil {
		return peerResult{}, fmt.Errorf("delta-rs peer output %q: %w", out, err)
	}
	r.WallSecond = time.Since(start).Seconds()
	r.CPU = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	return r, nil
}

// cpuNow returns this process's user + system CPU time.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
