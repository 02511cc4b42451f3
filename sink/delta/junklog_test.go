package delta

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestJunkLogNamesTheTable: a folder whose _delta_log holds a file that is
// no Delta commit is refused naming the table, "not a Delta table", and
// the file, still as a *CorruptLogError.
func TestJunkLogNamesTheTable(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "_delta_log"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "_delta_log", "00000000000000000000.json"), []byte("hello\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	tb := openLocal(t, dir, Options{})
	_, err := tb.Version(context.Background())
	var corrupt *CorruptLogError
	want := "delta: table " + dir + ": not a Delta table, or a damaged one: log file _delta_log/00000000000000000000.json: "
	if !errors.As(err, &corrupt) || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %v, want a *CorruptLogError starting %q", err, want)
	}
}
