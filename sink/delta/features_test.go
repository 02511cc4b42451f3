package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/cdcsnap/cdcsnap/internal/deltalog"
	"github.com/cdcsnap/cdcsnap/internal/testenv"
	"github.com/cdcsnap/cdcsnap/sink"
)

// featureTable writes version 0 of a table created elsewhere: protocol,
// metaData (the bronze schema of capturedSchema, with column metadata and
// table properties) and a commitInfo carrying an in-commit timestamp.
func featureTable(t *testing.T, protocol deltalog.Protocol, conf map[string]string, colMeta map[string]map[string]any, partitionBy ...string) string {
	t.Helper()
	dir := t.TempDir()
	sc, err := deltalog.SchemaFromArrow(bronze(t, capturedSchema()))
	if err != nil {
		t.Fatal(err)
	}
	for i := range sc.Fields {
		if m, ok := colMeta[sc.Fields[i].Name]; ok {
			sc.Fields[i].Metadata = m
		}
	}
	if conf == nil {
		conf = map[string]string{}
	}
	lines := []any{
		map[string]any{"commitInfo": map[string]any{"timestamp": 1, "inCommitTimestamp": 4102444800000, "operation": "CREATE TABLE"}},
		map[string]any{"protocol": protocol},
		map[string]any{"metaData": map[string]any{"id": "t", "format": map[string]any{"provider": "parquet", "options": map[string]any{}},
			"schemaString": sc.String(), "partitionColumns": append([]string{}, partitionBy...), "configuration": conf}},
	}
	var b strings.Builder
	for _, l := range lines {
		j, _ := json.Marshal(l)
		b.Write(j)
		b.WriteByte('\n')
	}
	if err := os.MkdirAll(filepath.Join(dir, "_delta_log"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "_delta_log", deltalog.CommitKey(0)[len(deltalog.LogDir):]), []byte(b.String()), 0o666); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestAppendHonoursFeatures: into a table at protocol (3, 7) with the
// features Spark 4 and Databricks turn on, a snapshot, change batches and
// a second snapshot land as the protocol asks of a writer: every add has
// a fresh baseRowId above the high water mark before it, ranges never
// overlap, defaultRowCommitVersion is the add's version, the
// delta.rowTracking domain holds the highest id, and every commit's
// commitInfo comes first with an inCommitTimestamp past the previous one
// (the table's first is in 2100, past the clock).
func TestAppendHonoursFeatures(t *testing.T) {
	ctx := context.Background()
	dir := featureTable(t, deltalog.Protocol{MinReaderVersion: 3, MinWriterVersion: 7,
		ReaderFeatures: []string{"deletionVectors", "timestampNtz", "vacuumProtocolCheck"},
		WriterFeatures: []string{"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns", "identityColumns",
			"deletionVectors", "timestampNtz", "domainMetadata", "rowTracking", "inCommitTimestamp", "vacuumProtocolCheck", "v2Checkpoint"}},
		map[string]string{"delta.enableDeletionVectors": "true", "delta.enableRowTracking": "true", "delta.enableInCommitTimestamps": "true",
			"delta.enableChangeDataFeed": "true", "delta.appendOnly": "true",
			"delta.rowTracking.materializedRowIdColumnName": "_row-id-col-x", "delta.rowTracking.materializedRowCommitVersionColumnName": "_row-commit-version-col-x"},
		nil)
	tb := openLocal(t, dir, Options{TargetFileSize: 2 << 10, RowGroupRows: 30})
	schema := bronze(t, capturedSchema())
	if _, err := takeSnapshot(ctx, t, tb, snapshotInfo(t, schema, "dbo_Orders", "0x0000002A000000100001"), 3, 70); err != nil {
		t.Fatal(err)
	}
	for b := int64(1); b <= 2; b++ {
		if _, err := tb.AppendChanges(ctx, "dbo_Orders", b, changeRows(t, schema, "dbo_Orders", b, int(b)*100, 9)); err != nil {
			t.Fatal(err)
		}
	}
	info := snapshotInfo(t, schema, "dbo_Orders", "0x0000002A000000200001")
	info.Replaces = mustLSN(t, "0x0000002A000000100001")
	if _, err := takeSnapshot(ctx, t, tb, info, 2, 40); err != nil {
		t.Fatal(err)
	}
	v, err := tb.Version(ctx)
	if err != nil || v != 4 {
		t.Fatalf("version %d, %v", v, err)
	}
	hwm, prevICT := int64(-1), int64(0)
	for ver := int64(0); ver <= v; ver++ {
		acts, err := tb.dlog.ReadCommit(ctx, ver)
		if err != nil {
			t.Fatal(err)
		}
		var ci struct {
			ICT int64 `json:"inCommitTimestamp"`
		}
		if acts[0].CommitInfo == nil || json.Unmarshal(acts[0].CommitInfo, &ci) != nil || ci.ICT <= prevICT {
			t.Fatalf("version %d: first action %s, in-commit timestamp %d after %d", ver, acts[0].CommitInfo, ci.ICT, prevICT)
		}
		prevICT = ci.ICT
		var domain *deltalog.DomainMetadata
		for _, a := range acts {
			if a.Add != nil {
				st, _ := a.Add.ParseStats()
				if a.Add.BaseRowID == nil || *a.Add.BaseRowID != hwm+1 || a.Add.DefaultRowCommitVersion == nil || *a.Add.DefaultRowCommitVersion != ver {
					t.Fatalf("version %d: add %s has baseRowId %v, defaultRowCommitVersion %v; want %d and %d", ver, a.Add.Path, a.Add.BaseRowID, a.Add.DefaultRowCommitVersion, hwm+1, ver)
				}
				hwm += st.NumRecords
			}
			if a.DomainMetadata != nil {
				domain = &deltalog.DomainMetadata{}
				if err := json.Unmarshal(a.DomainMetadata, domain); err != nil {
					t.Fatal(err)
				}
			}
		}
		if ver > 0 && (domain == nil || domain.Domain != deltalog.RowTrackingDomain || domain.Configuration != fmt.Sprintf(`{"rowIdHighWaterMark":%d}`, hwm)) {
			t.Fatalf("version %d: domain %+v, want the high water mark %d", ver, domain, hwm)
		}
	}
	if hwm != 3*70+2*9+2*40-1 {
		t.Fatalf("row ids up to %d for %d rows", hwm, 3*70+2*9+2*40)
	}
}

// TestRefusesFeaturesItCannotHonour: each constraint an appending writer
// would have to enforce, and each unknown feature, is refused before
// anything is written, named in the error.
func TestRefusesFeaturesItCannotHonour(t *testing.T) {
	ctx := context.Background()
	schema := bronze(t, capturedSchema())
	v7 := func(fs ...string) deltalog.Protocol {
		return deltalog.Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{}, WriterFeatures: fs}
	}
	for _, tc := range []struct {
		name     string
		protocol deltalog.Protocol
		conf     map[string]string
		colMeta  map[string]map[string]any
		want     string
	}{
		{"check constraint", v7("checkConstraints"), map[string]string{"delta.constraints.positive_qty": "qty > 0"}, nil, "checkConstraints (positive_qty: qty > 0)"},
		{"legacy writer 3", deltalog.Protocol{MinReaderVersion: 1, MinWriterVersion: 3}, map[string]string{"delta.constraints.c1": "id IS NOT NULL"}, nil, "c1: id IS NOT NULL"},
		{"invariant", v7("invariants"), nil, map[string]map[string]any{"qty": {"delta.invariants": `{"expression":{"expression":"qty > 0"}}`}}, "invariants (qty:"},
		{"generated column", v7("generatedColumns"), nil, map[string]map[string]any{"day": {"delta.generationExpression": "CAST(created AS DATE)"}}, "generatedColumns (day AS (CAST(created AS DATE)))"},
		{"identity column", deltalog.Protocol{MinReaderVersion: 1, MinWriterVersion: 6}, nil, map[string]map[string]any{"id": {"delta.identity.start": 1, "delta.identity.step": 1}}, "identityColumns (id)"},
		{"unknown feature", v7("deletionVectors", "clustering", "someFutureFeature"), nil, nil, "clustering, someFutureFeature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := featureTable(t, tc.protocol, tc.conf, tc.colMeta)
			tb := openLocal(t, dir, Options{})
			err := tb.CheckSnapshot(ctx, "dbo_Orders", schema)
			var ue *deltalog.UnsupportedProtocolError
			if !errors.As(err, &ue) || !ue.Write || !strings.Contains(ue.Feature, tc.want) {
				t.Fatalf("CheckSnapshot = %v; want a write refusal naming %q", err, tc.want)
			}
			if _, err := tb.AppendChanges(ctx, "dbo_Orders", 1, changeRows(t, schema, "dbo_Orders", 1, 0, 3)); !errors.As(err, &ue) {
				t.Fatalf("AppendChanges = %v", err)
			}
			if v, _ := tb.Version(ctx); v != 0 {
				t.Fatalf("version %d after refusals", v)
			}
			if _, err := tb.FindSnapshot(ctx, "dbo_Orders"); !errors.Is(err, sink.ErrNotFound) {
				t.Fatalf("FindSnapshot = %v", err)
			}
		})
	}
}

