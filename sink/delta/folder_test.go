package delta

import (
	"context"
	"io/fs"
	"net/url"
	"path/filepath"
	"regexp"
	"testing"
)

// TestLocalTableFolderHoldsOnlyTheTable: after a snapshot, change batches
// and a checkpoint, a local table's folder holds the log's commits and
// checkpoints, _last_checkpoint and the data files the log adds: no
// temporary file or folder of the writer is left beside them.
func TestLocalTableFolderHoldsOnlyTheTable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tb := openLocal(t, dir, Options{CheckpointInterval: 2})
	schema := bronze(t, capturedSchema())
	if _, err := takeSnapshot(ctx, t, tb, snapshotInfo(t, schema, "dbo_Orders", "0x0000002A00000F380003"), 2, 20); err != nil {
		t.Fatal(err)
	}
	for b := int64(1); b <= 2; b++ {
		if _, err := tb.AppendChanges(ctx, "dbo_Orders", b, changeRows(t, schema, "dbo_Orders", b, int(b)*100, 5)); err != nil {
			t.Fatal(err)
		}
	}
	files, err := tb.files(ctx)
	if err != nil {
		t.Fatal(err)
	}
	data := map[string]bool{}
	for _, f := range files {
		p, err := url.PathUnescape(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		data[filepath.FromSlash(p)] = true
	}
	logName := regexp.MustCompile(`^_delta_log/(\d{20}\.(json|checkpoint\.parquet)|_last_checkpoint)$`)
	sawCheckpoint := false
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		switch {
		case d.IsDir():
			if rel != "_delta_log" {
				t.Errorf("folder %s is not part of the table", rel)
			}
		case logName.MatchString(filepath.ToSlash(rel)):
			sawCheckpoint = sawCheckpoint || filepath.Ext(rel) == ".parquet"
		case data[rel]:
			delete(data, rel)
		default:
			t.Errorf("file %s is not part of the table", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sawCheckpoint {
		t.Error("no checkpoint was written: the test did not exercise checkpoint files")
	}
	for p := range data {
		t.Errorf("the log adds %s, which is not in the folder", p)
	}
}
