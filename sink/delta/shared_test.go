package delta

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/internal/deltalog"
	"github.com/cdcsnap/cdcsnap/internal/testenv"
)

// sharedTables are the delta-rs test tables in ../shared/testdata/delta
// with the versions and live file counts delta-rs 1.6.6 reports, or the
// feature the reader must refuse.
var sharedTables = []struct {
	name    string
	version int64
	files   int
	refuse  string // substring of UnsupportedProtocolError.Feature
}{
	{name: "checkpoint-v2-table", version: 9, files: 8},
	{name: "checkpoint_with_partitions", version: 2, files: 2},
	{name: "checkpoints_vacuumed", version: 12, files: 12},
	{name: "delta-0.8.0", version: 1, files: 2},
	{name: "delta-2.2.0-partitioned-types", version: 0, files: 3},
	{name: "delta-checkpoint-stats-optional", version: 2, files: 2},
	{name: "latest_not_checkpointed", version: 3, files: 1},
	{name: "python-0.25.5-checkpoint", version: 1, files: 2},
	{name: "simple_table", version: 4, files: 5},
	{name: "simple_table_features", refuse: "blahabl"},
	{name: "simple_table_with_checkpoint", version: 10, files: 11},
	{name: "table-with-dv-small", version: 1, files: 1},
	{name: "table_failed_last_checkpoint_update", version: 3, files: 4},
	{name: "table_with_column_mapping", version: 0, files: 2},
	{name: "table_with_edge_timestamps", version: 0, files: 2},
	{name: "with_checkpoint_no_last_checkpoint", version: 3, files: 1},
}

