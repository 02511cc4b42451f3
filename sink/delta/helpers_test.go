package delta

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cdcsnap/cdcsnap/internal/deltalog"
	"github.com/cdcsnap/cdcsnap/internal/testenv"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
)

var tsUTC = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

// capturedSchema is a captured table with one column of every type.
func capturedSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "amount", Type: &arrow.Decimal128Type{Precision: 18, Scale: 4}, Nullable: true},
		{Name: "created", Type: tsUTC, Nullable: true},
		{Name: "payload", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "day", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "qty", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "small", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
		{Name: "tiny", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "ratio", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "ratio32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	}, nil)
}

func bronze(t testing.TB, captured *arrow.Schema) *arrow.Schema {
	t.Helper()
	s, err := sink.BronzeSchema(captured)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var baseTime = time.Date(2026, 11, 30, 12, 34, 56, 789012000, time.UTC)

func mustLSN(t testing.TB, s string) lsn.LSN {
	t.Helper()
	l, err := lsn.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// rowSpec says how to stamp the metadata columns of generated rows.
type rowSpec struct {
	ci       string
	op       int32
	startLSN string
	seqval   string // "" = NULL
	batch    int64  // 0 = NULL
	commitTS time.Time
	snapshot string // "" = NULL
}

// buildRecord builds n rows with ids from..from+n-1 in schema (a bronze
// schema of capturedSchema, possibly without _snapshot/_chunk). Every
// seventh row has NULLs in every captured column but id.
func buildRecord(t testing.TB, schema *arrow.Schema, from, n int, rs rowSpec) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for r := 0; r < n; r++ {
		id := int64(from + r)
		null := id%7 == 3
		for i, f := range schema.Fields() {
			fb := b.Field(i)
			switch f.Name {
			case "id":
				fb.(*array.Int64Builder).Append(id)
				continue
			case sink.ColCaptureInstance:
				fb.(*array.StringBuilder).Append(rs.ci)
				continue
			case sink.ColOperation:
				fb.(*array.Int32Builder).Append(rs.op)
				continue
			case sink.ColStartLSN:
				fb.(*array.StringBuilder).Append(rs.startLSN)
				continue
			case sink.ColSeqval:
				if rs.seqval == "" {
					fb.AppendNull()
				} else {
					fb.(*array.StringBuilder).Append(rs.seqval)
				}
				continue
			case sink.ColCommandID:
				fb.AppendNull()
				continue
			case sink.ColBatchID:
				if rs.batch == 0 {
					fb.AppendNull()
				} else {
					fb.(*array.Int64Builder).Append(rs.batch)
				}
				continue
			case sink.ColCommitTS:
				fb.(*array.TimestampBuilder).Append(arrow.Timestamp(rs.commitTS.UnixMicro()))
				continue
			case sink.ColSnapshot:
				if rs.snapshot == "" {
					fb.AppendNull()
				} else {
					fb.(*array.StringBuilder).Append(rs.snapshot)
				}
				continue
			case sink.ColChunk:
				fb.AppendNull()
				continue
			}
			if null {
				fb.AppendNull()
				continue
			}
			switch f.Name {
			case "name":
				fb.(*array.StringBuilder).Append(fmt.Sprintf("name-%06d-%s", id, strings.Repeat("é", int(id%40))))
			case "amount":
				fb.(*array.Decimal128Builder).Append(decimal128.FromI64(id*12345 - 500000)) // scale 4
			case "created":
				fb.(*array.TimestampBuilder).Append(arrow.Timestamp(baseTime.Add(time.Duration(id) * time.Minute).UnixMicro()))
			case "payload":
				fb.(*array.BinaryBuilder).Append([]byte{byte(id), 0, byte(id >> 8)})
			case "day":
				fb.(*array.Date32Builder).Append(arrow.Date32FromTime(baseTime.AddDate(0, 0, int(id%1000))))
			case "qty":
				fb.(*array.Int32Builder).Append(int32(id%100 - 50))
			case "small":
				fb.(*array.Int16Builder).Append(int16(id % 300))
			case "tiny":
				fb.(*array.Int8Builder).Append(int8(id%200 - 100))
			case "ratio":
				fb.(*array.Float64Builder).Append(float64(id) / 3)
			case "ratio32":
				fb.(*array.Float32Builder).Append(float32(id) / 7)
			case "flag":
				fb.(*array.BooleanBuilder).Append(id%2 == 0)
			default:
				t.Fatalf("no generator for column %s", f.Name)
			}
		}
	}
	return b.NewRecordBatch()
}

func reader(t testing.TB, schema *arrow.Schema, recs ...arrow.RecordBatch) array.RecordReader {
	t.Helper()
	rr, err := array.NewRecordReader(schema, recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		r.Release()
	}
	return rr
}

func snapshotInfo(t testing.TB, schema *arrow.Schema, ci, l string) sink.Info {
	return sink.Info{CaptureInstance: ci, LSN: mustLSN(t, l), CommitTS: baseTime, Schema: schema, PlanID: "plan-" + ci + "-" + l}
}

// takeSnapshot writes rows partitions of n rows each and commits them.
func takeSnapshot(ctx context.Context, t testing.TB, tb *Table, info sink.Info, partitions, n int) (sink.Snapshot, error) {
	t.Helper()
	var parts []sink.Part
	for p := 0; p < partitions; p++ {
		rec := buildRecord(t, info.Schema, p*n, n, rowSpec{ci: info.CaptureInstance, op: 0, startLSN: info.LSN.String(), commitTS: info.CommitTS, snapshot: info.LSN.String()})
		part, err := tb.WritePartition(ctx, info, p, reader(t, info.Schema, rec))
		if err != nil {
			t.Fatalf("WritePartition %d: %v", p, err)
		}
		parts = append(parts, part)
	}
	return tb.CommitSnapshot(ctx, info, parts)
}

func openLocal(t testing.TB, dir string, opts Options) *Table {
	t.Helper()
	tb, err := Open(context.Background(), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tb.Close() })
	return tb
}

func readAll(t testing.TB, tb *Table) arrow.Table {
	t.Helper()
	rr, err := tb.ReadAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	recs := collect(t, rr)
	tbl := array.NewTableFromRecords(rr.Schema(), recs)
	for _, r := range recs {
		r.Release()
	}
	return tbl
}

func fixtureTable(t *testing.T, name string) string {
	t.Helper()
	return testenv.DeltaFixture(t, name)
}

// readFile reads data file f of tb alone, as one record batch.
func readFile(t *testing.T, tb *Table, schema *arrow.Schema, f deltalog.AddFile) arrow.RecordBatch {
	t.Helper()
	one := &Table{url: tb.url, store: tb.store, log: tb.log}
	rr := &tableReader{ctx: context.Background(), t: one, files: []deltalog.AddFile{f}, schema: schema, refs: 1}
	defer rr.Release()
	return concat(t, schema, collect(t, rr))
}

// collect retains and returns every record batch of rr.
func collect(t testing.TB, rr array.RecordReader) []arrow.RecordBatch {
	t.Helper()
	var recs []arrow.RecordBatch
	for rr.Next() {
		r := rr.RecordBatch()
		r.Retain()
		recs = append(recs, r)
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	return recs
}

// concat joins recs (and releases them) into one record batch.
func concat(t *testing.T, schema *arrow.Schema, recs []arrow.RecordBatch) arrow.RecordBatch {
	t.Helper()
	tbl := array.NewTableFromRecords(schema, recs)
	defer tbl.Release()
	for _, r := range recs {
		r.Release()
	}
	cols := make([]arrow.Array, schema.NumFields())
	for i := range cols {
		a, err := array.Concatenate(tbl.Column(i).Data().Chunks(), memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Release()
		cols[i] = a
	}
	return array.NewRecordBatch(schema, cols, tbl.NumRows())
}

// files returns the live add actions ordered by path.
func (t *Table) files(ctx context.Context) ([]deltalog.AddFile, error) {
	s, err := t.current(ctx)
	if err != nil {
		return nil, err
	}
	return s.SortedFiles(), nil
}

// schema returns the table's Delta schema (no fields when the table does
// not exist).
func (t *Table) schema(ctx context.Context) (deltalog.Schema, error) {
	s, err := t.current(ctx)
	if err != nil {
		return deltalog.Schema{}, err
	}
	return s.Schema, nil
}

// protocol returns the table's protocol action (nil when the table does
// not exist).
func (t *Table) protocol(ctx context.Context) (*deltalog.Protocol, error) {
	s, err := t.current(ctx)
	if err != nil {
		return nil, err
	}
	return s.Protocol, nil
}

// txns returns the live txn (SetTransaction) actions by appId.
func (t *Table) txns(ctx context.Context) (map[string]deltalog.Txn, error) {
	s, err := t.current(ctx)
	if err != nil {
		return nil, err
	}
	return maps.Clone(s.Txns), nil
}
