package delta

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if raceChild() {
		return
	}
	goleak.VerifyTestMain(m)
}

func TestRoundTripEveryType(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tb := openLocal(t, dir, Options{})
	schema := bronze(t, capturedSchema())
	info := snapshotInfo(t, schema, "dbo_Orders", "0x0000002A00000F380003")
	snap, err := takeSnapshot(ctx, t, tb, info, 2, 100)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Version != 0 || snap.Rows != 200 || snap.LSN != info.LSN || !snap.CommitTS.Equal(baseTime.Truncate(1000)) {
		t.Fatalf("snapshot = %+v", snap)
	}
	got := readAll(t, tb)
	defer got.Release()
	if got.NumRows() != 200 {
		t.Fatalf("rows = %d", got.NumRows())
	}
	want0 := buildRecord(t, schema, 0, 100, rowSpec{ci: info.CaptureInstance, startLSN: info.LSN.String(), commitTS: baseTime, snapshot: info.LSN.String()})
	want1 := buildRecord(t, schema, 100, 100, rowSpec{ci: info.CaptureInstance, startLSN: info.LSN.String(), commitTS: baseTime, snapshot: info.LSN.String()})
	defer want0.Release()
	defer want1.Release()
	if !got.Schema().Equal(schema) {
		t.Fatalf("schema read back:\n%s\nwant:\n%s", got.Schema(), schema)
	}
	for i := 0; i < int(got.NumCols()); i++ {
		col, err := array.Concatenate(got.Column(i).Data().Chunks(), memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := array.Concatenate([]arrow.Array{want0.Column(i), want1.Column(i)}, memory.DefaultAllocator)
		if !array.Equal(col, want) {
			t.Errorf("column %s differs:\n got %v\nwant %v", schema.Field(i).Name, col, want)
		}
		col.Release()
		want.Release()
	}
	found, err := tb.FindSnapshot(ctx, "DBO_ORDERS")
	if err != nil || found != snap {
		t.Fatalf("FindSnapshot = %+v, %v; want %+v", found, err, snap)
	}
}