func TestSharedTables(t *testing.T) {
	ctx := context.Background()
	for _, tc := range sharedTables {
		t.Run(tc.name, func(t *testing.T) {
			tb := openLocal(t, sharedTable(t, tc.name), Options{})
			v, err := tb.Version(ctx)
			if tc.refuse != "" {
				var ue *deltalog.UnsupportedProtocolError
				if !errors.As(err, &ue) || !strings.Contains(ue.Feature, tc.refuse) {
					t.Fatalf("Version = %d, %v; want an UnsupportedProtocolError naming %s", v, err, tc.refuse)
				}
				if _, err := tb.files(ctx); !errors.As(err, &ue) {
					t.Fatalf("Files: %v, want UnsupportedProtocolError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			files, err := tb.files(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if v != tc.version || len(files) != tc.files {
				t.Fatalf("version %d with %d files, want %d with %d", v, len(files), tc.version, tc.files)
			}
			if _, err := tb.FindSnapshot(ctx, "x"); err == nil {
				t.Fatal("found a snapshot in a foreign table")
			}
		})
	}
}

// TestSharedTablesReadRows reads the rows of the unpartitioned shared
// tables back (Spark- and delta-rs-written Parquet). table_with_edge_timestamps
// is left out: its INT96 timestamps overflow the nanoseconds arrow-go reads
// INT96 into.
func TestSharedTablesReadRows(t *testing.T) {
	for _, name := range []string{"simple_table", "delta-0.8.0", "simple_table_with_checkpoint", "python-0.25.5-checkpoint"} {
		t.Run(name, func(t *testing.T) {
			tb := openLocal(t, sharedTable(t, name), Options{})
			tbl := readAll(t, tb)
			defer tbl.Release()
			if tbl.NumRows() == 0 {
				t.Fatal("no rows")
			}
		})
	}
}

func pythonOrSkip(t *testing.T) string {
	t.Helper()
	return testenv.Python(t, "delta-rs and DuckDB read sink/delta's tables")
}

func runPython(t *testing.T, py string, out any, args ...string) {
	t.Helper()
	cmd := exec.Command(py, append([]string{filepath.Join("interop", "interop.py")}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("python %v: %v\n%s", args, err, stderr.String())
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("python %v printed %q: %v", args, b, err)
	}
}

type oracleTable struct {
	Error     string `json:"error"`
	NumRows   *int64 `json:"num_rows"`
	RowsError string `json:"rows_error"`
	IntColumn *struct {
		Name   string  `json:"name"`
		Values []int64 `json:"values"`
	} `json:"int_column"`
	Version          int64           `json:"version"`
	Files            []string        `json:"files"`
	Schema           json.RawMessage `json:"schema"`
	PartitionColumns []string        `json:"partitionColumns"`
	Protocol         struct {
		MinReaderVersion int      `json:"minReaderVersion"`
		MinWriterVersion int      `json:"minWriterVersion"`
		ReaderFeatures   []string `json:"readerFeatures"`
	} `json:"protocol"`
}

// TestOracleDeltaRS compares the Go reader with delta-rs on every shared
// table: version, live files, schema, protocol.
func TestOracleDeltaRS(t *testing.T) {
	py := pythonOrSkip(t)
	ctx := context.Background()
	var paths []string
	for _, tc := range sharedTables {
		paths = append(paths, sharedTable(t, tc.name))
	}
	var want map[string]oracleTable
	runPython(t, py, &want, append([]string{"oracle"}, paths...)...)
	for _, tc := range sharedTables {
		t.Run(tc.name, func(t *testing.T) {
			w, ok := want[tc.name]
			if !ok {
				t.Fatalf("delta-rs said nothing about %s", tc.name)
			}
			tb := openLocal(t, sharedTable(t, tc.name), Options{})
			v, err := tb.Version(ctx)
			if tc.refuse != "" {
				var ue *deltalog.UnsupportedProtocolError
				if !errors.As(err, &ue) {
					t.Fatalf("Go read version %d (%v) of a table it must refuse; delta-rs: %+v", v, err, w)
				}
				t.Logf("Go refuses (%v); delta-rs: version %d, reader features %v, error %q", err, w.Version, w.Protocol.ReaderFeatures, w.Error)
				return
			}
			if w.Error != "" {
				t.Fatalf("delta-rs failed: %s", w.Error)
			}
			if err != nil {
				t.Fatal(err)
			}
			if v != w.Version {
				t.Errorf("version %d, delta-rs %d", v, w.Version)
			}
			files, _ := tb.files(ctx)
			var got []string
			for _, f := range files {
				p, err := url.PathUnescape(f.Path)
				if err != nil {
					p = f.Path
				}
				got = append(got, p)
			}
			sort.Strings(got)
			if strings.Join(got, "\n") != strings.Join(w.Files, "\n") {
				t.Errorf("files:\n%s\ndelta-rs:\n%s", strings.Join(got, "\n"), strings.Join(w.Files, "\n"))
			}
			if readsRows[tc.name] {
				compareRows(t, tb, w)
			}
			p, _ := tb.protocol(ctx)
			if p.MinReaderVersion != w.Protocol.MinReaderVersion || p.MinWriterVersion != w.Protocol.MinWriterVersion {
				t.Errorf("protocol %+v, delta-rs %+v", p, w.Protocol)
			}
			sc, _ := tb.schema(ctx)
			var ws struct {
				Fields []struct {
					Name     string          `json:"name"`
					Type     json.RawMessage `json:"type"`
					Nullable bool            `json:"nullable"`
				} `json:"fields"`
			}
			if err := json.Unmarshal(w.Schema, &ws); err != nil {
				t.Fatal(err)
			}
			if len(ws.Fields) != len(sc.Fields) {
				t.Fatalf("schema has %d fields, delta-rs %d", len(sc.Fields), len(ws.Fields))
			}
			for i, f := range sc.Fields {
				wf := ws.Fields[i]
				var wt any
				var gt any
				_ = json.Unmarshal(wf.Type, &wt)
				_ = json.Unmarshal(f.Type, &gt)
				wj, _ := json.Marshal(wt)
				gj, _ := json.Marshal(gt)
				if f.Name != wf.Name || string(wj) != string(gj) || f.Nullable != wf.Nullable {
					t.Errorf("field %d: %s %s %v, delta-rs %s %s %v", i, f.Name, gj, f.Nullable, wf.Name, wj, wf.Nullable)
				}
			}
		})
	}
}

// readsRows are the shared tables whose rows the Go reader reads (the
// others hold struct columns or INT96 timestamps past arrow-go's range,
// or ship without their data files).
var readsRows = map[string]bool{
	"simple_table": true, "delta-0.8.0": true, "simple_table_with_checkpoint": true,
	"python-0.25.5-checkpoint": true, "table-with-dv-small": true,
	"table_failed_last_checkpoint_update": true, "checkpoint-v2-table": true,
	"delta-2.2.0-partitioned-types": true, "table_with_column_mapping": true,
}

// compareRows checks that Go reads the rows delta-rs reads: their count
// and the values of the first integer column.
func compareRows(t *testing.T, tb *Table, w oracleTable) {
	t.Helper()
	if w.NumRows == nil {
		t.Fatalf("delta-rs read no rows: %s", w.RowsError)
	}
	tbl := readAll(t, tb)
	defer tbl.Release()
	if tbl.NumRows() != *w.NumRows {
		t.Fatalf("Go reads %d rows, delta-rs %d", tbl.NumRows(), *w.NumRows)
	}
	if w.IntColumn == nil {
		return
	}
	idx := tbl.Schema().FieldIndices(w.IntColumn.Name)
	if len(idx) != 1 {
		t.Fatalf("no column %s", w.IntColumn.Name)
	}
	var got []int64
	for _, c := range tbl.Column(idx[0]).Data().Chunks() {
		for i := range c.Len() {
			if c.IsNull(i) {
				continue
			}
			v, err := strconv.ParseInt(c.ValueStr(i), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, v)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, w.IntColumn.Values) {
		t.Fatalf("column %s: Go reads %v, delta-rs %v", w.IntColumn.Name, got, w.IntColumn.Values)
	}
}
