package reliability_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// The table-features test (issue 17): Spark 4 + Delta 4 create empty
// bronze tables with Delta table features (Databricks' defaults as far as
// open-source Delta has them, a timestamp_ntz column, and one table per
// feature sink/delta must refuse); Go bootstraps each from the fake source
// and streams change batches; Spark deletes rows with deletion vectors and
// writes a v2 checkpoint; Go reruns the bootstrap and appends again; then
// Spark (latest-image MERGE, row ids, history, timestamp_ntz data
// skipping), delta-rs and DuckDB read the tables back.

const (
	featRows    = 2000 // source rows
	featChanges = 40   // changes per batch
)

// ordersShape is the demo's sales.orders (examples/bootstrap) as a
// testworld layout: a case-insensitive varchar + bigint key, nvarchar,
// decimal, datetime2 (at the microsecond a Delta timestamp keeps), date,
// bit and uniqueidentifier, with NULLs.
func ordersShape() testworld.Shape {
	regions := []string{"AMER-East", "AMER-West", "APAC", "EMEA-North", "EMEA-South", "LATAM"}
	return testworld.Shape{
		Name: "orders",
		Columns: []fake.ColumnDef{
			{Name: "region", Type: "varchar(16)", Collation: "SQL_Latin1_General_CP1_CI_AS"},
			{Name: "order_id", Type: "bigint"},
			{Name: "customer", Type: "nvarchar(100)", Nullable: true},
			{Name: "amount", Type: "decimal(18,4)", Nullable: true},
			{Name: "placed_at", Type: "datetime2(7)"},
			{Name: "ship_date", Type: "date", Nullable: true},
			{Name: "express", Type: "bit"},
			{Name: "ref", Type: "uniqueidentifier"},
		},
		Key: []string{"region", "order_id"},
		Row: func(r *rand.Rand) fake.Row {
			var customer, amount, ship any
			if r.IntN(20) > 0 {
				customer = fmt.Sprintf("Customer %05d — %s", r.IntN(50_000), []string{"Zoë", "Jürgen", "Łukasz", "Ana", "李"}[r.IntN(5)])
			}
			if r.IntN(10) > 0 {
				amount = keyrange.Decimal(fmt.Sprintf("%d.%04d", r.IntN(100_000), r.IntN(10_000)))
			}
			placed := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(r.Int64N(int64(700*24*time.Hour/100))) * 100).Truncate(time.Microsecond)
			if r.IntN(3) > 0 {
				ship = time.Date(placed.Year(), placed.Month(), placed.Day()+1+r.IntN(9), 0, 0, 0, 0, time.UTC)
			}
			var ref keyrange.UUID
			for i := range ref {
				ref[i] = byte(r.Uint32())
			}
			return fake.Row{regions[r.IntN(len(regions))], 1 + r.Int64N(4000), customer, amount, placed, ship, r.IntN(4) == 0, ref}
		},
	}
}

// featCase is one table of the test.
type featCase struct {
	name   string
	refuse []string // what the refusal must name; nil: Go appends
	dvs    bool     // Spark deletes rows with deletion vectors after Go's writes
}

var featCases = []featCase{
	{name: "databricks", dvs: true},
	{name: "deletionvectors", dvs: true},
	{name: "ntz"},
	{name: "columnmapping"},
	{name: "columnmapping-id"},
	{name: "partitioned"},
	// typeWidening is a reader and writer feature; the reader casts a
	// widened file's columns to the table's types (63c5ab7).
	{name: "typewidening"},
	{name: "check", refuse: []string{"checkConstraints", "amount_not_negative"}},
	{name: "generated", refuse: []string{"generatedColumns", "ship_date"}},
	{name: "identity", refuse: []string{"identityColumns", "order_id"}},
	{name: "clustered", refuse: []string{"clustering"}},
	{name: "variant", refuse: []string{"variantType"}},
}

// featTable is one case's table and what Go did to it.
type featTable struct {
	featCase
	dir, silver string
	w           *testworld.World
	snap        snapshot.Result
	batches     int64
	next        lsn.LSN // the first LSN of the next batch
	dataVers    []int64 // versions of Go's commits that added rows
	created     sparkCreated
}

type sparkProtocol struct {
	Reader         int      `json:"reader"`
	Writer         int      `json:"writer"`
	ReaderFeatures []string `json:"readerFeatures"`
	WriterFeatures []string `json:"writerFeatures"`
}

