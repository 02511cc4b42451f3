package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/cdcsnap/cdcsnap/internal/deltalog"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
)

// expireTxns does to a local table what a checkpoint writer does once
// delta.setTransactionRetentionDuration has passed and the log has been
// cleaned (the Delta protocol lets it drop expired txn actions): a
// checkpoint of the latest version without txn actions, and every commit
// and older checkpoint at or below it deleted.
func expireTxns(t *testing.T, ctx context.Context, dir string) {
	t.Helper()
	tb := openLocal(t, dir, Options{})
	s, err := tb.current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Version < 0 {
		return // no table yet
	}
	c := s.Clone()
	c.Txns = map[string]deltalog.Txn{}
	es, err := os.ReadDir(filepath.Join(dir, "_delta_log"))
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.dlog.WriteCheckpoint(ctx, c, 1); err != nil {
		t.Fatal(err)
	}
	keep := fmt.Sprintf("%020d.checkpoint.parquet", s.Version)
	for _, e := range es {
		var v int64
		if _, err := fmt.Sscanf(e.Name(), "%020d.", &v); err == nil && v <= s.Version && e.Name() != keep {
			if err := os.Remove(filepath.Join(dir, "_delta_log", e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	if txns, err := openLocal(t, dir, Options{}).txns(ctx); err != nil || len(txns) != 0 {
		t.Fatalf("after expiry the table still has txns %v (%v)", txns, err)
	}
}

// compact does what OPTIMIZE does: the given files' rows rewritten into
// new files (snapshot and change rows mixed) and the old ones removed, in
// one commit with dataChange false. stats says what the new files carry:
// "all", "none" (a writer without stats) or "head" (only the first
// columns, as delta.dataSkippingNumIndexedCols does: no metadata column).
func compact(t *testing.T, ctx context.Context, tb *Table, files []deltalog.AddFile, stats string) {
	t.Helper()
	s, err := tb.current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	as, err := s.Schema.ArrowSchema()
	if err != nil {
		t.Fatal(err)
	}
	rr := &tableReader{ctx: ctx, t: tb, files: files, schema: as, refs: 1}
	adds, _, err := tb.writeRecords(ctx, as, 0, rr, false)
	rr.Release()
	if err != nil {
		t.Fatal(err)
	}
	for i := range adds {
		adds[i].DataChange = false
		switch stats {
		case "none":
			adds[i].Stats = ""
		case "head":
			st, _ := adds[i].ParseStats()
			for _, m := range []map[string]any{st.MinValues, st.MaxValues} {
				for k := range m {
					if strings.HasPrefix(k, "_") {
						delete(m, k)
					}
				}
			}
			for k := range st.NullCount {
				if strings.HasPrefix(k, "_") {
					delete(st.NullCount, k)
				}
			}
			b, _ := json.Marshal(st)
			adds[i].Stats = string(b)
		}
	}
	_, err = tb.commit(ctx, func(s *deltalog.State, v int64) ([]deltalog.Action, error) {
		acts := []deltalog.Action{{CommitInfo: commitInfo("OPTIMIZE", "", nil)}}
		for _, f := range files {
			acts = append(acts, deltalog.Action{Remove: &deltalog.RemoveFile{Path: f.Path, DeletionTimestamp: time.Now().UnixMilli(), Size: f.Size}})
		}
		for i := range adds {
			acts = append(acts, deltalog.Action{Add: &adds[i]})
		}
		return acts, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFoundFromRowsProperty: random histories of whole snapshots (and
// resnapshots) of two instances, change batches, txn expiry and
// compactions (with full, no, or partial stats). After every step the
// newest snapshot of each instance (LSN, commit time, rows) and its last
// change batch are what the history says, whether the txn records exist
// or not; a replayed batch appends nothing; a rerun's snapshot commit is
// refused as ErrSnapshotExists.
func TestFoundFromRowsProperty(t *testing.T) {
	ctx := context.Background()
	schema := bronze(t, capturedSchema())
	type want struct {
		snap sink.Snapshot
		has  bool
		// batch is the last batch appended; rowsBatch the last one with
		// rows, which is all the rows can tell once txnLive is false.
		batch, rowsBatch int64
		txnLive          bool
	}
	for c := range 12 {
		r := rand.New(rand.NewPCG(uint64(c), 16))
		dir := t.TempDir()
		names := []string{"Sales_Orders", "dbo_ſtock"} // ſ folds to s: names are matched ignoring case
		spell := func(ci string) string {
			switch r.IntN(3) {
			case 0:
				return strings.ToUpper(ci)
			case 1:
				return strings.ToLower(ci)
			}
			return ci
		}
		w := map[string]*want{}
		for _, n := range names {
			w[n] = &want{}
		}
		var l uint64 = 0x2A_0000_0100
		nextLSN := func() lsn.LSN {
			l += 1 + uint64(r.IntN(1000))
			return mustLSN(t, fmt.Sprintf("0x%08X%08X%04X", uint32(l>>32), uint32(l), 1))
		}
		expired := false
		var history []string
		for step := range 14 {
			tb := openLocal(t, dir, Options{CheckpointInterval: -1, TargetFileSize: 2 << 10, RowGroupRows: 40})
			ci := names[r.IntN(len(names))]
			switch k := r.IntN(10); {
			case k < 3:
				info := snapshotInfo(t, schema, spell(ci), "0x00000000000000000000")
				info.LSN = nextLSN()
				info.CommitTS = baseTime.Add(time.Duration(l%100000) * 3333 * time.Microsecond)
				info.Replaces = w[ci].snap.LSN
				info.PlanID = fmt.Sprintf("p%d", step)
				n := 1 + r.IntN(3)
				per := 1 + r.IntN(60)
				sn, err := takeSnapshot(ctx, t, tb, info, n, per)
				if err != nil {
					t.Fatalf("case %d step %d: snapshot: %v (history %v)", c, step, err, history)
				}
				w[ci].snap, w[ci].has = sn, true
				history = append(history, "snapshot "+info.CaptureInstance)
			case k < 6:
				b := w[ci].batch + 1 + r.Int64N(2)
				n := r.IntN(8)
				if _, err := tb.AppendChanges(ctx, spell(ci), b, changeRows(t, schema, spell(ci), b, r.IntN(100), n)); err != nil {
					t.Fatalf("case %d step %d: changes: %v", c, step, err)
				}
				w[ci].batch, w[ci].txnLive = b, true
				if n > 0 {
					w[ci].rowsBatch = b
				}
				history = append(history, fmt.Sprintf("batch %d of %s", b, ci))
			case k < 8:
				expireTxns(t, ctx, dir)
				expired = true
				for _, n := range names {
					w[n].txnLive = false
				}
				history = append(history, "expire")
			default:
				files, err := tb.files(ctx)
				if err != nil || len(files) < 2 {
					continue
				}
				r.Shuffle(len(files), func(i, j int) { files[i], files[j] = files[j], files[i] })
				stats := []string{"all", "none", "head"}[r.IntN(3)]
				compact(t, ctx, tb, files[:2+r.IntN(len(files)-1)], stats)
				history = append(history, "compact "+stats)
			}
			tb = openLocal(t, dir, Options{})
			for _, ci := range names {
				want := w[ci]
				got, err := tb.FindSnapshot(ctx, spell(ci))
				if !want.has {
					if !errors.Is(err, sink.ErrNotFound) {
						t.Fatalf("case %d step %d: %s: FindSnapshot = %+v, %v; want ErrNotFound (history %v)", c, step, ci, got, err, history)
					}
				} else {
					if err != nil || got.LSN != want.snap.LSN || !got.CommitTS.Equal(want.snap.CommitTS) || got.Rows != want.snap.Rows {
						t.Fatalf("case %d step %d: %s: FindSnapshot = %+v, %v; want %+v (history %v)", c, step, ci, got, err, want.snap, history)
					}
					if got.Version != want.snap.Version && (got.Version != -1 || !expired) {
						t.Fatalf("case %d step %d: %s: version %d, want %d or -1 after expiry", c, step, ci, got.Version, want.snap.Version)
					}
					rr, err := tb.ReadSnapshotRows(ctx, ci)
					if err != nil {
						t.Fatal(err)
					}
					if n := countRows(t, rr); n != want.snap.Rows {
						t.Fatalf("case %d step %d: %s: ReadSnapshotRows read %d rows, want %d (history %v)", c, step, ci, n, want.snap.Rows, history)
					}
					// A rerun that did not see the snapshot would commit a
					// second one: the commit itself refuses.
					info := snapshotInfo(t, schema, ci, "0xFFFFFFFF000000000001")
					info.PlanID = "rerun"
					if _, err := takeSnapshot(ctx, t, tb, info, 1, 3); !errors.Is(err, sink.ErrSnapshotExists) {
						t.Fatalf("case %d step %d: %s: a second snapshot committed: %v", c, step, ci, err)
					}
				}
				s, err := tb.current(ctx)
				if err != nil {
					t.Fatal(err)
				}
				// An empty batch leaves no row: once its txn is gone it is
				// appended again, which appends nothing.
				wantLast := want.rowsBatch
				if want.txnLive {
					wantLast = want.batch
				}
				last, ok, err := tb.lastBatch(ctx, s, ci)
				if err != nil || ok != (wantLast > 0) || last != wantLast {
					t.Fatalf("case %d step %d: %s: last batch %d, %v, %v; want %d (history %v)", c, step, ci, last, ok, err, wantLast, history)
				}
				if wantLast > 0 {
					v, err := tb.AppendChanges(ctx, ci, wantLast, changeRows(t, schema, ci, wantLast, 0, 2))
					if err != nil || v != s.Version {
						t.Fatalf("case %d step %d: %s: replaying batch %d appended (version %d, was %d): %v", c, step, ci, wantLast, v, s.Version, err)
					}
				}
			}
		}
	}
}

// TestRowsFallbackReadsAlmostNothing: with the txn records gone, finding
// a snapshot whose files are untouched reads one file (for its exact
// commit time) and settles the rest by their stats; after a compaction
// without stats, it reads the compacted file.
func TestRowsFallbackReadsAlmostNothing(t *testing.T) {
	ctx := context.Background()
	schema := bronze(t, capturedSchema())
	dir := t.TempDir()
	tb := openLocal(t, dir, Options{TargetFileSize: 1 << 10, RowGroupRows: 10})
	if _, err := takeSnapshot(ctx, t, tb, snapshotInfo(t, schema, "dbo_Orders", "0x0000002A000000100001"), 10, 80); err != nil {
		t.Fatal(err)
	}
	for b := int64(1); b <= 3; b++ {
		if _, err := tb.AppendChanges(ctx, "dbo_Orders", b, changeRows(t, schema, "dbo_Orders", b, int(b)*10, 5)); err != nil {
			t.Fatal(err)
		}
	}
	expireTxns(t, ctx, dir)
	tb = openLocal(t, dir, Options{})
	s, err := tb.current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Files) < 10 {
		t.Fatalf("only %d files; the test wants many", len(s.Files))
	}
	facts, err := tb.scanRows(ctx, s, "DBO_ORDERS", wantSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	if l, sn, ok := facts.newestSnapshot(); !ok || l != mustLSN(t, "0x0000002A000000100001") || sn.rows != 800 || !sn.commitTS.Equal(baseTime) {
		t.Fatalf("found %v %+v %v", l, sn, ok)
	}
	if facts.opened != 1 || facts.skipped != len(s.Files) {
		t.Fatalf("read %d files and settled %d by stats of %d; want 1 read (the commit time) and all settled", facts.opened, facts.skipped, len(s.Files))
	}
	batches, err := tb.scanRows(ctx, s, "dbo_orders", wantBatch)
	if err != nil {
		t.Fatal(err)
	}
	if !batches.hasBatch || batches.batch != 3 || batches.opened != 0 {
		t.Fatalf("batches: %+v; want batch 3 from stats alone", batches)
	}
	compact(t, ctx, tb, s.SortedFiles(), "none")
	s, _ = tb.current(ctx)
	facts, err = tb.scanRows(ctx, s, "dbo_Orders", wantSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	if _, sn, ok := facts.newestSnapshot(); !ok || sn.rows != 800 || facts.opened != len(s.Files) {
		t.Fatalf("after a compaction without stats: %+v, read %d of %d files", sn, facts.opened, len(s.Files))
	}
}

// TestFoldRange: every string equal to ci ignoring case lies between the
// bounds, byte-wise, checked against every case variant of short names.
func TestFoldRange(t *testing.T) {
	for _, ci := range []string{"dbo_Orders", "ſtock", "Kelvin_K", "straße", "ǅemal", "x1"} {
		lo, hi := foldRange(ci)
		var variants func(prefix string, rest []rune)
		n := 0
		variants = func(prefix string, rest []rune) {
			if len(rest) == 0 {
				n++
				if !strings.EqualFold(prefix, ci) || prefix < lo || prefix > hi {
					t.Fatalf("%q: variant %q outside [%q, %q]", ci, prefix, lo, hi)
				}
				return
			}
			r := rest[0]
			variants(prefix+string(r), rest[1:])
			for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
				variants(prefix+string(f), rest[1:])
			}
		}
		variants("", []rune(ci))
		if n < 2 {
			t.Fatalf("%q: only %d variants", ci, n)
		}
	}
}

func countRows(t *testing.T, rr interface {
	Next() bool
	RecordBatch() arrow.RecordBatch
	Err() error
	Release()
}) int64 {
	t.Helper()
	defer rr.Release()
	var n int64
	for rr.Next() {
		n += rr.RecordBatch().NumRows()
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}
