package fake_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

// compositeDB has a (company varchar CI, id int) key with companies in mixed
// case and trailing spaces, so bounds can differ in Go and be equal in SQL.
func compositeDB(t testing.TB, collation string, companies, ids int) (*fake.DB, *source.CaptureInstance) {
	t.Helper()
	db := fake.New(fake.Options{})
	check(t, db.CreateTable(fake.TableDef{
		Schema: "sales", Name: "lines",
		Columns: []fake.ColumnDef{
			{Name: "company", Type: "varchar(10)", Collation: collation},
			{Name: "id", Type: "int"},
			{Name: "qty", Type: "int", Nullable: true},
		},
		Key: []string{"company", "id"},
	}))
	ci := must[*source.CaptureInstance](t)(db.EnableCDC("sales", "lines", ""))
	var rows []fake.Row
	for c := range companies {
		for i := range ids {
			rows = append(rows, fake.Row{companyName(c), int64(i * 2), int64(c*1000 + i)})
		}
	}
	must[lsn.LSN](t)(db.Load("sales", "lines", rows...))
	return db, ci
}

func companyName(c int) string {
	names := []string{"acme", "Bolt", "cog", "Dyn", "eon", "Fig", "gem"}
	return names[c%len(names)]
}

// randomBound picks a bound: an existing key, a case or trailing-space
// variant of one, or a key between rows.
func randomBound(rng *rand.Rand, companies, ids int) keyrange.Tuple {
	c := companyName(rng.IntN(companies + 1))
	switch rng.IntN(4) {
	case 0:
		c = swapCase(c)
	case 1:
		c += " "
	case 2:
		c += "a"
	}
	return keyrange.Tuple{c, int64(rng.IntN(ids*2+2) - 1)}
}

func swapCase(s string) string {
	b := []byte(s)
	for i, x := range b {
		switch {
		case 'a' <= x && x <= 'z':
			b[i] = x - 32
		case 'A' <= x && x <= 'Z':
			b[i] = x + 32
		}
	}
	return string(b)
}

func TestReadRangeReadsExactlyItsRows(t *testing.T) {
	for _, collation := range []string{"Latin1_General_CI_AS", "Latin1_General_CS_AS"} {
		t.Run(collation, func(t *testing.T) {
			const companies, ids = 5, 40
			db, ci := compositeDB(t, collation, companies, ids)
			info := must[fake.TableInfo](t)(db.Table("sales", "lines"))
			cols := info.KeyColumns
			all := must[[]fake.Row](t)(db.Rows("sales", "lines"))
			rng := rand.New(rand.NewPCG(7, uint64(len(collation))))
			for trial := range 60 {
				var bounds []keyrange.Tuple
				for range rng.IntN(6) {
					bounds = append(bounds, randomBound(rng, companies, ids))
				}
				slices.SortStableFunc(bounds, func(a, b keyrange.Tuple) int {
					return must[int](t)(keyrange.CompareTuples(cols, a, b))
				})
				bounds = slices.CompactFunc(bounds, func(a, b keyrange.Tuple) bool { return fmt.Sprint(a) == fmt.Sprint(b) })
				ranges := keyrange.FromBounds(bounds)
				seen := map[string]int{}
				for _, r := range ranges {
					db.ResetStats()
					got := mustReadAll(t)(db.ReadRange(ctx, ci, r, source.ReadOptions{BatchRows: 1 + rng.IntN(7)}))
					var want [][]any
					for _, row := range all {
						if must[bool](t)(r.Contains(cols, keyrange.Tuple(row[:2]))) {
							want = append(want, []any(row))
						}
					}
					pieces := must[[]keyrange.Piece](t)(keyrange.Pieces(cols, r))
					inSeek := 0
					for _, p := range pieces {
						for _, row := range all {
							if must[bool](t)(p.InSeek(cols, keyrange.Tuple(row[:2]))) {
								inSeek++
							}
						}
					}
					st := must[fake.Stats](t)(db.Stats("sales", "lines"))
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("trial %d %s: read %d rows %v\nwant %d rows %v", trial, r, len(got), got, len(want), want)
					}
					if st.RowsReturned != int64(len(want)) || st.RowsExamined != int64(inSeek) {
						t.Fatalf("trial %d %s: examined %d returned %d; want examined = %d rows in the pieces' seek ranges, returned %d",
							trial, r, st.RowsExamined, st.RowsReturned, inSeek, len(want))
					}
					sqlEqualBounds := r.Lower != nil && r.Upper != nil && r.Lower[0] != r.Upper[0] &&
						must[int](t)(keyrange.Compare(cols[0], r.Lower[0], r.Upper[0])) == 0
					if !sqlEqualBounds && st.RowsExamined != st.RowsReturned {
						t.Fatalf("trial %d %s: examined %d != returned %d with bounds that differ in SQL", trial, r, st.RowsExamined, st.RowsReturned)
					}
					for _, row := range got {
						seen[fmt.Sprint(row[:2])]++
					}
				}
				if len(seen) != len(all) {
					t.Fatalf("trial %d: ranges %v read %d distinct rows of %d", trial, ranges, len(seen), len(all))
				}
				for k, n := range seen {
					if n != 1 {
						t.Fatalf("trial %d: row %s read %d times", trial, k, n)
					}
				}
			}
		})
	}
}

