package tdsserver

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-sql/civil"
	mssql "github.com/microsoft/go-mssqldb"
)

// nopHandler answers every request with an empty response.
var nopHandler = HandlerFunc(func(context.Context, *Request, *ResponseWriter) error { return nil })

func withPassword(t *testing.T, dsn, user, password string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}

func TestLogin(t *testing.T) {
	s := startServer(t, nopHandler)
	if want := "sqlserver://cdcsnap:p%40ss%3Aw%2Frd%20%C3%A9%3F&@" + s.Addr() + "?database=shop&encrypt=disable"; s.DSN("shop") != want {
		t.Errorf("DSN %s, want %s", s.DSN("shop"), want)
	}
	db := openDB(t, s.DSN("shop"))
	if err := db.Ping(); err != nil {
		t.Fatal(err)
	}
	// The user name matches ignoring case, as SQL Server's does.
	if err := openDB(t, withPassword(t, s.DSN("shop"), "CDCSNAP", testPassword)).Ping(); err != nil {
		t.Errorf("user in upper case: %v", err)
	}
	for _, c := range []struct{ user, password string }{{testUser, "wrong"}, {testUser, strings.ToUpper(testPassword)}, {"sa", testPassword}, {testUser, ""}} {
		err := openDB(t, withPassword(t, s.DSN("shop"), c.user, c.password)).Ping()
		var me mssql.Error
		if !errors.As(err, &me) || me.Number != 18456 || me.Class != 14 || !strings.Contains(me.Message, "Login failed for user '"+c.user+"'") {
			t.Errorf("%s/%s: got %v, want login error 18456", c.user, c.password, err)
		}
	}
	// The database and packet size of the login reach the handler.
	if _, err := db.Exec("select 1"); err != nil {
		t.Fatal(err)
	}
	reqs := s.Requests()
	if l := reqs[len(reqs)-1].Login; l.Database != "shop" || l.User != testUser || l.AppName != "go-mssqldb" || l.PacketSize != 4096 || l.TDSVersion != 0x74000004 || l.ReadOnlyIntent {
		t.Errorf("login %+v", l)
	}
}

// TestLoginReadOnlyIntent: ApplicationIntent=ReadOnly in the DSN (the
// value as go-mssqldb compares it, case and all) reaches the handler as
// LOGIN7's fReadOnlyIntent; any other value, or none, does not.
func TestLoginReadOnlyIntent(t *testing.T) {
	for _, c := range []struct {
		query string
		want  bool
	}{{"&ApplicationIntent=ReadOnly", true}, {"&applicationintent=ReadOnly", true}, {"&ApplicationIntent=ReadWrite", false}, {"&ApplicationIntent=readonly", false}, {"", false}} {
		s := startServer(t, nopHandler)
		db := openDB(t, s.DSN("shop")+c.query)
		if _, err := db.Exec("select 1"); err != nil {
			t.Fatal(err)
		}
		reqs := s.Requests()
		if got := reqs[len(reqs)-1].Login.ReadOnlyIntent; got != c.want {
			t.Errorf("DSN with %q: ReadOnlyIntent %v, want %v", c.query, got, c.want)
		}
	}
}

