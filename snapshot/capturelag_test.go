package snapshot_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// TestSnapshotUnderCaptureLagConverges is case 19 of the DDL property
// (seed 1, capture lag) in miniature. While the capture job lags,
// sys.fn_cdc_get_max_lsn trails the commits (FACTS.md F06) and the table
// shows them all: a snapshot stamped L0 = max LSN may read a row that a
// commit above L0 deletes after the read passed it. The bronze table
// then holds that row until the job harvests the delete and the stream
// from L0 + 1 carries it; after that the latest image is the source's
// (DESIGN.md R3).
func TestSnapshotUnderCaptureLagConverges(t *testing.T) {
	ctx := context.Background()
	db := ordersDB(t, fake.Options{ManualCapture: true}, 4)
	tx := db.Begin()
	if err := tx.Update("dbo", "orders", []any{int64(1)}, fake.Row{int64(1), "captured"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	db.RunCaptureJob()
	maxLSN, err := db.MaxLSN(ctx)
	must(t, err)
	// After the first page (key 0), a commit the job does not reach
	// deletes key 0 and updates key 3, which the read has yet to pass.
	var late string
	db.SetPageHook(func(context.Context, fake.Page) error {
		if late != "" {
			return nil
		}
		tx := db.Begin()
		if err := tx.Delete("dbo", "orders", []any{int64(0)}); err != nil {
			return err
		}
		if err := tx.Update("dbo", "orders", []any{int64(3)}, fake.Row{int64(3), "late"}); err != nil {
			return err
		}
		at, err := tx.Commit()
		late = at.String()
		return err
	})
	dst := fake.NewMemSink()
	defer dst.Close()
	from, res, err := snapshot.Bootstrap(ctx, db, dst, snapshot.Options{CaptureInstance: "dbo_Orders", Partitions: 1, MinPartitionRows: -1,
		ReadOptions: snapshot.ReadOptions{BatchRows: 1}})
	must(t, err)
	db.SetPageHook(nil)
	if res.LSN != maxLSN || late <= res.LSN.String() {
		t.Fatalf("L0 %s, max LSN before the read %s, the late commit %s: want L0 = max LSN below the late commit", res.LSN, maxLSN, late)
	}
	image := func() map[string]any {
		rows, err := dst.Rows()
		must(t, err)
		out := map[string]any{}
		for k, r := range testworld.LatestImage(rows, res.LSN.String()) {
			out[k] = r["note"]
		}
		return out
	}
	if got := image(); got["0"] != "n0" || got["3"] != "late" {
		t.Fatalf("snapshot image %v: want key 0 (read before its delete) and key 3's late note (read after it)", got)
	}
	poll := func(batch int64) snapshot.PollResult {
		p, err := snapshot.Poll(ctx, db, testworld.MemAppender{MemSink: dst}, "dbo_Orders", from, snapshot.PollOptions{BatchID: batch})
		must(t, err)
		return p
	}
	if p := poll(1); p.Appended {
		t.Fatalf("a poll before the job harvested the late commit appended %d rows", p.Rows)
	}
	db.RunCaptureJob()
	if p := poll(2); !p.Appended || p.Rows != 3 {
		t.Fatalf("the poll after the job: %+v, want the late commit's 3 change rows", p)
	}
	src, err := db.Rows("dbo", "orders")
	must(t, err)
	want := map[string]any{}
	for _, r := range src {
		want[fmt.Sprint(r[0])] = r[1]
	}
	if got := image(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("latest image %v, source %v", got, want)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
