package delta

import (
	"bufio"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// processUmask reads the process's umask from /proc/self/status (Linux
// 4.7 and later); ok is false elsewhere.
func processUmask() (os.FileMode, bool) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Umask:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			return os.FileMode(m), err == nil
		}
	}
	return 0, false
}

// TestLocalTableFilesHaveTheUmasksMode: every file of a local table, its
// log's commits, checkpoint and _last_checkpoint and its partial-snapshot
// records as much as its data files, gets mode 0666 less the process's
// umask, so whoever may read the data files may read the log (Spark,
// DuckDB or a person as another user). Run as root, another user (nobody)
// then reads every file.
func TestLocalTableFilesHaveTheUmasksMode(t *testing.T) {
	umask, ok := processUmask()
	if !ok {
		t.Skip("no /proc/self/status to read the umask from")
	}
	want := 0o666 &^ umask
	ctx := context.Background()
	dir := t.TempDir()
	tb := openLocal(t, dir, Options{})
	schema := bronze(t, capturedSchema())
	if _, err := takeSnapshot(ctx, t, tb, snapshotInfo(t, schema, "dbo_Orders", "0x0000002A00000F380003"), 2, 20); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.AppendChanges(ctx, "dbo_Orders", 1, changeRows(t, schema, "dbo_Orders", 1, 100, 5)); err != nil {
		t.Fatal(err)
	}
	if err := tb.Checkpoint(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := tb.OpenPartial(ctx, snapshotInfo(t, schema, "dbo_Orders", "0x0000002A00000F390001"), []byte(`{"plan":"kept for the rerun"}`)); err != nil {
		t.Fatal(err)
	}
	var files []string
	seen := map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		files = append(files, path)
		switch {
		case strings.HasSuffix(rel, ".checkpoint.parquet"):
			seen["checkpoint"] = true
		case strings.HasPrefix(rel, "_delta_log"+string(filepath.Separator)+"0") && strings.HasSuffix(rel, ".json"):
			seen["commit"] = true
		case strings.HasSuffix(rel, "_last_checkpoint"):
			seen["_last_checkpoint"] = true
		case strings.HasPrefix(rel, "_cdcsnap"):
			seen["partial record"] = true
		case strings.HasSuffix(rel, ".parquet"):
			seen["data file"] = true
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v (0666 less the umask %03o)", rel, info.Mode().Perm(), want, umask)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"commit", "checkpoint", "_last_checkpoint", "partial record", "data file"} {
		if !seen[kind] {
			t.Errorf("the table holds no %s to check", kind)
		}
	}
	if os.Geteuid() != 0 || want&0o004 == 0 {
		return
	}
	// As root: let nobody through the test's folders (t.TempDir makes
	// them 0700), and have it read every file.
	for d := dir; d != filepath.Dir(d) && strings.HasPrefix(d, os.TempDir()) && d != filepath.Clean(os.TempDir()); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		cmd := exec.Command("cat", f)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		if out, err := cmd.CombinedOutput(); err != nil {
			rel, _ := filepath.Rel(dir, f)
			t.Errorf("another user (nobody) cannot read %s: %v: %.200s", rel, err, out)
		}
	}
}
