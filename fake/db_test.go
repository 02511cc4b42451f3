package fake_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

var ctx = context.Background()

func stringKeyDB(t *testing.T, collation string) *fake.DB {
	t.Helper()
	db := fake.New(fake.Options{})
	check(t, db.CreateTable(fake.TableDef{
		Schema: "dbo", Name: "names",
		Columns: []fake.ColumnDef{
			{Name: "name", Type: "varchar(10)", Collation: collation},
			{Name: "note", Type: "nvarchar(max)", Nullable: true},
		},
		Key: []string{"name"},
	}))
	return db
}

func TestPrimaryKeyFollowsCollation(t *testing.T) {
	for _, tc := range []struct {
		collation string
		other     string
		conflict  bool
	}{
		{"Latin1_General_CI_AS", "A  ", true},
		{"Latin1_General_CI_AS", "A", true},
		{"Latin1_General_CS_AS", "A", false},
		{"Latin1_General_CS_AS", "a  ", true},
		{"Latin1_General_BIN2", "a ", true},
		{"Latin1_General_BIN2", "A", false},
	} {
		t.Run(tc.collation+"/"+tc.other, func(t *testing.T) {
			db := stringKeyDB(t, tc.collation)
			must[lsn.LSN](t)(db.Load("dbo", "names", fake.Row{"a", nil}))
			_, err := db.Load("dbo", "names", fake.Row{tc.other, "x"})
			if tc.conflict {
				if err == nil || !strings.Contains(err.Error(), "violates the primary key") {
					t.Fatalf("insert %q after 'a': err = %v, want a primary key violation", tc.other, err)
				}
				rows := must[[]fake.Row](t)(db.Rows("dbo", "names"))
				if len(rows) != 1 {
					t.Fatalf("a failed commit changed the table: %v", rows)
				}
				got, ok, err := db.Get("dbo", "names", []any{tc.other})
				if err != nil || !ok || got[0] != "a" {
					t.Fatalf("Get(%q) = %v, %v, %v; want the row 'a'", tc.other, got, ok, err)
				}
				return
			}
			check(t, err)
		})
	}
}

func TestCharIsPaddedAndKeysCompareTrimmed(t *testing.T) {
	db := fake.New(fake.Options{})
	check(t, db.CreateTable(fake.TableDef{Schema: "dbo", Name: "c", Columns: []fake.ColumnDef{{Name: "k", Type: "char(4)"}, {Name: "b", Type: "binary(3)", Nullable: true}}, Key: []string{"k"}}))
	must[lsn.LSN](t)(db.Load("dbo", "c", fake.Row{"ab", []byte{1}}))
	rows := must[[]fake.Row](t)(db.Rows("dbo", "c"))
	if rows[0][0] != "ab  " || string(rows[0][1].([]byte)) != "\x01\x00\x00" {
		t.Fatalf("stored %q %v, want char padded to 4 and binary to 3 bytes", rows[0][0], rows[0][1])
	}
	if _, ok, _ := db.Get("dbo", "c", []any{"ab"}); !ok {
		t.Fatal("key 'ab' does not find 'ab  '")
	}
}

func TestValidation(t *testing.T) {
	db := fake.New(fake.Options{})
	check(t, db.CreateTable(fake.TableDef{Schema: "dbo", Name: "v", Columns: []fake.ColumnDef{
		{Name: "id", Type: "tinyint"},
		{Name: "d", Type: "decimal(5,2)", Nullable: true},
		{Name: "s", Type: "varchar(3)", Nullable: true},
		{Name: "t", Type: "datetime2(3)", Nullable: true},
		{Name: "req", Type: "int"},
	}, Key: []string{"id"}}))
	for _, tc := range []struct {
		row  fake.Row
		want string
	}{
		{fake.Row{int64(256), nil, nil, nil, int64(1)}, `column "id" (tinyint): value 256 (int64): out of range`},
		{fake.Row{1, nil, nil, nil, int64(1)}, "want int64"},
		{fake.Row{int64(1), keyrange.Decimal("1000.1"), nil, nil, int64(1)}, "more than 3 integer digits"},
		{fake.Row{int64(1), keyrange.Decimal("1.001"), nil, nil, int64(1)}, "more than 2 fractional digits"},
		{fake.Row{int64(1), keyrange.Decimal("1e3"), nil, nil, int64(1)}, "is not a decimal"},
		{fake.Row{int64(1), nil, "abcd", nil, int64(1)}, "4 characters, the column holds 3"},
		{fake.Row{int64(1), nil, nil, time.Date(2026, 1, 1, 0, 0, 0, 1e5, time.UTC), int64(1)}, "more fractional digits than scale 3"},
		{fake.Row{int64(1), nil, nil, time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("x", 3600)), int64(1)}, "pass it in time.UTC"},
		{fake.Row{int64(1), nil, nil, nil, nil}, `column "req" (int): value NULL: the column is NOT NULL`},
		{fake.Row{int64(1)}, "row has 1 values for 5 columns"},
	} {
		err := db.Begin().Insert("dbo", "v", tc.row)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "dbo.v") {
			t.Errorf("insert %v: err = %v, want it to name dbo.v and say %q", tc.row, err, tc.want)
		}
	}
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "bad", Columns: []fake.ColumnDef{{Name: "x", Type: "varchar(30"}}, Key: []string{"x"}}); err == nil {
		t.Error("a malformed type was accepted")
	}
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "bad", Columns: []fake.ColumnDef{{Name: "x", Type: "xml"}}, Key: []string{"x"}}); err == nil {
		t.Error("an xml key was accepted")
	}
	if err := db.CreateTable(fake.TableDef{Schema: "DBO", Name: "V", Columns: []fake.ColumnDef{{Name: "x", Type: "int"}}, Key: []string{"x"}}); err == nil {
		t.Error("a table equal ignoring case to an existing one was accepted")
	}
}

