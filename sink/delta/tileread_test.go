package delta

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cdcsnap/cdcsnap/internal/deltalog"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/sink"
)

// pruneColumns are the key column kinds the pruning property draws from:
// every kind it prunes on, each string collation family, and kinds it
// must leave unknown.
var pruneColumns = []keyrange.Column{
	{Name: "i", Kind: keyrange.KindInt},
	{Name: "d", Kind: keyrange.KindDecimal},
	{Name: "day", Kind: keyrange.KindDate},
	{Name: "at", Kind: keyrange.KindDateTime},
	{Name: "b", Kind: keyrange.KindBool},
	{Name: "f", Kind: keyrange.KindFloat},
	{Name: "ci", Kind: keyrange.KindString, Collation: keyrange.ParseCollation("Latin1_General_CI_AS")},
	{Name: "cs", Kind: keyrange.KindString, Collation: keyrange.ParseCollation("Latin1_General_CS_AS")},
	{Name: "bin", Kind: keyrange.KindString, Collation: keyrange.ParseCollation("Latin1_General_BIN2")},
	{Name: "tr", Kind: keyrange.KindString, Collation: keyrange.ParseCollation("Turkish_CI_AS")},
}

var pruneBase = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// pruneValue draws a value of c from a small domain (so that ranges cut
// it), NULL sometimes.
func pruneValue(r *rand.Rand, c keyrange.Column) any {
	if r.IntN(8) == 0 {
		return nil
	}
	switch c.Kind {
	case keyrange.KindInt:
		return int64(r.IntN(40) - 5)
	case keyrange.KindDecimal:
		return keyrange.Decimal(fmt.Sprintf("%d.%02d", r.IntN(8)-2, r.IntN(100)))
	case keyrange.KindDate:
		return pruneBase.AddDate(0, 0, r.IntN(20))
	case keyrange.KindDateTime:
		return pruneBase.Add(time.Duration(r.IntN(5000)) * time.Microsecond) // a few milliseconds: truncation matters
	case keyrange.KindBool:
		return r.IntN(2) == 0
	case keyrange.KindFloat:
		return float64(r.IntN(20)) / 4
	}
	alphabet := []rune("aAbBiIıİ \té")
	w := make([]rune, r.IntN(5))
	for i := range w {
		w[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(w)
}

// pruneStat is value v of column c as a writer puts it in statistics.
func pruneStat(r *rand.Rand, c keyrange.Column, v any, isMax bool) any {
	switch x := v.(type) {
	case int64:
		return json.Number(fmt.Sprint(x))
	case keyrange.Decimal:
		return json.Number(string(x))
	case bool:
		return x
	case float64:
		return json.Number(fmt.Sprint(x))
	case time.Time:
		if c.Kind == keyrange.KindDate {
			return x.Format(time.DateOnly)
		}
		if r.IntN(2) == 0 { // the protocol: truncated down to milliseconds
			x = x.Truncate(time.Millisecond)
		}
		if r.IntN(2) == 0 {
			return x.Format("2006-01-02T15:04:05.000000") // timestamp_ntz
		}
		return x.Format(time.RFC3339Nano)
	case string:
		runes := []rune(x)
		k := r.IntN(len(runes) + 1)
		if k == len(runes) || r.IntN(2) == 0 {
			return x
		}
		if isMax && r.IntN(2) == 0 {
			return string(runes[:k]) + string(maxRune) // this package's and Spark's tie-breaker
		}
		return string(runes[:k]) // cut to a prefix (PROTOCOL.md's footnote)
	}
	return nil
}

// pruneFile is the rows of one random file: each row's capture instance
// and key.
type pruneFile struct {
	cis  []string
	keys []keyrange.Tuple
}

// stats builds the file's statistics as some writer might: exact, cut,
// truncated, or missing in part.
func (f pruneFile) stats(r *rand.Rand, key []keyrange.Column) deltalog.FileStats {
	st := deltalog.FileStats{NumRecords: int64(len(f.keys)), MinValues: map[string]any{}, MaxValues: map[string]any{}, NullCount: map[string]int64{}}
	type col struct {
		name   string
		c      keyrange.Column
		values []any
	}
	cols := []col{{name: sink.ColCaptureInstance, c: keyrange.Column{Name: sink.ColCaptureInstance, Kind: keyrange.KindString, Collation: keyrange.ParseCollation("Latin1_General_BIN2")}}}
	for _, ci := range f.cis {
		cols[0].values = append(cols[0].values, ci)
	}
	for j, c := range key {
		cc := col{name: c.Name, c: c}
		for _, k := range f.keys {
			cc.values = append(cc.values, k[j])
		}
		cols = append(cols, cc)
	}
	for _, c := range cols {
		var nulls int64
		var mn, mx any
		for _, v := range c.values {
			if v == nil {
				nulls++
				continue
			}
			if mn == nil || statLess(v, mn) {
				mn = v
			}
			if mx == nil || statLess(mx, v) {
				mx = v
			}
		}
		if r.IntN(5) > 0 {
			st.NullCount[c.name] = nulls
		}
		if mn != nil && r.IntN(6) > 0 {
			st.MinValues[c.name] = pruneStat(r, c.c, mn, false)
		}
		if mx != nil && r.IntN(6) > 0 {
			st.MaxValues[c.name] = pruneStat(r, c.c, mx, true)
		}
	}
	return st
}

// statLess orders values as a writer's statistics do: strings byte-wise
// (not by collation), the rest by value.
func statLess(a, b any) bool {
	switch x := a.(type) {
	case int64:
		return x < b.(int64)
	case keyrange.Decimal:
		n, _ := keyrange.Compare(keyrange.Column{Kind: keyrange.KindDecimal}, x, b)
		return n < 0
	case bool:
		return !x && b.(bool)
	case float64:
		return x < b.(float64)
	case time.Time:
		return x.Before(b.(time.Time))
	case string:
		return x < b.(string)
	}
	return false
}

// TestMayHoldKeysNeverSkipsARowOfTheRange: for random keys (one to three
// columns of every kind), files of random rows with statistics written
// as the protocol allows (strings cut to a prefix with or without a
// tie-breaker, timestamps truncated to milliseconds, NULL counts and
// bounds missing at random), random ranges and capture instances, a file
// that holds a row of the instance in the range is never skipped: the
// brute force reads every row. The pruning must also skip some files, or
// it proves nothing.
func TestMayHoldKeysNeverSkipsARowOfTheRange(t *testing.T) {
	r := rand.New(rand.NewPCG(testworld.Seed(t, 0), 7))
	instances := []string{"dbo_orders", "DBO_Orders", "dbo_items", "sales_x"}
	skipped, files := 0, 0
	for c := range 20000 {
		key := make([]keyrange.Column, 1+r.IntN(3))
		for i := range key {
			key[i] = pruneColumns[r.IntN(len(pruneColumns))]
			key[i].Name = fmt.Sprintf("k%d", i)
		}
		tuple := func() keyrange.Tuple {
			k := make(keyrange.Tuple, len(key))
			for i, col := range key {
				k[i] = pruneValue(r, col)
			}
			return k
		}
		var f pruneFile
		for range 1 + r.IntN(6) {
			f.cis = append(f.cis, instances[r.IntN(1+r.IntN(len(instances)))])
			f.keys = append(f.keys, tuple())
		}
		var rg keyrange.Range
		if r.IntN(4) > 0 {
			rg.Lower = tuple()
		}
		if r.IntN(4) > 0 {
			rg.Upper = tuple()
		}
		ci := instances[r.IntN(len(instances))]
		st := f.stats(r, key)
		got := mayHoldKeys(st, ci, key, rg)
		files++
		if !got {
			skipped++
		}
		for i, k := range f.keys {
			in, err := rg.Contains(key, k)
			if err != nil {
				t.Fatal(err)
			}
			if in && sink.SameInstance(f.cis[i], ci) && !got {
				b, _ := json.Marshal(st)
				t.Fatalf("case %d: the file was skipped, but its row %d (%q, %v) is in %s of %q\nkey %+v\nstats %s",
					c, i, f.cis[i], []any(k), rg, ci, key, b)
			}
		}
	}
	t.Logf("%d of %d files skipped", skipped, files)
	if skipped < files/10 {
		t.Fatalf("only %d of %d files skipped: the statistics prune too little", skipped, files)
	}
}

// FuzzStringPrefixPruning: a file holding one string v whose statistics
// are a prefix of v (min) and v itself or a cut of it with or without the
// tie-breaker (max) is never skipped for a range that holds v under its
// collation, and the statistics never fail to parse.
func FuzzStringPrefixPruning(f *testing.F) {
	f.Add("abc", "ab", "b", uint8(1), uint8(2), uint8(0), true)
	f.Add("a\t", "a", "", uint8(0), uint8(1), uint8(1), false)
	f.Add("İi", "ıI", "J", uint8(1), uint8(1), uint8(2), true)
	f.Fuzz(func(t *testing.T, v, lower, upper string, cutMin, cutMax, how uint8, ci bool) {
		col := keyrange.Column{Name: "k", Kind: keyrange.KindString, Collation: keyrange.ParseCollation("Latin1_General_BIN2")}
		if ci {
			col.Collation = keyrange.ParseCollation("Latin1_General_CI_AS")
			if how%2 == 1 {
				col.Collation = keyrange.ParseCollation("Turkish_CI_AS")
			}
		}
		if !utf8.ValidString(v) {
			return // Delta strings are UTF-8, and so are their statistics
		}
		runes := []rune(v)
		mn := string(runes[:int(cutMin)%(len(runes)+1)])
		mx := v
		switch k := int(cutMax) % (len(runes) + 1); how % 3 {
		case 1:
			mx = string(runes[:k]) + string(maxRune)
		case 2:
			mx = string(runes[:k])
		}
		st := deltalog.FileStats{NumRecords: 1, MinValues: map[string]any{"k": mn}, MaxValues: map[string]any{"k": mx}, NullCount: map[string]int64{"k": 0}}
		rg := keyrange.Range{Lower: keyrange.Tuple{lower}, Upper: keyrange.Tuple{upper}}
		if how%5 == 0 {
			rg.Upper = nil
		}
		in, err := rg.Contains([]keyrange.Column{col}, keyrange.Tuple{v})
		if err != nil {
			t.Fatal(err)
		}
		st.MinValues[sink.ColCaptureInstance], st.MaxValues[sink.ColCaptureInstance] = "dbo_t", "dbo_t"
		if in && !mayHoldKeys(st, "DBO_T", []keyrange.Column{col}, rg) {
			t.Fatalf("%q (stats %q..%q) is in %s, and the file was skipped", v, mn, mx, rg)
		}
	})
}

// TestReadKeyRangeReadsOnlyTheTilesFiles: a table whose commits each hold
// one band of integer keys (and one band of another instance) reads, for
// a range, only the files whose band meets it, and those hold every row
// of the range that ReadAll reads.
func TestReadKeyRangeReadsOnlyTheTilesFiles(t *testing.T) {
	ctx := context.Background()
	tb, err := Open(ctx, "mem://", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	schema := arrow.NewSchema(append([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, sink.MetadataFields()...), nil)
	band := func(ci string, from, n int) array.RecordReader {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		for i := range n {
			for j, fld := range schema.Fields() {
				switch fld.Name {
				case "id":
					b.Field(j).(*array.Int64Builder).Append(int64(from + i))
				case sink.ColCaptureInstance:
					b.Field(j).(*array.StringBuilder).Append(ci)
				case sink.ColOperation:
					b.Field(j).(*array.Int32Builder).Append(2)
				case sink.ColStartLSN, sink.ColSeqval:
					b.Field(j).(*array.StringBuilder).Append(fmt.Sprintf("0x%020X", from+i))
				default:
					b.Field(j).AppendNull()
				}
			}
		}
		rec := b.NewRecordBatch()
		defer rec.Release()
		rr, err := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
		if err != nil {
			t.Fatal(err)
		}
		return rr
	}
	for i := range 8 {
		for _, ci := range []string{"dbo_a", "dbo_b"} {
			rr := band(ci, i*100, 100)
			if _, err := tb.AppendChanges(ctx, ci, int64(i+1), rr); err != nil {
				t.Fatal(err)
			}
			rr.Release()
		}
	}
	key := []keyrange.Column{{Name: "id", Kind: keyrange.KindInt}}
	ids := func(rr array.RecordReader, rg keyrange.Range) map[int64]bool {
		defer rr.Release()
		out := map[int64]bool{}
		for rr.Next() {
			rec := rr.RecordBatch()
			idc := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
			cic := rec.Column(rec.Schema().FieldIndices(sink.ColCaptureInstance)[0]).(*array.String)
			for i := range int(rec.NumRows()) {
				if in, _ := rg.Contains(key, keyrange.Tuple{idc.Value(i)}); in && cic.Value(i) == "dbo_a" {
					out[idc.Value(i)] = true
				}
			}
		}
		if err := rr.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, tc := range []struct {
		rg    keyrange.Range
		files int
	}{
		{keyrange.Range{Upper: keyrange.Tuple{int64(100)}}, 1},
		{keyrange.Range{Lower: keyrange.Tuple{int64(150)}, Upper: keyrange.Tuple{int64(301)}}, 3},
		{keyrange.Range{Lower: keyrange.Tuple{int64(700)}}, 1},
		{keyrange.Range{Lower: keyrange.Tuple{int64(800)}}, 0},
		{keyrange.Range{}, 8},
	} {
		rr, err := tb.ReadKeyRange(ctx, "DBO_A", key, tc.rg)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(rr.(*tableReader).files); n != tc.files {
			t.Errorf("%s: %d files read, want %d", tc.rg, n, tc.files)
		}
		all, err := tb.ReadAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got, want := ids(rr, tc.rg), ids(all, tc.rg)
		if len(got) != len(want) {
			t.Errorf("%s: %d rows read, ReadAll has %d", tc.rg, len(got), len(want))
		}
		for id := range want {
			if !got[id] {
				t.Errorf("%s: row %d not read", tc.rg, id)
			}
		}
	}
	none, err := Open(ctx, "mem://", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer none.Close()
	if _, err := none.ReadKeyRange(ctx, "dbo_a", key, keyrange.Range{}); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("a table that does not exist: %v", err)
	}
}