// TestTimestampNtzColumn: a table whose created column is timestamp_ntz
// (timestampNtz feature) takes the bronze records' UTC-labeled wall-clock
// values as they are: Parquet marks the column isAdjustedToUTC false, the
// stats carry no zone, and the values read back unchanged.
func TestTimestampNtzColumn(t *testing.T) {
	ctx := context.Background()
	dir := featureTable(t, deltalog.Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"timestampNtz"}, WriterFeatures: []string{"timestampNtz"}}, nil, nil)
	// Make created a timestamp_ntz column, as Spark's CREATE TABLE with
	// TIMESTAMP_NTZ does.
	key := filepath.Join(dir, "_delta_log", deltalog.CommitKey(0)[len(deltalog.LogDir):])
	b, err := os.ReadFile(key)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), `\"name\":\"created\",\"type\":\"timestamp\"`, `\"name\":\"created\",\"type\":\"timestamp_ntz\"`, 1))
	if !strings.Contains(string(b), "timestamp_ntz") {
		t.Fatal("could not make created a timestamp_ntz column")
	}
	if err := os.WriteFile(key, b, 0o666); err != nil {
		t.Fatal(err)
	}
	tb := openLocal(t, dir, Options{})
	schema := bronze(t, capturedSchema())
	if _, err := takeSnapshot(ctx, t, tb, snapshotInfo(t, schema, "dbo_Orders", "0x0000002A000000100001"), 1, 20); err != nil {
		t.Fatal(err)
	}
	files, err := tb.files(ctx)
	if err != nil || len(files) != 1 {
		t.Fatalf("files %v, %v", files, err)
	}
	st, _ := files[0].ParseStats()
	if mn, _ := st.MinValues["created"].(string); mn != baseTime.Format("2006-01-02T15:04:05.000000") {
		t.Fatalf("created stats min %q, want the wall-clock time without a zone", mn)
	}
	tbl := readAll(t, tb)
	defer tbl.Release()
	col := tbl.Column(tbl.Schema().FieldIndices("created")[0])
	if tt := col.DataType().(*arrow.TimestampType); tt.TimeZone != "" {
		t.Fatalf("created reads back as %s", tt)
	}
	ts := col.Data().Chunk(0).(*array.Timestamp)
	for i := range ts.Len() {
		id := i // buildRecord's ids start at 0
		if id%7 == 3 {
			continue
		}
		if want := baseTime.Add(time.Duration(id) * time.Minute).UnixMicro(); int64(ts.Value(i)) != want {
			t.Fatalf("row %d: created %d, want %d", i, ts.Value(i), want)
		}
	}
	pf, err := file.OpenParquetFile(filepath.Join(dir, files[0].Path), false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	lt := pf.MetaData().Schema.Column(pf.MetaData().Schema.ColumnIndexByName("created")).LogicalType()
	if !strings.Contains(lt.String(), "isAdjustedToUTC=false") {
		t.Fatalf("created is %s in Parquet", lt)
	}
}