// TestStartOptions: bad options are refused, defaults fill in.
func TestStartOptions(t *testing.T) {
	for _, o := range []Options{
		{},
		{User: "u", MaxPacketSize: 100},
		{User: "u", PacketSize: 40000},
		{User: "u", ServerVersion: "16"},
		{User: "u", ServerVersion: "300.0.1"},
		{User: "u", Collation: "Elvish_CI_AS"},
	} {
		if s, err := Start(context.Background(), nopHandler, o); err == nil {
			_ = s.Close()
			t.Errorf("%+v: started", o)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Start(ctx, nopHandler, Options{User: "u"}); err == nil {
		t.Error("started with a done context")
	}
}

// TestStartContext: the server stops when Start's context ends.
func TestStartContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Start(ctx, nopHandler, Options{User: "u"})
	if err != nil {
		t.Fatal(err)
	}
	db := openDB(t, s.DSN("x"))
	if err := db.Ping(); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := s.Close(); err != nil { // waits for the shutdown cancel started
		t.Fatal(err)
	}
	db2 := openDB(t, s.DSN("x"))
	if err := db2.Ping(); err == nil {
		t.Error("connected after the server stopped")
	}
}

func TestBatchAndResultSets(t *testing.T) {
	h := HandlerFunc(func(ctx context.Context, req *Request, w *ResponseWriter) error {
		switch req.SQL {
		case "select two":
			if err := w.Columns([]Column{{Name: "a", Type: "int"}}); err != nil {
				return err
			}
			for i := range 3 {
				if err := w.Row(i); err != nil {
					return err
				}
			}
			if err := w.Info(0, 0, 1, "between the result sets"); err != nil {
				return err
			}
			if err := w.Columns([]Column{{Name: "b", Type: "nvarchar(10)", Nullable: true}, {Name: "c", Type: "bit"}}); err != nil {
				return err
			}
			return w.Row("x", true)
		case "update t":
			return w.Done(42)
		case "update twice":
			if err := w.Done(2); err != nil {
				return err
			}
			return w.Done(3)
		}
		return nil
	})
	s := startServer(t, h)
	db := openDB(t, s.DSN("shop"))
	rows, err := db.Query("select two")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprint(cols, vals))
		}
		if !rows.NextResultSet() {
			break
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := "[a] [0] [a] [1] [a] [2] [b c] [x true]"; strings.Join(got, " ") != want {
		t.Errorf("got %s, want %s", strings.Join(got, " "), want)
	}
	for sqlText, want := range map[string]int64{"update t": 42, "update twice": 5, "nothing": 0} {
		res, err := db.Exec(sqlText)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := res.RowsAffected(); n != want {
			t.Errorf("%s: %d rows affected, want %d", sqlText, n, want)
		}
		// The same through sp_executesql (DONEINPROC, RETURNSTATUS, DONEPROC).
		res, err = db.Exec(sqlText, sql.Named("x", 1))
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := res.RowsAffected(); n != want {
			t.Errorf("%s (RPC): %d rows affected, want %d", sqlText, n, want)
		}
	}
	reqs := s.Requests()
	if reqs[0].Kind != Batch || reqs[0].SQL != "select two" || reqs[0].Proc != "" {
		t.Errorf("first request %+v", reqs[0])
	}
}

