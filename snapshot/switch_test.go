package snapshot_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// TestSwitchSteps: Switch at each step of the procedure (FACTS.md F66,
// F67): before the capture job reached the new instance it is not ready;
// it refuses to move to the older instance; it appends the old instance's
// changes below S once, a rerun appending nothing; after the old instance
// is disabled a sink that tells its last batch resumes, and one that
// appended nothing gets ErrSwitchGap; a stream already past S moves on
// where it is.
func TestSwitchSteps(t *testing.T) {
	ctx := context.Background()
	db := fake.New(fake.Options{ManualCapture: true})
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "t", Key: []string{"id"}, CaptureInstance: "a",
		Columns: []fake.ColumnDef{{Name: "id", Type: "int"}, {Name: "v", Type: "int", Nullable: true}}}); err != nil {
		t.Fatal(err)
	}
	load := func(id int64) {
		t.Helper()
		row := fake.Row{id, id}
		if info, _ := db.Table("dbo", "t"); len(info.Columns) == 3 {
			row = append(row, id)
		}
		if _, err := db.Load("dbo", "t", row); err != nil {
			t.Fatal(err)
		}
	}
	load(1)
	db.RunCaptureJob()
	dst := fake.NewMemSink()
	defer dst.Close()
	from, _, err := snapshot.Bootstrap(ctx, db, dst, snapshot.Options{CaptureInstance: "a"})
	if err != nil {
		t.Fatal(err)
	}
	load(2)
	if _, err := db.AddColumn("dbo", "t", fake.ColumnDef{Name: "w", Type: "int", Nullable: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.EnableCDC("dbo", "t", "b"); err != nil {
		t.Fatal(err)
	}
	app := testworld.MemAppender{MemSink: dst}
	opts := snapshot.SwitchOptions{From: "a", To: "b", BatchID: 1}
	if _, err := snapshot.Switch(ctx, db, app, from, opts); !errors.Is(err, snapshot.ErrSwitchNotReady) {
		t.Fatalf("before the capture job reached b: %v", err)
	}
	if _, err := snapshot.Switch(ctx, db, app, from, snapshot.SwitchOptions{From: "b", To: "a", BatchID: 1}); err == nil {
		t.Fatal("a switch to the older instance went through")
	}
	load(3)
	db.RunCaptureJob()
	res, err := snapshot.Switch(ctx, db, app, from, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := db.CaptureInstance(ctx, "b")
	if res.At != b.StartLSN || res.Next != b.StartLSN || res.Last.Rows != 1 || res.From != "a" || res.To != "b" {
		t.Fatalf("switch: %+v, b starts at %s", res, b.StartLSN)
	}
	commits := len(dst.Commits())
	if again, err := snapshot.Switch(ctx, db, app, from, opts); err != nil || !again.Resumed || len(dst.Commits()) != commits {
		t.Fatalf("rerun: %+v, %v, %d commits (were %d)", again, err, len(dst.Commits()), commits)
	}
	if err := db.DisableCDC("a"); err != nil {
		t.Fatal(err)
	}
	if again, err := snapshot.Switch(ctx, db, app, from, opts); err != nil || !again.Resumed || again.Next != b.StartLSN {
		t.Fatalf("rerun after a is disabled, with the batch in the sink: %+v, %v", again, err)
	}
	empty := fake.NewMemSink()
	defer empty.Close()
	if _, err := snapshot.Switch(ctx, db, testworld.MemAppender{MemSink: empty}, from, opts); !errors.Is(err, snapshot.ErrSwitchGap) {
		t.Fatalf("a gone, its last changes never appended: %v", err)
	}
	past, err := b.StartLSN.Next()
	if err != nil {
		t.Fatal(err)
	}
	if res, err := snapshot.Switch(ctx, db, app, past, opts); err != nil || res.Next != past {
		t.Fatalf("a stream already past S: %+v, %v", res, err)
	}
}
