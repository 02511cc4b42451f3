package delta

import (
	"context"
	"testing"
	"time"
)

// TestRecordSwitch: the S a switch records stays with the table (a new
// Table on the same directory finds it), a second record for the same
// instance keeps the first S (a rerun must not move it to a start_lsn
// that cleanup raised), and an instance enabled again under the name
// (another create_date) or another instance has none.
func TestRecordSwitch(t *testing.T) {
	ctx := context.Background()
	schema := bronze(t, capturedSchema())
	dir := t.TempDir()
	tb := openLocal(t, dir, Options{})
	if err := tb.RecordSwitch(ctx, "dbo_Orders_v2", baseTime, mustLSN(t, "0x0000002A000000100001")); err == nil {
		t.Fatal("a switch recorded in a table that does not exist yet")
	}
	if _, err := takeSnapshot(ctx, t, tb, snapshotInfo(t, schema, "dbo_Orders", "0x0000002A000000100001"), 1, 3); err != nil {
		t.Fatal(err)
	}
	created := baseTime.Add(time.Hour)
	s := mustLSN(t, "0x0000002A000000200001")
	if err := tb.RecordSwitch(ctx, "dbo_Orders_v2", created, s); err != nil {
		t.Fatal(err)
	}
	if err := tb.RecordSwitch(ctx, "DBO_orders_V2", created, mustLSN(t, "0x0000002A000000300001")); err != nil {
		t.Fatal(err)
	}
	again := openLocal(t, dir, Options{})
	if at, ok, err := again.FindSwitch(ctx, "dbo_orders_v2", created); err != nil || !ok || at != s {
		t.Fatalf("FindSwitch: %s, %v, %v; want %s", at, ok, err, s)
	}
	for _, miss := range []struct {
		name    string
		created time.Time
	}{{"dbo_Orders_v2", created.Add(time.Second)}, {"dbo_Orders_v3", created}} {
		if _, ok, err := again.FindSwitch(ctx, miss.name, miss.created); err != nil || ok {
			t.Fatalf("FindSwitch(%s, %s): %v, %v; want none", miss.name, miss.created, ok, err)
		}
	}
}
