package deltalog

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/internal/pqfile"
)

// corruptFooter is a file arrow-go v18.9.0's footer decoding panics on
// (parquet/schema makes a slice of a negative child count), found by
// fuzzing; testdata/fuzz keeps it as a regression input too.
func corruptFooter(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzCheckpointActions", "ff21e264b866f044"))
	if err != nil {
		t.Fatal(err)
	}
	// The corpus file's second line is []byte("..."): a Go string literal.
	lines := strings.SplitN(string(b), "\n", 3)
	lit := strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")")
	v, err := strconv.Unquote(lit)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(v)
}

// TestCorruptParquetIsAnError: a checkpoint whose footer makes arrow-go
// panic is an error (pqfile.ErrCorrupt), and the process goes on.
func TestCorruptParquetIsAnError(t *testing.T) {
	b := corruptFooter(t)
	if _, err := checkpointActions(b); !errors.Is(err, pqfile.ErrCorrupt) {
		t.Fatalf("checkpoint of a corrupt footer: %v", err)
	}
}

// FuzzCheckpointActions: any bytes as a checkpoint file decode into
// actions or fail with an error, never panic. Seeded with checkpoints
// Spark wrote (testdata/delta).
func FuzzCheckpointActions(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "delta", "*", "_delta_log", "*.checkpoint.parquet"))
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("PAR1\x00\x00\x00\x00PAR1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		acts, err := checkpointActions(b)
		if err != nil && acts != nil {
			t.Fatalf("%d actions with the error %v", len(acts), err)
		}
	})
}