type sparkCreated struct {
	Accepted   []string          `json:"accepted"`
	Refused    map[string]string `json:"refused"`
	Protocol   sparkProtocol     `json:"protocol"`
	Properties map[string]string `json:"properties"`
	Version    int64             `json:"version"`
	Error      string            `json:"error"`
	Seconds    float64           `json:"seconds"`
}

type readerAgg struct {
	Rows          int64            `json:"rows"`
	ByOperation   map[string]int64 `json:"by_operation"`
	SumOrderID    *int64           `json:"sum_order_id"`
	CountCustomer int64            `json:"count_customer"`
	Error         string           `json:"error"`
}

type sparkRead struct {
	readerAgg
	Protocol   sparkProtocol `json:"protocol"`
	Version    int64         `json:"version"`
	SilverRows int64         `json:"silver_rows"`
	History    []struct {
		Version     int64  `json:"version"`
		TimestampMS int64  `json:"timestamp_ms"`
		Operation   string `json:"operation"`
	} `json:"history"`
	RowIDs *struct {
		Rows            int64      `json:"rows"`
		Distinct        int64      `json:"distinct"`
		NonNull         int64      `json:"non_null"`
		VersionsNonNull int64      `json:"versions_non_null"`
		ByVersion       [][4]int64 `json:"by_version"`
	} `json:"row_ids"`
	NTZ map[string]struct {
		Values int64                 `json:"values"`
		Min    string                `json:"min"`
		Max    string                `json:"max"`
		Probes []string              `json:"probes"`
		Counts map[string][][3]int64 `json:"counts"`
	} `json:"ntz"`
	Seconds float64 `json:"seconds"`
}

// sparkServer is features_spark.py: one Spark session answering one JSON
// command per line.
type sparkServer struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *syncBuffer
}

func startSpark(t *testing.T, ctx context.Context, py, work string) *sparkServer {
	t.Helper()
	cmd := exec.CommandContext(ctx, py, filepath.Join("testdata", "features_spark.py"), work)
	s := &sparkServer{cmd: cmd, stderr: &syncBuffer{}}
	cmd.Stderr = s.stderr
	var err error
	if s.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.out = bufio.NewReaderSize(stdout, 1<<20)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.in.Close() // EOF ends the script's loop
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return s
}