// TestColumnMapping: into tables whose columns are mapped (name and id
// modes, physical names unlike the display names), the data files name
// the columns by physical name with their ids as Parquet field ids and
// the stats are keyed by physical names; everything reads back by display
// name, in Go (also through the rows fallback, whose stats are rekeyed)
// and in delta-rs. Adding a column to a mapped table is refused, named.
func TestColumnMapping(t *testing.T) {
	ctx := context.Background()
	schema := bronze(t, capturedSchema())
	for _, mode := range []string{"name", "id"} {
		t.Run(mode, func(t *testing.T) {
			meta := map[string]map[string]any{}
			for i, f := range schema.Fields() {
				meta[f.Name] = map[string]any{"delta.columnMapping.id": i + 1, "delta.columnMapping.physicalName": fmt.Sprintf("col-%02d-%s", i+1, mode)}
			}
			dir := featureTable(t, deltalog.Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"columnMapping"}, WriterFeatures: []string{"columnMapping"}},
				map[string]string{"delta.columnMapping.mode": mode, "delta.columnMapping.maxColumnId": fmt.Sprint(schema.NumFields())}, meta)
			tb := openLocal(t, dir, Options{})
			if _, err := takeSnapshot(ctx, t, tb, snapshotInfo(t, schema, "dbo_Orders", "0x0000002A000000100001"), 2, 30); err != nil {
				t.Fatal(err)
			}
			if _, err := tb.AppendChanges(ctx, "dbo_Orders", 1, changeRows(t, schema, "dbo_Orders", 1, 100, 5)); err != nil {
				t.Fatal(err)
			}
			files, err := tb.files(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				st, _ := f.ParseStats()
				if _, ok := st.MinValues["col-01-"+mode]; !ok {
					t.Fatalf("stats of %s are not keyed by physical names: %s", f.Path, f.Stats)
				}
				pf, err := file.OpenParquetFile(filepath.Join(dir, f.Path), false)
				if err != nil {
					t.Fatal(err)
				}
				sc := pf.MetaData().Schema
				c := sc.Column(sc.ColumnIndexByName("col-01-" + mode))
				if c.SchemaNode().FieldID() != 1 {
					t.Fatalf("%s: column col-01-%s has field id %d", f.Path, mode, c.SchemaNode().FieldID())
				}
				pf.Close()
			}
			tbl := readAll(t, tb)
			if tbl.NumRows() != 65 || len(tbl.Schema().FieldIndices("id")) != 1 {
				t.Fatalf("read back %d rows in %s", tbl.NumRows(), tbl.Schema())
			}
			ids := tbl.Column(tbl.Schema().FieldIndices("id")[0]).Data().Chunk(0).(*array.Int64)
			if ids.NullN() != 0 {
				t.Fatalf("id read back with %d NULLs", ids.NullN())
			}
			tbl.Release()
			expireTxns(t, ctx, dir)
			tb = openLocal(t, dir, Options{})
			if sn, err := tb.FindSnapshot(ctx, "dbo_orders"); err != nil || sn.Rows != 60 {
				t.Fatalf("FindSnapshot from the rows of a mapped table: %+v, %v", sn, err)
			}
			v, _ := tb.Version(ctx)
			if got, err := tb.AppendChanges(ctx, "dbo_Orders", 1, changeRows(t, schema, "dbo_Orders", 1, 100, 5)); err != nil || got != v {
				t.Fatalf("replayed batch 1: version %d (was %d), %v", got, v, err)
			}
			wider, _ := sink.BronzeSchema(arrow.NewSchema(append(capturedSchema().Fields(), arrow.Field{Name: "added", Type: arrow.PrimitiveTypes.Int64, Nullable: true}), nil))
			var se *deltalog.SchemaError
			if err := tb.CheckSnapshot(ctx, "dbo_Orders", wider); !errors.As(err, &se) || !strings.Contains(se.Column, "added") {
				t.Fatalf("a new column on a mapped table: %v", err)
			}
			if py := os.Getenv(testenv.PythonEnv); py != "" {
				var got struct {
					NumRows int64                     `json:"num_rows"`
					Rows    map[string]map[string]any `json:"rows"`
				}
				runPython(t, py, &got, "verify", dir)
				if got.NumRows != 65 || got.Rows["5/0/None"] == nil {
					t.Fatalf("delta-rs read %d rows; keys like %v", got.NumRows, firstKeys(got.Rows, 3))
				}
			}
		})
	}
}