// TestCompareAgreesWithKeyrange checks the fake's normalized key order
// against keyrange.Compare on random values of every key kind, through the
// order of rows the fake keeps.
func TestCompareAgreesWithKeyrange(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	kinds := []struct {
		decl, collation string
		gen             func() any
	}{
		{"int", "", func() any { return int64(rng.IntN(20) - 10) }},
		{"bit", "", func() any { return rng.IntN(2) == 1 }},
		{"decimal(10,3)", "", func() any {
			forms := []string{"%d.%03d", "%d.%d", "%d.", "-0.%d"}
			f := forms[rng.IntN(len(forms))]
			if f == "%d." {
				return keyrange.Decimal(fmt.Sprintf(f, rng.IntN(20)-10))
			}
			if f == "-0.%d" {
				return keyrange.Decimal(fmt.Sprintf(f, rng.IntN(3)))
			}
			return keyrange.Decimal(fmt.Sprintf(f, rng.IntN(20)-10, rng.IntN(1000)))
		}},
		{"float", "", func() any { return float64(rng.IntN(50)) / 4 }},
		{"varchar(5)", "Latin1_General_CI_AS", func() any { return randString(rng) }},
		{"nvarchar(5)", "Latin1_General_CS_AS", func() any { return randString(rng) }},
		{"varbinary(3)", "", func() any { return []byte{byte(rng.IntN(3)), byte(rng.IntN(3))}[:rng.IntN(3)] }},
		{"datetimeoffset(7)", "", func() any {
			return time.Date(2026, 1, 1, rng.IntN(3), 0, 0, 0, time.FixedZone("", 3600*(rng.IntN(3)-1)))
		}},
		{"uniqueidentifier", "", func() any {
			var u keyrange.UUID
			for i := range u {
				u[i] = byte(rng.IntN(2) * 255)
			}
			return u
		}},
	}
	for _, k := range kinds {
		t.Run(k.decl, func(t *testing.T) {
			db := fake.New(fake.Options{})
			check(t, db.CreateTable(fake.TableDef{Schema: "dbo", Name: "k", Columns: []fake.ColumnDef{
				{Name: "a", Type: k.decl, Collation: k.collation, Nullable: true}, {Name: "b", Type: "int"},
			}, Key: []string{"a", "b"}}))
			info := must[fake.TableInfo](t)(db.Table("dbo", "k"))
			for i := 0; i < 300; i++ {
				var v any
				if rng.IntN(10) > 0 {
					v = k.gen()
				}
				key := keyrange.Tuple{v, int64(rng.IntN(3))}
				before := must[[]fake.Row](t)(db.Rows("dbo", "k"))
				dup := false
				for _, r := range before {
					if must[int](t)(keyrange.CompareTuples(info.KeyColumns, keyrange.Tuple(r), key)) == 0 {
						dup = true
					}
				}
				if _, err := db.Load("dbo", "k", fake.Row(key)); (err != nil) != dup {
					t.Fatalf("insert %v: err = %v, but keyrange finds an equal key: %v", key, err, dup)
				}
			}
			rows := must[[]fake.Row](t)(db.Rows("dbo", "k"))
			for i := 1; i < len(rows); i++ {
				c := must[int](t)(keyrange.CompareTuples(info.KeyColumns, keyrange.Tuple(rows[i-1]), keyrange.Tuple(rows[i])))
				if c >= 0 {
					t.Fatalf("rows %v and %v are out of keyrange order (%d)", rows[i-1], rows[i], c)
				}
			}
		})
	}
}