// call sends one command and decodes its answer into v.
func (s *sparkServer) call(t *testing.T, cmd map[string]any, v any) {
	t.Helper()
	b, _ := json.Marshal(cmd)
	start := time.Now()
	if _, err := s.in.Write(append(b, '\n')); err != nil {
		t.Fatalf("spark %s: %v\n%s", cmd["cmd"], err, tail(s.stderr.String(), 40))
	}
	line, err := s.out.ReadBytes('\n')
	if err != nil {
		t.Fatalf("spark %s: no answer (%v)\n%s", cmd["cmd"], err, tail(s.stderr.String(), 60))
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(line, &e) == nil && e.Error != "" {
		t.Fatalf("spark %s: %s\n%s", cmd["cmd"], e.Error, tail(s.stderr.String(), 30))
	}
	if err := json.Unmarshal(line, v); err != nil {
		t.Fatalf("spark %s answered %q: %v", cmd["cmd"], tail(string(line), 5), err)
	}
	t.Logf("spark %s: %s", cmd["cmd"], time.Since(start).Round(time.Millisecond))
}

// TestFeaturesSpark is issue 17's proof with real engines.
func TestFeaturesSpark(t *testing.T) {
	t.Parallel()
	spy := sparkPython(t)
	rpy := maintPython(t)
	ctx := context.Background()
	start := time.Now()
	seed := testworld.Seed(t, *seedFlag)
	root := t.TempDir()

	tables := make([]*featTable, len(featCases))
	var jobs []map[string]any
	for i, c := range featCases {
		r := rand.New(rand.NewPCG(seed, uint64(200+i)))
		ft := &featTable{featCase: c, dir: filepath.Join(root, c.name), silver: filepath.Join(root, c.name+"-silver")}
		ft.w = testworld.New(t, r, ordersShape(), featRows)
		tables[i] = ft
		job := map[string]any{"case": c.name, "path": ft.dir}
		if c.name == "ntz" {
			job["ntz"] = []string{"placed_at"}
		}
		jobs = append(jobs, job)
	}
	schema := deltaSchemaJSON(t, bronze(t, tables[0].w))

	sctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	spark := startSpark(t, sctx, spy, root)
	var created struct {
		Tables  map[string]sparkCreated `json:"tables"`
		Session float64                 `json:"session_seconds"`
	}
	spark.call(t, map[string]any{"cmd": "create", "schema": schema, "tables": jobs}, &created)
	t.Logf("Spark session started in %.1fs", created.Session)
	for _, ft := range tables {
		c, ok := created.Tables[ft.dir]
		if !ok {
			t.Fatalf("spark created nothing for %s", ft.name)
		}
		ft.created = c
		if c.Error != "" {
			t.Fatalf("Spark could not create the %s table: %s", ft.name, c.Error)
		}
		t.Logf("%s: Spark created version %d, protocol %d/%d reader %v writer %v (%.1fs)", ft.name, c.Version,
			c.Protocol.Reader, c.Protocol.Writer, c.Protocol.ReaderFeatures, c.Protocol.WriterFeatures, c.Seconds)
	}
	db := tables[0]
	t.Logf("databricks defaults open-source Delta accepted: %v", db.created.Accepted)
	for k, v := range db.created.Refused {
		t.Logf("databricks default refused: %s: %s", k, v)
	}
	for _, f := range []string{"deletionVectors", "inCommitTimestamp", "rowTracking", "v2Checkpoint", "domainMetadata"} {
		if !slices.Contains(db.created.Protocol.WriterFeatures, f) {
			t.Fatalf("the databricks-like table lacks %s: %+v", f, db.created.Protocol)
		}
	}
	for _, ft := range tables {
		want := map[string]string{"deletionvectors": "deletionVectors", "ntz": "timestampNtz", "columnmapping": "columnMapping",
			"columnmapping-id": "columnMapping", "typewidening": "typeWidening"}[ft.name]
		if want != "" && !slices.Contains(ft.created.Protocol.WriterFeatures, want) {
			t.Fatalf("the %s table lacks %s: %+v", ft.name, want, ft.created.Protocol)
		}
	}

	// Go: the snapshot and two change batches, or the refusal.
	var live []*featTable
	for _, ft := range tables {
		if ft.refuse != nil {
			t.Run("refuse/"+ft.name, func(t *testing.T) { checkRefused(t, ctx, ft) })
			continue
		}
		goWrite(t, ctx, ft, 2)
		live = append(live, ft)
	}
	if t.Failed() {
		return
	}

	// Spark: deletion vectors, appendOnly, a v2 checkpoint.
	for _, ft := range live {
		if ft.dvs {
			sparkDeletes(t, ctx, spark, ft)
		}
	}

	// Go: the rerun finds the snapshot and reads nothing; one more batch.
	for _, ft := range live {
		goRerun(t, ctx, ft)
	}

	// Spark, delta-rs and DuckDB read the tables back.
	var readJobs []map[string]any
	for _, ft := range live {
		j := map[string]any{"path": ft.dir, "silver": ft.silver, "key": ft.w.Shape.Key}
		if ft.name == "ntz" {
			j["ntz"] = []string{"placed_at"}
		}
		readJobs = append(readJobs, j)
	}
	var read struct {
		Tables map[string]sparkRead `json:"tables"`
	}
	spark.call(t, map[string]any{"cmd": "read", "tables": readJobs}, &read)
	readers := runReaders(t, rpy, root, live)
	for _, ft := range live {
		t.Run("read/"+ft.name, func(t *testing.T) {
			checkRead(t, ctx, ft, read.Tables[ft.dir], readers[ft.dir])
		})
	}
	t.Logf("whole test %s", time.Since(start).Round(time.Millisecond))
}

// sparkDeletes has Spark delete rows of ft's table with deletion vectors,
// set appendOnly and write a v2 checkpoint; Go must then read what Spark
// reads.
func sparkDeletes(t *testing.T, ctx context.Context, spark *sparkServer, ft *featTable) {
	t.Helper()
	var mut struct {
		RowsBefore     int64           `json:"rows_before"`
		RowsAfter      int64           `json:"rows_after"`
		KeysChanged    int64           `json:"keys_changed"`
		DeleteVersions []int64         `json:"delete_versions"`
		Version        int64           `json:"version"`
		DVAdds         int             `json:"dv_adds"`
		DVExample      json.RawMessage `json:"dv_example"`
		Log            []string        `json:"log"`
		Sidecars       []string        `json:"sidecars"`
		Protocol       sparkProtocol   `json:"protocol"`
	}
	spark.call(t, map[string]any{"cmd": "mutate", "path": ft.dir, "key": ft.w.Shape.Key}, &mut)
	t.Logf("%s: Spark DELETE %d -> %d rows (versions %v), %d adds with a deletion vector (e.g. %s); now version %d; checkpoint files %v, sidecars %v",
		ft.name, mut.RowsBefore, mut.RowsAfter, mut.DeleteVersions, mut.DVAdds, mut.DVExample, mut.Version, checkpointNames(mut.Log), mut.Sidecars)
	if mut.DVAdds == 0 || mut.RowsAfter >= mut.RowsBefore {
		t.Fatalf("%s: Spark's DELETE wrote no deletion vector: %+v", ft.name, mut)
	}
	v2 := false
	for _, n := range mut.Log {
		v2 = v2 || regexp.MustCompile(`^\d{20}\.checkpoint\.[0-9a-fA-F-]{36}\.(json|parquet)$`).MatchString(n)
	}
	if !v2 {
		t.Fatalf("%s: Spark wrote no v2 (UUID-named) checkpoint: %v", ft.name, mut.Log)
	}
	if !slices.Contains(mut.Protocol.WriterFeatures, "appendOnly") {
		t.Fatalf("%s: delta.appendOnly did not add appendOnly: %+v", ft.name, mut.Protocol)
	}
	tb := openMaint(t, ctx, ft.dir)
	n := countTable(t, ctx, tb, ft.w.CI).all
	tb.Close()
	if n != mut.RowsAfter {
		t.Fatalf("%s: Go reads %d rows of the table with deletion vectors, Spark %d (before the DELETE %d)", ft.name, n, mut.RowsAfter, mut.RowsBefore)
	}
	t.Logf("%s: Go reads %d rows after the DELETE, as Spark does (deletion vectors applied)", ft.name, n)
}

// deltaSchemaJSON is the Delta schemaString (Spark's StructType JSON) of
// an Arrow bronze schema, mapped as sink/delta maps it.
func deltaSchemaJSON(t *testing.T, s *arrow.Schema) map[string]any {
	t.Helper()
	var fields []map[string]any
	for _, f := range s.Fields() {
		var typ string
		switch tt := f.Type.(type) {
		case *arrow.StringType:
			typ = "string"
		case *arrow.Int16Type:
			typ = "short"
		case *arrow.Int32Type:
			typ = "integer"
		case *arrow.Int64Type:
			typ = "long"
		case *arrow.BooleanType:
			typ = "boolean"
		case *arrow.BinaryType:
			typ = "binary"
		case *arrow.Date32Type:
			typ = "date"
		case *arrow.TimestampType:
			typ = "timestamp"
			if tt.TimeZone == "" {
				typ = "timestamp_ntz"
			}
		case *arrow.Decimal128Type:
			typ = fmt.Sprintf("decimal(%d,%d)", tt.Precision, tt.Scale)
		default:
			t.Fatalf("bronze column %s has type %s: no Delta mapping here", f.Name, f.Type)
		}
		fields = append(fields, map[string]any{"name": f.Name, "type": typ, "nullable": f.Nullable, "metadata": map[string]any{}})
	}
	return map[string]any{"type": "struct", "fields": fields}
}

func takeOpts(ft *featTable) snapshot.Options {
	return snapshot.Options{CaptureInstance: ft.w.CI, Partitions: 4, MinPartitionRows: -1}
}

// goWrite bootstraps ft's table and appends batches change batches.
func goWrite(t *testing.T, ctx context.Context, ft *featTable, batches int) {
	t.Helper()
	tb := openMaint(t, ctx, ft.dir)
	defer tb.Close()
	var err error
	if ft.snap, err = snapshot.Take(ctx, ft.w.DB, tb, takeOpts(ft)); err != nil {
		t.Fatalf("%s: Take: %v", ft.name, err)
	}
	ft.dataVers = append(ft.dataVers, ft.snap.Version)
	if ft.next, err = ft.snap.StreamFrom(); err != nil {
		t.Fatal(err)
	}
	for range batches {
		goBatch(t, ctx, ft, tb)
	}
	t.Logf("%s: Go wrote the snapshot (%d rows at %s, version %d) and %d change batches (versions %v)",
		ft.name, ft.snap.Rows, ft.snap.LSN, ft.snap.Version, batches, ft.dataVers[1:])
}

// goBatch makes featChanges changes and appends them as the next batch.
func goBatch(t *testing.T, ctx context.Context, ft *featTable, tb *delta.Table) {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(len(ft.name)), uint64(ft.batches)))
	for range featChanges {
		ft.w.Change(t, r)
	}
	to := ft.w.MaxLSN(t)
	ft.batches++
	v := appendBatch(t, ctx, tb, ft.w, ft.batches, ft.next, to)
	ft.dataVers = append(ft.dataVers, v)
	var err error
	if ft.next, err = to.Next(); err != nil {
		t.Fatal(err)
	}
}

