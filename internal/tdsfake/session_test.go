package tdsfake_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/tdsfake"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

func bigTable(t *testing.T, n int) *fake.DB {
	t.Helper()
	db := fake.New(fake.Options{})
	rows := make([]fake.Row, n)
	for i := range rows {
		rows[i] = fake.Row{int64(i), strings.Repeat("x", 50)}
	}
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "big", Key: []string{"id"},
		Columns: []fake.ColumnDef{{Name: "id", Type: "bigint"}, {Name: "v", Type: "varchar(50)", Nullable: true}},
		Rows:    rows, CaptureInstance: "dbo_big"}); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestCancelMidReadSendsAttention: a read whose context is cancelled
// mid-stream stops: the driver sends ATTENTION, the server stops sending,
// the read ends with the context's error, and its connection is not
// pooled again. A reader released before its end with its context live
// also stops the statement (ATTENTION), and its connection goes back to
// the pool at READ COMMITTED, where the next statement finds it. No
// goroutine is left (TestMain's goleak).
func TestCancelMidReadSendsAttention(t *testing.T) {
	db := bigTable(t, 20000)
	src, srv, sdb := serve(t, db, tdsfake.Options{PageRows: 1000}, sqlserver.Options{})
	sdb.SetMaxOpenConns(1)
	// The server stalls after its second page (some 130 kB, several of
	// the 32767-byte packets sqlserver.Open asks for sent) until the
	// client cancels, so the cancel comes while
	// the statement runs; the client asks for batches of 10 rows.
	db.SetPageHook(func(ctx context.Context, p fake.Page) error {
		if p.Number >= 2 {
			<-ctx.Done()
		}
		return nil
	})
	defer db.SetPageHook(nil)
	ci, err := src.CaptureInstance(context.Background(), "dbo_big")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rr, err := src.ReadRange(ctx, ci, keyrange.Range{}, source.ReadOptions{Isolation: source.Snapshot, BatchRows: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !rr.Next() {
		t.Fatal(rr.Err())
	}
	cancel()
	for rr.Next() {
	}
	if !errors.Is(rr.Err(), context.Canceled) {
		t.Errorf("read after cancel: %v, want context.Canceled", rr.Err())
	}
	rr.Release()
	if srv.Attentions() < 1 {
		t.Errorf("the server saw no ATTENTION")
	}

	// Released early, context live.
	rr, err = src.ReadRange(context.Background(), ci, keyrange.Range{}, source.ReadOptions{Isolation: source.Snapshot, BatchRows: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !rr.Next() {
		t.Fatal(rr.Err())
	}
	before := srv.Attentions()
	rr.Release()
	if srv.Attentions() <= before {
		t.Errorf("releasing a reader early sent no ATTENTION")
	}
	reqs := srv.Requests()
	reset, last := reqs[len(reqs)-2], reqs[len(reqs)-1]
	if reset.SQL != "SET TRANSACTION ISOLATION LEVEL READ COMMITTED" || last.SQL != "SET LOCK_TIMEOUT -1" || reset.ConnID != last.ConnID || srv.Isolation(last.ConnID) != source.ReadCommitted {
		t.Errorf("the last statements %q, %q on connections %d, %d (level %s): want the reset to READ COMMITTED and no lock time-out", reset.SQL, last.SQL, reset.ConnID, last.ConnID, srv.Isolation(last.ConnID))
	}
	if _, err := src.MaxLSN(context.Background()); err != nil {
		t.Fatal(err)
	}
	reqs = srv.Requests()
	if next := reqs[len(reqs)-1]; next.ConnID != last.ConnID || !next.Reset {
		t.Errorf("the next statement ran on connection %d (reset %v), want the pooled connection %d, reset", next.ConnID, next.Reset, last.ConnID)
	}
}

// castRE finds each bound's CAST: its parameter and target type.
var castRE = regexp.MustCompile(`CAST\(@p(\d+)(?: COLLATE \w+)? AS ([a-z0-9]+)`)

// bindings are the TYPE_INFO a bound of each CAST target type is sent as
// (source/sqlserver's boundExpr, FACTS.md F47): never a string against a
// key the CAST does not convert.
var bindings = map[string]string{
	"bigint": "bigint", "int": "bigint", "smallint": "bigint", "tinyint": "bigint", "bit": "bit",
	"decimal": "nvarchar", "numeric": "nvarchar", "money": "nvarchar", "smallmoney": "nvarchar",
	"float": "float", "real": "float", "char": "nvarchar", "varchar": "nvarchar", "nchar": "nvarchar", "nvarchar": "nvarchar",
	"binary": "varbinary", "varbinary": "varbinary", "uniqueidentifier": "nvarchar",
	"date": "date", "time": "time", "datetime": "datetime2", "smalldatetime": "datetime2", "datetime2": "datetime2",
	"datetimeoffset": "datetimeoffset",
}

// TestBoundsHaveTheTypesTheirCastsExpect: a keyset snapshot of a table
// keyed by one column of every bound type: every parameter the server
// received has the TYPE_INFO its CAST expects.
func TestBoundsHaveTheTypesTheirCastsExpect(t *testing.T) {
	db := fake.New(fake.Options{})
	key := []fake.ColumnDef{
		{Name: "d", Type: "decimal(10,3)"}, {Name: "u", Type: "uniqueidentifier"}, {Name: "t", Type: "datetime2(7)"},
		{Name: "o", Type: "datetimeoffset(7)"}, {Name: "b", Type: "varbinary(8)"}, {Name: "f", Type: "float"},
		{Name: "x", Type: "bit"}, {Name: "tm", Type: "time(7)"}, {Name: "dd", Type: "date"}, {Name: "g", Type: "varchar(10)", Collation: "Greek_CI_AS"},
		{Name: "m", Type: "money"}, {Name: "s", Type: "smallint"}, {Name: "dt", Type: "datetime"},
	}
	var names []string
	for _, c := range key {
		names = append(names, c.Name)
	}
	var rows []fake.Row
	for i := range 40 {
		u := keyrange.UUID{15: byte(i)}
		rows = append(rows, fake.Row{keyrange.Decimal(strconv.Itoa(i % 3)), u, timeAt(i % 2), timeAt(i).In(fixed(i)), []byte{byte(i % 2)}, float64(i % 2),
			i%2 == 0, timeOfDay(i % 2), time.Date(2024, 3, 1+i%2, 0, 0, 0, 0, time.UTC), "Άλφα", keyrange.Decimal("1.0000"), int64(i % 2), time.Date(2024, 3, 1, 12, 0, 0, 3000000*(i%2), time.UTC)})
	}
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "keys", Columns: key, Key: names, Rows: rows, CaptureInstance: "dbo_keys"}); err != nil {
		t.Fatal(err)
	}
	src, srv, _ := serve(t, db, tdsfake.Options{}, sqlserver.Options{})
	if _, err := snapshot.Take(context.Background(), src, fake.NewMemSink(), snapshot.Options{CaptureInstance: "dbo_keys", Partitions: 7, MinPartitionRows: -1}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, req := range srv.Requests() {
		for _, m := range castRE.FindAllStringSubmatch(req.SQL, -1) {
			n, _ := strconv.Atoi(m[1])
			if n < 1 || n > len(req.Params) {
				t.Fatalf("CAST of @p%d, but %d parameters came: %q", n, len(req.Params), req.SQL)
			}
			p := req.Params[n-1]
			want, ok := bindings[m[2]]
			if !ok {
				t.Fatalf("CAST to %s: no binding known", m[2])
			}
			if !strings.HasPrefix(p.Type.Name, want) {
				t.Errorf("@p%d in CAST(... AS %s) came as %s (%s), want %s", n, m[2], p.Type.Name, p.Decl, want)
			}
			seen[m[2]]++
		}
	}
	for _, typ := range []string{"decimal", "uniqueidentifier", "datetime2", "datetimeoffset", "varbinary", "float", "bit", "time", "date", "varchar", "money", "smallint", "datetime"} {
		if seen[typ] == 0 {
			t.Errorf("no bound of type %s was sent: the test proves less than it says (%v)", typ, seen)
		}
	}
}

// TestPasswordNeverShown: a login refused for a wrong password, and every
// statement of a snapshot, leave the password in no error and no log line.
func TestPasswordNeverShown(t *testing.T) {
	db := bigTable(t, 50)
	srv, err := tdsfake.Start(context.Background(), db, tdsfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	dsn := srv.DSN("cdcsnap")
	wrong := strings.Replace(dsn, "fake-Passw0rd", "Wr0ng-Secret-7", 1)
	bad, err := sqlserver.Open(wrong)
	if err != nil {
		t.Fatal(err)
	}
	err = bad.PingContext(context.Background())
	bad.Close()
	if err == nil || strings.Contains(err.Error(), "Wr0ng-Secret-7") {
		t.Fatalf("wrong password: %v", err)
	}
	sdb, err := sqlserver.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	src, err := sqlserver.New(sdb, sqlserver.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Take(context.Background(), src, fake.NewMemSink(), snapshot.Options{CaptureInstance: "dbo_big", Partitions: 3, MinPartitionRows: -1, RunOptions: snapshot.RunOptions{Logger: logger}}); err != nil {
		t.Fatal(err)
	}
	if logs.Len() == 0 {
		t.Fatal("nothing was logged: the test proves nothing")
	}
	for _, secret := range []string{"fake-Passw0rd", "Wr0ng-Secret-7"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds the password %q", secret)
		}
	}
	if red := sqlserver.RedactDSN(dsn); strings.Contains(red, "fake-Passw0rd") {
		t.Errorf("RedactDSN(%s) keeps the password", red)
	}
}

func timeAt(i int) time.Time { return time.Date(2024, 3, 1, 12, 0, 0, 100*i, time.UTC) }

func timeOfDay(i int) time.Time { return time.Date(1, 1, 1, 9, 0, i, 100, time.UTC) }

func fixed(i int) *time.Location { return time.FixedZone("", (i%5-2)*3600) }