func firstKeys(m map[string]map[string]any, n int) []string {
	var out []string
	for k := range m {
		if len(out) == n {
			break
		}
		out = append(out, k)
	}
	return out
}

// TestPartitionedTable: appends into tables partitioned by captured
// columns (a boolean with NULLs, a smallint of 100 values, more than the
// files kept open at once; a string with non-ASCII and escaped
// characters) put each file under <column>=<value>/ with the value in the
// add action and not in the file, and read back row for row, in Go
// (also through the rows fallback) and in delta-rs and DuckDB.
func TestPartitionedTable(t *testing.T) {
	ctx := context.Background()
	schema := bronze(t, capturedSchema())
	for _, by := range [][]string{{"flag", "small"}, {"name"}} {
		t.Run(strings.Join(by, ","), func(t *testing.T) {
			dir := featureTable(t, deltalog.Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, nil, nil, by...)
			tb := openLocal(t, dir, Options{})
			if _, err := takeSnapshot(ctx, t, tb, snapshotInfo(t, schema, "dbo_Orders", "0x0000002A000000100001"), 2, 60); err != nil {
				t.Fatal(err)
			}
			if _, err := tb.AppendChanges(ctx, "dbo_Orders", 1, changeRows(t, schema, "dbo_Orders", 1, 300, 7)); err != nil {
				t.Fatal(err)
			}
			files, err := tb.files(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				dir := ""
				for _, c := range by {
					v, ok := f.PartitionValues[c]
					if !ok || v == "" {
						v = hiveNull
					} else {
						v = hiveEscape(v)
					}
					dir += c + "=" + v + "/"
				}
				if !strings.HasPrefix(f.Key(), dir) {
					t.Fatalf("file %s (key %s) has partition values %v", f.Path, f.Key(), f.PartitionValues)
				}
				st, _ := f.ParseStats()
				if _, ok := st.NullCount[by[0]]; ok {
					t.Fatalf("stats of %s cover partition column %s", f.Path, by[0])
				}
			}
			if by[0] == "flag" && len(files) <= maxOpenPartitions {
				t.Fatalf("only %d files: the test wants more partitions than files open at once", len(files))
			}
			// Go reads back exactly the rows written: each id's partition
			// columns as buildRecord made them.
			tbl := readAll(t, tb)
			if tbl.NumRows() != 127 {
				t.Fatalf("read %d rows", tbl.NumRows())
			}
			want := concat(t, schema, []arrow.RecordBatch{
				buildRecord(t, schema, 0, 60, rowSpec{}), buildRecord(t, schema, 60, 60, rowSpec{}), buildRecord(t, schema, 300, 7, rowSpec{}),
			})
			wantBy := map[int64]string{}
			for r := range int(want.NumRows()) {
				wantBy[want.Column(0).(*array.Int64).Value(r)] = rowText(want, r, by)
			}
			want.Release()
			rr := array.NewTableReader(tbl, 1<<20)
			for rr.Next() {
				rec := rr.RecordBatch()
				ids := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
				for r := range int(rec.NumRows()) {
					if got := rowText(rec, r, by); got != wantBy[ids.Value(r)] {
						t.Fatalf("id %d: partition columns %s, want %s", ids.Value(r), got, wantBy[ids.Value(r)])
					}
				}
			}
			rr.Release()
			tbl.Release()
			expireTxns(t, ctx, dir)
			tb = openLocal(t, dir, Options{})
			if sn, err := tb.FindSnapshot(ctx, "dbo_Orders"); err != nil || sn.Rows != 120 {
				t.Fatalf("FindSnapshot from the rows of a partitioned table: %+v, %v", sn, err)
			}
			readersCount(t, dir, 127)
		})
	}
}