// TestParams sends a parameter of every type cdcsnap binds (and a few more
// go-mssqldb produces) and checks what the server decoded.
func TestParams(t *testing.T) {
	plus0530 := time.FixedZone("x", 5*3600+30*60)
	guid := mssql.UniqueIdentifier{0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF, 0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF}
	big := strings.Repeat("ü😀", 3000) // 9000 UTF-16 units: nvarchar(max), several packets
	bigBin := bytes.Repeat([]byte{1, 2, 3, 4, 5}, 4000)
	type want struct {
		decl  string
		value any
	}
	cases := []struct {
		arg  any
		want want
	}{
		{int64(-42), want{"bigint", int64(-42)}},
		{true, want{"bit", true}},
		{3.25, want{"float", 3.25}},
		{"héllo 😀", want{"nvarchar(8)", "héllo 😀"}},
		{"", want{"nvarchar(max)", ""}},
		{big, want{"nvarchar(max)", big}},
		{[]byte{1, 2, 3}, want{"varbinary(3)", []byte{1, 2, 3}}},
		{bigBin, want{"varbinary(max)", bigBin}},
		{[]byte(nil), want{"varbinary(max)", nil}},
		{civil.Date{Year: 2024, Month: 2, Day: 29}, want{"date", time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC)}},
		{civil.DateTime{Date: civil.Date{Year: 2026, Month: 12, Day: 1}, Time: civil.Time{Hour: 8, Second: 7, Nanosecond: 123_456_700}},
			want{"datetime2(7)", time.Date(2026, 12, 1, 8, 0, 7, 123_456_700, time.UTC)}},
		{civil.Time{Hour: 23, Minute: 59, Second: 58, Nanosecond: 999_999_900}, want{"time", time.Date(1, 1, 1, 23, 59, 58, 999_999_900, time.UTC)}},
		{mssql.DateTimeOffset(time.Date(2024, 1, 2, 3, 4, 5, 600, plus0530)), want{"datetimeoffset(7)", time.Date(2024, 1, 2, 3, 4, 5, 600, plus0530)}},
		// A time.Time goes as datetimeoffset(7) because LOGINACK says TDS 7.4.
		{time.Date(2024, 6, 30, 23, 0, 0, 100, time.UTC), want{"datetimeoffset(7)", time.Date(2024, 6, 30, 23, 0, 0, 100, time.UTC)}},
		{nil, want{"nvarchar(1)", nil}},
		{int32(-7), want{"int", int64(-7)}},
		{int16(300), want{"smallint", int64(300)}},
		{uint8(200), want{"tinyint", int64(200)}},
		{float32(0.5), want{"real", 0.5}},
		{mssql.VarChar("é"), want{"varchar(2)", "é"}}, // raw UTF-8 bytes under the all-zero collation (F46)
		{mssql.NVarCharMax("m"), want{"nvarchar(max)", "m"}},
		{mssql.NChar("ab"), want{"nchar(2)", "ab"}},
		{mssql.DateTime1(time.Date(2014, 6, 26, 11, 8, 9, 673_000_000, time.UTC)), want{"datetime", time.Date(2014, 6, 26, 11, 8, 9, 673_333_300, time.UTC)}}, // 202 ticks of 1/300 s, to the nearest 100 ns
		{mssql.DateTime1(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)), want{"datetime", time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{guid, want{"uniqueidentifier", []byte{0x67, 0x45, 0x23, 0x01, 0xAB, 0x89, 0xEF, 0xCD, 0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF}}},
		{sql.NullInt64{}, want{"bigint", nil}},
		{sql.NullTime{}, want{"datetimeoffset(7)", nil}},
		{sql.NullString{}, want{"nvarchar(4000)", nil}},
	}
	s := startServer(t, nopHandler)
	db := openDB(t, s.DSN("shop"))
	args := make([]any, len(cases))
	for i, c := range cases {
		args[i] = c.arg
	}
	args = append(args, sql.Named("Named", "n"))
	if _, err := db.Exec("exec something @p1", args...); err != nil {
		t.Fatal(err)
	}
	reqs := s.Requests()
	r := reqs[len(reqs)-1]
	if r.Kind != RPC || r.Proc != "sp_executesql" || r.SQL != "exec something @p1" || len(r.Params) != len(cases)+1 {
		t.Fatalf("request %+v", r)
	}
	for i, c := range cases {
		p := r.Params[i]
		if p.Name != fmt.Sprintf("@p%d", i+1) || p.Decl != c.want.decl || !sameValue(p.Value, c.want.value) {
			t.Errorf("%T %s: got %s %q %T %s (type %+v), want %q %s", c.arg, short(c.arg), p.Name, p.Decl, p.Value, short(p.Value), p.Type, c.want.decl, short(c.want.value))
		}
	}
	if p := r.Params[len(cases)]; p.Name != "@Named" || p.Decl != "nvarchar(1)" || p.Value != "n" {
		t.Errorf("named parameter %+v", p)
	}
	// The TYPE_INFO is described: nvarchar(8) is NVARCHAR with 16 bytes and
	// go-mssqldb's zero collation.
	if ti := r.Params[3].Type; ti.ID != 0xE7 || ti.MaxLength != 16 || ti.Name != "nvarchar(8)" || ti.Collation != (Collation{}) {
		t.Errorf("nvarchar TYPE_INFO %+v", ti)
	}
	if ti := r.Params[12].Type; ti.ID != 0x2B || ti.Scale != 7 || ti.MaxLength != 10 {
		t.Errorf("datetimeoffset TYPE_INFO %+v", ti)
	}
	// Requests returns a copy.
	r.Params[6].Value.([]byte)[0] = 99
	if again := s.Requests(); again[len(again)-1].Params[6].Value.([]byte)[0] != 1 {
		t.Error("Requests shares memory with the log")
	}
}

