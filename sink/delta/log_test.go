package delta

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cdcsnap/cdcsnap/internal/deltalog"
	"github.com/cdcsnap/cdcsnap/sink"
)

func changeRows(t testing.TB, schema *arrow.Schema, ci string, batch int64, from, n int) array.RecordReader {
	rec := buildRecord(t, schema, from, n, rowSpec{ci: ci, op: 2, startLSN: fmt.Sprintf("0x0000002B%012X0001", batch), seqval: fmt.Sprintf("0x0000002B%012X0002", batch), batch: batch, commitTS: baseTime.Add(time.Duration(batch) * time.Second)})
	return reader(t, schema, rec)
}

func logFiles(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(dir, "_delta_log"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// TestSnapshotAfterCheckpointsAndCleanup makes 25 commits (checkpoints at
// 10 and 20), deletes the early JSON commits, and still finds the snapshot
// and every live file; then the same through a multi-part checkpoint,
// a stale _last_checkpoint, and none at all.
func TestSnapshotAfterCheckpointsAndCleanup(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tb := openLocal(t, dir, Options{})
	schema := bronze(t, capturedSchema())
	info := snapshotInfo(t, schema, "dbo_Orders", "0x0000002A00000F380003")
	snap, err := takeSnapshot(ctx, t, tb, info, 2, 10)
	if err != nil {
		t.Fatal(err)
	}
	for b := int64(1); b <= 24; b++ {
		v, err := tb.AppendChanges(ctx, "dbo_Orders", b, changeRows(t, schema, "dbo_Orders", b, int(b)*100, 3))
		if err != nil {
			t.Fatal(err)
		}
		if v != b {
			t.Fatalf("batch %d committed version %d", b, v)
		}
	}
	names := strings.Join(logFiles(t, dir), " ")
	for _, want := range []string{"00000000000000000010.checkpoint.parquet", "00000000000000000020.checkpoint.parquet", "_last_checkpoint"} {
		if !strings.Contains(names, want) {
			t.Fatalf("no %s in the log: %s", want, names)
		}
	}
	wantFiles, _ := tb.files(ctx)
	// Log cleanup: remove every JSON commit before the newest checkpoint.
	for v := 0; v < 20; v++ {
		if err := os.Remove(filepath.Join(dir, "_delta_log", fmt.Sprintf("%020d.json", v))); err != nil {
			t.Fatal(err)
		}
	}
	check := func(name string) {
		t.Helper()
		fresh := openLocal(t, dir, Options{})
		got, err := fresh.FindSnapshot(ctx, "DBO_orders")
		if err != nil || got != snap {
			t.Fatalf("%s: FindSnapshot = %+v, %v; want %+v", name, got, err, snap)
		}
		files, err := fresh.files(ctx)
		if err != nil || len(files) != len(wantFiles) {
			t.Fatalf("%s: %d files (%v), want %d", name, len(files), err, len(wantFiles))
		}
		txns, _ := fresh.txns(ctx)
		if txns[changesAppID("dbo_orders")].Version != 24 {
			t.Fatalf("%s: changes txn = %+v", name, txns)
		}
		// A rerun of an old batch is a no-op, even from the checkpoint.
		v, err := fresh.AppendChanges(ctx, "dbo_Orders", 7, changeRows(t, schema, "dbo_Orders", 7, 0, 1))
		if err != nil || v != 24 {
			t.Fatalf("%s: rerun of batch 7: %d, %v", name, v, err)
		}
		tbl := readAll(t, fresh)
		defer tbl.Release()
		if tbl.NumRows() != 20+24*3 {
			t.Fatalf("%s: %d rows", name, tbl.NumRows())
		}
	}
	check("after cleanup")

	// _last_checkpoint pointing at an older checkpoint.
	if err := os.WriteFile(filepath.Join(dir, "_delta_log", "_last_checkpoint"), []byte(`{"version":10,"size":5}`), 0o666); err != nil {
		t.Fatal(err)
	}
	check("stale _last_checkpoint")
	// No _last_checkpoint at all.
	if err := os.Remove(filepath.Join(dir, "_delta_log", "_last_checkpoint")); err != nil {
		t.Fatal(err)
	}
	check("no _last_checkpoint")
	// A multi-part checkpoint at 24, and nothing else before it.
	if err := tb.Checkpoint(ctx, 3); err != nil {
		t.Fatal(err)
	}
	for v := 20; v <= 24; v++ {
		os.Remove(filepath.Join(dir, "_delta_log", fmt.Sprintf("%020d.json", v)))
	}
	os.Remove(filepath.Join(dir, "_delta_log", "00000000000000000020.checkpoint.parquet"))
	os.Remove(filepath.Join(dir, "_delta_log", "00000000000000000010.checkpoint.parquet"))
	if !strings.Contains(strings.Join(logFiles(t, dir), " "), "00000000000000000024.checkpoint.0000000003.0000000003.parquet") {
		t.Fatalf("no multi-part checkpoint: %v", logFiles(t, dir))
	}
	check("multi-part checkpoint only")
	// A missing commit with no checkpoint to cover it is an error.
	os.Remove(filepath.Join(dir, "_delta_log", "00000000000000000024.checkpoint.0000000002.0000000003.parquet"))
	fresh := openLocal(t, dir, Options{})
	var ce *deltalog.CorruptLogError
	if _, err := fresh.Version(ctx); !errors.As(err, &ce) {
		t.Fatalf("incomplete multi-part checkpoint and no commits: %v", err)
	}
}

func TestConcurrentCommitsSameInstance(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	schema := bronze(t, capturedSchema())
	const n = 6
	var wg sync.WaitGroup
	snaps := make([]sink.Snapshot, n)
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		tb := openLocal(t, dir, Options{CheckpointInterval: 2})
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			info := snapshotInfo(t, schema, "dbo_Orders", "0x0000002A00000F380003")
			info.PlanID = fmt.Sprintf("plan-%d", i)
			snaps[i], errs[i] = takeSnapshot(ctx, t, tb, info, 2, 5)
		}(i)
	}
	wg.Wait()
	checkOneWinner(t, snaps, errs)
	tb := openLocal(t, dir, Options{})
	all, _ := tb.Snapshots(ctx)
	if len(all) != 1 {
		t.Fatalf("%d snapshots in the table: %+v", len(all), all)
	}
	tbl := readAll(t, tb)
	defer tbl.Release()
	if tbl.NumRows() != 10 {
		t.Fatalf("%d rows visible, want one snapshot's 10", tbl.NumRows())
	}
}