func TestReadRangeStringKeyExaminedEqualsReturned(t *testing.T) {
	db := stringKeyDB(t, "SQL_Latin1_General_CP1_CI_AS")
	ci := must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "names", ""))
	var rows []fake.Row
	for i := range 500 {
		rows = append(rows, fake.Row{fmt.Sprintf("k%04d", i), nil})
	}
	must[lsn.LSN](t)(db.Load("dbo", "names", rows...))
	rng := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		a, b := rng.IntN(520), rng.IntN(520)
		if a > b {
			a, b = b, a
		}
		r := keyrange.Range{Lower: keyrange.Tuple{fmt.Sprintf("K%04d", a)}, Upper: keyrange.Tuple{fmt.Sprintf("k%04d", b)}}
		db.ResetStats()
		got := mustReadAll(t)(db.ReadRange(ctx, ci, r, source.ReadOptions{BatchRows: 17}))
		want := min(b, 500) - min(a, 500)
		st := must[fake.Stats](t)(db.Stats("dbo", "names"))
		if len(got) != want || st.RowsExamined != int64(want) || st.RowsReturned != int64(want) {
			t.Fatalf("%s: %d rows, examined %d, returned %d; want %d", r, len(got), st.RowsExamined, st.RowsReturned, want)
		}
	}
}

func TestSeekKey(t *testing.T) {
	const companies, ids = 4, 25
	db, ci := compositeDB(t, "Latin1_General_CI_AS", companies, ids)
	cols := must[fake.TableInfo](t)(db.Table("sales", "lines")).KeyColumns
	all := must[[]fake.Row](t)(db.Rows("sales", "lines"))
	rng := rand.New(rand.NewPCG(5, 6))
	for range 200 {
		var from keyrange.Tuple
		if rng.IntN(4) > 0 {
			from = randomBound(rng, companies, ids)
		}
		k := int64(rng.IntN(len(all) + 3))
		db.ResetStats()
		key, ok, err := db.SeekKey(ctx, ci, source.ReadCommitted, from, k)
		check(t, err)
		var after [][]any
		for _, row := range all {
			if from == nil || must[int](t)(keyrange.CompareTuples(cols, keyrange.Tuple(row[:2]), from)) >= 0 {
				after = append(after, row[:2])
			}
		}
		st := must[fake.Stats](t)(db.Stats("sales", "lines"))
		pieces := must[[]keyrange.Piece](t)(keyrange.Pieces(cols, keyrange.Range{Lower: from}))
		if k >= int64(len(after)) {
			if ok || st.KeysExamined != int64(len(after)) {
				t.Fatalf("SeekKey(%v, %d) = %v, %v; examined %d; want not found after reading %d keys", from, k, key, ok, st.KeysExamined, len(after))
			}
			continue
		}
		if !ok || fmt.Sprint([]any(key)) != fmt.Sprint(after[k]) {
			t.Fatalf("SeekKey(%v, %d) = %v, %v; want %v", from, k, key, ok, after[k])
		}
		if st.KeysExamined < k+1 || st.KeysExamined > k+int64(len(pieces)) {
			t.Fatalf("SeekKey(%v, %d) examined %d keys; want k+1 plus at most one per other piece (%d pieces)", from, k, st.KeysExamined, len(pieces))
		}
	}
}

