package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"gocloud.dev/blob/memblob"

	"github.com/cdcsnap/cdcsnap/internal/bucketstore"
	"github.com/cdcsnap/cdcsnap/internal/deltalog"
	"github.com/cdcsnap/cdcsnap/internal/faultblob"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/sinktest"
)

// openedPartial opens a local table with the partial snapshot of dbo_t at
// LSN 9 recorded.
func openedPartial(t *testing.T) (string, *Table, sink.Info) {
	t.Helper()
	dir := t.TempDir()
	tb := openLocal(t, dir, Options{})
	return dir, tb, openPartial(t, tb)
}

// openPartial records a partial snapshot of dbo_t at LSN 9 in tb.
func openPartial(t *testing.T, tb *Table) sink.Info {
	t.Helper()
	info := sinktest.Info("dbo_t", sinktest.LSN(9))
	if err := tb.OpenPartial(context.Background(), info, json.RawMessage(`{"plan":1}`)); err != nil {
		t.Fatal(err)
	}
	return info
}

// writePart writes rows [from, to) as partition i of info.
func writePart(t *testing.T, tb *Table, info sink.Info, i int, from, to int64) sink.Part {
	t.Helper()
	rr, err := sinktest.Records(memory.DefaultAllocator, info, from, to, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	part, err := tb.WritePartition(context.Background(), info, i, rr)
	if err != nil {
		t.Fatal(err)
	}
	return part
}

// writeRecorded writes rows [from, to) as partition i of info and records
// the part.
func writeRecorded(t *testing.T, tb *Table, info sink.Info, i int, from, to int64) sink.Part {
	t.Helper()
	part := writePart(t, tb, info, i, from, to)
	got, err := tb.RecordPart(context.Background(), info, part)
	if err != nil && !errors.Is(err, sink.ErrPartRecorded) {
		t.Fatal(err)
	}
	return got
}

func partFiles(t *testing.T, p sink.Part) []deltalog.AddFile {
	t.Helper()
	var adds []deltalog.AddFile
	if err := json.Unmarshal(p.Data, &adds); err != nil {
		t.Fatal(err)
	}
	return adds
}

// TestPartialFilesVacuumed: a recorded part whose data file is gone (as
// VACUUM removes uncommitted files past its retention) or truncated is
// Lost; recording the partition again writes the next generation, which
// FindPartial then returns; and CommitSnapshot refuses a part whose file
// is gone, naming it, and commits nothing.
func TestPartialFilesVacuumed(t *testing.T) {
	ctx := context.Background()
	dir, tb, info := openedPartial(t)
	p0 := writeRecorded(t, tb, info, 0, 0, 100)
	p1 := writeRecorded(t, tb, info, 1, 100, 200)
	gone := partFiles(t, p0)[0].Path
	if err := os.Remove(filepath.Join(dir, gone)); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dir, partFiles(t, p1)[0].Path), 10); err != nil {
		t.Fatal(err)
	}
	p, err := tb.FindPartial(ctx, "dbo_t")
	if err != nil || len(p.Parts) != 0 || len(p.Lost) != 2 {
		t.Fatalf("FindPartial after the files went: %+v, %v; want partitions 0 and 1 lost", p, err)
	}
	if _, err := tb.CommitSnapshot(ctx, info, []sink.Part{p0, p1}); err == nil {
		t.Fatal("CommitSnapshot committed parts whose files are gone")
	} else if pe := (*PartsError)(nil); !errors.As(err, &pe) || pe.Partition != 0 {
		t.Fatalf("CommitSnapshot: %v; want a *PartsError naming partition 0", err)
	}
	if v, err := tb.Version(ctx); err != nil || v != -1 {
		t.Fatalf("after the refused commit the table is at version %d (%v); want no commit", v, err)
	}
	again := writeRecorded(t, tb, info, 0, 0, 100)
	if string(again.Data) == string(p0.Data) {
		t.Fatal("recording partition 0 again returned the lost part")
	}
	if _, err := os.Stat(filepath.Join(dir, "_cdcsnap/partial", info.PlanID, "part-000000.1.json")); err != nil {
		t.Fatalf("the second record of partition 0 is not generation 1: %v", err)
	}
	p, err = tb.FindPartial(ctx, "dbo_t")
	if err != nil || len(p.Parts) != 1 || string(p.Parts[0].Data) != string(again.Data) || len(p.Lost) != 1 || p.Lost[0] != 1 {
		t.Fatalf("FindPartial: %+v, %v; want partition 0's new part and partition 1 lost", p, err)
	}
}

// TestPartialBadRecordSkipped: a plan.json that does not decode (written
// by hand, or by another program) does not stop FindPartial for other
// instances.
func TestPartialBadRecordSkipped(t *testing.T) {
	ctx := context.Background()
	dir, tb, info := openedPartial(t)
	bad := filepath.Join(dir, "_cdcsnap/partial/0badc0de/plan.json")
	if err := os.MkdirAll(filepath.Dir(bad), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("{not json"), 0o666); err != nil {
		t.Fatal(err)
	}
	if p, err := tb.FindPartial(ctx, "dbo_t"); err != nil || p.PlanID != info.PlanID {
		t.Fatalf("FindPartial beside a bad record: %+v, %v", p, err)
	}
}

