package snapshot_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

// TestReplicaBehindRefusesAndResumes: every partition read of a whole
// snapshot asks for a database at least as recent as the max LSN its plan
// saw (Plan.MaxLSN, source.ReadOptions.NotBefore). When the reads start
// landing on a replica behind it (fake.DB.SetReplicaMaxLSN) after the
// first partition, the snapshot fails with source.ErrReplicaBehind and
// commits nothing; once the replica has caught up a rerun resumes the
// same plan, reads only what is missing, and with the stream after its
// LSN converges to the source, changes committed meanwhile included.
func TestReplicaBehindRefusesAndResumes(t *testing.T) {
	r := rand.New(rand.NewPCG(testworld.Seed(t, *seedFlag), 56))
	ctx := context.Background()
	tested := 0
	for _, sh := range shapes() {
		w := testworld.New(t, r, sh, 200)
		opts := snapshot.Options{CaptureInstance: w.CI, Partitions: 4, MinPartitionRows: -1, Parallelism: 1, ReadOptions: snapshot.ReadOptions{BatchRows: 10}}
		probe, err := snapshot.NewPlan(ctx, w.DB, opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(probe.Ranges) < 2 {
			continue // one partition: nothing is read after the replica falls behind
		}
		tested++
		planned := w.MaxLSN(t)
		behind, err := planned.Prev()
		if err != nil {
			t.Fatal(err)
		}
		pages := 0
		w.DB.SetPageHook(func(context.Context, fake.Page) error {
			if pages++; pages == 1 {
				w.DB.SetReplicaMaxLSN(behind) // later partitions land on a lagging replica
			}
			w.Change(t, r)
			return nil
		})
		dst := fake.NewMemSink()
		_, err = snapshot.Take(ctx, w.DB, dst, opts)
		w.DB.SetPageHook(nil)
		var rb *source.ReplicaBehindError
		if !errors.Is(err, source.ErrReplicaBehind) || !errors.As(err, &rb) || rb.Need != planned || rb.Have != behind {
			t.Fatalf("%s: got %v, want a *source.ReplicaBehindError needing %s, having %s", sh.Name, err, planned, behind)
		}
		if n := len(dst.Commits()); n != 0 {
			t.Fatalf("%s: %d commits after the refused read", sh.Name, n)
		}
		p, err := dst.FindPartial(ctx, w.CI)
		if err != nil || len(p.Parts) == 0 {
			t.Fatalf("%s: partial %+v, %v: want the first partition recorded", sh.Name, p, err)
		}

		w.DB.SetReplicaMaxLSN(lsn.LSN{}) // caught up
		for range 5 {
			w.Change(t, r)
		}
		from, res, err := snapshot.Bootstrap(ctx, w.DB, dst, opts)
		if err != nil {
			t.Fatalf("%s: rerun: %v", sh.Name, err)
		}
		if !res.Resumed || res.PartitionsResumed == 0 || res.LSN != p.LSN {
			t.Fatalf("%s: rerun %+v, want the partial snapshot at %s resumed", sh.Name, res, p.LSN)
		}
		stream(t, ctx, w, dst, from, 1)
		w.CheckImage(t, dst, lsn.LSN{}, sh.Name)
		dst.Close()
	}
	if tested == 0 {
		t.Fatal("no shape planned two partitions")
	}
}

// TestQuietDatabasePlanChecksItsMaxLSN: on a quiet database whose new
// instance's start_lsn - 1 is above the max LSN, the plan's L0 is
// start_lsn - 1 and its MaxLSN the max LSN as read, and the reads ask for
// that (a NotBefore of L0 would be refused: no replica reaches it); a plan
// whose MaxLSN is above its LSN is refused, and one without (written
// before it was recorded) checks nothing.
func TestQuietDatabasePlanChecksItsMaxLSN(t *testing.T) {
	ctx := context.Background()
	// A captured commit on another table, then a new instance: the max
	// LSN is that commit's, below the new instance's start_lsn.
	db := fake.New(fake.Options{ManualCapture: true})
	cols := []fake.ColumnDef{{Name: "id", Type: "int"}, {Name: "note", Type: "varchar(20)", Nullable: true}}
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "other", Columns: cols, Key: []string{"id"}, CaptureInstance: "dbo_other"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Load("dbo", "other", fake.Row{int64(1), nil}); err != nil {
		t.Fatal(err)
	}
	db.RunCaptureJob()
	var rows []fake.Row
	for i := range 10 {
		rows = append(rows, fake.Row{int64(i), nil})
	}
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "orders", Columns: cols, Key: []string{"id"}, Rows: rows, CaptureInstance: "dbo_Orders"}); err != nil {
		t.Fatal(err)
	}
	maxLSN, err := db.MaxLSN(ctx)
	if err != nil || maxLSN.IsZero() {
		t.Fatalf("setup: max LSN %s, %v", maxLSN, err)
	}
	plan, err := snapshot.NewPlan(ctx, db, snapshot.Options{CaptureInstance: "dbo_Orders", Partitions: 2, MinPartitionRows: -1})
	if err != nil {
		t.Fatal(err)
	}
	ci, err := db.CaptureInstance(ctx, "dbo_Orders")
	if err != nil {
		t.Fatal(err)
	}
	l0, _ := ci.StartLSN.Prev()
	if plan.LSN != l0 || plan.MaxLSN != maxLSN || !maxLSN.Less(l0) {
		t.Fatalf("plan LSN %s, MaxLSN %s; want start_lsn - 1 = %s and the max LSN %s below it", plan.LSN, plan.MaxLSN, l0, maxLSN)
	}
	if _, err := db.ReadRange(ctx, ci, plan.Ranges[0], source.ReadOptions{NotBefore: plan.LSN}); !errors.Is(err, source.ErrReplicaBehind) {
		t.Fatalf("setup: a read needing L0 %s: %v, want it refused", plan.LSN, err)
	}
	dst := fake.NewMemSink()
	defer dst.Close()
	var parts int
	for i := range plan.Ranges {
		part, err := snapshot.Execute(ctx, db, dst, plan, i, nil)
		if err != nil {
			t.Fatalf("partition %d: %v", i, err)
		}
		parts += int(part.Rows)
	}
	if parts != 10 {
		t.Fatalf("read %d rows, want 10", parts)
	}

	raw, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m["max_lsn"] != maxLSN.String() {
		t.Fatalf("max_lsn in the plan's JSON: %v, want %s", m["max_lsn"], maxLSN)
	}
	delete(m, "max_lsn")
	old, _ := json.Marshal(m)
	var oldPlan snapshot.Plan
	if err := json.Unmarshal(old, &oldPlan); err != nil || !oldPlan.MaxLSN.IsZero() || oldPlan.Validate() != nil {
		t.Fatalf("a plan without max_lsn: MaxLSN %s, %v, Validate %v", oldPlan.MaxLSN, err, oldPlan.Validate())
	}
	bad := *plan
	bad.MaxLSN, _ = plan.LSN.Next()
	if err := bad.Validate(); !errors.Is(err, snapshot.ErrInvalidPlan) {
		t.Fatalf("a plan whose MaxLSN is above its LSN: %v, want ErrInvalidPlan", err)
	}
}

