package delta

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cdcsnap/cdcsnap/sink"
)

type verifyOut struct {
	Version     int64                     `json:"version"`
	NumRows     int64                     `json:"num_rows"`
	Files       int                       `json:"files"`
	ArrowSchema map[string]string         `json:"arrow_schema"`
	History     []historyEntry            `json:"history"`
	Rows        map[string]map[string]any `json:"rows"`
}

type historyEntry struct {
	Version      int64   `json:"version"`
	Operation    string  `json:"operation"`
	UserMetadata *string `json:"userMetadata"`
}

// TestInterop: Go writes a snapshot and a change batch; delta-rs reads the
// same rows, types and userMetadata; delta-rs appends, checkpoints and
// cleans up the log; Go still finds the snapshot, the live files, and
// appends again; delta-rs and DuckDB read the result.
func TestInterop(t *testing.T) {
	py := pythonOrSkip(t)
	ctx := context.Background()
	dir := t.TempDir()
	tb := openLocal(t, dir, Options{})
	schema := bronze(t, capturedSchema())
	info := snapshotInfo(t, schema, "dbo_Orders", "0x0000002A00000F380003")
	snap, err := takeSnapshot(ctx, t, tb, info, 2, 50)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.AppendChanges(ctx, "dbo_Orders", 1, changeRows(t, schema, "dbo_Orders", 1, 0, 20)); err != nil {
		t.Fatal(err)
	}

	// The snapshot's ascending columns are delta-encoded, so the checks
	// below show delta-rs (and DuckDB, at the end) reading that encoding.
	delta := deltaEncoded(t, tb, dir)
	for _, c := range []string{"id", "created", "day", "qty"} {
		if !delta[c] {
			t.Errorf("no DELTA_BINARY_PACKED pages in column %s", c)
		}
	}
	var v1 verifyOut
	runPython(t, py, &v1, "verify", dir)
	if v1.Version != 1 || v1.NumRows != 120 {
		t.Fatalf("delta-rs: version %d, %d rows", v1.Version, v1.NumRows)
	}
	wantTypes := map[string]string{
		"id": "int64", "name": "string", "amount": "decimal128(18, 4)", "created": "timestamp[us, tz=UTC]",
		"payload": "binary", "day": "date32[day]", "qty": "int32", "small": "int16", "tiny": "int8",
		"ratio": "double", "ratio32": "float", "flag": "bool",
		"_capture_instance": "string", "_operation": "int32", "_start_lsn": "string", "_seqval": "string",
		"_command_id": "int32", "_batch_id": "int64", "_commit_ts": "timestamp[us, tz=UTC]", "_snapshot": "string", "_chunk": "int32",
	}
	for name, typ := range wantTypes {
		got := strings.ReplaceAll(strings.ReplaceAll(v1.ArrowSchema[name], "large_", ""), "_view", "")
		if got != typ {
			t.Errorf("delta-rs reads %s as %q, want %s", name, v1.ArrowSchema[name], typ)
		}
	}
	// Row id 5 of the snapshot, row id 3 (all NULLs) and a change row.
	r5 := v1.Rows[firstKey(v1.Rows, "5/0/")]
	want5 := map[string]any{
		"amount": "-43.8275", "created": "2026-11-30T12:39:56.789012+00:00", "day": "2026-12-05",
		"_start_lsn": "0x0000002A00000F380003", "_snapshot": "0x0000002A00000F380003", "_seqval": nil,
		"_commit_ts": "2026-11-30T12:34:56.789012+00:00", "payload": "050000", "name": "name-000005-ééééé",
		"_operation": 0.0, "_chunk": nil, "_capture_instance": "dbo_Orders", "flag": false,
	}
	for k, w := range want5 {
		if fmt.Sprint(r5[k]) != fmt.Sprint(w) {
			t.Errorf("delta-rs row 5 %s = %v, want %v", k, r5[k], w)
		}
	}
	// Every snapshot row, value by value, as the generator made it.
	for id := int64(0); id < 100; id++ {
		r := v1.Rows[firstKey(v1.Rows, fmt.Sprintf("%d/0/", id))]
		if r == nil {
			t.Fatalf("delta-rs has no snapshot row %d", id)
		}
		want := map[string]any{"_start_lsn": info.LSN.String(), "_snapshot": info.LSN.String(), "_batch_id": nil, "_command_id": nil}
		if id%7 == 3 {
			for _, c := range []string{"name", "amount", "created", "payload", "day", "qty", "small", "tiny", "ratio", "ratio32", "flag"} {
				want[c] = nil
			}
		} else {
			want["name"] = fmt.Sprintf("name-%06d-%s", id, strings.Repeat("é", int(id%40)))
			want["amount"] = decimalText(id*12345-500000, 4)
			want["created"] = baseTime.Add(time.Duration(id) * time.Minute).Format("2006-01-02T15:04:05.000000-07:00")
			want["day"] = baseTime.AddDate(0, 0, int(id%1000)).Format("2006-01-02")
			want["payload"] = fmt.Sprintf("%02x00%02x", byte(id), byte(id>>8))
			want["qty"] = float64(id%100 - 50)
			want["flag"] = id%2 == 0
		}
		for k, w := range want {
			if fmt.Sprint(r[k]) != fmt.Sprint(w) {
				t.Errorf("delta-rs row %d %s = %v, want %v", id, k, r[k], w)
			}
		}
	}
	var r3 map[string]any
	for k, r := range v1.Rows {
		if strings.HasPrefix(k, "3/0/") {
			r3 = r
		}
	}
	for _, c := range []string{"name", "amount", "created", "payload", "day", "ratio", "flag"} {
		if r3[c] != nil {
			t.Errorf("delta-rs row 3 %s = %v, want NULL", c, r3[c])
		}
	}
	foundUM := false
	for _, h := range v1.History {
		if h.Version == 0 && h.UserMetadata != nil {
			var um sink.UserMetadata
			if err := json.Unmarshal([]byte(*h.UserMetadata), &um); err != nil {
				t.Fatal(err)
			}
			foundUM = um == sink.NewUserMetadata(info)
		}
	}
	if !foundUM {
		t.Errorf("delta-rs history has no snapshot userMetadata: %+v", v1.History)
	}

	// delta-rs appends three commits, checkpoints and cleans up the log.
	var ap struct {
		Version int64    `json:"version"`
		Before  []string `json:"before"`
		After   []string `json:"after"`
		Removed int      `json:"removed"`
		Files   int      `json:"files"`
	}
	runPython(t, py, &ap, "append", dir, "7")
	t.Logf("delta-rs: version %d, removed %d log files; log now %v", ap.Version, ap.Removed, ap.After)
	if !strings.Contains(strings.Join(ap.Before, " "), "00000000000000000000.json") || strings.Contains(strings.Join(ap.After, " "), "00000000000000000000.json") {
		t.Fatalf("log cleanup did not remove the first commit: before %v, after %v", ap.Before, ap.After)
	}
	fresh := openLocal(t, dir, Options{})
	got, err := fresh.FindSnapshot(ctx, "dbo_orders")
	if err != nil || got != snap {
		t.Fatalf("after delta-rs cleanup: %+v, %v; want %+v", got, err, snap)
	}
	files, err := fresh.files(ctx)
	if err != nil || len(files) != ap.Files {
		t.Fatalf("Go sees %d files (%v), delta-rs %d", len(files), err, ap.Files)
	}
	if v, _ := fresh.AppendChanges(ctx, "dbo_Orders", 1, changeRows(t, schema, "dbo_Orders", 1, 0, 20)); v != ap.Version {
		t.Fatalf("rerun of batch 1 committed version %d", v)
	}
	v2, err := fresh.AppendChanges(ctx, "dbo_Orders", 2, changeRows(t, schema, "dbo_Orders", 2, 200, 5))
	if err != nil || v2 != ap.Version+1 {
		t.Fatalf("append after delta-rs: %d, %v", v2, err)
	}

	var v3 verifyOut
	runPython(t, py, &v3, "verify", dir)
	if v3.Version != v2 || v3.NumRows != 120+21+5 {
		t.Fatalf("delta-rs after Go's append: version %d, %d rows", v3.Version, v3.NumRows)
	}
	all := readAll(t, fresh)
	defer all.Release()
	if all.NumRows() != v3.NumRows {
		t.Fatalf("Go reads %d rows, delta-rs %d", all.NumRows(), v3.NumRows)
	}

	// A checkpoint written by Go, with every JSON commit before it gone:
	// delta-rs and DuckDB must read the table from it.
	if err := fresh.Checkpoint(ctx, 1); err != nil {
		t.Fatal(err)
	}
	for v := int64(0); v < v2; v++ {
		_ = os.Remove(filepath.Join(dir, "_delta_log", fmt.Sprintf("%020d.json", v)))
	}
	var v4 verifyOut
	runPython(t, py, &v4, "verify", dir)
	if v4.Version != v2 || v4.NumRows != v3.NumRows || v4.Files != len(files)+1 {
		t.Fatalf("delta-rs from Go's checkpoint: version %d, %d rows, %d files; want %d, %d, %d", v4.Version, v4.NumRows, v4.Files, v2, v3.NumRows, len(files)+1)
	}
	if fmt.Sprint(v4.Rows[firstKey(v4.Rows, "5/0/")]["amount"]) != "-43.8275" {
		t.Fatalf("delta-rs from Go's checkpoint: row 5 = %v", v4.Rows[firstKey(v4.Rows, "5/0/")])
	}
	var txn struct {
		Snapshot *int64 `json:"snapshot"`
		Changes  *int64 `json:"changes"`
	}
	runPython(t, py, &txn, "txn", dir, snapshotAppID(info, snap.Rows), changesAppID("dbo_Orders"))
	if txn.Snapshot == nil || *txn.Snapshot != snap.Version || txn.Changes == nil || *txn.Changes != 2 {
		t.Fatalf("delta-rs txn versions: %+v", txn)
	}

	var dk struct {
		Count     int64  `json:"count"`
		Amount    string `json:"amount"`
		Created   string `json:"created"`
		StartLSN  string `json:"start_lsn"`
		Day       string `json:"day"`
		NullNames int64  `json:"null_names"`
		TSCount   int64  `json:"ts_count"`
	}
	runPython(t, py, &dk, "duckdb", dir)
	if dk.Count != v3.NumRows || dk.Amount != "-43.8275" || dk.Created != "2026-11-30T12:39:56.789012" || dk.StartLSN != info.LSN.String() || dk.Day != "2026-12-05" || dk.TSCount != 2 {
		t.Fatalf("DuckDB: %+v", dk)
	}
}

func firstKey(m map[string]map[string]any, prefix string) string {
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			return k
		}
	}
	return ""
}

// decimalText prints unscaled/10^scale.
func decimalText(unscaled int64, scale int) string {
	sign := ""
	if unscaled < 0 {
		sign, unscaled = "-", -unscaled
	}
	s := fmt.Sprintf("%0*d", scale+1, unscaled)
	return sign + s[:len(s)-scale] + "." + s[len(s)-scale:]
}