func randString(rng *rand.Rand) string {
	const letters = "aAbB \t"
	n := rng.IntN(4)
	b := make([]byte, n)
	for i := range b {
		b[i] = letters[rng.IntN(len(letters))]
	}
	return string(b)
}

func TestNullKeysSortFirst(t *testing.T) {
	db := fake.New(fake.Options{})
	check(t, db.CreateTable(fake.TableDef{Schema: "dbo", Name: "n", Columns: []fake.ColumnDef{
		{Name: "a", Type: "int", Nullable: true}, {Name: "b", Type: "varchar(5)", Nullable: true},
	}, Key: []string{"a", "b"}}))
	must[lsn.LSN](t)(db.Load("dbo", "n", fake.Row{int64(1), "x"}, fake.Row{nil, "y"}, fake.Row{nil, nil}, fake.Row{int64(-5), nil}, fake.Row{int64(1), nil}))
	got := must[[]fake.Row](t)(db.Rows("dbo", "n"))
	want := []fake.Row{{nil, nil}, {nil, "y"}, {int64(-5), nil}, {int64(1), nil}, {int64(1), "x"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("rows = %v, want %v", got, want)
	}
	if _, err := db.Load("dbo", "n", fake.Row{nil, nil}); err == nil {
		t.Fatal("a second (NULL, NULL) key was accepted")
	}
	ci := must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "n", ""))
	_ = ci
	check(t, db.CreateTable(fake.TableDef{Schema: "dbo", Name: "i", Columns: []fake.ColumnDef{{Name: "id", Type: "bigint", Nullable: true}}, Key: []string{"id"}}))
	ii := must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "i", ""))
	if _, _, ok, err := db.IntKeyBounds(ctx, ii); ok || err != nil {
		t.Fatalf("IntKeyBounds of an empty table: ok=%v err=%v", ok, err)
	}
	must[lsn.LSN](t)(db.Load("dbo", "i", fake.Row{nil}))
	if _, _, ok, err := db.IntKeyBounds(ctx, ii); ok || err != nil {
		t.Fatalf("IntKeyBounds of NULL keys only: ok=%v err=%v", ok, err)
	}
	must[lsn.LSN](t)(db.Load("dbo", "i", fake.Row{int64(7)}, fake.Row{int64(-3)}, fake.Row{int64(40)}))
	lo, hi, ok, err := db.IntKeyBounds(ctx, ii)
	if lo != -3 || hi != 40 || !ok || err != nil {
		t.Fatalf("IntKeyBounds = %d, %d, %v, %v; want -3, 40", lo, hi, ok, err)
	}
	if _, _, _, err := db.IntKeyBounds(ctx, ci); err == nil {
		t.Fatal("IntKeyBounds of a composite key succeeded")
	}
}

func ordersDB(t *testing.T, opts fake.Options) *fake.DB {
	t.Helper()
	db := fake.New(opts)
	check(t, db.CreateTable(fake.TableDef{
		Schema: "dbo", Name: "orders",
		Columns: []fake.ColumnDef{
			{Name: "id", Type: "int"},
			{Name: "customer", Type: "nvarchar(50)", Nullable: true},
			{Name: "amount", Type: "decimal(18,4)", Nullable: true},
		},
		Key: []string{"id"},
	}))
	return db
}

type changeRow struct {
	id         int64
	op         int64
	start, seq string
	cmd        int64
	customer   any
	ts         time.Time
}

func readChanges(t *testing.T, db *fake.DB, ci *source.CaptureInstance, from, to lsn.LSN) []changeRow {
	t.Helper()
	rows := mustReadAll(t)(db.ReadChanges(ctx, ci, from, to))
	var out []changeRow
	for _, r := range rows {
		out = append(out, changeRow{id: r[0].(int64), customer: r[1], op: r[3].(int64), start: r[4].(string), seq: r[5].(string), cmd: r[6].(int64), ts: r[7].(time.Time)})
	}
	return out
}