// checkRefused checks that Go refuses ft's table naming what it must, and
// that it neither reads the source nor writes anything.
func checkRefused(t *testing.T, ctx context.Context, ft *featTable) {
	w := ft.w
	before := treeOf(t, ft.dir)
	tb := openMaint(t, ctx, ft.dir)
	defer tb.Close()
	w.DB.ResetStats()
	_, err := snapshot.Take(ctx, w.DB, tb, takeOpts(ft))
	var upe *delta.UnsupportedProtocolError
	if !errors.As(err, &upe) {
		meta, _ := os.ReadFile(filepath.Join(ft.dir, "_delta_log", fmt.Sprintf("%020d.json", ft.created.Version)))
		t.Fatalf("Take into the %s table: %v (%T); want an *delta.UnsupportedProtocolError naming %v.\nSpark's commit %d:\n%s\nthe folder changed:\n%s",
			ft.name, err, err, ft.refuse, ft.created.Version, meta, diffTrees(before, treeOf(t, ft.dir)))
	}
	for _, want := range ft.refuse {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not name %q: %v", want, err)
		}
	}
	if !strings.Contains(upe.Feature, ft.refuse[0]) {
		t.Errorf("the error's Feature is %q; want it to name %s", upe.Feature, ft.refuse[0])
	}
	t.Logf("%s: Take refused: %v", ft.name, err)

	// A change batch is refused too.
	to := w.MaxLSN(t)
	rr, err := snapshot.Changes(ctx, w.DB, w.CI, to, to, 1)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tb.AppendChanges(ctx, w.CI, 1, rr)
	rr.Release()
	if !errors.As(err, &upe) || !strings.Contains(err.Error(), ft.refuse[0]) {
		t.Errorf("AppendChanges into the %s table: %v; want an *UnsupportedProtocolError naming %s", ft.name, err, ft.refuse[0])
	}
	st, _ := w.DB.Stats("dbo", w.Shape.Name)
	if st.RangeReads != 0 || st.Seeks != 0 || st.RowsReturned != 0 {
		t.Errorf("the refused Take read the source: %+v", st)
	}
	if d := diffTrees(before, treeOf(t, ft.dir)); d != "" {
		t.Errorf("the refused calls changed the table's folder:\n%s", d)
	}
	if v, err := tb.Version(ctx); err == nil && v != ft.created.Version {
		t.Errorf("the %s table is at version %d after the refusal; Spark left it at %d", ft.name, v, ft.created.Version)
	}
}