// TestDecimalTextParams: cdcsnap binds decimals as text, which go-mssqldb
// sends as nvarchar; a decimal(38,10) output parameter is the one path
// that sends DECIMALN... which go-mssqldb never uses for inputs. The
// server-side decoder is checked directly instead.
func TestDecodeDecimalAndMoney(t *testing.T) {
	for _, c := range []struct {
		ti   TypeInfo
		raw  []byte
		want string
	}{
		{TypeInfo{ID: typeDecimalN, Precision: 38, Scale: 10}, append([]byte{0}, leBytes("12345678901234567890123456781234567890", 16)...), "-1234567890123456789012345678.1234567890"},
		{TypeInfo{ID: typeNumericN, Precision: 5, Scale: 2}, append([]byte{1}, leBytes("5", 4)...), "0.05"},
		{TypeInfo{ID: typeDecimalN, Precision: 9, Scale: 0}, append([]byte{1}, leBytes("0", 4)...), "0"},
		{TypeInfo{ID: typeMoneyN}, []byte{0, 0, 0, 0, 0x98, 0x3A, 0, 0}, "1.5000"},
		{TypeInfo{ID: typeMoneyN}, []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}, "-0.0001"},
		{TypeInfo{ID: typeMoney4}, []byte{0, 0, 0, 0x80}, "-214748.3648"},
	} {
		got, err := decodeValue(c.ti, c.raw)
		if err != nil || got != c.want {
			t.Errorf("%+v % X: got %v %v, want %s", c.ti, c.raw, got, err, c.want)
		}
	}
}

// leBytes is the little-endian magnitude of decimal digits, n bytes.
func leBytes(digits string, n int) []byte {
	var hi, lo uint64
	_, hi, lo, _ = parseDecimal(digits, 38, 0)
	b := appendU64(appendU64(nil, lo), hi)
	return b[:n]
}

// TestRPCByName: query text that is a bare procedure name goes as an RPC
// by name (F48), with its arguments as parameters.
func TestRPCByName(t *testing.T) {
	h := HandlerFunc(func(ctx context.Context, req *Request, w *ResponseWriter) error {
		if err := w.Columns([]Column{{Name: "proc", Type: "sysname"}, {Name: "n", Type: "int"}}); err != nil {
			return err
		}
		return w.Row(req.Proc, len(req.Params))
	})
	s := startServer(t, h)
	db := openDB(t, s.DSN("shop"))
	var proc string
	var n int64
	if err := db.QueryRow("sys.sp_cdc_help_change_data_capture").Scan(&proc, &n); err != nil {
		t.Fatal(err)
	}
	if proc != "sys.sp_cdc_help_change_data_capture" || n != 0 {
		t.Errorf("got %s %d", proc, n)
	}
	if err := db.QueryRow("[sys].[sp_cdc_get_captured_columns]", sql.Named("capture_instance", "dbo_orders")).Scan(&proc, &n); err != nil {
		t.Fatal(err)
	}
	reqs := s.Requests()
	r := reqs[len(reqs)-1]
	if r.Kind != RPC || r.Proc != "[sys].[sp_cdc_get_captured_columns]" || r.SQL != "" || len(r.Params) != 1 ||
		r.Params[0].Name != "@capture_instance" || r.Params[0].Value != "dbo_orders" || r.Params[0].Decl != "nvarchar(10)" {
		t.Errorf("request %+v", r)
	}
}