func TestCommitsLSNsSeqvalsCommandIDs(t *testing.T) {
	db := ordersDB(t, fake.Options{})
	ci := must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "orders", "dbo_orders"))
	if ci.StartLSN.String() != "0x0000002A00000F380001" {
		t.Fatalf("start_lsn = %s, want the first LSN", ci.StartLSN)
	}
	l1 := must[lsn.LSN](t)(db.Load("dbo", "orders", fake.Row{int64(1), "ann", keyrange.Decimal("1.5")}, fake.Row{int64(2), "bob", nil}))
	if l1 != ci.StartLSN {
		t.Fatalf("first commit %s, want start_lsn %s", l1, ci.StartLSN)
	}
	tx := db.Begin()
	check(t, tx.Update("dbo", "orders", []any{int64(1)}, fake.Row{int64(1), "ANN", keyrange.Decimal("2")}))
	check(t, tx.Update("dbo", "orders", []any{int64(2)}, fake.Row{int64(20), "bob", nil})) // key change
	check(t, tx.Delete("dbo", "orders", []any{int64(1)}))
	l2 := must[lsn.LSN](t)(tx.Commit())
	if !l1.Less(l2) {
		t.Fatalf("LSNs %s then %s", l1, l2)
	}
	rb := db.Begin()
	check(t, rb.Insert("dbo", "orders", fake.Row{int64(99), nil, nil}))
	rb.Rollback()
	if _, err := rb.Commit(); !errors.Is(err, fake.ErrTxDone) {
		t.Fatalf("commit after rollback: %v", err)
	}
	got := readChanges(t, db, ci, ci.StartLSN, maxLSN(t, db))
	type key struct {
		id, op, cmd int64
		start       string
	}
	var keys []key
	for _, c := range got {
		keys = append(keys, key{c.id, c.op, c.cmd, c.start})
	}
	want := []key{
		{1, 2, 1, l1.String()}, {2, 2, 2, l1.String()},
		{1, 3, 1, l2.String()}, {1, 4, 1, l2.String()},
		{2, 1, 2, l2.String()}, {20, 2, 2, l2.String()},
		{1, 1, 3, l2.String()},
	}
	if fmt.Sprint(keys) != fmt.Sprint(want) {
		t.Fatalf("changes\n got %v\nwant %v", keys, want)
	}
	for i := 1; i < len(got); i++ {
		a, b := got[i-1], got[i]
		switch {
		case a.start == b.start && a.op == 3 && b.op == 4:
			if a.seq != b.seq {
				t.Errorf("update images have seqvals %s and %s", a.seq, b.seq)
			}
		case a.start == b.start && a.seq >= b.seq:
			t.Errorf("seqval %s then %s within %s", a.seq, b.seq, a.start)
		}
		if a.start == b.start && a.cmd > b.cmd {
			t.Errorf("command id %d then %d within %s", a.cmd, b.cmd, a.start)
		}
		if a.start == b.start && !a.ts.Equal(b.ts) {
			t.Errorf("one commit has two times")
		}
	}
	if got[2].customer != "ann" || got[3].customer != "ANN" {
		t.Errorf("update images %v, %v; want before 'ann' and after 'ANN'", got[2].customer, got[3].customer)
	}
	if !got[0].ts.Before(got[2].ts) {
		t.Errorf("commit times %v then %v", got[0].ts, got[2].ts)
	}
	if tm := must[time.Time](t)(db.LSNTime(ctx, l2)); !tm.Equal(got[2].ts) {
		t.Errorf("LSNTime(%s) = %v, want %v", l2, tm, got[2].ts)
	}
	// An LSN that is no commit's has no time, as
	// sys.fn_cdc_map_lsn_to_time answers (source/sqlserver FACTS.md F08).
	next, _ := l2.Next()
	if tm := must[time.Time](t)(db.LSNTime(ctx, next)); !tm.IsZero() {
		t.Errorf("LSNTime just above the last commit = %v, want zero", tm)
	}
	if tm := must[time.Time](t)(db.LSNTime(ctx, lsn.LSN{9: 1})); !tm.IsZero() {
		t.Errorf("LSNTime below every commit = %v, want zero", tm)
	}
	// from > to is empty; a window of one commit holds only it.
	if rows := readChanges(t, db, ci, l2, l1); len(rows) != 0 {
		t.Errorf("from > to gave %d rows", len(rows))
	}
	if rows := readChanges(t, db, ci, l2, l2); len(rows) != 5 {
		t.Errorf("changes at %s: %d rows, want 5", l2, len(rows))
	}
	// Failed statements fail the whole commit.
	bad := db.Begin()
	check(t, bad.Insert("dbo", "orders", fake.Row{int64(5), nil, nil}))
	check(t, bad.Delete("dbo", "orders", []any{int64(12345)}))
	if _, err := bad.Commit(); err == nil || !strings.Contains(err.Error(), "no row has key (12345)") {
		t.Fatalf("deleting a missing row: %v", err)
	}
	if _, ok, _ := db.Get("dbo", "orders", []any{int64(5)}); ok {
		t.Fatal("a failed commit applied its insert")
	}
	if m := must[lsn.LSN](t)(db.MaxLSN(ctx)); m != l2 {
		t.Fatalf("MaxLSN = %s, want %s", m, l2)
	}
}