// TestPartialDropLeavesNoFolder: dropping a local table's partial snapshot
// removes its folder, so records do not pile up.
func TestPartialDropLeavesNoFolder(t *testing.T) {
	ctx := context.Background()
	dir, tb, info := openedPartial(t)
	writeRecorded(t, tb, info, 0, 0, 10)
	if err := tb.DropPartial(ctx, "dbo_t", info.PlanID); err != nil {
		t.Fatal(err)
	}
	es, err := os.ReadDir(filepath.Join(dir, "_cdcsnap/partial"))
	if err != nil || len(es) != 0 {
		t.Fatalf("after the drop _cdcsnap/partial holds %v (%v); want nothing", es, err)
	}
}

// TestDeltaRSVacuumAndPartial runs delta-rs's VACUUM (no retention, as
// after a week) over a table holding a committed snapshot and a partial
// one: in full mode it deletes the partial snapshot's uncommitted data
// files and leaves the records under _cdcsnap (a folder starting with _);
// FindPartial then reports the partitions Lost, and a commit of the old
// parts is refused. In lite mode it deletes nothing of either. The
// committed snapshot is intact both times.
func TestDeltaRSVacuumAndPartial(t *testing.T) {
	py := pythonOrSkip(t)
	ctx := context.Background()
	for _, mode := range []string{"lite", "full"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			tb := openLocal(t, dir, Options{})
			committed := sinktest.Info("dbo_a", sinktest.LSN(5))
			a := writePart(t, tb, committed, 0, 0, 50)
			if _, err := tb.CommitSnapshot(ctx, committed, []sink.Part{a}); err != nil {
				t.Fatal(err)
			}
			info := openPartial(t, tb)
			p0 := writeRecorded(t, tb, info, 0, 0, 100)
			p1 := writeRecorded(t, tb, info, 1, 100, 200)
			var out struct {
				Deleted []string `json:"deleted"`
			}
			runPython(t, py, &out, "vacuum", dir, mode)
			uncommitted := map[string]bool{partFiles(t, p0)[0].Path: true, partFiles(t, p1)[0].Path: true}
			for _, d := range out.Deleted {
				if strings.Contains(d, "_cdcsnap") || strings.Contains(d, "_delta_log") {
					t.Fatalf("delta-rs VACUUM (%s) deleted %s", mode, d)
				}
				if !uncommitted[filepath.Base(d)] {
					t.Fatalf("delta-rs VACUUM (%s) deleted %s, which is not an uncommitted file of the partial snapshot", mode, d)
				}
			}
			p, err := tb.FindPartial(ctx, "dbo_t")
			if err != nil {
				t.Fatalf("after delta-rs VACUUM (%s) the partial snapshot is gone: %v", mode, err)
			}
			if snap, err := tb.FindSnapshot(ctx, "dbo_a"); err != nil || snap.Rows != 50 {
				t.Fatalf("after delta-rs VACUUM (%s) the committed snapshot is %+v, %v", mode, snap, err)
			}
			switch mode {
			case "lite":
				if len(out.Deleted) != 0 || len(p.Parts) != 2 {
					t.Fatalf("lite VACUUM deleted %v; the partial snapshot holds %d parts, lost %v; want nothing deleted", out.Deleted, len(p.Parts), p.Lost)
				}
			case "full":
				if len(out.Deleted) != 2 || len(p.Parts) != 0 || len(p.Lost) != 2 {
					t.Fatalf("full VACUUM deleted %v; the partial snapshot holds %d parts, lost %v; want both uncommitted files deleted and both partitions lost", out.Deleted, len(p.Parts), p.Lost)
				}
				if _, err := tb.CommitSnapshot(ctx, info, []sink.Part{p0, p1}); err == nil {
					t.Fatal("committed the parts whose files delta-rs VACUUM deleted")
				}
			}
		})
	}
}

// TestFindPartialKeepsStoreFailures: a store failure that is not a
// missing object (gocloud.dev code Unknown, here caused by an ENOENT of a
// dial) fails FindPartial; it neither reports a recorded part Lost nor
// says there is no partial snapshot.
func TestFindPartialKeepsStoreFailures(t *testing.T) {
	ctx := context.Background()
	fb := faultblob.New(memblob.OpenBucket(nil), true)
	tb, err := OpenStore(bucketstore.New(fb.Bucket(), "s3://bucket/t", true), "s3://bucket/t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	info := openPartial(t, tb)
	writeRecorded(t, tb, info, 0, 0, 100)
	if p, err := tb.FindPartial(ctx, info.CaptureInstance); err != nil || len(p.Parts) != 1 {
		t.Fatalf("FindPartial = %+v, %v", p, err)
	}
	dial := fmt.Errorf("dial: %w", &os.SyscallError{Syscall: "connect", Err: fs.ErrNotExist})
	for _, f := range []faultblob.Fault{
		{Op: faultblob.OpAttributes, Key: `\.parquet$`, Times: -1, Err: dial},
		{Op: faultblob.OpOpenRead, Key: `plan\.json$`, Times: -1, Err: dial},
	} {
		fb.Inject(f)
		p, err := tb.FindPartial(ctx, info.CaptureInstance)
		if err == nil || errors.Is(err, sink.ErrNotFound) {
			t.Errorf("%s of %s failing: FindPartial = %d parts, lost %v, %v; want the store's error", f.Op, f.Key, len(p.Parts), p.Lost, err)
		}
		fb.Clear()
	}
}