// rowText renders row r's columns cols.
func rowText(rec arrow.RecordBatch, r int, cols []string) string {
	var b strings.Builder
	for _, c := range cols {
		a := rec.Column(rec.Schema().FieldIndices(c)[0])
		if a.IsNull(r) {
			b.WriteString("NULL|")
			continue
		}
		b.WriteString(a.ValueStr(r) + "|")
	}
	return b.String()
}

// FuzzPartitionValue: a partition value read from a log never panics the
// parser, and every value the writer serializes parses back to itself.
func FuzzPartitionValue(f *testing.F) {
	f.Add("2026-12-03", int64(5), "x")
	f.Add("1970-01-01T00:00:00.123456Z", int64(-1), "é=/%")
	f.Fuzz(func(t *testing.T, s string, n int64, str string) {
		for _, typ := range []string{"string", "long", "integer", "byte", "boolean", "date", "timestamp", "timestamp_ntz", "decimal(18,4)"} {
			at, err := deltalog.ArrowType(typ)
			if err != nil {
				t.Fatal(err)
			}
			c := partitionColumn{name: "c", key: "c", typ: typ, arrowTyp: at}
			if a, err := c.column(s, true, 2); err == nil {
				a.Release()
			}
		}
		// Round trips: a long, a timestamp, a string.
		for _, tc := range []struct {
			typ string
			arr arrow.Array
		}{
			{"long", func() arrow.Array {
				b := array.NewInt64Builder(memory.DefaultAllocator)
				b.Append(n)
				return b.NewArray()
			}()},
			{"timestamp", func() arrow.Array {
				b := array.NewTimestampBuilder(memory.DefaultAllocator, tsUTC)
				b.Append(arrow.Timestamp(n % (1 << 50)))
				return b.NewArray()
			}()},
			{"string", func() arrow.Array {
				b := array.NewStringBuilder(memory.DefaultAllocator)
				b.Append(str)
				return b.NewArray()
			}()},
		} {
			at, _ := deltalog.ArrowType(tc.typ)
			c := partitionColumn{name: "c", key: "c", typ: tc.typ, arrowTyp: at}
			v, ok := c.value(tc.arr, 0)
			back, err := c.column(v, ok, 1)
			if err != nil {
				t.Fatalf("%s %s: %q does not parse back: %v", tc.typ, tc.arr, v, err)
			}
			if ok && back.ValueStr(0) != tc.arr.ValueStr(0) {
				t.Fatalf("%s: %s serialized as %q reads back as %s", tc.typ, tc.arr.ValueStr(0), v, back.ValueStr(0))
			}
			back.Release()
			tc.arr.Release()
		}
	})
}

