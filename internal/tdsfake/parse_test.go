package tdsfake

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/golang-sql/civil"
	mssql "github.com/microsoft/go-mssqldb"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// wireArgs turns a Stmt's arguments into the values a TDS server decodes
// from them (internal/tdsserver.Param.Value): civil and datetimeoffset
// types become time.Time.
func wireArgs(st sqlserver.Stmt) args {
	a := args{}
	for i, v := range st.Args {
		switch x := v.(type) {
		case civil.Date:
			v = time.Date(x.Year, x.Month, x.Day, 0, 0, 0, 0, time.UTC)
		case civil.DateTime:
			v = time.Date(x.Date.Year, x.Date.Month, x.Date.Day, x.Time.Hour, x.Time.Minute, x.Time.Second, x.Time.Nanosecond, time.UTC)
		case civil.Time:
			v = time.Date(1900, 1, 1, x.Hour, x.Minute, x.Second, x.Nanosecond, time.UTC)
		case mssql.DateTimeOffset:
			v = time.Time(x)
		}
		a[i+1] = v
	}
	return a
}

// TestParsedPiecesHoldWhatTheRangeHolds: for random ranges of the
// standard random tables, the pieces read back from ReadRangeStatement's
// text hold exactly the keys the range holds: the text on the wire is the
// statement the golden files pin, and the server answers what it says.
func TestParsedPiecesHoldWhatTheRangeHolds(t *testing.T) {
	seed := testworld.Seed(t, 0)
	r := rand.New(rand.NewPCG(seed, seed^0x51))
	nullable := testworld.Shape{
		Name: "nullable-key",
		Columns: []fake.ColumnDef{
			{Name: "a", Type: "int", Nullable: true}, {Name: "b ]x;", Type: "varchar(8)", Collation: "Latin1_General_CI_AS", Nullable: true},
			{Name: "v", Type: "nvarchar(max)", Nullable: true},
		},
		Key: []string{"a", "b ]x;"},
		Row: func(r *rand.Rand) fake.Row {
			var a, b any
			if r.IntN(4) > 0 {
				a = int64(r.IntN(4))
			}
			if r.IntN(4) > 0 {
				b = testworld.Word(r, "nN", 2)
			}
			return fake.Row{a, b, "v"}
		},
	}
	for _, sh := range append(testworld.Shapes(testworld.Tick), nullable) {
		w := testworld.New(t, r, sh, 60)
		ci := w.Instance(t)
		tb, err := newTable(ci)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := w.DB.Rows("dbo", sh.Name)
		if err != nil {
			t.Fatal(err)
		}
		var keys []keyrange.Tuple
		for _, row := range rows {
			keys = append(keys, keyrange.Tuple(w.KeyOf(row)))
		}
		for range 200 {
			pick := func() keyrange.Tuple {
				if r.IntN(5) == 0 || len(keys) == 0 {
					return nil
				}
				return keys[r.IntN(len(keys))]
			}
			lo, hi := pick(), pick()
			if lo != nil && hi != nil {
				if c, _ := keyrange.CompareTuples(w.Info.KeyColumns, lo, hi); c > 0 {
					lo, hi = hi, lo
				}
			}
			rg := keyrange.Range{Lower: lo, Upper: hi}
			st, err := sqlserver.ReadRangeStatement(ci, rg)
			if err != nil {
				t.Fatal(err)
			}
			rr, err := parseRangeRead(st.SQL)
			if err != nil {
				t.Fatalf("%s: %v\n%s", sh.Name, err, st.SQL)
			}
			var pieces []keyrange.Piece
			for _, where := range rr.where {
				p, ok, err := tb.parsePiece(where, wireArgs(st))
				if err != nil {
					t.Fatalf("%s %s: %v\n%s", sh.Name, rg, err, st.SQL)
				}
				if ok {
					pieces = append(pieces, p)
				}
			}
			kc, _ := ci.KeyColumns()
			for _, k := range keys {
				want, err := rg.Contains(kc, k)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, p := range pieces {
					if in, _ := p.Contains(kc, k); in {
						n++
					}
				}
				if want && n != 1 || !want && n != 0 {
					js, _ := json.Marshal(pieces)
					t.Fatalf("%s %s: key %v in the range %v, in %d parsed pieces %s\n%s", sh.Name, rg, k, want, n, js, st.SQL)
				}
			}
		}
	}
}
