// Package testworld builds the random cases of the randomized tests: a
// table layout with a random-row generator (Shape), a fake database with
// that table captured by CDC and loaded with rows of distinct keys
// (World), and random inserts, updates and deletes committed to it
// (World.Change).
//
// A test draws everything from one *rand.Rand seeded by Seed, so a failing
// case reruns from the seed it logged.
package testworld

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

// Tick is the precision of datetime2(7): Shapes(Tick) keeps every digit
// SQL Server holds.
const Tick = 100 * time.Nanosecond

// Seed returns the seed of a randomized test: flagSeed (the value of the
// test binary's -seed flag) when it is not 0, else $CDCSNAP_SEED, else
// the clock. It logs the seed and how to rerun with it.
func Seed(t testing.TB, flagSeed uint64) uint64 {
	t.Helper()
	s := flagSeed
	if v := os.Getenv("CDCSNAP_SEED"); s == 0 && v != "" {
		fmt.Sscan(v, &s)
	}
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed=%d or CDCSNAP_SEED=%d)", s, s, s)
	return s
}

// Shape is a random table layout: its columns, its key and a row
// generator.
type Shape struct {
	// Name names the table (schema dbo).
	Name string
	// Columns are the table's columns in ordinal order.
	Columns []fake.ColumnDef
	// Key names the primary key columns in index order.
	Key []string
	// Row returns a random row; its key may repeat.
	Row func(r *rand.Rand) fake.Row
}

// Word returns a random string of 1 to maxLen bytes of alphabet, one time
// in four with one or two trailing spaces (equal under SQL Server's
// padding).
func Word(r *rand.Rand, alphabet string, maxLen int) string {
	b := make([]byte, 1+r.IntN(maxLen))
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	s := string(b)
	if r.IntN(4) == 0 {
		s += strings.Repeat(" ", 1+r.IntN(2))
	}
	return s
}

// Shapes returns the standard layouts, with small key spaces so that
// random keys collide: a sparse and skewed bigint key; a composite
// case-insensitive varchar + int key; a case-insensitive string key; a
// binary-collation nvarchar + date + smallint key; and a Turkish_CI_AS
// varchar + int key with large-object and computed columns. Their datetime2
// values are truncated to precision: Tick keeps all of them,
// time.Microsecond only what a Delta timestamp holds.
func Shapes(precision time.Duration) []Shape {
	dec := func(r *rand.Rand) any {
		if r.IntN(5) == 0 {
			return nil
		}
		return keyrange.Decimal(fmt.Sprintf("%d.%04d", r.IntN(20000)-10000, r.IntN(10000)))
	}
	return []Shape{
		{
			Name: "bigint",
			Columns: []fake.ColumnDef{
				{Name: "id", Type: "bigint"}, {Name: "name", Type: "nvarchar(40)", Nullable: true},
				{Name: "amount", Type: "decimal(18,4)", Nullable: true}, {Name: "at", Type: "datetime2(7)", Nullable: true},
			},
			Key: []string{"id"},
			Row: func(r *rand.Rand) fake.Row {
				var at any
				if r.IntN(3) > 0 {
					at = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(r.Int64N(1e15)) * Tick).Truncate(precision)
				}
				// Sparse and skewed keys, negative ones too.
				id := r.Int64N(1000) - 100
				if r.IntN(10) == 0 {
					id = r.Int64N(1 << 40)
				}
				return fake.Row{id, Word(r, "abcXYZ", 8), dec(r), at}
			},
		},
		{
			Name: "company-id",
			Columns: []fake.ColumnDef{
				{Name: "company", Type: "varchar(10)", Collation: "Latin1_General_CI_AS"}, {Name: "id", Type: "int"},
				{Name: "val", Type: "nvarchar(20)", Nullable: true},
			},
			Key: []string{"company", "id"},
			Row: func(r *rand.Rand) fake.Row {
				companies := []string{"acme", "ACME", "Beta", "gamma", "Gamma ", "delta"}
				return fake.Row{companies[r.IntN(1+r.IntN(len(companies)))], int64(r.IntN(200)), Word(r, "xyz", 5)}
			},
		},
		{
			Name: "ci-string",
			Columns: []fake.ColumnDef{
				{Name: "code", Type: "varchar(12)", Collation: "SQL_Latin1_General_CP1_CI_AS"}, {Name: "n", Type: "int", Nullable: true},
			},
			Key: []string{"code"},
			Row: func(r *rand.Rand) fake.Row { return fake.Row{Word(r, "nNaAbB", 4), int64(r.IntN(10))} },
		},
		{
			Name: "binary-collation-3col",
			Columns: []fake.ColumnDef{
				{Name: "k", Type: "nvarchar(8)", Collation: "Latin1_General_BIN2"}, {Name: "d", Type: "date"},
				{Name: "s", Type: "smallint"}, {Name: "flag", Type: "bit", Nullable: true},
			},
			Key: []string{"k", "d", "s"},
			Row: func(r *rand.Rand) fake.Row {
				d := time.Date(2026, 1, 1+r.IntN(3), 0, 0, 0, 0, time.UTC)
				return fake.Row{Word(r, "aAb", 2), d, int64(r.IntN(4)), r.IntN(2) == 0}
			},
		},
		{
			// Turkish rules: 'I' and 'i' are two keys, 'I' and 'ı' one
			// (FACTS.md F23); the keys hold no two that only Turkish rules
			// make equal, so planning shares every equality the model has
			// (see keyrange.Collation.CertainlyEqual) and each range still
			// reads exactly its rows. The other columns are those CDC writes NULL
			// for in some change rows (F13): a computed column always, text
			// in deletes and before images, the (max) types in before
			// images of updates that left them alone, which a small
			// alphabet makes common.
			Name: "turkish-lob",
			Columns: []fake.ColumnDef{
				{Name: "name", Type: "varchar(10)", Collation: "Turkish_CI_AS"}, {Name: "id", Type: "int"},
				{Name: "body", Type: "nvarchar(max)", Nullable: true}, {Name: "note", Type: "text", Collation: "Turkish_CI_AS", Nullable: true},
				{Name: "blob", Type: "varbinary(max)", Nullable: true}, {Name: "total", Type: "int", Computed: true, Nullable: true},
			},
			Key: []string{"name", "id"},
			Row: func(r *rand.Rand) fake.Row {
				names := []string{"I", "i", "ıb", "İc", "Ia", "ia", "a", "A"}
				id := int64(r.IntN(12))
				var blob any
				if r.IntN(3) > 0 {
					blob = []byte(Word(r, "01", 1))
				}
				return fake.Row{names[r.IntN(len(names))], id, Word(r, "xy", 1), Word(r, "pq", 3), blob, id * 2}
			},
		},
	}
}