func TestMinLSNNullUntilCaptureJobRuns(t *testing.T) {
	db := ordersDB(t, fake.Options{ManualCapture: true})
	ci := must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "orders", ""))
	l1 := must[lsn.LSN](t)(db.Load("dbo", "orders", fake.Row{int64(1), nil, nil}))
	if _, ok := must2(t)(db.MinLSN(ctx, "dbo_orders")); ok {
		t.Fatal("min LSN valid before the capture job ran")
	}
	if m := must[lsn.LSN](t)(db.MaxLSN(ctx)); !m.IsZero() {
		t.Fatalf("max LSN %s before the capture job ran", m)
	}
	if rows := readChanges(t, db, ci, ci.StartLSN, maxLSN(t, db)); len(rows) != 0 {
		t.Fatalf("change table shows %d rows before the capture job ran", len(rows))
	}
	db.RunCaptureJob()
	if m, ok := must2(t)(db.MinLSN(ctx, "DBO_ORDERS")); !ok || m != ci.StartLSN {
		t.Fatalf("min LSN = %s, %v; want %s", m, ok, ci.StartLSN)
	}
	if m := must[lsn.LSN](t)(db.MaxLSN(ctx)); m != l1 {
		t.Fatalf("max LSN = %s, want %s", m, l1)
	}
	if rows := readChanges(t, db, ci, ci.StartLSN, maxLSN(t, db)); len(rows) != 1 {
		t.Fatalf("change table shows %d rows, want 1", len(rows))
	}
}

func must2(t *testing.T) func(lsn.LSN, bool, error) (lsn.LSN, bool) {
	return func(l lsn.LSN, ok bool, err error) (lsn.LSN, bool) {
		t.Helper()
		check(t, err)
		return l, ok
	}
}

// TestQuietDatabase builds the case of DESIGN.md R3: a new
// instance on a quiet database has start_lsn above max_lsn.
func TestQuietDatabase(t *testing.T) {
	db := ordersDB(t, fake.Options{})
	check(t, db.CreateTable(fake.TableDef{Schema: "dbo", Name: "other", Columns: []fake.ColumnDef{{Name: "id", Type: "int"}}, Key: []string{"id"}}))
	must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "other", ""))
	l1 := must[lsn.LSN](t)(db.Load("dbo", "other", fake.Row{int64(1)}))
	must[lsn.LSN](t)(db.Load("dbo", "orders", fake.Row{int64(1), "before CDC", nil}))
	ci := must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "orders", ""))
	max := must[lsn.LSN](t)(db.MaxLSN(ctx))
	if max != l1 || !max.Less(ci.StartLSN) {
		t.Fatalf("max LSN %s, start_lsn %s: want max = %s < start_lsn", max, ci.StartLSN, l1)
	}
	if _, ok := must2(t)(db.MinLSN(ctx, ci.Name)); ok {
		t.Fatal("min LSN valid on a quiet database")
	}
	// start_lsn - 1 is no commit's LSN: no commit time (FACTS.md F08),
	// where max LSN, a commit's, has one.
	l0, _ := ci.StartLSN.Prev()
	if tm := must[time.Time](t)(db.LSNTime(ctx, l0)); !tm.IsZero() {
		t.Fatalf("commit time %s for start_lsn - 1", tm)
	}
	if tm := must[time.Time](t)(db.LSNTime(ctx, max)); tm.IsZero() {
		t.Fatal("no commit time for the max LSN")
	}
	// Nothing in the changes up to L0; the stream from start_lsn sees later commits.
	if rows := readChanges(t, db, ci, ci.StartLSN, max); len(rows) != 0 {
		t.Fatalf("%d changes before the instance's first commit", len(rows))
	}
	l2 := must[lsn.LSN](t)(db.Load("dbo", "orders", fake.Row{int64(2), nil, nil}))
	if m := must[lsn.LSN](t)(db.MaxLSN(ctx)); m != l2 || m.Less(ci.StartLSN) {
		t.Fatalf("max LSN %s after a captured commit, want %s", m, l2)
	}
	if m, ok := must2(t)(db.MinLSN(ctx, ci.Name)); !ok || m != ci.StartLSN {
		t.Fatalf("min LSN %s %v, want start_lsn", m, ok)
	}
	if rows := readChanges(t, db, ci, ci.StartLSN, maxLSN(t, db)); len(rows) != 1 || rows[0].id != 2 {
		t.Fatalf("changes %v, want the insert of 2 only", rows)
	}
}