// TestCreateOptions: a table created with Databricks' defaults and more
// (deletion vectors, in-commit timestamps, row tracking, column mapping,
// change data feed, v2 checkpoints, append-only), partitioned, gets the
// protocol and properties those features need from its first commit on,
// its data files (written before that commit) already follow them, and it
// reads back in Go, delta-rs and DuckDB. Bad options are refused before
// any I/O.
func TestCreateOptions(t *testing.T) {
	ctx := context.Background()
	if _, err := Open(ctx, filepath.Join(t.TempDir(), "x"), Options{Create: CreateOptions{Features: []string{"deletionVectors", "clustering"}, PartitionBy: []string{"a", "A"}}}); err == nil ||
		!strings.Contains(err.Error(), `feature "clustering"`) || !strings.Contains(err.Error(), `partition column "A"`) {
		t.Fatalf("bad options: %v", err)
	}
	schema := bronze(t, capturedSchema())
	dir := t.TempDir()
	opts := Options{Create: CreateOptions{
		PartitionBy: []string{"flag"},
		Properties:  map[string]string{"delta.logRetentionDuration": "interval 60 days"},
		Features:    []string{"deletionVectors", "inCommitTimestamp", "rowTracking", "columnMapping", "changeDataFeed", "v2Checkpoint", "appendOnly"},
	}}
	tb, err := Open(ctx, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	if _, err := takeSnapshot(ctx, t, tb, snapshotInfo(t, schema, "dbo_Orders", "0x0000002A000000100001"), 2, 50); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.AppendChanges(ctx, "dbo_Orders", 1, changeRows(t, schema, "dbo_Orders", 1, 300, 6)); err != nil {
		t.Fatal(err)
	}
	p, _ := tb.protocol(ctx)
	if p.MinReaderVersion != 3 || p.MinWriterVersion != 7 || !slices.Contains(p.ReaderFeatures, "columnMapping") || !slices.Contains(p.WriterFeatures, "domainMetadata") {
		t.Fatalf("protocol %+v", p)
	}
	s, _ := tb.current(ctx)
	for k, v := range map[string]string{"delta.enableDeletionVectors": "true", "delta.enableInCommitTimestamps": "true", "delta.enableRowTracking": "true",
		"delta.columnMapping.mode": "name", "delta.enableChangeDataFeed": "true", "delta.checkpointPolicy": "v2", "delta.appendOnly": "true",
		"delta.logRetentionDuration": "interval 60 days"} {
		if s.Meta.Configuration[k] != v {
			t.Fatalf("property %s = %q, want %q", k, s.Meta.Configuration[k], v)
		}
	}
	acts, err := tb.dlog.ReadCommit(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ci struct {
		ICT int64 `json:"inCommitTimestamp"`
	}
	if err := json.Unmarshal(acts[0].CommitInfo, &ci); err != nil || ci.ICT == 0 {
		t.Fatalf("the creating commit has no inCommitTimestamp: %s", acts[0].CommitInfo)
	}
	cm, _ := s.Mapping()
	files, _ := tb.files(ctx)
	for _, f := range files {
		if f.BaseRowID == nil || !strings.HasPrefix(f.Key(), cm.FileName("flag")+"=") {
			t.Fatalf("file %s: baseRowId %v, partition folder not %s=", f.Key(), f.BaseRowID, cm.FileName("flag"))
		}
		st, _ := f.ParseStats()
		if _, ok := st.NullCount[cm.FileName("id")]; !ok {
			t.Fatalf("stats of %s are not keyed by physical names: %s", f.Path, f.Stats)
		}
	}
	tbl := readAll(t, tb)
	if tbl.NumRows() != 106 {
		t.Fatalf("read %d rows", tbl.NumRows())
	}
	tbl.Release()
	readersCount(t, dir, 106)
}

// TestTypeWidening: after Spark widens columns (typeWidening: int to
// long, smallint to int, float to double, decimal(18,4) to (22,6), date
// to timestamp_ntz), files written before read back in the wide types
// with the same values, and bronze records (still narrow: the capture
// instance did not change) are written cast to them.
func TestTypeWidening(t *testing.T) {
	ctx := context.Background()
	schema := bronze(t, capturedSchema())
	dir := t.TempDir()
	tb := openLocal(t, dir, Options{})
	if _, err := takeSnapshot(ctx, t, tb, snapshotInfo(t, schema, "dbo_Orders", "0x0000002A000000100001"), 1, 30); err != nil {
		t.Fatal(err)
	}
	s, _ := tb.current(ctx)
	wide := map[string]string{"qty": "long", "small": "integer", "ratio32": "double", "amount": "decimal(22,6)", "day": "timestamp_ntz"}
	sc := deltalog.Schema{Fields: slices.Clone(s.Schema.Fields)}
	for i, f := range sc.Fields {
		if w, ok := wide[f.Name]; ok {
			sc.Fields[i].Type, _ = json.Marshal(w)
			sc.Fields[i].Metadata = map[string]any{"delta.typeChanges": []any{map[string]any{"fromType": f.TypeName(), "toType": w}}}
		}
	}
	md := *s.Meta
	md.SchemaString = sc.String()
	md.Configuration = deltalog.StringMap{"delta.enableTypeWidening": "true"}
	var b strings.Builder
	for _, a := range []any{
		map[string]any{"commitInfo": map[string]any{"operation": "CHANGE COLUMN"}},
		map[string]any{"protocol": deltalog.Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"timestampNtz", "typeWidening"}, WriterFeatures: []string{"timestampNtz", "typeWidening"}}},
		map[string]any{"metaData": md},
	} {
		j, _ := json.Marshal(a)
		b.Write(j)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(dir, "_delta_log", deltalog.CommitKey(s.Version + 1)[len(deltalog.LogDir):]), []byte(b.String()), 0o666); err != nil {
		t.Fatal(err)
	}
	tb = openLocal(t, dir, Options{})
	if _, err := tb.AppendChanges(ctx, "dbo_Orders", 1, changeRows(t, schema, "dbo_Orders", 1, 100, 10)); err != nil {
		t.Fatal(err)
	}
	tbl := readAll(t, tb)
	defer tbl.Release()
	want := concat(t, schema, []arrow.RecordBatch{buildRecord(t, schema, 0, 30, rowSpec{}), buildRecord(t, schema, 100, 10, rowSpec{})})
	defer want.Release()
	if tbl.NumRows() != want.NumRows() {
		t.Fatalf("%d rows, want %d", tbl.NumRows(), want.NumRows())
	}
	for name, w := range wide {
		at, _ := deltalog.ArrowType(w)
		col := tbl.Column(tbl.Schema().FieldIndices(name)[0])
		if !arrow.TypeEqual(col.DataType(), at) {
			t.Fatalf("%s reads as %s, want %s", name, col.DataType(), at)
		}
		c, err := compute.CastArray(ctx, want.Column(want.Schema().FieldIndices(name)[0]), compute.SafeCastOptions(at))
		if err != nil {
			t.Fatal(err)
		}
		// Files are read in path order: match rows by id.
		byID := map[string]string{}
		ids := tbl.Column(tbl.Schema().FieldIndices("id")[0]).Data().Chunks()
		for k, g := range col.Data().Chunks() {
			for i := range g.Len() {
				byID[ids[k].ValueStr(i)] = g.ValueStr(i)
			}
		}
		wantIDs := want.Column(want.Schema().FieldIndices("id")[0])
		for i := range c.Len() {
			if got := byID[wantIDs.ValueStr(i)]; got != c.ValueStr(i) {
				t.Fatalf("%s of id %s: %s, want %s", name, wantIDs.ValueStr(i), got, c.ValueStr(i))
			}
		}
		c.Release()
	}
}