func checkpointNames(log []string) []string {
	var out []string
	for _, n := range log {
		if strings.Contains(n, ".checkpoint") {
			out = append(out, n)
		}
	}
	return out
}

// goRerun reruns the bootstrap on a fresh Table (it must find the
// snapshot and read nothing), appends one more batch and compares Go's
// latest image with the source.
func goRerun(t *testing.T, ctx context.Context, ft *featTable) {
	t.Helper()
	tb := openMaint(t, ctx, ft.dir)
	defer tb.Close()
	ft.w.DB.ResetStats()
	res, err := snapshot.Take(ctx, ft.w.DB, tb, takeOpts(ft))
	if err != nil {
		t.Fatalf("%s: rerun Take: %v", ft.name, err)
	}
	st, _ := ft.w.DB.Stats("dbo", ft.w.Shape.Name)
	if !res.Existing || res.LSN != ft.snap.LSN || res.Rows != 0 {
		t.Fatalf("%s: rerun Take returned %+v; want the existing snapshot at %s", ft.name, res, ft.snap.LSN)
	}
	if st.RangeReads != 0 || st.Seeks != 0 || st.RowsReturned != 0 {
		t.Fatalf("%s: rerun Take read the source: %+v", ft.name, st)
	}
	goBatch(t, ctx, ft, tb)
	want, err := snapshot.SourceImage(ctx, ft.w.DB, ft.w.Instance(t))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ntzImage(t, ctx, ft.w, tb)
	if err != nil {
		t.Fatal(err)
	}
	if d := want.Diff(got, 5); len(d) > 0 {
		t.Fatalf("%s: Go's latest image differs from the source:\n%s", ft.name, strings.Join(d, "\n"))
	}
	t.Logf("%s: rerun found the snapshot at %s (nothing read); batch %d committed version %d; Go's latest image equals the source (%d keys)",
		ft.name, res.LSN, ft.batches, ft.dataVers[len(ft.dataVers)-1], want.Len())
}

