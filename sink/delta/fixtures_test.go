package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
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

// fixtureTables are the Delta tables of testdata/delta (written by Spark
// 4.0.1 + delta-spark 4.0.0 and delta-rs 1.6.6; testdata/delta/README.md
// says which shape each one holds) with the versions and live file counts
// delta-rs reports for them and the rows it reads, or the feature the
// reader must refuse.
var fixtureTables = []fixture{
	{name: "deltars_checkpoint", version: 2, files: 3, rows: 6},
	{name: "deltars_json_only", version: 4, files: 2, rows: 5},
	{name: "deltars_log_cleaned", version: 6, files: 4, rows: 8},
	{name: "spark_checkpoint_multipart", version: 5, files: 5, rows: 10},
	{name: "spark_checkpoint_then_commits", version: 6, files: 4, rows: 8},
	{name: "spark_checkpoint_v2_json", version: 4, files: 2, rows: 4},
	{name: "spark_checkpoint_v2_parquet", version: 4, files: 2, rows: 4},
	{name: "spark_checkpoint_without_stats", version: 2, files: 2, rows: 4},
	{name: "spark_column_mapping_id", version: 3, files: 2, rows: 4},
	{name: "spark_column_mapping_name", version: 3, files: 2, rows: 4},
	{name: "spark_deletion_vectors", version: 2, files: 1, rows: 6},
	{name: "spark_edge_timestamps", version: 0, files: 1, rows: 3},
	{name: "spark_json_only", version: 4, files: 2, rows: 5},
	{name: "spark_log_cleaned", version: 7, files: 4, rows: 8},
	{name: "spark_no_last_checkpoint", version: 3, files: 3, rows: 6},
	{name: "spark_partition_types", version: 0, files: 3, rows: 3},
	{name: "spark_partitioned_checkpoint", version: 2, files: 2, rows: 2},
	{name: "spark_stale_last_checkpoint", version: 5, files: 2, rows: 4},
	{name: "unknown_reader_feature", refuse: "cdcsnapFixtureUnknownFeature"},
}

func TestFixtureTables(t *testing.T) {
	ctx := context.Background()
	for _, tc := range fixtureTables {
		t.Run(tc.name, func(t *testing.T) {
			tb := openLocal(t, fixtureTable(t, tc.name), Options{})
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
			tc.check(t, tb, "")
			if _, err := tb.FindSnapshot(ctx, "x"); err == nil {
				t.Fatal("found a snapshot in a foreign table")
			}
		})
	}
}

type fixture struct {
	name    string
	version int64
	files   int
	rows    int64
	refuse  string // substring of UnsupportedProtocolError.Feature
}

// check checks that tb reads as delta-rs reads the fixture: its version,
// live files and rows; from says what tb was read from, for the message.
func (tc fixture) check(t *testing.T, tb *Table, from string) {
	t.Helper()
	ctx := context.Background()
	v, err := tb.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	files, err := tb.files(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v != tc.version || len(files) != tc.files {
		t.Fatalf("%sversion %d with %d files, want %d with %d", from, v, len(files), tc.version, tc.files)
	}
	tbl := readAll(t, tb)
	defer tbl.Release()
	if tbl.NumRows() != tc.rows {
		t.Fatalf("%s%d rows, want %d", from, tbl.NumRows(), tc.rows)
	}
}

// TestFixtureCheckpointsAlone: every fixture with a checkpoint reads the same
// from its newest checkpoint alone, with the commits up to it deleted (as
// log cleanup may leave it), so the checkpoint itself is what the reader
// read: classic, multi-part, v2 with sidecars, without stats, partitioned.
func TestFixtureCheckpointsAlone(t *testing.T) {
	checkpointed := 0
	for _, tc := range fixtureTables {
		if tc.refuse != "" {
			continue
		}
		src := fixtureTable(t, tc.name)
		newest := int64(-1)
		es, err := os.ReadDir(filepath.Join(src, "_delta_log"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if v, _, ok := strings.Cut(e.Name(), ".checkpoint."); ok {
				if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > newest {
					newest = n
				}
			}
		}
		if newest < 0 {
			continue
		}
		checkpointed++
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				rel, _ := filepath.Rel(src, p)
				if v, ext, ok := strings.Cut(filepath.Base(rel), "."); ok && filepath.Dir(rel) == "_delta_log" && (ext == "json" || ext == "crc") {
					if n, err := strconv.ParseInt(v, 10, 64); err == nil && n <= newest {
						return nil
					}
				}
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(rel)), 0o777); err != nil {
					return err
				}
				return os.WriteFile(filepath.Join(dir, rel), b, 0o666)
			})
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, openLocal(t, dir, Options{}), fmt.Sprintf("from the checkpoint at %d alone: ", newest))
		})
	}
	if checkpointed < 10 {
		t.Fatalf("%d fixtures with a checkpoint, want at least 10", checkpointed)
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

// TestOracleDeltaRS compares the Go reader with delta-rs on every fixture
// table: version, live files, schema, protocol.
func TestOracleDeltaRS(t *testing.T) {
	py := pythonOrSkip(t)
	ctx := context.Background()
	var paths []string
	for _, tc := range fixtureTables {
		paths = append(paths, fixtureTable(t, tc.name))
	}
	var want map[string]oracleTable
	runPython(t, py, &want, append([]string{"oracle"}, paths...)...)
	for _, tc := range fixtureTables {
		t.Run(tc.name, func(t *testing.T) {
			w, ok := want[tc.name]
			if !ok {
				t.Fatalf("delta-rs said nothing about %s", tc.name)
			}
			tb := openLocal(t, fixtureTable(t, tc.name), Options{})
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
			var got []string // as the log holds them: URL-encoded, as delta-rs gives them
			for _, f := range files {
				got = append(got, f.Path)
			}
			sort.Strings(got)
			if strings.Join(got, "\n") != strings.Join(w.Files, "\n") {
				t.Errorf("files:\n%s\ndelta-rs:\n%s", strings.Join(got, "\n"), strings.Join(w.Files, "\n"))
			}
			compareRows(t, tb, w)
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