// TestBackfillChunksCheckTheReplica: a chunked snapshot's chunk reads ask
// for a database at least as recent as their wave's stamp: on a replica
// behind it a wave fails with source.ErrReplicaBehind and commits nothing,
// and once it caught up Backfill commits every chunk, the stream after S
// converging. On a quiet database (S = start_lsn - 1, above the max LSN)
// nothing is refused.
func TestBackfillChunksCheckTheReplica(t *testing.T) {
	r := rand.New(rand.NewPCG(testworld.Seed(t, *seedFlag), 57))
	ctx := context.Background()
	w := testworld.New(t, r, shapes()[r.IntN(len(shapes()))], 100)
	opts := snapshot.BackfillOptions{CaptureInstance: w.CI, ChunkRows: 20, WaveChunks: 2, ReadOptions: snapshot.ReadOptions{BatchRows: 7}}
	dst := fake.NewMemSink()
	defer dst.Close()
	from, _, err := snapshot.BootstrapBackfill(ctx, w.DB, dst, opts)
	if err != nil {
		t.Fatal(err)
	}
	w.Change(t, r)
	behind, err := w.MaxLSN(t).Prev()
	if err != nil {
		t.Fatal(err)
	}
	w.DB.SetReplicaMaxLSN(behind)
	if _, err := snapshot.Backfill(ctx, w.DB, dst, opts); !errors.Is(err, source.ErrReplicaBehind) {
		t.Fatalf("Backfill on a lagging replica: %v, want source.ErrReplicaBehind", err)
	}
	for _, c := range dst.Commits() {
		if c.Kind == "chunks" {
			t.Fatalf("a wave committed on a lagging replica: %+v", c)
		}
	}
	w.DB.SetReplicaMaxLSN(lsn.LSN{})
	res, err := snapshot.Backfill(ctx, w.DB, dst, opts)
	if err != nil {
		t.Fatal(err)
	}
	checkChunks(t, ctx, dst, w.CI, res)
	st := &streamer{next: from}
	st.poll(t, ctx, w, dst)
	w.CheckImage(t, dst, lsn.LSN{}, "after the replica caught up")

	quiet := fake.New(fake.Options{ManualCapture: true})
	cols := []fake.ColumnDef{{Name: "id", Type: "int"}}
	if err := quiet.CreateTable(fake.TableDef{Schema: "dbo", Name: "a", Columns: cols, Key: []string{"id"}, Rows: []fake.Row{{int64(1)}}, CaptureInstance: "dbo_a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := quiet.Load("dbo", "a", fake.Row{int64(2)}); err != nil {
		t.Fatal(err)
	}
	quiet.RunCaptureJob()
	if err := quiet.CreateTable(fake.TableDef{Schema: "dbo", Name: "b", Columns: cols, Key: []string{"id"}, Rows: []fake.Row{{int64(1)}, {int64(2)}, {int64(3)}}, CaptureInstance: "dbo_b"}); err != nil {
		t.Fatal(err)
	}
	qdst := fake.NewMemSink()
	defer qdst.Close()
	qres, err := snapshot.Backfill(ctx, quiet, qdst, snapshot.BackfillOptions{CaptureInstance: "dbo_b", ChunkRows: 2})
	if err != nil || !qres.Complete || qres.Rows != 3 {
		t.Fatalf("Backfill on a quiet database: %+v, %v", qres, err)
	}
}