func TestCleanupRaisesStartLSNAndReportsDataLoss(t *testing.T) {
	db := ordersDB(t, fake.Options{})
	ci := must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "orders", ""))
	var ls []lsn.LSN
	for i := range 5 {
		ls = append(ls, must[lsn.LSN](t)(db.Load("dbo", "orders", fake.Row{int64(i), nil, nil})))
	}
	check(t, db.Cleanup("DBO_Orders", ls[3]))
	if m, ok := must2(t)(db.MinLSN(ctx, ci.Name)); !ok || m != ls[3] {
		t.Fatalf("min LSN after cleanup = %s, want %s", m, ls[3])
	}
	// Cleanup sets the low water mark as the instance's start_lsn (FACTS.md
	// F20), which is what sp_cdc_help_change_data_capture reports (F07).
	if now := must[*source.CaptureInstance](t)(db.CaptureInstance(ctx, ci.Name)); now.StartLSN != ls[3] {
		t.Fatalf("start_lsn after cleanup = %s, want the low water mark %s", now.StartLSN, ls[3])
	}
	_, err := db.ReadChanges(ctx, ci, ls[0], maxLSN(t, db))
	var dl *source.DataLossError
	if !errors.As(err, &dl) || !errors.Is(err, source.ErrDataLoss) || dl.MinLSN != ls[3] || dl.Requested != ls[0] {
		t.Fatalf("read below min LSN: %v", err)
	}
	rows := readChanges(t, db, ci, ls[3], maxLSN(t, db))
	if len(rows) != 2 || rows[0].id != 3 {
		t.Fatalf("after cleanup: %v", rows)
	}
	if err := db.Cleanup("", lsn.Max); err == nil {
		t.Fatal("cleanup above max LSN succeeded")
	}
	if rows := must[[]fake.Row](t)(db.Rows("dbo", "orders")); len(rows) != 5 {
		t.Fatal("cleanup touched the table")
	}
}

func TestCaptureInstanceNames(t *testing.T) {
	db := ordersDB(t, fake.Options{})
	check(t, db.CreateTable(fake.TableDef{Schema: "dbo", Name: "t2", Columns: []fake.ColumnDef{{Name: "id", Type: "int"}}, Key: []string{"id"}}))
	must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "orders", "dbo_ORDER_ITEMS", "id", "customer"))
	ci := must[*source.CaptureInstance](t)(db.CaptureInstance(ctx, "dbo_order_items"))
	if ci.Name != "dbo_ORDER_ITEMS" || len(ci.Columns) != 2 || ci.Key[0] != "id" || ci.Columns[1].Collation != fake.DefaultCollation {
		t.Fatalf("resolved %+v", ci)
	}
	must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "t2", "dbo_order_ITEMS"))
	_, err := db.CaptureInstance(ctx, "dbo_order_items")
	var amb *source.AmbiguousError
	if !errors.As(err, &amb) || !strings.Contains(err.Error(), "dbo_ORDER_ITEMS") || !strings.Contains(err.Error(), "dbo_order_ITEMS") {
		t.Fatalf("ambiguous name: %v", err)
	}
	if ci := must[*source.CaptureInstance](t)(db.CaptureInstance(ctx, "dbo_order_ITEMS")); ci.SourceTable != "t2" {
		t.Fatalf("exact name resolved to %s", ci.SourceTable)
	}
	if _, err := db.CaptureInstance(ctx, "nope"); !errors.Is(err, source.ErrNotFound) {
		t.Fatalf("missing instance: %v", err)
	}
	must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "orders", "dbo_orders_v2"))
	if _, err := db.EnableCDC("dbo", "orders", "dbo_orders_v3"); err == nil || !strings.Contains(err.Error(), "already has 2") {
		t.Fatalf("third instance: %v", err)
	}
	check(t, db.DisableCDC("dbo_ORDER_ITEMS"))
	must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "orders", "dbo_orders_v3"))
}

func TestSchemaChangeWithTwoInstances(t *testing.T) {
	db := ordersDB(t, fake.Options{})
	v1 := must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "orders", "v1"))
	must[lsn.LSN](t)(db.Load("dbo", "orders", fake.Row{int64(1), "a", nil}))
	must[lsn.LSN](t)(db.AddColumn("dbo", "orders", fake.ColumnDef{Name: "region", Type: "varchar(5)", Nullable: true}))
	v2 := must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "orders", "v2"))
	must[lsn.LSN](t)(db.Load("dbo", "orders", fake.Row{int64(2), "b", nil, "eu"}))
	if len(v2.Columns) != 4 || len(v1.Columns) != 3 {
		t.Fatalf("columns v1 %d, v2 %d", len(v1.Columns), len(v2.Columns))
	}
	r1 := mustReadAll(t)(db.ReadRange(ctx, v1, keyrange.Range{}, source.ReadOptions{}))
	r2 := mustReadAll(t)(db.ReadRange(ctx, v2, keyrange.Range{}, source.ReadOptions{}))
	if fmt.Sprint(r1) != "[[1 a <nil>] [2 b <nil>]]" || fmt.Sprint(r2) != "[[1 a <nil> <nil>] [2 b <nil> eu]]" {
		t.Fatalf("v1 %v, v2 %v", r1, r2)
	}
	c1 := mustReadAll(t)(db.ReadChanges(ctx, v1, v1.StartLSN, maxLSN(t, db)))
	c2 := mustReadAll(t)(db.ReadChanges(ctx, v2, v2.StartLSN, maxLSN(t, db)))
	if len(c1) != 2 || len(c2) != 1 || c2[0][3] != "eu" {
		t.Fatalf("changes v1 %v, v2 %v", c1, c2)
	}
}