// readersCount checks that delta-rs and DuckDB read want rows from the
// table in dir (when the interop Python is there).
func readersCount(t *testing.T, dir string, want int64) {
	t.Helper()
	py := os.Getenv(testenv.PythonEnv)
	if py == "" {
		return
	}
	var rs struct {
		NumRows int64 `json:"num_rows"`
	}
	runPython(t, py, &rs, "verify", dir)
	var dk struct {
		Count int64 `json:"count"`
	}
	runPython(t, py, &dk, "duckdb", dir)
	if rs.NumRows != want || dk.Count != want {
		t.Fatalf("delta-rs read %d rows, DuckDB %d; want %d", rs.NumRows, dk.Count, want)
	}
}

// TestWriterChecks: data paths a commit accepts (partition folders may
// start with "_" or hold ".."), NOT NULL columns enforced, feature
// properties refused outside Features, and a naive timestamp column
// creating a table brings the timestampNtz feature.
func TestWriterChecks(t *testing.T) {
	ctx := context.Background()
	for key, ok := range map[string]bool{
		"part-0.parquet": true, "_capture_instance=dbo_x/part-0.parquet": true, "region=a..b/part-0.parquet": true,
		"../x.parquet": false, "a/../x.parquet": false, "/abs.parquet": false, "s3://b/x.parquet": false,
		"_delta_log/00000000000000000000.json": false, "_cdcsnap/partial/p/plan.json": false, "a//b.parquet": false, "": false,
	} {
		if dataPath(key) != ok {
			t.Errorf("dataPath(%q) = %v", key, !ok)
		}
	}
	schema := bronze(t, capturedSchema())
	dir := featureTable(t, deltalog.Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, nil, nil)
	b, _ := os.ReadFile(filepath.Join(dir, "_delta_log", deltalog.CommitKey(0)[len(deltalog.LogDir):]))
	b = []byte(strings.Replace(string(b), `{\"name\":\"qty\",\"type\":\"integer\",\"nullable\":true`, `{\"name\":\"qty\",\"type\":\"integer\",\"nullable\":false`, 1))
	if err := os.WriteFile(filepath.Join(dir, "_delta_log", deltalog.CommitKey(0)[len(deltalog.LogDir):]), b, 0o666); err != nil {
		t.Fatal(err)
	}
	tb := openLocal(t, dir, Options{})
	var se *deltalog.SchemaError
	if _, err := tb.AppendChanges(ctx, "dbo_Orders", 1, changeRows(t, schema, "dbo_Orders", 1, 0, 10)); !errors.As(err, &se) || se.Column != "qty" {
		t.Fatalf("NULLs into a NOT NULL column: %v", err)
	}
	if v, _ := tb.Version(ctx); v != 0 {
		t.Fatalf("version %d after a refused batch", v)
	}
	if _, err := Open(ctx, t.TempDir(), Options{Create: CreateOptions{Properties: map[string]string{"delta.enableDeletionVectors": "true", "delta.checkpointPolicy": "classic"}}}); err == nil ||
		!strings.Contains(err.Error(), "delta.enableDeletionVectors") || strings.Contains(err.Error(), "checkpointPolicy") {
		t.Fatalf("a feature property outside Features: %v", err)
	}
	naive := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, {Name: "at", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true}}, nil)
	acts, err := CreateOptions{}.createActions(mustSchema(t, naive), "x", 0)
	if err != nil || !slices.Contains(acts[0].Protocol.ReaderFeatures, "timestampNtz") || !slices.Contains(acts[0].Protocol.WriterFeatures, "timestampNtz") {
		t.Fatalf("a naive timestamp column creates protocol %+v (%v)", acts[0].Protocol, err)
	}
}