func checkOneWinner(t *testing.T, snaps []sink.Snapshot, errs []error) {
	t.Helper()
	winner := -1
	for i, err := range errs {
		if err == nil {
			if winner >= 0 {
				t.Fatalf("two snapshots landed: %+v and %+v", snaps[winner], snaps[i])
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("no snapshot landed: %v", errs)
	}
	for i, err := range errs {
		if i == winner {
			continue
		}
		if !errors.Is(err, sink.ErrSnapshotExists) {
			t.Fatalf("racer %d: %v, want ErrSnapshotExists", i, err)
		}
		if snaps[i] != snaps[winner] {
			t.Fatalf("racer %d got %+v, the winner committed %+v", i, snaps[i], snaps[winner])
		}
	}
}

func TestConcurrentCommitsDifferentInstances(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	schema := bronze(t, capturedSchema())
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		tb := openLocal(t, dir, Options{CheckpointInterval: 2})
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, errs[i] = takeSnapshot(ctx, t, tb, snapshotInfo(t, schema, fmt.Sprintf("dbo_T%d", i), "0x0000002A00000F380003"), 1, 5)
		}(i)
	}
	wg.Wait()
	tb := openLocal(t, dir, Options{})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("instance %d: %v", i, err)
		}
		if _, err := tb.FindSnapshot(ctx, fmt.Sprintf("DBO_t%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := tb.Version(ctx); v != 3 {
		t.Fatalf("version %d, want 3", v)
	}
}