// TestErrors: an ERROR token surfaces as mssql.Error with its number,
// class, state and message; the connection stays usable.
func TestErrors(t *testing.T) {
	const msg313 = "An insufficient number of arguments were supplied for the procedure or function cdc.fn_cdc_get_all_changes_dbo_orders."
	h := HandlerFunc(func(ctx context.Context, req *Request, w *ResponseWriter) error {
		switch {
		case strings.HasPrefix(req.SQL, "select 313"):
			return w.Error(313, 16, 3, msg313)
		case strings.HasPrefix(req.SQL, "select rows then error"):
			if err := w.Columns([]Column{{Name: "a", Type: "int"}}); err != nil {
				return err
			}
			if err := w.Row(1); err != nil {
				return err
			}
			return w.Error(8134, 16, 1, "Divide by zero error encountered.")
		case strings.HasPrefix(req.SQL, "select two errors"):
			if err := w.Error(313, 16, 3, msg313); err != nil {
				return err
			}
			return w.Error(8180, 16, 1, "Statement(s) could not be prepared.")
		case strings.HasPrefix(req.SQL, "select handler error"):
			return errors.New("the fake has no table dbo.nope")
		case strings.HasPrefix(req.SQL, "select panic"):
			panic("handler bug")
		}
		return nil
	})
	s := startServer(t, h)
	db := openDB(t, s.DSN("shop"))
	db.SetMaxOpenConns(1)
	check := func(err error, number int32, class, state uint8, msg string) {
		t.Helper()
		var me mssql.Error
		if !errors.As(err, &me) || me.Number != number || me.Class != class || me.State != state || !strings.Contains(me.Message, msg) {
			t.Errorf("got %v (%#v), want mssql.Error %d/%d/%d %q", err, err, number, class, state, msg)
		}
	}
	for _, args := range [][]any{nil, {1}} { // batch, then RPC
		_, err := db.Exec("select 313", args...)
		check(err, 313, 16, 3, msg313)
		var x int
		err = db.QueryRow("select 313", args...).Scan(&x)
		check(err, 313, 16, 3, msg313)

		rows, err := db.Query("select rows then error", args...)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rows.Next() {
			n++
		}
		check(rows.Err(), 8134, 16, 1, "Divide by zero")
		_ = rows.Close()
		if n != 1 {
			t.Errorf("%d rows before the error", n)
		}

		// go-mssqldb reports the last error, with every one in All (F50).
		_, err = db.Exec("select two errors", args...)
		check(err, 8180, 16, 1, "could not be prepared")
		var me mssql.Error
		if errors.As(err, &me) && (len(me.All) != 2 || me.All[0].Number != 313) {
			t.Errorf("All = %+v", me.All)
		}
		_, err = db.Exec("select handler error", args...)
		check(err, 50000, 16, 1, "the fake has no table dbo.nope")
		_, err = db.Exec("select panic", args...)
		check(err, 50000, 16, 1, "handler panicked: handler bug")
	}
	if err := db.QueryRow("select ok").Scan(new(any)); !errors.Is(err, sql.ErrNoRows) {
		t.Errorf("after the errors: %v", err)
	}
	conns := map[uint64]bool{}
	for _, r := range s.Requests() {
		conns[r.ConnID] = true
	}
	if len(conns) != 1 {
		t.Errorf("errors cost connections: %v", conns)
	}
}

// TestReset: database/sql resets a connection it takes from the pool
// again; go-mssqldb marks the next request with RESETCONNECTION. Its
// Connector.Connect resets a new connection too, so the first request of a
// connection has the flag as well.
func TestReset(t *testing.T) {
	s := startServer(t, nopHandler)
	db := openDB(t, s.DSN("shop"))
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	c1, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"select a", "select b"} {
		if _, err := c1.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	_ = c1.Close()
	c2, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.ExecContext(ctx, "select c", 1); err != nil { // an RPC this time
		t.Fatal(err)
	}
	_ = c2.Close()
	var got []string
	for _, r := range s.Requests() {
		got = append(got, fmt.Sprintf("%d:%s:%v", r.ConnID, r.SQL, r.Reset))
	}
	if want := "1:select a:true 1:select b:false 1:select c:true"; strings.Join(got, " ") != want {
		t.Errorf("got %s, want %s", strings.Join(got, " "), want)
	}
}

// bigHandler streams up to total 8-column rows and reports how it ended.
type bigHandler struct {
	total  int
	sent   atomic.Int64
	causes chan error
}

var benchCols = []Column{
	{Name: "order_id", Type: "bigint"},
	{Name: "region", Type: "varchar(20)", Collation: "Latin1_General_CI_AS"},
	{Name: "customer", Type: "nvarchar(40)", Nullable: true},
	{Name: "amount", Type: "decimal(18,4)", Nullable: true},
	{Name: "placed_at", Type: "datetime2(7)"},
	{Name: "ship_date", Type: "date", Nullable: true},
	{Name: "express", Type: "bit"},
	{Name: "ref", Type: "uniqueidentifier", Nullable: true},
}

func benchRow(i int, placed time.Time, guid []byte) []any {
	return []any{int64(i), "EMEA-north", "Customer Müller " + "😀", "12345.6789", placed, placed.Truncate(24 * time.Hour), i%2 == 0, guid}
}

