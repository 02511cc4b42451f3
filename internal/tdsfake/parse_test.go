package tdsfake

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/golang-sql/civil"
	mssql "github.com/microsoft/go-mssqldb"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/mssqlstmt"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

// wireArgs turns a Stmt's arguments into the values a TDS server decodes
// from them (internal/tdsserver.Param.Value): civil and datetimeoffset
// types become time.Time.
func wireArgs(st mssqlstmt.Stmt) args {
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
			st, err := mssqlstmt.ReadRangeStatement(ci, rg)
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

// FuzzStatementParsers: the statement parsers never panic on any text,
// with parameters of any type; what parses as a range read of the fuzzed
// table's key gives pieces whose JSON round-trips.
func FuzzStatementParsers(f *testing.F) {
	ci := &source.CaptureInstance{Name: "dbo_t", SourceSchema: "dbo", SourceTable: "t", Key: []string{"a", "b"}, Columns: []source.Column{
		{Name: "a", Type: "int", Nullable: true}, {Name: "b", Type: "varchar", Length: 8, Collation: "Latin1_General_CI_AS", CodePage: 1252, Nullable: true}}}
	for _, rg := range []keyrange.Range{{}, {Lower: keyrange.Tuple{int64(1), "n"}, Upper: keyrange.Tuple{int64(1), "N"}}, {Lower: keyrange.Tuple{nil, "a"}, Upper: keyrange.Tuple{int64(2), nil}}} {
		st, err := mssqlstmt.ReadRangeStatement(ci, rg)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(st.SQL, int64(1), "n")
		if st, err = mssqlstmt.SeekKeyStatement(ci, rg.Lower, 3); err == nil {
			f.Add(st.SQL, int64(2), "x")
		}
	}
	if st, err := mssqlstmt.ChangeTableStatement(ci, lsnOne, lsnOne); err == nil {
		f.Add(st.SQL, int64(0), "")
	}
	split, err := ci.SplitOn("b")
	if err != nil {
		cp := *ci
		cp.Key, cp.KeyIndex = []string{"b"}, &source.Index{Name: "IX_b", Columns: []string{"b"}}
		split = &cp
	}
	for _, from := range []keyrange.Tuple{nil, {nil}, {"n"}} {
		if st, err := mssqlstmt.SeekKeyStatement(split, from, 4); err == nil {
			f.Add(st.SQL, int64(4), "n")
		}
	}
	f.Fuzz(func(t *testing.T, sql string, n int64, s string) {
		tb, err := newTable(ci)
		if err != nil {
			t.Fatal(err)
		}
		a := args{1: n, 2: s, 3: n, 4: s, 5: []byte(s), 6: nil}
		if r, err := parseRangeRead(sql); err == nil {
			var ps []keyrange.Piece
			for _, w := range r.where {
				if p, ok, err := tb.parsePiece(w, a); err == nil && ok {
					ps = append(ps, p)
				}
			}
			js, err := json.Marshal(ps)
			if err != nil {
				t.Fatalf("pieces %+v do not marshal: %v", ps, err)
			}
			var back []keyrange.Piece
			if err := json.Unmarshal(js, &back); err != nil || len(back) != len(ps) {
				t.Fatalf("pieces %s do not round-trip: %v", js, err)
			}
		}
		if r, err := parseSeek(sql); err == nil {
			for _, w := range r.where {
				_, _, _ = tb.parsePiece(w, a)
			}
		}
		if outer, r, err := parseSeekBeyond(sql); err == nil {
			if len(outer) != 1 {
				t.Fatalf("parseSeekBeyond accepted %d key columns", len(outer))
			}
			_ = columnsNamed(r.where)
		}
		_, _ = parseChanges(sql)
		_, _ = parseSelectList(sql)
		_ = splitTop(sql, " AND ")
	})
}

var lsnOne = lsn.LSN{9: 1}

// TestMaxLengthOfScaledTypes: sys.columns.max_length of the scaled
// temporal types and decimals is their storage size, which MS-TDS
// 2.2.5.5.1.8 gives for time(n) (3 bytes for n 0-2, 4 for 3-4, 5 for 5-7),
// datetime2(n) (3 more: the date) and datetimeoffset(n) (2 more: the
// offset), and "decimal and numeric (Transact-SQL)" for decimal (5, 9,
// 13, 17 bytes by precision).
func TestMaxLengthOfScaledTypes(t *testing.T) {
	for _, c := range []struct {
		typ         string
		prec, scale int
		want        int
	}{
		{"time", 0, 0, 3}, {"time", 0, 2, 3}, {"time", 0, 3, 4}, {"time", 0, 4, 4}, {"time", 0, 5, 5}, {"time", 0, 7, 5},
		{"datetime2", 0, 2, 6}, {"datetime2", 0, 3, 7}, {"datetime2", 0, 7, 8},
		{"datetimeoffset", 0, 2, 8}, {"datetimeoffset", 0, 4, 9}, {"datetimeoffset", 0, 7, 10},
		{"decimal", 9, 2, 5}, {"decimal", 10, 0, 9}, {"numeric", 19, 4, 9}, {"decimal", 28, 0, 13}, {"decimal", 38, 10, 17},
	} {
		if got := maxLength(source.Column{Type: c.typ, Precision: c.prec, Scale: c.scale}); got != c.want {
			t.Errorf("max_length of %s(%d, %d) = %d, want %d", c.typ, c.prec, c.scale, got, c.want)
		}
	}
}

// TestParseSeekBeyond: the seek of a key that is not unique reads back as
// its key column, its (k+1)-th seek's pieces on that column and the
// offset parameter; a unique seek is not taken for it.
func TestParseSeekBeyond(t *testing.T) {
	ci := &source.CaptureInstance{Name: "dbo_t", SourceSchema: "dbo", SourceTable: "t", Key: []string{"a"}, Columns: []source.Column{
		{Name: "a", Type: "int"}, {Name: "b", Type: "varchar", Length: 8, Collation: "Latin1_General_100_CI_AS_SC_UTF8", CodePage: 65001, Nullable: true}}}
	cp := *ci
	cp.Key, cp.KeyIndex = []string{"b"}, &source.Index{Name: "IX_b", Columns: []string{"b"}}
	st, err := mssqlstmt.SeekKeyStatement(&cp, keyrange.Tuple{"n"}, 4)
	if err != nil {
		t.Fatal(err)
	}
	outer, r, err := parseSeekBeyond(st.SQL)
	if err != nil {
		t.Fatal(err)
	}
	if len(outer) != 1 || outer[0].Name != "b" || outer[0].Cast != "nvarchar(8)" || r.schema != "dbo" || r.name != "t" || r.offset != "@p3" {
		t.Fatalf("parsed %+v, %+v", outer, r)
	}
	if got := columnsNamed(r.where); len(got) != 1 || got[0] != "b" {
		t.Fatalf("the pieces name %v, want [b]", got)
	}
	unique, err := mssqlstmt.SeekKeyStatement(ci, keyrange.Tuple{int64(3)}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := parseSeekBeyond(unique.SQL); err == nil {
		t.Fatal("a unique seek parsed as the seek of a key that is not unique")
	}
}