// World is one random case: a fake database with one table of a Shape,
// captured by CDC.
type World struct {
	// DB is the fake database.
	DB *fake.DB
	// Shape is the table's layout.
	Shape Shape
	// Info describes the table as the fake created it.
	Info fake.TableInfo
	// CI is the capture instance: dbo_ and the shape's name with _ for -.
	CI string
	// Keys holds the collation keys of the live rows, as New and Change
	// leave them; a test that writes rows itself keeps it up to date.
	Keys map[string]bool

	mu *sync.Mutex // one Change at a time, shared with the worlds of With
}

// New creates a fake database with sh's table, enables CDC on it and
// loads up to rows random rows of distinct keys (fewer when 20*rows draws
// do not find that many: the key space is small).
func New(t testing.TB, r *rand.Rand, sh Shape, rows int) *World {
	t.Helper()
	db := fake.New(fake.Options{})
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: sh.Name, Columns: sh.Columns, Key: sh.Key}); err != nil {
		t.Fatal(err)
	}
	info, err := db.Table("dbo", sh.Name)
	if err != nil {
		t.Fatal(err)
	}
	w := &World{DB: db, Shape: sh, Info: info, CI: "dbo_" + strings.ReplaceAll(sh.Name, "-", "_"), Keys: map[string]bool{}, mu: &sync.Mutex{}}
	if _, err := db.EnableCDC("dbo", sh.Name, w.CI); err != nil {
		t.Fatal(err)
	}
	var batch []fake.Row
	for tries := 0; len(batch) < rows && tries < rows*20; tries++ {
		row := sh.Row(r)
		k := w.CollationKey(t, w.KeyOf(row))
		if w.Keys[k] {
			continue
		}
		w.Keys[k] = true
		batch = append(batch, row)
	}
	if len(batch) > 0 {
		if _, err := db.Load("dbo", sh.Name, batch...); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// With returns w seen through another capture instance of its table: the
// same database, keys and Change lock.
func (w *World) With(ci string) *World {
	v := *w
	v.CI = ci
	return &v
}

// KeyOf returns row's key values in key order.
func (w *World) KeyOf(row fake.Row) []any {
	k := make([]any, len(w.Info.KeyIndexes))
	for i, j := range w.Info.KeyIndexes {
		k[i] = row[j]
	}
	return k
}

// CollationKey returns a string equal for keys the table's collations make
// equal, and only for them.
func (w *World) CollationKey(t testing.TB, key []any) string {
	t.Helper()
	k, err := w.collationKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (w *World) collationKey(key []any) (string, error) {
	var b strings.Builder
	for i, c := range w.Info.KeyColumns {
		s, err := keyrange.CollationKey(c, key[i])
		if err != nil {
			return "", err
		}
		b.WriteString(s + "\x00")
	}
	return b.String(), nil
}

// Change commits one random insert (skipped when its key is live), update
// of a live row's other columns, or delete of a live row. It is safe to
// call from other goroutines (a page hook's): it reports a failure with
// t.Error.
func (w *World) Change(t testing.TB, r *rand.Rand) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.change(r); err != nil {
		t.Error(err)
	}
}

func (w *World) change(r *rand.Rand) error {
	rows, err := w.DB.Rows("dbo", w.Shape.Name)
	if err != nil {
		return err
	}
	tx := w.DB.Begin()
	switch op := r.IntN(3); {
	case op == 0 || len(rows) == 0:
		row := w.Shape.Row(r)
		k, kerr := w.collationKey(w.KeyOf(row))
		if kerr != nil || w.Keys[k] {
			tx.Rollback()
			return kerr
		}
		w.Keys[k] = true
		err = tx.Insert("dbo", w.Shape.Name, row)
	case op == 1:
		old := rows[r.IntN(len(rows))]
		row := w.Shape.Row(r)
		// Keep the key (a non-key update), spelled as stored.
		for _, j := range w.Info.KeyIndexes {
			row[j] = old[j]
		}
		err = tx.Update("dbo", w.Shape.Name, w.KeyOf(old), row)
	default:
		key := w.KeyOf(rows[r.IntN(len(rows))])
		var k string
		if k, err = w.collationKey(key); err == nil {
			delete(w.Keys, k)
			err = tx.Delete("dbo", w.Shape.Name, key)
		}
	}
	if err != nil {
		tx.Rollback()
		return err
	}
	_, err = tx.Commit()
	return err
}

// Instance returns w's capture instance as the database describes it.
func (w *World) Instance(t testing.TB) *source.CaptureInstance {
	t.Helper()
	ci, err := w.DB.CaptureInstance(context.Background(), w.CI)
	if err != nil {
		t.Fatal(err)
	}
	return ci
}

// MaxLSN returns the database's max LSN.
func (w *World) MaxLSN(t testing.TB) lsn.LSN {
	t.Helper()
	l, err := w.DB.MaxLSN(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// SinkImage returns the latest image of the bronze rows dst holds whose
// _start_lsn is at or above from (the zero LSN: every row): after a
// re-snapshot, the rows from the newest snapshot on.
func (w *World) SinkImage(t testing.TB, dst *fake.MemSink, from lsn.LSN) *snapshot.Image {
	t.Helper()
	ci := w.Instance(t)
	key, _ := ci.KeyColumns()
	im := snapshot.NewImage(ci.Columns, key)
	f := from.String()
	for _, rec := range dst.Records() {
		col := rec.Column(rec.Schema().FieldIndices(sink.ColStartLSN)[0]).(*array.String)
		for i := 0; i < int(rec.NumRows()); i++ {
			if !col.IsValid(i) || col.Value(i) < f {
				continue
			}
			s := rec.NewSlice(int64(i), int64(i+1))
			err := im.AddBronze(s)
			s.Release()
			if err != nil {
				t.Fatal(err)
			}
		}
		rec.Release()
	}
	return im
}

// CheckImage fails t, saying what, unless the latest image of dst's rows
// from from on (SinkImage) equals the source table's.
func (w *World) CheckImage(t testing.TB, dst *fake.MemSink, from lsn.LSN, what string) {
	t.Helper()
	want, err := snapshot.SourceImage(context.Background(), w.DB, w.Instance(t))
	if err != nil {
		t.Fatal(err)
	}
	if d := want.Diff(w.SinkImage(t, dst, from), 5); len(d) > 0 {
		t.Fatalf("%s: the latest image differs from the source:\n%s", what, strings.Join(d, "\n"))
	}
}

// ChangeBetweenPages makes the database commit up to rate random changes
// (drawn from r) after every page a read takes, one page at a time, until
// the returned function stops it: changes committed while a snapshot
// reads.
func (w *World) ChangeBetweenPages(t testing.TB, r *rand.Rand, rate int) (stop func()) {
	var mu sync.Mutex // partitions read in parallel: one change at a time
	w.DB.SetPageHook(func(ctx context.Context, p fake.Page) error {
		mu.Lock()
		defer mu.Unlock()
		for range r.IntN(rate + 1) {
			w.Change(t, r)
		}
		return nil
	})
	return func() { w.DB.SetPageHook(nil) }
}

// InjectFault arms one random fault for the next attempt of a chunked
// backfill, or none: a read that fails after some rows, a failed sink
// commit, a failed sink write, or cancel called after a few pages. clear
// disarms whatever is left.
func (w *World) InjectFault(r *rand.Rand, dst *fake.MemSink, err error, cancel context.CancelFunc) (clear func()) {
	switch r.IntN(5) {
	case 0:
		w.DB.FailReadAfter(r.Int64N(40), err)
	case 1:
		dst.FailNextCommit(err)
	case 2:
		dst.FailWriteAfter(r.IntN(3), err)
	case 3:
		var n atomic.Int64
		n.Store(int64(r.IntN(4)))
		w.DB.SetPageHook(func(context.Context, fake.Page) error {
			if n.Add(-1) < 0 {
				cancel()
			}
			return nil
		})
	}
	return func() {
		w.DB.SetPageHook(nil)
		w.DB.ClearFaults()
		dst.FailNextCommit(nil)
	}
}