// ntzImage is tableImage with timestamp_ntz columns, which Go reads back
// as zone-less timestamps, labelled UTC again as the bronze schema has
// them (the wall clock is the value; the label is all that differs).
func ntzImage(t *testing.T, ctx context.Context, w *testworld.World, tb *delta.Table) (*snapshot.Image, error) {
	return relabelledImage(t, ctx, w, tb, relabelNTZ)
}

// relabelNTZ returns rec with each zone-less timestamp column labelled
// UTC (the same values); the caller releases it.
func relabelNTZ(rec arrow.RecordBatch) arrow.RecordBatch {
	fields := rec.Schema().Fields()
	cols := make([]arrow.Array, len(fields))
	for i, f := range fields {
		c := rec.Column(i)
		if ts, ok := f.Type.(*arrow.TimestampType); ok && ts.TimeZone == "" {
			utc := &arrow.TimestampType{Unit: ts.Unit, TimeZone: "UTC"}
			d := c.Data()
			nd := array.NewData(utc, d.Len(), d.Buffers(), nil, d.NullN(), d.Offset())
			c = array.MakeFromData(nd)
			nd.Release()
			fields[i].Type = utc
		} else {
			c.Retain()
		}
		cols[i] = c
	}
	out := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows())
	for _, c := range cols {
		c.Release()
	}
	return out
}

// readersResult is what features_readers.py reports for one table.
type readersResult struct {
	DeltaRS         readerAgg     `json:"deltars"`
	DeltaRSProtocol sparkProtocol `json:"deltars_protocol"`
	DeltaRSVersion  *int64        `json:"deltars_version"`
	ToPyarrowRows   *int64        `json:"deltars_to_pyarrow_rows"`
	ToPyarrowError  string        `json:"deltars_to_pyarrow_error"`
	DuckDB          readerAgg     `json:"duckdb"`
	Seconds         float64       `json:"seconds"`
}

func runReaders(t *testing.T, py, root string, tables []*featTable) map[string]readersResult {
	t.Helper()
	var paths []string
	for _, ft := range tables {
		paths = append(paths, ft.dir)
	}
	job := filepath.Join(root, "readers.json")
	b, _ := json.Marshal(map[string]any{"paths": paths})
	if err := os.WriteFile(job, b, 0o666); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, py, filepath.Join("testdata", "features_readers.py"), job)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("features_readers.py: %v\n%s", err, tail(stderr.String(), 30))
	}
	var res map[string]readersResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("features_readers.py printed %q: %v", tail(string(out), 5), err)
	}
	t.Logf("delta-rs and DuckDB read %d tables in %s", len(paths), time.Since(start).Round(time.Millisecond))
	return res
}

// goAgg is what Go reads of the table: the aggregates the readers report.
func goAgg(t *testing.T, ctx context.Context, dir string) readerAgg {
	t.Helper()
	tb := openMaint(t, ctx, dir)
	defer tb.Close()
	rr, err := tb.ReadAll(ctx)
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	defer rr.Release()
	a := readerAgg{ByOperation: map[string]int64{}}
	var sum int64
	for rr.Next() {
		rec := rr.RecordBatch()
		col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		op := col(sink.ColOperation).(*array.Int32)
		id := col("order_id").(*array.Int64)
		cust := col("customer")
		a.Rows += rec.NumRows()
		for i := range int(rec.NumRows()) {
			a.ByOperation[op.ValueStr(i)]++
			if id.IsValid(i) {
				sum += id.Value(i)
			}
			if cust.IsValid(i) {
				a.CountCustomer++
			}
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	a.SumOrderID = &sum
	return a
}

func sameAgg(a, b readerAgg) bool {
	return a.Rows == b.Rows && a.CountCustomer == b.CountCustomer && a.SumOrderID != nil && b.SumOrderID != nil &&
		*a.SumOrderID == *b.SumOrderID && fmt.Sprint(a.ByOperation) == fmt.Sprint(b.ByOperation)
}

func (a readerAgg) String() string {
	if a.Error != "" {
		return "error: " + a.Error
	}
	s := "nil"
	if a.SumOrderID != nil {
		s = strconv.FormatInt(*a.SumOrderID, 10)
	}
	return fmt.Sprintf("%d rows %v, sum(order_id) %s, count(customer) %d", a.Rows, a.ByOperation, s, a.CountCustomer)
}

// logAction is one action of a commit file.
type logAction struct {
	CommitInfo map[string]any `json:"commitInfo"`
	Add        *struct {
		Path                    string `json:"path"`
		Stats                   string `json:"stats"`
		BaseRowID               *int64 `json:"baseRowId"`
		DefaultRowCommitVersion *int64 `json:"defaultRowCommitVersion"`
	} `json:"add"`
	DomainMetadata *struct {
		Domain        string `json:"domain"`
		Configuration string `json:"configuration"`
	} `json:"domainMetadata"`
}

func readCommit(t *testing.T, dir string, v int64) []logAction {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "_delta_log", fmt.Sprintf("%020d.json", v)))
	if err != nil {
		t.Fatal(err)
	}
	var out []logAction
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var a logAction
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("commit %d: %v", v, err)
		}
		out = append(out, a)
	}
	return out
}