func TestNTileBySeeksReadsEachKeyOnce(t *testing.T) {
	const companies, ids = 3, 1000
	db, ci := compositeDB(t, "Latin1_General_CI_AS", companies, ids)
	rows := int64(companies * ids)
	for _, skew := range []int64{0, -700, 700} {
		check(t, db.SetRowCountSkew("sales", "lines", skew))
		db.ResetStats()
		count := must[int64](t)(db.RowCount(ctx, ci))
		ranges := must[[]keyrange.Range](t)(keyrange.NTile(ctx, seeker{db, ci}, count, 4))
		st := must[fake.Stats](t)(db.Stats("sales", "lines"))
		if st.KeysExamined > rows+st.Seeks {
			t.Errorf("skew %d: seeks examined %d keys over %d rows in %d seeks: more than each key once plus one per seek", skew, st.KeysExamined, rows, st.Seeks)
		}
		total := 0
		for _, r := range ranges {
			db.ResetStats()
			got := mustReadAll(t)(db.ReadRange(ctx, ci, r, source.ReadOptions{}))
			st := must[fake.Stats](t)(db.Stats("sales", "lines"))
			if st.RowsExamined != int64(len(got)) {
				t.Errorf("skew %d %s: examined %d, returned %d", skew, r, st.RowsExamined, len(got))
			}
			if skew == 0 && len(got) != int(rows)/4 {
				t.Errorf("exact count %s: %d rows, want %d", r, len(got), rows/4)
			}
			total += len(got)
		}
		if total != int(rows) {
			t.Errorf("skew %d: ranges read %d rows of %d", skew, total, rows)
		}
	}
}

func intTableDB(t testing.TB, n int) (*fake.DB, *source.CaptureInstance) {
	t.Helper()
	db := fake.New(fake.Options{})
	check(t, db.CreateTable(fake.TableDef{Schema: "dbo", Name: "t", Columns: []fake.ColumnDef{
		{Name: "id", Type: "bigint"}, {Name: "v", Type: "varchar(20)", Nullable: true},
	}, Key: []string{"id"}}))
	ci := must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "t", ""))
	rows := make([]fake.Row, n)
	for i := range rows {
		rows[i] = fake.Row{int64(i * 10), "v"}
	}
	must[lsn.LSN](t)(db.Load("dbo", "t", rows...))
	return db, ci
}

func ids(t testing.TB, rows [][]any) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r[0].(int64)
	}
	return out
}

func TestPageHookChangesAreSeenByLaterPagesUnderReadCommitted(t *testing.T) {
	for _, iso := range []source.Isolation{source.ReadCommitted, source.Snapshot} {
		t.Run(iso.String(), func(t *testing.T) {
			db, ci := intTableDB(t, 100) // ids 0, 10, ..., 990
			var pages []int
			db.SetPageHook(func(ctx context.Context, p fake.Page) error {
				pages = append(pages, p.Rows)
				if p.Number != 1 {
					return nil
				}
				tx := db.Begin()
				check(t, tx.Insert("dbo", "t", fake.Row{int64(5000), "ahead"}))
				check(t, tx.Insert("dbo", "t", fake.Row{int64(-1), "behind"}))
				check(t, tx.Delete("dbo", "t", []any{int64(950)}))
				check(t, tx.Update("dbo", "t", []any{int64(20)}, fake.Row{int64(995), "moved ahead"}))
				check(t, tx.Update("dbo", "t", []any{int64(900)}, fake.Row{int64(5), "moved behind"}))
				_, err := tx.Commit()
				return err
			})
			got := ids(t, mustReadAll(t)(db.ReadRange(ctx, ci, keyrange.Range{}, source.ReadOptions{BatchRows: 10, Isolation: iso})))
			has := func(id int64) int {
				n := 0
				for _, x := range got {
					if x == id {
						n++
					}
				}
				return n
			}
			if iso == source.Snapshot {
				if len(got) != 100 || has(950) != 1 || has(5000) != 0 || has(995) != 0 || has(900) != 1 {
					t.Fatalf("snapshot read saw changes: %v", got)
				}
				return
			}
			// The first page read 0..90 (20 among them): the row moved from 20
			// to 995 is read twice (once under each key), the row moved from 900
			// to 5 is missed, the delete is seen and the insert ahead too.
			if has(5000) != 1 || has(-1) != 0 || has(950) != 0 || has(20) != 1 || has(995) != 1 || has(900) != 0 || has(5) != 0 {
				t.Fatalf("read committed read: %v", got)
			}
			if len(pages) < 10 {
				t.Fatalf("hook ran %d times", len(pages))
			}
		})
	}
}

