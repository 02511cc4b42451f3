package reconcile_test

import (
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/reconcile"
	"github.com/cdcsnap/cdcsnap/source"
)

// collatedSource is a fake whose capture instance reports collation for
// its string key: the fake stores the key under Latin1_General_BIN2, so
// it holds every stored value the oracle's collation keeps apart
// (testworld.ServerKey), which Go's case folding would take for one.
type collatedSource struct {
	*fake.DB
	collation string
}

func (s collatedSource) CaptureInstance(ctx context.Context, name string) (*source.CaptureInstance, error) {
	ci, err := s.DB.CaptureInstance(ctx, name)
	if err != nil {
		return nil, err
	}
	out := *ci
	out.Columns = slices.Clone(ci.Columns)
	out.Columns[0].Collation = s.collation
	return &out, nil
}

// records is a RowReader of fixed batches.
type records []arrow.RecordBatch

func (r records) ReadAll(context.Context) (array.RecordReader, error) {
	return array.NewRecordReader(r[0].Schema(), r)
}

// TestReconcileServerEqualKeys: under a collation whose equality folds
// accents, width and case, expands ß and ties "aa" into one letter
// (testworld.ServerKey), the target is the bronze rows of a random history
// of keys changed into other keys, the collation's equal ones included
// (testworld.KeyHistory), and the source is the table the history ends
// with, drifted: values changed, rows deleted, keys added that are no
// other key, and keys re-spelled as another stored value the collation
// takes for equal. The brute-force oracle: the keys that differ are
// exactly the drift, by stored value (trailing spaces aside): a changed
// value is Different, a deleted row Extra, an added key Missing, a
// re-spelled key Missing and its old spelling Extra (the collation
// folds no ASCII letter for certain, keyrange.CertainKey). Grouping the
// target by Go's case folding (keyrange.CollationKey) merges "aa" and "aA", two
// rows under the collation, and reports differences the tables lack.
func TestReconcileServerEqualKeys(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(testworld.Seed(t, 11), 11))
	const collation = "Danish_Norwegian_CI_AI"
	trim := func(s string) string { return strings.TrimRight(s, " ") }
	for c := range 200 {
		changes, end := testworld.KeyHistory(r)
		want := map[string]reconcile.Kind{}
		byServer := map[string]string{}
		for k := range end {
			byServer[testworld.ServerKey(k)] = k
		}
		keys := make([]string, 0, len(end))
		for k := range end {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			switch r.IntN(10) {
			case 0:
				end[k]++
				want[trim(k)] = reconcile.Different
			case 1:
				delete(end, k)
				want[trim(k)] = reconcile.Extra
			case 2:
				// Another spelling the collation takes for the same key.
				for _, alt := range []string{strings.ToUpper(k), strings.ToLower(k), strings.ReplaceAll(k, "e", "é"), strings.ReplaceAll(k, "ss", "ß")} {
					if trim(alt) != trim(k) && testworld.ServerKey(alt) == testworld.ServerKey(k) {
						end[alt] = end[k]
						delete(end, k)
						want[trim(k)], want[trim(alt)] = reconcile.Extra, reconcile.Missing
						break
					}
				}
			}
		}
		for range r.IntN(3) {
			k := string(rune('b'+r.IntN(3))) + string(rune('a'+r.IntN(26)))
			if _, dup := byServer[testworld.ServerKey(k)]; !dup {
				byServer[testworld.ServerKey(k)] = k
				end[k] = r.Int64N(1000)
				want[trim(k)] = reconcile.Missing
			}
		}
		db := fake.New(fake.Options{})
		var rows []fake.Row
		for k, v := range end {
			rows = append(rows, fake.Row{k, v})
		}
		if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "t", Key: []string{"k"}, Rows: rows, CaptureInstance: "dbo_t",
			Columns: []fake.ColumnDef{{Name: "k", Type: "nvarchar(20)", Collation: "Latin1_General_BIN2"}, {Name: "v", Type: "bigint"}}}); err != nil {
			t.Fatal(err)
		}
		rec := testworld.KeyBronze(t, "dbo_t", changes)
		rep, err := reconcile.Run(ctx, collatedSource{db, collation}, records{rec}, reconcile.Options{CaptureInstance: "dbo_t", Tiles: 1, Parallel: 1})
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]reconcile.Kind{}
		for _, d := range rep.Differences {
			k := trim(d.Key[0].(string))
			if _, dup := got[k]; dup {
				t.Fatalf("history %d: key %q differs twice: %v", c, k, rep.Differences)
			}
			got[k] = d.Kind
		}
		if !maps.Equal(got, want) {
			t.Fatalf("history %d (%d bronze rows): reconcile found %v, the drift is %v", c, len(changes), got, want)
		}
	}
}