// TestResnapshot: a snapshot naming the newest one in Info.Replaces lands
// and becomes the newest; one naming an older snapshot (or none) is
// refused with the newest.
func TestResnapshot(t *testing.T) {
	ctx := context.Background()
	tb := openLocal(t, t.TempDir(), Options{})
	schema := bronze(t, capturedSchema())
	firstInfo := snapshotInfo(t, schema, "dbo_Orders", "0x0000002A00000F380003")
	first, err := takeSnapshot(ctx, t, tb, firstInfo, 1, 5)
	if err != nil {
		t.Fatal(err)
	}
	secondInfo := snapshotInfo(t, schema, "dbo_orders", "0x0000003000000F380003")
	secondInfo.Replaces = first.LSN
	second, err := takeSnapshot(ctx, t, tb, secondInfo, 1, 5)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := tb.FindSnapshot(ctx, "DBO_ORDERS")
	if got != second || got == first {
		t.Fatalf("FindSnapshot = %+v, want the resnapshot %+v", got, second)
	}
	for _, replaces := range []string{"", first.LSN.String()} {
		info := snapshotInfo(t, schema, "dbo_Orders", "0x0000004000000F380009")
		if replaces != "" {
			info.Replaces = mustLSN(t, replaces)
		}
		stale, err := takeSnapshot(ctx, t, tb, info, 1, 5)
		if !errors.Is(err, sink.ErrSnapshotExists) || stale != second {
			t.Fatalf("resnapshot replacing %q: %+v, %v", replaces, stale, err)
		}
	}
	all, _ := tb.Snapshots(ctx)
	if len(all) != 2 {
		t.Fatalf("snapshots %+v", all)
	}
}

func TestAppendChangesIdempotent(t *testing.T) {
	ctx := context.Background()
	tb := openLocal(t, t.TempDir(), Options{})
	schema := bronze(t, capturedSchema())
	v1, err := tb.AppendChanges(ctx, "dbo_Orders", 5, changeRows(t, schema, "dbo_Orders", 5, 0, 10))
	if err != nil || v1 != 0 {
		t.Fatal(v1, err)
	}
	v2, err := tb.AppendChanges(ctx, "DBO_ORDERS", 5, changeRows(t, schema, "dbo_Orders", 5, 0, 10))
	if err != nil || v2 != 0 {
		t.Fatalf("rerun: %d, %v", v2, err)
	}
	v3, err := tb.AppendChanges(ctx, "dbo_Orders", 6, changeRows(t, schema, "dbo_Orders", 6, 10, 10))
	if err != nil || v3 != 1 {
		t.Fatal(v3, err)
	}
	tbl := readAll(t, tb)
	defer tbl.Release()
	if tbl.NumRows() != 20 {
		t.Fatalf("%d rows", tbl.NumRows())
	}
	if _, err := tb.FindSnapshot(ctx, "dbo_Orders"); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("FindSnapshot on a table of changes only: %v", err)
	}
}

func TestPartsValidation(t *testing.T) {
	ctx := context.Background()
	tb := openLocal(t, t.TempDir(), Options{})
	schema := bronze(t, capturedSchema())
	info := snapshotInfo(t, schema, "dbo_Orders", "0x0000002A00000F380003")
	var parts []sink.Part
	for p := 0; p < 2; p++ {
		part, err := tb.WritePartition(ctx, info, p, reader(t, schema, buildRecord(t, schema, p*5, 5, rowSpec{ci: "dbo_Orders"})))
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, part)
	}
	other := parts[1]
	other.PlanID = "another"
	bad := map[string][]sink.Part{
		"other plan":     {parts[0], other},
		"duplicate":      {parts[0], parts[0]},
		"missing part 0": {parts[1]},
		"wrong rows":     {parts[0], {Partition: 1, PlanID: info.PlanID, Rows: 99, Bytes: parts[1].Bytes, Data: parts[1].Data}},
		"log path":       {parts[0], {Partition: 1, PlanID: info.PlanID, Data: []byte(`[{"path":"_delta_log/00000000000000000001.json","stats":"{\"numRecords\":0}"}]`)}},
		"foreign data":   {parts[0], {Partition: 1, PlanID: info.PlanID, Data: []byte(`"x"`)}},
	}
	for name, ps := range bad {
		var pe *PartsError
		if _, err := tb.CommitSnapshot(ctx, info, ps); !errors.As(err, &pe) {
			t.Errorf("%s: %v, want a PartsError", name, err)
		}
	}
	if v, _ := tb.Version(ctx); v != -1 {
		t.Fatalf("refused parts created version %d", v)
	}
}