func TestArrowConversion(t *testing.T) {
	db := fake.New(fake.Options{})
	cols := []fake.ColumnDef{
		{Name: "id", Type: "int"},
		{Name: "b", Type: "bit", Nullable: true},
		{Name: "ti", Type: "tinyint", Nullable: true},
		{Name: "d", Type: "decimal(38,10)", Nullable: true},
		{Name: "m", Type: "money", Nullable: true},
		{Name: "f", Type: "float", Nullable: true},
		{Name: "r", Type: "real", Nullable: true},
		{Name: "dt", Type: "date", Nullable: true},
		{Name: "t", Type: "time(7)", Nullable: true},
		{Name: "t0", Type: "time(0)", Nullable: true},
		{Name: "d2", Type: "datetime2(7)", Nullable: true},
		{Name: "dto", Type: "datetimeoffset(3)", Nullable: true},
		{Name: "u", Type: "uniqueidentifier", Nullable: true},
		{Name: "vb", Type: "varbinary(max)", Nullable: true},
		{Name: "c", Type: "nchar(3)", Nullable: true},
	}
	check(t, db.CreateTable(fake.TableDef{Schema: "dbo", Name: "all", Columns: cols, Key: []string{"id"}}))
	ci := must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "all", ""))
	u := must[keyrange.UUID](t)(keyrange.ParseUUID("6F9619FF-8B86-D011-B42D-00C04FC964FF"))
	tod := time.Date(1, 1, 1, 13, 4, 5, 123456700, time.UTC)
	row := fake.Row{
		int64(1), true, int64(255),
		keyrange.Decimal("-1234567890123456789012345678.0123456789"), keyrange.Decimal("922337203685477.5807"),
		1.5, 0.25,
		time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC), tod, time.Date(1, 1, 1, 23, 59, 59, 0, time.UTC),
		time.Date(2026, 3, 4, 5, 6, 7, 123456700, time.UTC),
		time.Date(2026, 3, 4, 5, 6, 7, 123000000, time.FixedZone("", -3*3600)),
		u, []byte{0, 1}, "ab",
	}
	must[lsn.LSN](t)(db.Load("dbo", "all", row, fake.Row{int64(2), nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil}))
	rr := must[arrowReader](t)(db.ReadRange(ctx, ci, keyrange.Range{}, source.ReadOptions{}))
	schema := must[*arrowSchema](t)(source.ArrowSchema(ci.Columns))
	if !rr.Schema().Equal(schema) {
		t.Fatalf("schema %s, want %s", rr.Schema(), schema)
	}
	got := must[[][]any](t)(readAll(t, rr))
	want := []any{
		int64(1), true, int64(255),
		keyrange.Decimal("-1234567890123456789012345678.0123456789"), keyrange.Decimal("922337203685477.5807"),
		1.5, 0.25,
		time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC), "13:04:05.1234567", "23:59:59",
		time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC),
		time.Date(2026, 3, 4, 8, 6, 7, 123000000, time.UTC),
		"6f9619ff-8b86-d011-b42d-00c04fc964ff", []byte{0, 1}, "ab ",
	}
	if fmt.Sprint(got[0]) != fmt.Sprint(want) {
		t.Fatalf("row\n got %v\nwant %v", got[0], want)
	}
	for i, v := range got[1][1:] {
		if v != nil {
			t.Errorf("column %d of the NULL row is %v", i+1, v)
		}
	}
}

func TestLargeTable(t *testing.T) {
	n := 1_000_000
	if testing.Short() || raceEnabled {
		n = 100_000
	}
	start := time.Now()
	db, ci := intTableDB(t, n)
	load := time.Since(start)
	start = time.Now()
	ranges := keyrange.UniformRanges(0, int64(n-1)*10, 4)
	total := 0
	for _, r := range ranges {
		rr := must[arrowReader](t)(db.ReadRange(ctx, ci, r, source.ReadOptions{BatchRows: 8192}))
		for rr.Next() {
			total += int(rr.RecordBatch().NumRows())
		}
		check(t, rr.Err())
		rr.Release()
	}
	read := time.Since(start)
	if total != n {
		t.Fatalf("read %d rows of %d", total, n)
	}
	t.Logf("%d rows: load %v, read %v (%.1fM rows/s)", n, load, read, float64(n)/read.Seconds()/1e6)
}

func BenchmarkReadRange(b *testing.B) {
	db, ci := intTableDB(b, 1_000_000)
	b.ResetTimer()
	for b.Loop() {
		rr := must[arrowReader](b)(db.ReadRange(ctx, ci, keyrange.Range{}, source.ReadOptions{BatchRows: 8192}))
		for rr.Next() {
		}
		check(b, rr.Err())
		rr.Release()
	}
	b.ReportMetric(float64(1_000_000*b.N)/b.Elapsed().Seconds(), "rows/s")
}
