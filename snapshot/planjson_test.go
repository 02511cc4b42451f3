package snapshot

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

var update = flag.Bool("update", false, "rewrite the plans' golden JSON under testdata/")

// planInstance is a capture instance with every field a plan carries.
func planInstance(t *testing.T) source.CaptureInstance {
	t.Helper()
	start, err := lsn.Parse("0x0000002A00000F380001")
	if err != nil {
		t.Fatal(err)
	}
	ix := source.Index{Name: "PK_orders", Columns: []string{"id"}, Unique: true, Clustered: true}
	return source.CaptureInstance{
		Name: "dbo_orders", SourceSchema: "dbo", SourceTable: "orders", StartLSN: start,
		Columns: []source.Column{{Name: "id", Type: "bigint"}, {Name: "region", Type: "varchar", Length: 10, Nullable: true, Collation: "Latin1_General_CI_AS", CodePage: 1252}},
		Key:     []string{"id"}, KeyIndex: &ix, Indexes: []source.Index{ix},
	}
}

func mustParseLSN(t *testing.T, s string) lsn.LSN {
	t.Helper()
	l, err := lsn.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// goldenPlans are a whole and a chunked snapshot's plan with every field
// set, as a process writes them for another (Prepare, fan-out workers)
// and as sinks keep them in partial and chunked snapshot records.
func goldenPlans(t *testing.T) map[string]any {
	ranges := []keyrange.Range{{Index: 0, Upper: keyrange.Tuple{int64(500)}}, {Index: 1, Lower: keyrange.Tuple{int64(500)}}}
	commitTS := time.Date(2026, 1, 2, 3, 4, 5, 678900000, time.UTC)
	return map[string]any{
		"plan.json": &Plan{
			PlanHeader: PlanHeader{
				ID: "5f0c2a9e-1b7d-4c11-9a3e-2d8f6b7c9e01", CaptureInstance: "dbo_Orders", Instance: planInstance(t),
				LSN: mustParseLSN(t, "0x0000002A00000F380010"), MaxLSN: mustParseLSN(t, "0x0000002A00000F38000F"), CommitTS: commitTS,
			},
			SplitColumn: "id", Strategy: "uniform", Reason: "a reason", Warnings: []string{"a warning"}, Ranges: ranges,
			EstimatedRows: 1000, Replaces: mustParseLSN(t, "0x0000002A00000F380002"),
			ReadOptions: ReadOptions{Isolation: source.Snapshot, BatchRows: 4096, ReadAhead: 3},
			Recorded:    true, Expires: commitTS.Add(6 * 24 * time.Hour),
		},
		"backfill-plan.json": &BackfillPlan{
			PlanHeader: PlanHeader{
				ID: "9a1b2c3d-4e5f-4a6b-8c7d-0e1f2a3b4c5d", CaptureInstance: "dbo_Orders", Instance: planInstance(t),
				LSN: mustParseLSN(t, "0x0000002A00000F380010"), MaxLSN: mustParseLSN(t, "0x0000002A00000F38000F"), CommitTS: commitTS,
			},
			Strategy: "keyset", Reason: "a reason", Warnings: []string{"a warning"}, Ranges: ranges,
			ChunkRows: 500, EstimatedRows: 1000, WaveChunks: 2,
			ReadOptions: ReadOptions{Isolation: source.Snapshot, BatchRows: 4096, ReadAhead: 3},
		},
	}
}

// TestPlanJSONGolden: a plan's JSON is what processes exchange and sinks
// persist, so it must not change shape. The golden files were written
// by the plan types as they were before their shared fields were
// factored out; each must decode to the same plan, and the plan must
// encode back to the same bytes (a sink compares a re-recorded plan's
// bytes with the recorded ones).
func TestPlanJSONGolden(t *testing.T) {
	for file, want := range goldenPlans(t) {
		path := filepath.Join("testdata", file)
		got, err := json.MarshalIndent(want, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		golden, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, golden) {
			t.Errorf("%s: the plan encodes otherwise than the golden file:\n%s", file, got)
		}
		decoded := reflect.New(reflect.TypeOf(want).Elem()).Interface()
		if err := json.Unmarshal(golden, decoded); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if !reflect.DeepEqual(decoded, want) {
			t.Errorf("%s decodes to\n%+v\nwant\n%+v", file, decoded, want)
		}
		compact := new(bytes.Buffer)
		if err := json.Compact(compact, golden); err != nil {
			t.Fatal(err)
		}
		if again, err := json.Marshal(decoded); err != nil || !bytes.Equal(again, compact.Bytes()) {
			t.Errorf("%s re-encodes as\n%s\nwant\n%s (%v)", file, again, compact, err)
		}
	}
}