// TestSchemaEvolution builds a table with the bronze schema before
// _snapshot/_chunk, then commits a snapshot in the current one: the
// columns are added, old rows read them as NULL.
func TestSchemaEvolution(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tb := openLocal(t, dir, Options{})
	full := bronze(t, capturedSchema())
	var oldFields []arrow.Field
	for _, f := range full.Fields() {
		if f.Name != sink.ColSnapshot && f.Name != sink.ColChunk {
			oldFields = append(oldFields, f)
		}
	}
	old := arrow.NewSchema(oldFields, nil)
	if _, err := tb.AppendChanges(ctx, "dbo_Orders", 1, changeRows(t, old, "dbo_Orders", 1, 0, 4)); err != nil {
		t.Fatal(err)
	}
	sc, _ := tb.schema(ctx)
	if _, _, ok := sc.Field(sink.ColSnapshot); ok {
		t.Fatal("old table already has _snapshot")
	}
	snap, err := takeSnapshot(ctx, t, tb, snapshotInfo(t, full, "dbo_Orders", "0x0000002A00000F380003"), 1, 6)
	if err != nil {
		t.Fatal(err)
	}
	sc, _ = tb.schema(ctx)
	as, _ := sc.ArrowSchema()
	if !as.Equal(full) {
		t.Fatalf("evolved schema:\n%s\nwant\n%s", as, full)
	}
	tbl := readAll(t, tb)
	defer tbl.Release()
	if tbl.NumRows() != 10 {
		t.Fatalf("%d rows", tbl.NumRows())
	}
	col, _ := array.Concatenate(tbl.Column(as.FieldIndices(sink.ColSnapshot)[0]).Data().Chunks(), memory.DefaultAllocator)
	defer col.Release()
	if col.NullN() != 4 {
		t.Fatalf("_snapshot has %d NULLs, want the 4 old rows'", col.NullN())
	}
	if got, _ := tb.FindSnapshot(ctx, "dbo_orders"); got != snap {
		t.Fatal(got)
	}
	// The old schema still appends: records may lack a nullable column of
	// the table (a capture instance that does not capture one), and their
	// file reads it as NULL, as the files from before the column do.
	if _, err := tb.AppendChanges(ctx, "dbo_Orders", 2, changeRows(t, old, "dbo_Orders", 2, 0, 1)); err != nil {
		t.Fatalf("old schema after evolution: %v", err)
	}
	tbl2 := readAll(t, tb)
	defer tbl2.Release()
	col2, _ := array.Concatenate(tbl2.Column(as.FieldIndices(sink.ColSnapshot)[0]).Data().Chunks(), memory.DefaultAllocator)
	defer col2.Release()
	if tbl2.NumRows() != 11 || col2.NullN() != 5 {
		t.Fatalf("after the old schema's append: %d rows, %d NULL _snapshot, want 11 and 5", tbl2.NumRows(), col2.NullN())
	}
	// A partition column the records lack is refused.
	sc, _ = tb.schema(ctx)
	var se *deltalog.SchemaError
	if _, _, err := deltalog.Evolve(sc, old, false, []string{sink.ColSnapshot}); !errors.As(err, &se) || se.Column != sink.ColSnapshot {
		t.Fatalf("records lacking a partition column: %v", err)
	}
}

// TestIncompatibleSchema: a type change, a non-nullable new column and a
// column differing in case are refused, naming the column, and nothing is
// written.
func TestIncompatibleSchema(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tb := openLocal(t, dir, Options{})
	schema := bronze(t, capturedSchema())
	if _, err := tb.AppendChanges(ctx, "dbo_Orders", 1, changeRows(t, schema, "dbo_Orders", 1, 0, 4)); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadDir(dir)
	mutate := func(f func(fs []arrow.Field) []arrow.Field) *arrow.Schema {
		return arrow.NewSchema(f(append([]arrow.Field(nil), schema.Fields()...)), nil)
	}
	cases := map[string]struct {
		schema *arrow.Schema
		column string
	}{
		"type": {mutate(func(fs []arrow.Field) []arrow.Field {
			fs[2] = arrow.Field{Name: "amount", Type: arrow.BinaryTypes.String, Nullable: true}
			return fs
		}), "amount"},
		"not nullable": {mutate(func(fs []arrow.Field) []arrow.Field {
			return append(fs, arrow.Field{Name: "extra", Type: arrow.PrimitiveTypes.Int64})
		}), "extra"},
		"case": {mutate(func(fs []arrow.Field) []arrow.Field {
			fs[1].Name = "NAME"
			return fs
		}), "NAME"},
		"unsupported type": {mutate(func(fs []arrow.Field) []arrow.Field {
			return append(fs, arrow.Field{Name: "u", Type: arrow.PrimitiveTypes.Uint64, Nullable: true})
		}), "u"},
	}
	for name, tc := range cases {
		rr, _ := array.NewRecordReader(tc.schema, nil)
		var se *deltalog.SchemaError
		_, err := tb.AppendChanges(ctx, "dbo_Orders", 2, rr)
		if !errors.As(err, &se) || se.Column != tc.column {
			t.Errorf("%s: %v, want a SchemaError naming %s", name, err, tc.column)
		}
		info := snapshotInfo(t, tc.schema, "dbo_Orders", "0x0000002A00000F380003")
		rr2, _ := array.NewRecordReader(tc.schema, nil)
		if _, err := tb.WritePartition(ctx, info, 0, rr2); !errors.As(err, &se) || se.Column != tc.column {
			t.Errorf("%s: WritePartition: %v", name, err)
		}
	}
	after, _ := os.ReadDir(dir)
	if len(after) != len(before) {
		t.Fatalf("files were written: %d entries before, %d after", len(before), len(after))
	}
	if v, _ := tb.Version(ctx); v != 0 {
		t.Fatalf("version %d", v)
	}
}