// checkRead checks what Spark, delta-rs and DuckDB read of ft's table.
func checkRead(t *testing.T, ctx context.Context, ft *featTable, sr sparkRead, rd readersResult) {
	if sr.Error != "" {
		t.Fatalf("Spark could not read the %s table Go wrote into: %s", ft.name, sr.Error)
	}
	g := goAgg(t, ctx, ft.dir)
	t.Logf("Go reads      %s", g)
	t.Logf("Spark reads   %s (version %d, %.1fs)", sr.readerAgg, sr.Version, sr.Seconds)
	t.Logf("delta-rs reads %s (version %v, protocol %+v)", rd.DeltaRS, ptrStr(rd.DeltaRSVersion), rd.DeltaRSProtocol)
	t.Logf("DuckDB reads  %s", rd.DuckDB)
	if rd.ToPyarrowError != "" {
		t.Logf("delta-rs DeltaTable.to_pyarrow_table: %s", rd.ToPyarrowError)
	} else {
		t.Logf("delta-rs DeltaTable.to_pyarrow_table: %s rows", ptrStr(rd.ToPyarrowRows))
	}
	if !sameAgg(g, sr.readerAgg) {
		t.Errorf("Spark reads %s; Go reads %s", sr.readerAgg, g)
	}
	for name, a := range map[string]readerAgg{"delta-rs": rd.DeltaRS, "DuckDB": rd.DuckDB} {
		if name == "delta-rs" && a.Error != "" && sparkFeatureRefused(a.Error, ft.created.Protocol) {
			t.Logf("delta-rs refuses a reader feature Spark gave the table before Go wrote to it (a delta-rs limitation, not Go's writes): %s", a.Error)
			continue
		}
		if !sameAgg(g, a) {
			t.Errorf("%s reads %s; Go and Spark read %s", name, a, g)
		}
	}

	// Spark's latest-image MERGE equals the source.
	want, err := snapshot.SourceImage(ctx, ft.w.DB, ft.w.Instance(t))
	if err != nil {
		t.Fatal(err)
	}
	ci := ft.w.Instance(t)
	key, _ := ci.KeyColumns()
	got := snapshot.NewImage(ci.Columns, key)
	stb := openMaint(t, ctx, ft.silver)
	rr, err := stb.ReadAll(ctx)
	if err != nil {
		t.Fatalf("reading Spark's silver table: %v", err)
	}
	err = snapshot.ReadImage(ctx, got, rr, false)
	rr.Release()
	stb.Close()
	if err != nil {
		t.Fatalf("Spark's silver table: %v", err)
	}
	if d := want.Diff(got, 5); len(d) > 0 {
		t.Errorf("Spark's latest-image MERGE differs from the source:\n%s", strings.Join(d, "\n"))
	} else {
		t.Logf("Spark's latest-image MERGE of the bronze table equals the source: %d rows", sr.SilverRows)
	}

	// History: Go's commits, with increasing in-commit timestamps.
	hist := map[int64]int64{}
	for _, h := range sr.History {
		hist[h.Version] = h.TimestampMS
	}
	for _, v := range ft.dataVers {
		if _, ok := hist[v]; !ok {
			t.Errorf("DESCRIBE HISTORY lacks Go's commit %d: %+v", v, sr.History)
		}
	}
	if ft.created.Properties["delta.enableInCommitTimestamps"] == "true" {
		var line []string
		for i, h := range sr.History {
			line = append(line, fmt.Sprintf("%d %s %d", h.Version, h.Operation, h.TimestampMS))
			if i > 0 && h.TimestampMS <= sr.History[i-1].TimestampMS {
				t.Errorf("DESCRIBE HISTORY: version %d's timestamp %d is not after version %d's %d", h.Version, h.TimestampMS, sr.History[i-1].Version, sr.History[i-1].TimestampMS)
			}
		}
		for _, v := range ft.dataVers {
			acts := readCommit(t, ft.dir, v)
			if acts[0].CommitInfo == nil {
				t.Errorf("Go's commit %d does not start with commitInfo", v)
				continue
			}
			ict, _ := acts[0].CommitInfo["inCommitTimestamp"].(float64)
			if int64(ict) != hist[v] {
				t.Errorf("Go's commit %d has inCommitTimestamp %v; Spark's history says %d", v, acts[0].CommitInfo["inCommitTimestamp"], hist[v])
			}
		}
		t.Logf("DESCRIBE HISTORY (version operation timestamp ms), Go's commits %v:\n%s", ft.dataVers, strings.Join(line, "\n"))
	}

	// Row tracking: unique row ids, each inside the ids Go's commit gave
	// its files, and the versions Go wrote.
	if ft.created.Properties["delta.enableRowTracking"] == "true" {
		ri := sr.RowIDs
		if ri == nil {
			t.Fatalf("Spark reported no row ids")
		}
		if ri.Distinct != ri.Rows || ri.NonNull != ri.Rows || ri.VersionsNonNull != ri.Rows || ri.Rows != sr.Rows {
			t.Errorf("row ids: %d rows, %d distinct ids, %d non-null ids, %d non-null commit versions; the table has %d rows", ri.Rows, ri.Distinct, ri.NonNull, ri.VersionsNonNull, sr.Rows)
		}
		for _, bv := range ri.ByVersion {
			v, n, lo, hi := bv[0], bv[1], bv[2], bv[3]
			if !slices.Contains(ft.dataVers, v) {
				t.Errorf("%d rows have row_commit_version %d, not a version of Go's commits %v", n, v, ft.dataVers)
				continue
			}
			var ranges []string
			for _, a := range readCommit(t, ft.dir, v) {
				if a.Add == nil {
					continue
				}
				var st struct {
					NumRecords int64 `json:"numRecords"`
				}
				_ = json.Unmarshal([]byte(a.Add.Stats), &st)
				if a.Add.BaseRowID == nil || a.Add.DefaultRowCommitVersion == nil || *a.Add.DefaultRowCommitVersion != v {
					t.Errorf("Go's add %s in commit %d has baseRowId %v, defaultRowCommitVersion %v", a.Add.Path, v, ptrStr(a.Add.BaseRowID), ptrStr(a.Add.DefaultRowCommitVersion))
					continue
				}
				b := *a.Add.BaseRowID
				ranges = append(ranges, fmt.Sprintf("[%d,%d)", b, b+st.NumRecords))
			}
			lo0, hi0 := rangeOf(ranges)
			if lo < lo0 || hi >= hi0 {
				t.Errorf("version %d: row ids %d..%d outside Go's ranges %v", v, lo, hi, ranges)
			}
			t.Logf("row ids of version %d: %d rows, ids %d..%d; Go's adds %v", v, n, lo, hi, ranges)
		}
	}

	// timestamp_ntz: the same counts with data skipping off and on, and in
	// another session time zone (stats that misstate the column, or carry
	// a zone, would make them differ).
	for col, nz := range sr.NTZ {
		var ref string
		for setting, c := range nz.Counts {
			s := fmt.Sprint(c)
			if ref == "" {
				ref = s
			} else if s != ref {
				t.Errorf("%s: counts at %v differ with %s: %s, elsewhere %s", col, nz.Probes, setting, s, ref)
			}
			for i, x := range c {
				if x[0] < 1 || x[1]+x[2] != int64(nz.Values) {
					t.Errorf("%s %s: probe %s counts %v of %d values", col, setting, nz.Probes[i], x, nz.Values)
				}
			}
		}
		t.Logf("timestamp_ntz %s: %d values %s..%s; counts (=, <=, >) at %v: %s in all of %d settings", col, nz.Values, nz.Min, nz.Max, nz.Probes, ref, len(nz.Counts))
	}
}

// sparkFeatureRefused reports whether a reader's error refuses a reader
// feature the table had when Spark created it.
func sparkFeatureRefused(msg string, p sparkProtocol) bool {
	if !strings.Contains(msg, "Unsupported table features") && !strings.Contains(msg, "not yet supported") {
		return false
	}
	for _, f := range p.ReaderFeatures {
		if strings.Contains(strings.ToLower(msg), strings.ToLower(f)) {
			return true
		}
	}
	return false
}

func rangeOf(ranges []string) (lo, hi int64) {
	lo, hi = 1<<62, -1
	for _, r := range ranges {
		var a, b int64
		fmt.Sscanf(r, "[%d,%d)", &a, &b)
		lo, hi = min(lo, a), max(hi, b)
	}
	return lo, hi
}

func ptrStr[T any](p *T) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}
