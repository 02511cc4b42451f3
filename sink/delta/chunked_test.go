package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/deltalog"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/sinktest"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

var (
	_ sinktest.TableReader = (*Table)(nil)
	_ sink.ChunkSink       = (*Table)(nil)
)

// TestChunkedConformance runs the chunked-snapshot conformance suite on a
// local table and on a mem:// one, with a checkpoint every 3 commits.
func TestChunkedConformance(t *testing.T) {
	t.Run("local", func(t *testing.T) {
		sinktest.RunChunked(t, func(t *testing.T) sink.ChunkSink { return openLocal(t, t.TempDir(), Options{CheckpointInterval: 3}) })
	})
	t.Run("mem", func(t *testing.T) {
		sinktest.RunChunked(t, func(t *testing.T) sink.ChunkSink { return openLocal(t, "mem://", Options{CheckpointInterval: 3}) })
	})
}

// ordersWorld is a fake CDC database with dbo.orders (id bigint key, note,
// qty) and random changes.
type ordersWorld struct {
	db   *fake.DB
	ci   string
	mu   sync.Mutex
	keys int64
}

func newOrdersWorld(t testing.TB, rows int) *ordersWorld {
	t.Helper()
	db := fake.New(fake.Options{})
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "orders", Columns: []fake.ColumnDef{
		{Name: "id", Type: "bigint"}, {Name: "note", Type: "nvarchar(40)", Nullable: true}, {Name: "qty", Type: "int", Nullable: true},
	}, Key: []string{"id"}}); err != nil {
		t.Fatal(err)
	}
	w := &ordersWorld{db: db, ci: "dbo_Orders", keys: int64(rows * 2)}
	if _, err := db.EnableCDC("dbo", "orders", w.ci); err != nil {
		t.Fatal(err)
	}
	var batch []fake.Row
	for i := range rows {
		batch = append(batch, fake.Row{int64(i * 2), fmt.Sprint("order ", i), int64(i % 7)})
	}
	if len(batch) > 0 {
		if _, err := db.Load("dbo", "orders", batch...); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// change commits one random insert, update or delete (skipped when the
// key exists, or does not).
func (w *ordersWorld) change(r *rand.Rand) {
	w.mu.Lock()
	defer w.mu.Unlock()
	tx := w.db.Begin()
	id := r.Int64N(w.keys + 20)
	var err error
	switch r.IntN(3) {
	case 0:
		err = tx.Insert("dbo", "orders", fake.Row{id, fmt.Sprint("new ", r.IntN(1000)), int64(r.IntN(100))})
	case 1:
		err = tx.Update("dbo", "orders", []any{id}, fake.Row{id, nil, int64(r.IntN(100))})
	default:
		err = tx.Delete("dbo", "orders", []any{id})
	}
	if err != nil {
		tx.Rollback()
		return
	}
	_, _ = tx.Commit()
}

// stream appends the changes from *next up to the max LSN as one batch.
func (w *ordersWorld) stream(t testing.TB, ctx context.Context, tb *Table, next *lsn.LSN, batch *int64) {
	t.Helper()
	to, err := w.db.MaxLSN(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if to.Less(*next) {
		return
	}
	*batch++
	rr, err := snapshot.Changes(ctx, w.db, w.ci, *next, to, *batch)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	if _, err := tb.AppendChanges(ctx, w.ci, *batch, rr); err != nil {
		t.Fatal(err)
	}
	if *next, err = to.Next(); err != nil {
		t.Fatal(err)
	}
}

// tableImage is the latest image per key of every row of tb.
func (w *ordersWorld) tableImage(t testing.TB, ctx context.Context, tb *Table) *snapshot.Image {
	t.Helper()
	ci, err := w.db.CaptureInstance(ctx, w.ci)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ci.KeyColumns()
	im := snapshot.NewImage(ci.Columns, key)
	rr, err := tb.ReadAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	if err := snapshot.ReadImage(ctx, im, rr, true); err != nil {
		t.Fatal(err)
	}
	return im
}

// TestBackfillIntoDelta: snapshot.Backfill into a Delta table, a wave at a
// time, with random changes committed while the chunks are read (between
// pages) and between waves, and a stream appending them from S: the
// latest image of the table equals the source table, every chunk is in
// the table once, and the state survives reopening the table.
func TestBackfillIntoDelta(t *testing.T) {
	ctx := context.Background()
	expiries := 0
	defer func() {
		if !t.Failed() && expiries == 0 {
			t.Error("no case expired the txn records between waves: the test proves nothing about finding a chunked snapshot from its rows")
		}
	}()
	for c, url := range []string{"local", "mem://", "local", "mem://", "local", "local"} {
		r := rand.New(rand.NewPCG(uint64(c), 42))
		dir := url
		if url == "local" {
			dir = t.TempDir()
		}
		tb := openLocal(t, dir, Options{CheckpointInterval: 4, TargetFileSize: 4 << 10, RowGroupRows: 50})
		w := newOrdersWorld(t, 150+r.IntN(300))
		hr := rand.New(rand.NewPCG(uint64(c), 43))
		var hookMu sync.Mutex // two chunks are read at once
		w.db.SetPageHook(func(context.Context, fake.Page) error {
			hookMu.Lock()
			defer hookMu.Unlock()
			for range hr.IntN(3) {
				w.change(hr)
			}
			return nil
		})
		opts := snapshot.BackfillOptions{CaptureInstance: w.ci, ChunkRows: 20 + r.Int64N(60), WaveChunks: 1 + r.IntN(3), Parallelism: 2, ReadOptions: snapshot.ReadOptions{BatchRows: 1 + r.IntN(40)}, MaxWaves: 1}
		from, open, err := snapshot.BootstrapBackfill(ctx, w.db, tb, opts)
		if err != nil {
			t.Fatal(err)
		}
		next, batch := from, int64(0)
		var res snapshot.BackfillResult
		expired := false
		for wave := 0; ; wave++ {
			for range r.IntN(5) {
				w.change(r)
			}
			if r.IntN(2) == 0 {
				w.stream(t, ctx, tb, &next, &batch)
			}
			res, err = snapshot.Backfill(ctx, w.db, tb, opts)
			if err != nil {
				t.Fatalf("case %d wave %d: %v", c, wave, err)
			}
			if res.PlanID != open.PlanID || res.LSN != open.LSN {
				t.Fatalf("case %d wave %d: resumed %+v, want the snapshot opened at %s (txns expired: %v)", c, wave, res, open.LSN, expired)
			}
			if res.Complete {
				break
			}
			// A user's retention settings expire the txn records (and
			// OPTIMIZE mixes the files) once chunk rows are visible: the
			// next wave resumes from the head and the rows.
			if url == "local" && r.IntN(3) == 0 && hasChunkRows(t, ctx, tb, w.ci, open.LSN) {
				expireTxns(t, ctx, dir)
				tb = openLocal(t, dir, Options{CheckpointInterval: 4, TargetFileSize: 4 << 10, RowGroupRows: 50})
				if files, _ := tb.files(ctx); r.IntN(2) == 0 && len(files) > 1 {
					compact(t, ctx, tb, files, []string{"all", "none", "head"}[r.IntN(3)])
				}
				expired = true
				expiries++
				all, err := tb.ChunkedSnapshots(ctx)
				if err != nil || len(all) != 1 || all[0].PlanID != open.PlanID || all[0].Version != -1 {
					t.Fatalf("case %d: after expiry ChunkedSnapshots = %+v, %v", c, all, err)
				}
			}
			if wave > 1000 {
				t.Fatalf("case %d: no progress: %+v", c, res)
			}
		}
		w.db.SetPageHook(nil)
		for range r.IntN(5) {
			w.change(r)
		}
		w.stream(t, ctx, tb, &next, &batch)

		want, err := snapshot.SourceImage(ctx, w.db, mustInstance(t, w))
		if err != nil {
			t.Fatal(err)
		}
		if d := want.Diff(w.tableImage(t, ctx, tb), 5); len(d) > 0 {
			t.Fatalf("case %d (%+v): latest image differs from the source:\n%s", c, opts, strings.Join(d, "\n"))
		}
		checkChunkRows(t, ctx, tb, res)

		// A new Table on the same folder finds the complete snapshot; a
		// rerun reads nothing; FindSnapshot sees no whole snapshot.
		if url == "local" && !expired {
			tb2 := openLocal(t, dir, Options{})
			found, err := tb2.FindChunked(ctx, "DBO_ORDERS")
			if err != nil || !found.Complete || found.PlanID != res.PlanID || found.Committed != res.Chunks || found.Version != res.Version {
				t.Fatalf("case %d: FindChunked on a reopened table = %+v, %v; want %+v", c, found, err, res)
			}
			again, err := snapshot.Backfill(ctx, w.db, tb2, opts)
			if err != nil || !again.Existing || again.LSN != res.LSN {
				t.Fatalf("case %d: rerun after completion: %+v, %v", c, again, err)
			}
		}
		if _, err := tb.FindSnapshot(ctx, w.ci); !errors.Is(err, sink.ErrNotFound) {
			t.Fatalf("case %d: FindSnapshot = %v, want ErrNotFound next to a chunked snapshot", c, err)
		}
	}
}

// hasChunkRows reports whether the table holds rows of ci's chunked
// snapshot at l.
func hasChunkRows(t testing.TB, ctx context.Context, tb *Table, ci string, l lsn.LSN) bool {
	t.Helper()
	s, err := tb.current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	facts, err := tb.scanRows(ctx, s, ci, wantChunks)
	if err != nil {
		t.Fatal(err)
	}
	_, ok := facts.chunks[l]
	return ok
}

func mustInstance(t testing.TB, w *ordersWorld) *source.CaptureInstance {
	t.Helper()
	ci, err := w.db.CaptureInstance(context.Background(), w.ci)
	if err != nil {
		t.Fatal(err)
	}
	return ci
}

// checkChunkRows checks the table's snapshot rows: every one stamped with
// _snapshot S and a committed _chunk, each chunk's ids disjoint from the
// others' (no chunk is in the table twice), and the wave txns cover
// 0..Chunks once.
func checkChunkRows(t testing.TB, ctx context.Context, tb *Table, res snapshot.BackfillResult) {
	t.Helper()
	rr, err := tb.ReadAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	seen := map[string]int32{}
	for rr.Next() {
		rec := rr.RecordBatch()
		col := func(name string) int { return rec.Schema().FieldIndices(name)[0] }
		op := rec.Column(col(sink.ColOperation))
		for i := range int(rec.NumRows()) {
			if op.ValueStr(i) != "0" {
				continue
			}
			snap, chunk, start := rec.Column(col(sink.ColSnapshot)).ValueStr(i), rec.Column(col(sink.ColChunk)), rec.Column(col(sink.ColStartLSN)).ValueStr(i)
			if snap != res.LSN.String() || chunk.IsNull(i) || start < snap {
				t.Fatalf("snapshot row %d: _snapshot %s, _chunk %s, _start_lsn %s; want S %s, a chunk and a stamp >= S", i, snap, chunk.ValueStr(i), start, res.LSN)
			}
			id := rec.Column(col("id")).ValueStr(i)
			ch := chunk.(*array.Int32).Value(i)
			if prev, ok := seen[id]; ok {
				t.Fatalf("id %s is in the snapshot twice (chunks %d and %d)", id, prev, ch)
			}
			seen[id] = ch
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	txns, err := tb.txns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ends []int
	for id := range txns {
		if rest, ok := strings.CutPrefix(id, chunksAppPrefix+res.PlanID+"/"); ok {
			end, err := strconv.Atoi(rest)
			if err != nil {
				t.Fatalf("wave txn %s", id)
			}
			ends = append(ends, end)
		}
	}
	sort.Ints(ends)
	if len(ends) == 0 || ends[len(ends)-1] != res.Chunks {
		t.Fatalf("wave txns end at %v, want the last at %d", ends, res.Chunks)
	}
	for i := 1; i < len(ends); i++ {
		if ends[i] == ends[i-1] {
			t.Fatalf("two waves end at %d: %v", ends[i], ends)
		}
	}
	if _, ok := txns[completeAppID(res.PlanID)]; !ok {
		t.Fatalf("no completion txn: %v", txns)
	}
}

// TestChunkedAfterCheckpointAndCleanup: the state of a chunked snapshot
// is found from the checkpoint's txns and plan file alone, once the JSON
// commits before the checkpoint are deleted (log cleanup); the snapshot
// then resumes and completes.
func TestChunkedAfterCheckpointAndCleanup(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tb := openLocal(t, dir, Options{CheckpointInterval: -1})
	schema := bronze(t, capturedSchema())
	info := snapshotInfo(t, schema, "dbo_Orders", "0x0000002A00000F380003")
	plan := json.RawMessage(`{"ranges":[1,2,3,4]}`)
	st, err := tb.OpenChunked(ctx, info, 4, plan, "")
	if err != nil || st.Version != 0 {
		t.Fatalf("open: %+v, %v", st, err)
	}
	wave := func(n int, chunks ...int) sink.Chunked {
		t.Helper()
		var parts []sink.Part
		stamp := info.LSN
		stamp[9] += byte(n + 1)
		for _, c := range chunks {
			rec := buildRecord(t, schema, c*10, 10, rowSpec{ci: info.CaptureInstance, startLSN: stamp.String(), commitTS: baseTime, snapshot: info.LSN.String()})
			p, err := tb.WritePartition(ctx, info, c, reader(t, schema, rec))
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, p)
		}
		st, err := tb.CommitChunks(ctx, info, sink.Wave{Number: n, Stamp: stamp, CommitTS: baseTime}, parts)
		if err != nil {
			t.Fatalf("wave %d: %v", n, err)
		}
		return st
	}
	wave(0, 0)
	for i := range 3 { // other commits in between
		if _, err := tb.AppendChanges(ctx, "dbo_Other", int64(i+1), changeRows(t, schema, "dbo_Other", int64(i+1), 100+i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	st = wave(1, 1, 2)
	if st.Committed != 3 || st.Version != 5 {
		t.Fatalf("after wave 1: %+v", st)
	}
	if err := tb.Checkpoint(ctx, 2); err != nil {
		t.Fatal(err)
	}
	for v := 0; v <= 5; v++ {
		if err := os.Remove(filepath.Join(dir, filepath.FromSlash(deltalog.CommitKey(int64(v))))); err != nil {
			t.Fatal(err)
		}
	}
	// A fresh Table: only the multi-part checkpoint at 5 and the plan file.
	tb2 := openLocal(t, dir, Options{})
	found, err := tb2.FindChunked(ctx, "DBO_ORDERS")
	if err != nil || found.Committed != 3 || found.Chunks != 4 || found.Complete || found.Version != 5 || found.LSN != info.LSN ||
		!found.CommitTS.Equal(baseTime.Truncate(time.Microsecond)) || string(found.Plan) != string(plan) || found.CaptureInstance != "dbo_Orders" {
		t.Fatalf("FindChunked after checkpoint and cleanup = %+v, %v", found, err)
	}
	if _, err := tb2.CompleteChunked(ctx, info); err == nil {
		t.Fatal("completed with 3 of 4 chunks committed")
	}
	tb = tb2
	st = wave(2, 3)
	if st.Committed != 4 || st.Version != 6 {
		t.Fatalf("after wave 2: %+v", st)
	}
	if _, err := tb.CommitChunks(ctx, info, sink.Wave{Number: 2, Stamp: info.LSN}, nil); err == nil {
		t.Fatal("an empty wave committed")
	}
	done, err := tb.CompleteChunked(ctx, info)
	if err != nil || !done.Complete || done.Version != 7 {
		t.Fatalf("complete: %+v, %v", done, err)
	}
	all, err := tb.ChunkedSnapshots(ctx)
	if err != nil || len(all) != 1 || all[0].PlanID != info.PlanID || !all[0].Complete || all[0].Committed != 4 {
		t.Fatalf("ChunkedSnapshots = %+v, %v", all, err)
	}
	tbl := readAll(t, tb)
	defer tbl.Release()
	if tbl.NumRows() != 40+3 {
		t.Fatalf("%d rows, want 40 chunk rows and 3 change rows", tbl.NumRows())
	}
	// The durable records are txns; commitInfo carries the metadata.
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(deltalog.CommitKey(6))))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`\"chunked\":\"wave\"`, `\"chunks\":[3,4]`, `"appId":"cdcsnap/chunks/` + info.PlanID + `/4"`} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("commit 6 lacks %s:\n%s", want, b)
		}
	}
}

const (
	chunkRaceDirEnv = "CDCSNAP_DELTA_CHUNK_RACE_DIR"
	chunkRaceIDEnv  = "CDCSNAP_DELTA_CHUNK_RACE_ID"
)

// A re-executed test binary racing in TestChunkMultiProcessRace runs its
// part and exits before TestMain.
func init() {
	if dir := os.Getenv(chunkRaceDirEnv); dir != "" {
		out := chunkRaceOutcome{}
		st, err := chunkRaceOnce(dir, os.Getenv(chunkRaceIDEnv))
		out.Committed = st.Committed
		if errors.Is(err, sink.ErrChunkCommitted) {
			out.Refused = true
		} else if err != nil {
			out.Err = err.Error()
		}
		_ = json.NewEncoder(os.Stdout).Encode(out)
		os.Exit(0)
	}
}

// chunkRaceOutcome is what a racing process reports on stdout.
type chunkRaceOutcome struct {
	Committed int    `json:"committed"`
	Refused   bool   `json:"refused"`
	Err       string `json:"err,omitempty"`
}

func chunkRaceInfo(t testing.TB) sink.Info {
	info := snapshotInfo(t, bronze(t, capturedSchema()), "dbo_Orders", "0x0000002A00000F380003")
	info.PlanID = "plan-chunk-race"
	return info
}

func chunkRaceOnce(dir, id string) (sink.Chunked, error) {
	ctx := context.Background()
	t := &testing.T{}
	tb, err := Open(ctx, dir, Options{CheckpointInterval: 3})
	if err != nil {
		return sink.Chunked{}, err
	}
	defer tb.Close()
	info := chunkRaceInfo(t)
	stamp := info.LSN
	stamp[9] += 1
	parts, err := stageRace(t, ctx, tb, info, stamp.String(), dir, id)
	if err != nil {
		return sink.Chunked{}, err
	}
	return tb.CommitChunks(ctx, info, sink.Wave{Stamp: stamp, CommitTS: info.CommitTS}, parts)
}

// TestChunkMultiProcessRace re-executes the test binary in several
// processes that commit the same wave of one chunked snapshot (each with
// its own files) to one local table at once: exactly one wave lands, the
// others get ErrChunkCommitted, every change batch lands, and each
// version has exactly one commit file.
func TestChunkMultiProcessRace(t *testing.T) {
	const n = 6
	ctx := context.Background()
	dir := t.TempDir()
	tb := openLocal(t, dir, Options{})
	info := chunkRaceInfo(t)
	if _, err := tb.OpenChunked(ctx, info, 3, json.RawMessage(`{}`), ""); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for i := 0; i < n; i++ {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), chunkRaceDirEnv+"="+dir, fmt.Sprintf("%s=%d", chunkRaceIDEnv, i))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		outs = append(outs, &out)
	}
	for i := 0; i < n; i++ {
		for deadline := time.Now().Add(time.Minute); ; {
			if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("ready-%d", i))); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("racer %d never got ready", i)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	winners := 0
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("racer %d: %v\n%s", i, err, outs[i])
		}
		var o chunkRaceOutcome
		if err := json.Unmarshal(outs[i].Bytes(), &o); err != nil {
			t.Fatalf("racer %d printed %q", i, outs[i])
		}
		switch {
		case o.Err != "":
			t.Fatalf("racer %d: %s", i, o.Err)
		case !o.Refused:
			winners++
		}
		if o.Committed != 2 {
			t.Fatalf("racer %d: Committed %d, want 2", i, o.Committed)
		}
	}
	if winners != 1 {
		t.Fatalf("%d racers committed the wave, want exactly 1", winners)
	}

	re := regexp.MustCompile(`^(\d{20})\.json$`)
	var versions []string
	for _, name := range logFiles(t, dir) {
		if m := re.FindStringSubmatch(name); m != nil {
			versions = append(versions, m[1])
		}
	}
	sort.Strings(versions)
	// The open, one wave, n change batches.
	if len(versions) != n+2 {
		t.Fatalf("%d commit files, want %d: %v", len(versions), n+2, versions)
	}
	for i, v := range versions {
		if v != fmt.Sprintf("%020d", i) {
			t.Fatalf("commit files %v are not versions 0..%d", versions, n+1)
		}
	}
	found, err := tb.FindChunked(ctx, info.CaptureInstance)
	if err != nil || found.Committed != 2 {
		t.Fatalf("FindChunked = %+v, %v", found, err)
	}
	txns, _ := tb.txns(ctx)
	waves := 0
	for id := range txns {
		if strings.HasPrefix(id, chunksAppPrefix) {
			waves++
		}
	}
	if waves != 1 {
		t.Fatalf("%d wave txns, want 1: %v", waves, txns)
	}
	tbl := readAll(t, tb)
	defer tbl.Release()
	if tbl.NumRows() != 10+2*n {
		t.Fatalf("%d rows, want %d (one wave of 10, %d change batches of 2)", tbl.NumRows(), 10+2*n, n)
	}
}

// TestPartialConformance runs the partial-snapshot conformance suite on a
// local table and on a mem:// one.
func TestPartialConformance(t *testing.T) {
	t.Run("local", func(t *testing.T) {
		sinktest.RunPartial(t, func(t *testing.T) sink.PartialSink { return openLocal(t, t.TempDir(), Options{CheckpointInterval: 3}) })
	})
	t.Run("mem", func(t *testing.T) {
		sinktest.RunPartial(t, func(t *testing.T) sink.PartialSink { return openLocal(t, "mem://", Options{CheckpointInterval: 3}) })
	})
}