// failingReader yields one record, then fails.
type failingReader struct {
	array.RecordReader
	n int
}

func (f *failingReader) Next() bool {
	f.n++
	return f.n == 1 && f.RecordReader.Next()
}

func (f *failingReader) Err() error {
	if f.n > 1 {
		return errors.New("source read failed")
	}
	return nil
}

func TestFailureBeforeCommitLeavesNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tb := openLocal(t, dir, Options{TargetFileSize: 1}) // a file per record
	schema := bronze(t, capturedSchema())
	info := snapshotInfo(t, schema, "dbo_Orders", "0x0000002A00000F380003")
	rr := &failingReader{RecordReader: reader(t, schema, buildRecord(t, schema, 0, 10, rowSpec{ci: "dbo_Orders"}), buildRecord(t, schema, 10, 10, rowSpec{ci: "dbo_Orders"}))}
	if _, err := tb.WritePartition(ctx, info, 0, rr); err == nil || !strings.Contains(err.Error(), "source read failed") {
		t.Fatalf("WritePartition: %v", err)
	}
	if v, _ := tb.Version(ctx); v != -1 {
		t.Fatalf("version %d after a failed write", v)
	}
	es, _ := os.ReadDir(dir)
	for _, e := range es {
		if strings.HasSuffix(e.Name(), ".parquet") {
			t.Errorf("file %s left behind (harmless, but the writer deletes what it can)", e.Name())
		}
	}
	if _, err := tb.FindSnapshot(ctx, "dbo_Orders"); !errors.Is(err, sink.ErrNotFound) {
		t.Fatal(err)
	}
}

func TestMemBucket(t *testing.T) {
	ctx := context.Background()
	tb, err := Open(ctx, "mem://", Options{CheckpointInterval: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	schema := bronze(t, capturedSchema())
	if _, err := takeSnapshot(ctx, t, tb, snapshotInfo(t, schema, "a", "0x0000002A00000F380003"), 2, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := takeSnapshot(ctx, t, tb, snapshotInfo(t, schema, "b", "0x0000002A00000F380003"), 1, 5); err != nil {
		t.Fatal(err)
	}
	tbl := readAll(t, tb)
	defer tbl.Release()
	if tbl.NumRows() != 15 {
		t.Fatal(tbl.NumRows())
	}
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Version(ctx); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
}

// TestUnknownCommitTime: a snapshot whose commit time is unknown (the zero
// time) is found with the zero time.
func TestUnknownCommitTime(t *testing.T) {
	ctx := context.Background()
	tb := openLocal(t, t.TempDir(), Options{})
	schema := bronze(t, capturedSchema())
	info := snapshotInfo(t, schema, "dbo_Orders", "0x0000002A00000F380003")
	info.CommitTS = time.Time{}
	snap, err := takeSnapshot(ctx, t, tb, info, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tb.FindSnapshot(ctx, "dbo_orders")
	if err != nil || !got.CommitTS.IsZero() || got != snap {
		t.Fatalf("FindSnapshot = %+v, %v; CommitSnapshot returned %+v", got, err, snap)
	}
}