func TestRowCountSkew(t *testing.T) {
	db := ordersDB(t, fake.Options{})
	ci := must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "orders", ""))
	for i := range 10 {
		must[lsn.LSN](t)(db.Load("dbo", "orders", fake.Row{int64(i), nil, nil}))
	}
	for _, tc := range []struct{ skew, want int64 }{{0, 10}, {-3, 7}, {5, 15}, {-100, 0}} {
		check(t, db.SetRowCountSkew("dbo", "orders", tc.skew))
		if n := must[int64](t)(db.RowCount(ctx, ci)); n != tc.want {
			t.Errorf("skew %d: RowCount = %d, want %d", tc.skew, n, tc.want)
		}
	}
}

func TestFaults(t *testing.T) {
	db := ordersDB(t, fake.Options{})
	ci := must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "orders", ""))
	var rows []fake.Row
	for i := range 100 {
		rows = append(rows, fake.Row{int64(i), nil, nil})
	}
	must[lsn.LSN](t)(db.Load("dbo", "orders", rows...))

	db.FailNext(fake.OpMaxLSN, fake.ErrInjected)
	if _, err := db.MaxLSN(ctx); !errors.Is(err, fake.ErrInjected) {
		t.Fatalf("MaxLSN: %v", err)
	}
	must[lsn.LSN](t)(db.MaxLSN(ctx))

	db.FailNext(fake.OpSeekKey, fake.ErrInjected)
	if _, _, err := db.SeekKey(ctx, ci, source.ReadCommitted, nil, 3); !errors.Is(err, fake.ErrInjected) {
		t.Fatalf("SeekKey: %v", err)
	}

	db.FailNext(fake.OpCommit, fake.ErrInjected)
	if _, err := db.Load("dbo", "orders", fake.Row{int64(1000), nil, nil}); !errors.Is(err, fake.ErrInjected) {
		t.Fatalf("commit: %v", err)
	}
	if _, ok, _ := db.Get("dbo", "orders", []any{int64(1000)}); ok {
		t.Fatal("a failed commit applied")
	}

	db.FailReadAfter(25, fake.ErrInjected)
	rr, err := db.ReadRange(ctx, ci, keyrange.Range{}, source.ReadOptions{BatchRows: 10})
	check(t, err)
	got, err := readAll(t, rr)
	if !errors.Is(err, fake.ErrInjected) || len(got) != 25 {
		t.Fatalf("read with a fault after 25 rows: %d rows, %v", len(got), err)
	}
	if got := mustReadAll(t)(db.ReadRange(ctx, ci, keyrange.Range{}, source.ReadOptions{})); len(got) != 100 {
		t.Fatalf("read after the fault fired: %d rows", len(got))
	}

	cctx, cancel := context.WithCancel(ctx)
	rr, err = db.ReadRange(cctx, ci, keyrange.Range{}, source.ReadOptions{BatchRows: 10})
	check(t, err)
	if !rr.Next() {
		t.Fatal(rr.Err())
	}
	cancel()
	if rr.Next() || !errors.Is(rr.Err(), context.Canceled) {
		t.Fatalf("after cancel: %v", rr.Err())
	}
	rr.Release()

	hookErr := errors.New("hook says no")
	db.SetPageHook(func(context.Context, fake.Page) error { return hookErr })
	if _, err := readAll(t, must[arrowReader](t)(db.ReadRange(ctx, ci, keyrange.Range{}, source.ReadOptions{}))); !errors.Is(err, hookErr) {
		t.Fatalf("hook error: %v", err)
	}
}

