package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
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

// switchTable is a table with capture instance a, one row, a bootstrap
// of it in a MemSink, and the first LSN its stream reads.
func switchTable(t *testing.T, opts fake.Options) (*fake.DB, *fake.MemSink, lsn.LSN) {
	t.Helper()
	ctx := context.Background()
	db := fake.New(opts)
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "t", Key: []string{"id"}, CaptureInstance: "a",
		Columns: []fake.ColumnDef{{Name: "id", Type: "int"}, {Name: "v", Type: "int", Nullable: true}},
		Indexes: []fake.IndexDef{{Name: "UX_v", Columns: []string{"v"}, Unique: true}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Load("dbo", "t", fake.Row{int64(1), int64(1)}); err != nil {
		t.Fatal(err)
	}
	db.RunCaptureJob()
	dst := fake.NewMemSink()
	t.Cleanup(func() { dst.Close() })
	from, _, err := snapshot.Bootstrap(ctx, db, dst, snapshot.Options{CaptureInstance: "a"})
	if err != nil {
		t.Fatal(err)
	}
	return db, dst, from
}

// D4: B's start_lsn is NULL until the capture job establishes it (F02,
// modelled with fake.Options.NullStartLSN): Switch says ErrSwitchNotReady,
// not that B is older. Once cleanup raised both instances' start_lsn to
// one low water mark (F20), create_date still tells which is newer:
// Switch moves a stream already past S, and PickAmong picks B.
func TestSwitchOrdersInstancesByCreateDate(t *testing.T) {
	ctx := context.Background()
	db, dst, from := switchTable(t, fake.Options{ManualCapture: true, NullStartLSN: true})
	if _, err := db.EnableCDC("dbo", "t", "b"); err != nil {
		t.Fatal(err)
	}
	app := testworld.MemAppender{MemSink: dst}
	if _, err := snapshot.Switch(ctx, db, app, from, snapshot.SwitchOptions{From: "a", To: "b", BatchID: 1}); !errors.Is(err, snapshot.ErrSwitchNotReady) {
		t.Fatalf("switch before the capture job reached b: %v", err)
	}
	if _, err := db.Load("dbo", "t", fake.Row{int64(2), int64(2)}); err != nil {
		t.Fatal(err)
	}
	db.RunCaptureJob()
	m, err := db.MaxLSN(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Cleanup("", m); err != nil {
		t.Fatal(err)
	}
	a, _ := db.CaptureInstance(ctx, "a")
	b, _ := db.CaptureInstance(ctx, "b")
	if a.StartLSN != b.StartLSN {
		t.Fatalf("cleanup to %s left start_lsn %s and %s", m, a.StartLSN, b.StartLSN)
	}
	res, err := snapshot.Switch(ctx, db, app, m, snapshot.SwitchOptions{From: "a", To: "b", BatchID: 1})
	if err != nil || res.Next != m {
		t.Fatalf("switch of a stream at %s after cleanup: %+v, %v", m, res, err)
	}
	if pick, err := snapshot.PickAmong(ctx, fake.NewMemSink(), []source.CaptureInstance{*a, *b}); err != nil || pick != "b" {
		t.Fatalf("PickAmong after cleanup: %q, %v", pick, err)
	}
}

// D4: Switch records S with the target before it appends A's last
// changes, and a rerun after a crash uses that S, not B's start_lsn, which
// cleanup has raised past it meanwhile: the stream then reads B from S and
// fails with source.ErrDataLoss, where B's new start would have skipped the
// changes between without a word.
func TestSwitchRerunKeepsTheRecordedStart(t *testing.T) {
	ctx := context.Background()
	db, dst, from := switchTable(t, fake.Options{ManualCapture: true})
	if _, err := db.EnableCDC("dbo", "t", "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Load("dbo", "t", fake.Row{int64(2), int64(2)}); err != nil {
		t.Fatal(err)
	}
	db.RunCaptureJob()
	app := testworld.MemAppender{MemSink: dst}
	opts := snapshot.SwitchOptions{From: "a", To: "b", BatchID: 1}
	first, err := snapshot.Switch(ctx, db, app, from, opts)
	if err != nil {
		t.Fatal(err)
	}
	// The caller crashed before it recorded first.Next; b's changes from S
	// on are cleaned up meanwhile.
	if _, err := db.Load("dbo", "t", fake.Row{int64(3), int64(3)}); err != nil {
		t.Fatal(err)
	}
	db.RunCaptureJob()
	m, _ := db.MaxLSN(ctx)
	if err := db.Cleanup("", m); err != nil {
		t.Fatal(err)
	}
	again, err := snapshot.Switch(ctx, db, app, from, opts)
	if err != nil || !again.Resumed || again.Next != first.At {
		t.Fatalf("rerun after cleanup to %s: %+v, %v; want the stream at S = %s", m, again, err, first.At)
	}
	if _, err := snapshot.Poll(ctx, db, app, "b", again.Next, snapshot.PollOptions{BatchID: 2}); !errors.Is(err, source.ErrDataLoss) {
		t.Fatalf("poll of b from S after cleanup passed it: %v", err)
	}
}

// D5: Switch refuses while the target holds an open chunked snapshot of
// A, whose later chunks would be stamped after S with A's columns; once
// it is complete, Switch goes on.
func TestSwitchRefusesWhileABackfillOfTheOldInstanceIsOpen(t *testing.T) {
	ctx := context.Background()
	db, dst, _ := switchTable(t, fake.Options{})
	for i := 2; i < 30; i++ {
		if _, err := db.Load("dbo", "t", fake.Row{int64(i), int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	opts := snapshot.BackfillOptions{CaptureInstance: "a", Resnapshot: true, ChunkRows: 10, WaveChunks: 1, MaxWaves: 1}
	bf, err := snapshot.Backfill(ctx, db, dst, opts)
	if err != nil || bf.Complete {
		t.Fatalf("backfill: %+v, %v", bf, err)
	}
	from, _ := bf.StreamFrom()
	if _, err := db.AddColumn("dbo", "t", fake.ColumnDef{Name: "w", Type: "int", Nullable: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.EnableCDC("dbo", "t", "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Load("dbo", "t", fake.Row{int64(100), int64(100), int64(100)}); err != nil {
		t.Fatal(err)
	}
	app := testworld.MemAppender{MemSink: dst}
	sw := snapshot.SwitchOptions{From: "a", To: "b", BatchID: 1}
	if _, err := snapshot.Switch(ctx, db, app, from, sw); !errors.Is(err, snapshot.ErrSwitchBackfillOpen) {
		t.Fatalf("switch with a's chunked snapshot open: %v", err)
	}
	opts.Resnapshot, opts.MaxWaves = false, 0
	if bf, err = snapshot.Backfill(ctx, db, dst, opts); err != nil || !bf.Complete {
		t.Fatalf("backfill to its end: %+v, %v", bf, err)
	}
	if _, err := snapshot.Switch(ctx, db, app, from, sw); err != nil {
		t.Fatalf("switch once a's chunked snapshot is complete: %v", err)
	}
}

// D7: an instance enabled with @index_name on another unique index
// identifies rows by other columns (F18): Switch refuses unless the
// caller opts in with AllowKeyChange.
func TestSwitchRefusesAnotherKeyUnlessAllowed(t *testing.T) {
	ctx := context.Background()
	db, dst, from := switchTable(t, fake.Options{})
	if _, err := db.EnableCDCOn("dbo", "t", "b", "UX_v"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Load("dbo", "t", fake.Row{int64(2), int64(2)}); err != nil {
		t.Fatal(err)
	}
	app := testworld.MemAppender{MemSink: dst}
	opts := snapshot.SwitchOptions{From: "a", To: "b", BatchID: 1}
	if _, err := snapshot.Switch(ctx, db, app, from, opts); !errors.Is(err, snapshot.ErrSwitchKeyChange) || !strings.Contains(err.Error(), "[v]") {
		t.Fatalf("switch to an instance keyed by v: %v", err)
	}
	opts.AllowKeyChange = true
	if _, err := snapshot.Switch(ctx, db, app, from, opts); err != nil {
		t.Fatalf("switch with AllowKeyChange: %v", err)
	}
}

// X1: rows no change touched since S keep NULL in B's new column after a
// switch, though the table holds a value (written before B existed);
// SwitchOptions.Backfill takes a chunked snapshot of B after the switch,
// whose chunks fill it: the latest image then equals the source in every
// column B captures.
func TestSwitchBackfillFillsTheNewColumns(t *testing.T) {
	ctx := context.Background()
	for _, backfill := range []bool{false, true} {
		db, dst, from := switchTable(t, fake.Options{})
		if _, err := db.AddColumn("dbo", "t", fake.ColumnDef{Name: "w", Type: "int", Nullable: true}); err != nil {
			t.Fatal(err)
		}
		tx := db.Begin()
		if err := tx.Update("dbo", "t", []any{int64(1)}, fake.Row{int64(1), int64(1), int64(42)}); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if _, err := db.EnableCDC("dbo", "t", "b"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Load("dbo", "t", fake.Row{int64(2), int64(2), int64(7)}); err != nil {
			t.Fatal(err)
		}
		opts := snapshot.SwitchOptions{From: "a", To: "b", BatchID: 1}
		if backfill {
			opts.Backfill = &snapshot.BackfillOptions{}
		}
		app := testworld.MemAppender{MemSink: dst}
		res, err := snapshot.Switch(ctx, db, app, from, opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := snapshot.Poll(ctx, db, app, "b", res.Next, snapshot.PollOptions{BatchID: 1}); err != nil {
			t.Fatal(err)
		}
		image := latest(t, dst, lsn.LSN{})
		got := fmt.Sprint(image["1"]["w"], " ", image["2"]["w"])
		switch {
		case backfill && (got != "42 7" || res.Backfill == nil || !res.Backfill.Complete):
			t.Fatalf("w after a switch with Backfill: %s (%+v)", got, res.Backfill)
		case !backfill && got != "<nil> 7":
			t.Fatalf("w after a switch without Backfill: %s, want row 1's NULL (X1)", got)
		}
	}
}