func mustSchema(t *testing.T, as *arrow.Schema) deltalog.Schema {
	t.Helper()
	s, err := deltalog.SchemaFromArrow(as)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCommitRefusesAnotherLayout: two writers write parts for a table
// that does not exist yet, one plain, one partitioned and column-mapped;
// the second's commit lands first, and the first's parts, laid out for
// another table, are refused instead of committed as rows nobody can read.
// Every file of the partitioned table names its partition column, NULL
// as "".
func TestCommitRefusesAnotherLayout(t *testing.T) {
	ctx := context.Background()
	schema := bronze(t, capturedSchema())
	dir := t.TempDir()
	a := openLocal(t, dir, Options{})
	b := openLocal(t, dir, Options{Create: CreateOptions{PartitionBy: []string{"flag"}, Features: []string{"columnMapping"}}})
	info := snapshotInfo(t, schema, "dbo_Orders", "0x0000002A000000100001")
	rec := buildRecord(t, schema, 0, 20, rowSpec{ci: "dbo_Orders", startLSN: info.LSN.String(), commitTS: info.CommitTS, snapshot: info.LSN.String()})
	rec.Retain()
	partA, err := a.WritePartition(ctx, info, 0, reader(t, schema, rec))
	if err != nil {
		t.Fatal(err)
	}
	partB, err := b.WritePartition(ctx, info, 0, reader(t, schema, rec))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.CommitSnapshot(ctx, info, []sink.Part{partB}); err != nil {
		t.Fatal(err)
	}
	other := info
	other.CaptureInstance, other.PlanID = "dbo_Other", "plan-other"
	partA.PlanID = other.PlanID
	if _, err := a.CommitSnapshot(ctx, other, []sink.Part{partA}); err == nil || !strings.Contains(err.Error(), "another layout") {
		t.Fatalf("a plain part committed into a partitioned, mapped table: %v", err)
	}
	files, _ := b.files(ctx)
	nulls := 0
	for _, f := range files {
		cm, _ := mustState(t, b).Mapping()
		v, ok := f.PartitionValues[cm.FileName("flag")]
		if !ok {
			t.Fatalf("file %s lacks its partition value: %v", f.Path, f.PartitionValues)
		}
		if v == "" {
			nulls++
		}
	}
	if nulls == 0 || len(files) != 3 {
		t.Fatalf("%d files, %d with a NULL partition: want true, false and NULL", len(files), nulls)
	}
}

func mustState(t *testing.T, tb *Table) *deltalog.State {
	t.Helper()
	s, err := tb.current(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}