func TestLSNsAreStrictlyIncreasingUnderConcurrency(t *testing.T) {
	db := ordersDB(t, fake.Options{})
	ci := must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "orders", ""))
	const writers, each = 4, 50
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			for i := range each {
				if _, err := db.Load("dbo", "orders", fake.Row{int64(w*1000 + i), nil, nil}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range writers {
		check(t, <-errs)
	}
	got := readChanges(t, db, ci, ci.StartLSN, maxLSN(t, db))
	if len(got) != writers*each {
		t.Fatalf("%d changes", len(got))
	}
	seen := map[string]bool{}
	for i, c := range got {
		if seen[c.start] {
			t.Fatalf("LSN %s twice", c.start)
		}
		seen[c.start] = true
		if i > 0 && got[i-1].start >= c.start {
			t.Fatalf("LSNs out of order: %s then %s", got[i-1].start, c.start)
		}
	}
}

func TestCaptureEvery(t *testing.T) {
	db := ordersDB(t, fake.Options{CaptureEvery: 3})
	ci := must[*source.CaptureInstance](t)(db.EnableCDC("dbo", "orders", ""))
	var ls []lsn.LSN
	for i := range 3 {
		ls = append(ls, must[lsn.LSN](t)(db.Load("dbo", "orders", fake.Row{int64(i), nil, nil})))
		max := must[lsn.LSN](t)(db.MaxLSN(ctx))
		if i < 2 && !max.IsZero() {
			t.Fatalf("after %d commits max LSN %s, want zero until the job runs", i+1, max)
		}
	}
	if max := must[lsn.LSN](t)(db.MaxLSN(ctx)); max != ls[2] {
		t.Fatalf("max LSN %s, want %s", max, ls[2])
	}
	if rows := readChanges(t, db, ci, ci.StartLSN, maxLSN(t, db)); len(rows) != 3 {
		t.Fatalf("%d changes", len(rows))
	}
}

func TestConcurrentReadsAndCommits(t *testing.T) {
	db, ci := intTableDB(t, 2000)
	done := make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		defer close(errs)
		for i := 0; i < 1500; i++ {
			select {
			case <-done:
				return
			default:
			}
			tx := db.Begin()
			_ = tx.Insert("dbo", "t", fake.Row{int64(100000 + i), "new"})
			_ = tx.Delete("dbo", "t", []any{int64(i * 10)})
			if _, err := tx.Commit(); err != nil {
				errs <- err
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			iso := source.ReadCommitted
			if r%2 == 1 {
				iso = source.Snapshot
			}
			for range 5 {
				rr, err := db.ReadRange(ctx, ci, keyrange.Range{}, source.ReadOptions{BatchRows: 64, Isolation: iso})
				if err != nil {
					t.Error(err)
					return
				}
				n := 0
				for rr.Next() {
					n += int(rr.RecordBatch().NumRows())
				}
				if err := rr.Err(); err != nil {
					t.Error(err)
				}
				rr.Release()
				if iso == source.Snapshot && n != 2000 {
					t.Errorf("snapshot read %d rows, want 2000 (each commit deletes one and inserts one)", n)
				}
				if _, _, err := db.SeekKey(ctx, ci, iso, keyrange.Tuple{int64(500)}, 100); err != nil {
					t.Error(err)
				}
				if _, err := db.MaxLSN(ctx); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	check(t, <-errs)
}

// TestTurkicCollationsKeepIAndiApart: under Turkish and Azeri collations
// I pairs with ı and İ with i (FACTS.md F23), so a table keyed by such a
// column holds 'I' and 'i' as two rows, where Latin1_General_CI_AS makes
// them one key.
func TestTurkicCollationsKeepIAndiApart(t *testing.T) {
	for _, tc := range []struct {
		collation string
		turkic    bool
	}{{"Turkish_CI_AS", true}, {"Azeri_Latin_100_CI_AS", true}, {"Turkish_100_CI_AI", true}, {"Latin1_General_CI_AS", false}} {
		t.Run(tc.collation, func(t *testing.T) {
			db := stringKeyDB(t, tc.collation)
			must[lsn.LSN](t)(db.Load("dbo", "names", fake.Row{"I", nil}, fake.Row{"a", nil}))
			_, err := db.Load("dbo", "names", fake.Row{"i", nil})
			if tc.turkic != (err == nil) {
				t.Fatalf("load 'i' beside 'I': %v (Turkic %v)", err, tc.turkic)
			}
			conflicts := []string{"A", "a  "}
			if tc.turkic {
				conflicts = append(conflicts, "ı", "İ") // ı pairs with I, İ with i
			}
			for _, k := range conflicts {
				if _, err := db.Load("dbo", "names", fake.Row{k, nil}); err == nil || !strings.Contains(err.Error(), "violates the primary key") {
					t.Errorf("load %q: %v, want a primary key violation", k, err)
				}
			}
		})
	}
}
