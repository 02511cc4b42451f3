package delta

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/internal/deltalog"
)

// TestTypeWideningPreviewIsNotWidened: a table whose protocol has only
// typeWidening-preview (Delta 3.2 and 3.3, Databricks before the stable
// feature) is not widened: its readers take fewer type changes (Delta
// 3.2: byte to short to int) and read delta.typeChanges with a
// tableVersion this writer does not record. Records of a wider type are
// refused, naming the preview, and nothing is committed; with the stable
// typeWidening feature the same records widen the column.
func TestTypeWideningPreviewIsNotWidened(t *testing.T) {
	ctx := context.Background()
	schema := bronze(t, capturedSchema())
	for _, feature := range []string{"typeWidening-preview", "typeWidening"} {
		dir := featureTable(t, deltalog.Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"timestampNtz", feature}, WriterFeatures: []string{"timestampNtz", feature}},
			map[string]string{"delta.enableTypeWidening": "true"}, nil)
		// The table's qty is a short; the records' an integer.
		commit := filepath.Join(dir, "_delta_log", deltalog.CommitKey(0)[len(deltalog.LogDir):])
		b, _ := os.ReadFile(commit)
		narrow := strings.Replace(string(b), `{\"name\":\"qty\",\"type\":\"integer\"`, `{\"name\":\"qty\",\"type\":\"short\"`, 1)
		if narrow == string(b) {
			t.Fatal("no qty column to narrow")
		}
		if err := os.WriteFile(commit, []byte(narrow), 0o666); err != nil {
			t.Fatal(err)
		}
		tb := openLocal(t, dir, Options{})
		_, err := tb.AppendChanges(ctx, "dbo_Orders", 1, changeRows(t, schema, "dbo_Orders", 1, 0, 10))
		s, serr := tb.current(ctx)
		if serr != nil {
			t.Fatal(serr)
		}
		qty, _, _ := s.Schema.Field("qty")
		var se *deltalog.SchemaError
		switch {
		case feature == "typeWidening-preview" && (!errors.As(err, &se) || se.Column != "qty" || !strings.Contains(err.Error(), "typeWidening-preview") || s.Version != 0):
			t.Fatalf("records wider than a preview table's column: %v (table at version %d)", err, s.Version)
		case feature == "typeWidening" && (err != nil || qty.TypeName() != "integer"):
			t.Fatalf("records wider than a typeWidening table's column: %v; qty is %s", err, qty.TypeName())
		}
	}
}
