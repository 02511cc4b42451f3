package tdsfake_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/tdsfake"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/source"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// TestKeyBoundsThatDoNotConvertBackAreRefused: three ranges tile a
// varchar key at two bounds whose Unicode text does not convert back to
// the column's code page unchanged. Here they hold characters code page
// 1252 lacks, which tdsfake converts to '?' as SQL Server does (FACTS.md
// F29); on a server such a reading comes from stored bytes the code page
// leaves undefined (F82, F96). Bound back, "xĀz" and "xĂb" become "x?z"
// and "x?b": the middle range is inverted, and the keys between ("x?m",
// stored as such) are read by both of its neighbours. Each range with such
// a bound is refused before it is read (sqlserver.ErrBoundNotExact, naming
// the column and the bound); the tiling at bounds that convert back reads
// every row once.
func TestKeyBoundsThatDoNotConvertBackAreRefused(t *testing.T) {
	ctx := context.Background()
	db := fake.New(fake.Options{})
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "names", Key: []string{"name"}, CaptureInstance: "dbo_names", Columns: []fake.ColumnDef{
		{Name: "name", Type: "varchar(30)", Collation: "SQL_Latin1_General_CP1_CI_AS"}, {Name: "n", Type: "int"},
	}}); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i, w := range []string{"xĀz", "xĂb", "x?m", "xé", "a"} {
		for j := range 5 {
			keys = append(keys, fmt.Sprintf("%s%d", w, j))
			if _, err := db.Load("dbo", "names", fake.Row{keys[len(keys)-1], int64(10*i + j)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	src, _, _ := serve(t, db, tdsfake.Options{PageRows: 3}, sqlserver.Options{})
	ci, err := src.CaptureInstance(ctx, "dbo_names")
	if err != nil {
		t.Fatal(err)
	}
	tiling := func(lo, hi string) []keyrange.Range {
		return []keyrange.Range{{Index: 0, Upper: keyrange.Tuple{lo}}, {Index: 1, Lower: keyrange.Tuple{lo}, Upper: keyrange.Tuple{hi}}, {Index: 2, Lower: keyrange.Tuple{hi}}}
	}
	read := func(r keyrange.Range) (map[string]int, error) {
		rr, err := src.ReadRange(ctx, ci, r, source.ReadOptions{})
		if err != nil {
			return nil, err
		}
		defer rr.Release()
		out := map[string]int{}
		for rr.Next() {
			rec := rr.RecordBatch()
			names := rec.Column(0).(*array.String)
			for i := range names.Len() {
				out[names.Value(i)]++
			}
		}
		return out, rr.Err()
	}
	refused, over := 0, map[string]int{}
	for _, r := range tiling("xĀz0", "xĂb0") {
		got, err := read(r)
		if err == nil {
			for k, n := range got {
				over[k] += n
			}
			continue
		}
		if !errors.Is(err, sqlserver.ErrBoundNotExact) || !strings.Contains(err.Error(), `column "name"`) {
			t.Fatalf("range %s: %v", r, err)
		}
		refused++
	}
	for k, n := range over {
		if n > 1 {
			t.Errorf("key %q read %d times over bounds that convert to other keys", k, n)
		}
	}
	if refused != 3 {
		t.Errorf("%d of 3 ranges refused: every range has a bound that converts to another key", refused)
	}
	seen := map[string]int{}
	for _, r := range tiling("x?m2", "xé0") {
		got, err := read(r)
		if err != nil {
			t.Fatalf("range %s: %v", r, err)
		}
		for k, n := range got {
			seen[k] += n
		}
	}
	for _, k := range keys {
		if seen[k] != 1 {
			t.Errorf("key %q read %d times over bounds that convert back", k, seen[k])
		}
	}
}