func (h *bigHandler) Serve(ctx context.Context, req *Request, w *ResponseWriter) error {
	if !strings.HasPrefix(req.SQL, "select big") {
		if err := w.Columns([]Column{{Name: "one", Type: "int"}}); err != nil {
			return err
		}
		return w.Row(req.ConnID)
	}
	if err := w.Columns(benchCols); err != nil {
		h.causes <- context.Cause(ctx)
		return err
	}
	placed := time.Date(2026, 12, 1, 8, 0, 7, 500_000_000, time.UTC)
	guid := make([]byte, 16)
	for i := range h.total {
		if err := w.Row(benchRow(i, placed, guid)...); err != nil {
			h.causes <- context.Cause(ctx)
			return err
		}
		h.sent.Add(1)
	}
	h.causes <- nil
	return nil
}

// TestAttention: cancelling the context mid-stream makes go-mssqldb send
// ATTENTION; the handler's context is cancelled with ErrAttention, the
// server ends the response with DONE_ATTN, and the connection serves the
// next query.
func TestAttention(t *testing.T) {
	h := &bigHandler{total: 5_000_000, causes: make(chan error, 10)}
	s := startServer(t, h)
	db := openDB(t, s.DSN("shop"))
	bg := context.Background()
	conn, err := db.Conn(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	ctx, cancel := context.WithCancel(bg)
	rows, err := conn.QueryContext(ctx, "select big")
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for rows.Next() && read < 1000 {
		read++
	}
	cancel()
	for rows.Next() {
		read++
	}
	if err := rows.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("rows.Err() = %v, want context.Canceled", err)
	}
	_ = rows.Close()
	select {
	case cause := <-h.causes:
		if !errors.Is(cause, ErrAttention) {
			t.Errorf("handler context cause %v, want ErrAttention", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not stop")
	}
	if n := h.sent.Load(); n >= int64(h.total) {
		t.Errorf("the handler sent all %d rows", n)
	}
	t.Logf("client read %d rows, server wrote %d of %d before ATTENTION", read, h.sent.Load(), h.total)

	// The connection is reusable: same connection id, right answer.
	var id int64
	if err := conn.QueryRowContext(bg, "select one").Scan(&id); err != nil {
		t.Fatal(err)
	}
	// Closing a result set early sends ATTENTION too (F50).
	rows, err = conn.QueryContext(bg, "select big 2")
	if err != nil {
		t.Fatal(err)
	}
	if !rows.Next() {
		t.Fatal(rows.Err())
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	if cause := <-h.causes; !errors.Is(cause, ErrAttention) {
		t.Errorf("after Rows.Close: cause %v", cause)
	}
	var id2 int64
	if err := conn.QueryRowContext(bg, "select one", 1).Scan(&id2); err != nil {
		t.Fatal(err)
	}
	if id != id2 || id != 1 {
		t.Errorf("connection ids %d, %d", id, id2)
	}
}

// TestPacketSize: a client asking for 512-byte packets gets them (and the
// ENVCHANGE saying so), and a server capped at 512 lowers a client's 4096;
// long values and parameters cross many packets both ways.
func TestPacketSize(t *testing.T) {
	long := strings.Repeat("añ😀", 2000)
	bin := bytes.Repeat([]byte{7, 0, 255}, 3000)
	h := HandlerFunc(func(ctx context.Context, req *Request, w *ResponseWriter) error {
		if err := w.Columns([]Column{{Name: "s", Type: "nvarchar(max)"}, {Name: "b", Type: "varbinary(max)"}, {Name: "n", Type: "bigint"}}); err != nil {
			return err
		}
		for i := range 200 {
			if err := w.Row(req.Params[0].Value, req.Params[1].Value, i); err != nil {
				return err
			}
		}
		return nil
	})
	for _, c := range []struct {
		name   string
		server int // Options.MaxPacketSize
		dsn    string
	}{
		{"client asks 512", 0, "&packet+size=512"},
		{"server caps at 512", 512, ""},
		{"client asks 32767", 0, "&packet+size=32767"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startServer(t, h, func(o *Options) { o.MaxPacketSize = c.server })
			db := openDB(t, s.DSN("shop")+c.dsn)
			rows, err := db.Query("select s, b, n from t where s = @p1 and b = @p2", long, bin)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for rows.Next() {
				var gs string
				var gb []byte
				var gn int64
				if err := rows.Scan(&gs, &gb, &gn); err != nil {
					t.Fatal(err)
				}
				if gs != long || !bytes.Equal(gb, bin) || gn != int64(n) {
					t.Fatalf("row %d differs", n)
				}
				n++
			}
			if err := rows.Err(); err != nil || n != 200 {
				t.Fatalf("%d rows, %v", n, err)
			}
			want := 512
			if c.dsn == "&packet+size=32767" {
				want = 32767
			}
			if got := s.Requests()[0].Login.PacketSize; got != want {
				t.Errorf("packet size %d, want %d", got, want)
			}
		})
	}
}

// TestConcurrentConnections: a database/sql pool runs many queries on many
// connections at once.
func TestConcurrentConnections(t *testing.T) {
	h := HandlerFunc(func(ctx context.Context, req *Request, w *ResponseWriter) error {
		if err := w.Columns([]Column{{Name: "v", Type: "bigint"}, {Name: "s", Type: "nvarchar(20)"}}); err != nil {
			return err
		}
		v := req.Params[0].Value.(int64)
		for i := range 50 {
			if err := w.Row(v+int64(i), fmt.Sprint(v)); err != nil {
				return err
			}
		}
		return nil
	})
	s := startServer(t, h)
	db := openDB(t, s.DSN("shop"))
	db.SetMaxOpenConns(8)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for q := range 30 {
				v := int64(g*1000 + q)
				rows, err := db.Query("select v from t where v = @p1", v)
				if err != nil {
					errs <- err
					return
				}
				i := int64(0)
				for rows.Next() {
					var got int64
					var s string
					if err := rows.Scan(&got, &s); err != nil || got != v+i || s != fmt.Sprint(v) {
						errs <- fmt.Errorf("query %d row %d: %d %q %v", v, i, got, s, err)
					}
					i++
				}
				if err := rows.Err(); err != nil || i != 50 {
					errs <- fmt.Errorf("query %d: %d rows, %v", v, i, err)
				}
				_ = rows.Close()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	reqs := s.Requests()
	conns := map[uint64]bool{}
	for _, r := range reqs {
		conns[r.ConnID] = true
	}
	if len(reqs) != 16*30 || len(conns) < 2 || len(conns) > 8 {
		t.Errorf("%d requests on %d connections", len(reqs), len(conns))
	}
}

// TestCloseWithHandlerRunning: Close cancels a running handler and waits
// for it; the client sees its connection fail.
func TestCloseWithHandlerRunning(t *testing.T) {
	started := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, req *Request, w *ResponseWriter) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})
	s, err := Start(context.Background(), h, Options{User: "u"})
	if err != nil {
		t.Fatal(err)
	}
	db := openDB(t, s.DSN("x"))
	done := make(chan error, 1)
	go func() { _, err := db.Exec("select wait"); done <- err }()
	<-started
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Error("the query succeeded on a closed server")
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestResponseWriterMisuse: writes out of order or after Serve are errors.
func TestResponseWriterMisuse(t *testing.T) {
	var kept *ResponseWriter
	h := HandlerFunc(func(ctx context.Context, req *Request, w *ResponseWriter) error {
		kept = w
		if err := w.Row(1); err == nil || !strings.Contains(err.Error(), "Row before Columns") {
			return fmt.Errorf("Row before Columns: %v", err)
		}
		if err := w.Columns(nil); err == nil {
			return errors.New("no columns accepted")
		}
		if err := w.Columns([]Column{{Name: "a", Type: "int"}}); err != nil {
			return err
		}
		if err := w.Row(1, 2); err == nil {
			return errors.New("two values for one column accepted")
		}
		return w.Row(1)
	})
	s := startServer(t, h)
	db := openDB(t, s.DSN("x"))
	var x int
	if err := db.QueryRow("select x").Scan(&x); err != nil || x != 1 {
		t.Fatal(x, err)
	}
	if err := kept.Row(2); !errors.Is(err, errFinished) {
		t.Errorf("after Serve: %v", err)
	}
}
