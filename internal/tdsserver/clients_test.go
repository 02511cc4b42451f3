package tdsserver

import (
	"context"
	"database/sql"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/internal/testenv"
)

// echoHandler answers "select <a> as v, <b> as w" with one row: the two
// parameters when there are two, else v and w parsed from the text.
func echoHandler(ctx context.Context, req *Request, w *ResponseWriter) error {
	if err := w.Columns([]Column{{Name: "v", Type: "nvarchar(20)"}, {Name: "w", Type: "bigint"}}); err != nil {
		return err
	}
	if len(req.Params) == 2 {
		return w.Row(req.Params[0].Value, req.Params[1].Value)
	}
	var v string
	var n int64
	if _, err := fmt.Sscanf(strings.ReplaceAll(req.SQL, "'", " "), "select %s as v, %d as w", &v, &n); err != nil {
		return fmt.Errorf("not an echo: %q", req.SQL)
	}
	return w.Row(v, n)
}

// procs lists each request's kind and procedure.
func procs(reqs []Request) []string {
	var out []string
	for _, r := range reqs {
		p := r.Kind.String()
		if r.Kind == RPC {
			p = r.Proc
		}
		out = append(out, p)
	}
	return out
}

// TestODBCDriver18: Microsoft's ODBC Driver 18 (through mssql-python)
// logs in with login-only encryption (Encrypt=no: ENCRYPT_OFF) and with
// full encryption (Encrypt=yes: ENCRYPT_ON), runs a batch, prepares a
// parameterised statement with sp_prepexec (the handle comes back in a
// RETURNVALUE; every value is sent unnamed and takes the name declared at
// its position) and fetches into Arrow.
func TestODBCDriver18(t *testing.T) {
	py := testenv.MSSQLPython(t, "ODBC Driver 18 against tdsserver")
	for _, tc := range []struct {
		encrypt string
		want    Encryption
	}{{"no", EncryptLogin}, {"yes", EncryptFull}} {
		t.Run("Encrypt="+tc.encrypt, func(t *testing.T) {
			s := startServer(t, HandlerFunc(echoHandler))
			port := s.Addr()[strings.LastIndexByte(s.Addr(), ':')+1:]
			out, err := exec.Command(py, filepath.Join("testdata", "odbc_client.py"), port, testUser, testPassword, tc.encrypt).CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			want := `[["batch", 0]]` + "\n" + `[["é1", 1]]` + "\n" + `[["é2", 2]]` + "\n" + `[{"v": "arrow", "w": 3}]`
			if got := strings.TrimSpace(string(out)); got != want {
				t.Errorf("ODBC read\n%s\nwant\n%s", got, want)
			}
			reqs := s.Requests()
			// mssql-python starts a transaction (autocommit off), prepares
			// again on the second execute and unprepares the first handle.
			if got := procs(reqs); !slices.Equal(got, []string{"batch", "batch", "sp_prepexec", "sp_prepexec", "sp_unprepare", "batch", "batch"}) {
				t.Errorf("requests %v", got)
			}
			for _, r := range reqs {
				if r.Login.Encryption != tc.want || r.Login.AppName != "MSSQL-Python" {
					t.Errorf("login %+v, want encryption %s", r.Login, tc.want)
				}
				if r.Proc == "sp_prepexec" && (r.SQL != "select @P1 as v, @P2 as w" || len(r.Params) != 2 || r.Params[0].Name != "@P1" || r.Params[1].Name != "@P2") {
					t.Errorf("sp_prepexec request %+v", r)
				}
			}
		})
	}
}

// TestJDBCPrepared: mssql-jdbc's prepared statements, with its two
// prepareMethods, on a fully encrypted and a login-encrypted connection.
// prepexec: sp_executesql first, then sp_prepexec (handle in RETURNVALUE),
// then sp_execute with it. prepare: sp_prepare (answered by the server
// alone) and sp_execute. Closed statements are unprepared (sp_unprepare).
// One JVM runs both connections, one after the other.
func TestJDBCPrepared(t *testing.T) {
	java, javac, jar := testenv.MSSQLJDBC(t, "mssql-jdbc against tdsserver")
	classes := t.TempDir()
	if out, err := exec.Command(javac, "-d", classes, filepath.Join("testdata", "JdbcPrepared.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	s := startServer(t, HandlerFunc(echoHandler), func(o *Options) { o.User, o.Password = "jdbc", "jdbc-Passw0rd" })
	cases := []struct {
		method, encrypt string
		enc             Encryption
		procs           []string
	}{
		{"prepexec", "true", EncryptFull, []string{"sp_executesql", "sp_prepexec", "sp_execute", "sp_unprepare", "sp_executesql", "sp_prepexec", "sp_execute", "sp_unprepare"}},
		{"prepare", "false", EncryptLogin, []string{"sp_executesql", "sp_prepare", "sp_execute", "sp_execute", "sp_unprepare", "sp_executesql", "sp_prepare", "sp_execute", "sp_execute", "sp_unprepare"}},
	}
	var urls []string
	var want strings.Builder
	for _, tc := range cases {
		u := fmt.Sprintf("jdbc:sqlserver://%s;databaseName=shop;user=jdbc;password=jdbc-Passw0rd;encrypt=%s;trustServerCertificate=true;prepareMethod=%s;serverPreparedStatementDiscardThreshold=1",
			s.Addr(), tc.encrypt, tc.method)
		urls = append(urls, u)
		fmt.Fprintf(&want, "-- %s\nr0é1 1\nr0é2 2\nr0é3 3\nr1é1 11\nr1é2 12\nr1é3 13\n", u)
	}
	out, err := exec.Command(java, append([]string{"-cp", jar + ":" + classes, "JdbcPrepared"}, urls...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := string(out); got != want.String() {
		t.Errorf("JDBC read\n%s\nwant\n%s", got, want.String())
	}
	byConn := map[uint64][]Request{}
	for _, r := range s.Requests() {
		byConn[r.ConnID] = append(byConn[r.ConnID], r)
	}
	for i, tc := range cases {
		reqs := byConn[uint64(i+1)]
		if got := procs(reqs); !slices.Equal(got, tc.procs) {
			t.Errorf("prepareMethod=%s: requests %v\nwant %v", tc.method, got, tc.procs)
		}
		for _, r := range reqs {
			if r.Login.Encryption != tc.enc {
				t.Errorf("prepareMethod=%s: encryption %s, want %s", tc.method, r.Login.Encryption, tc.enc)
			}
		}
	}
}

// TestPreparedByGoMSSQLDB: go-mssqldb calling the procedures by name, as
// an application can: sp_prepexec's handle comes back into its OUTPUT
// parameter (RETURNVALUE), sp_execute runs the statement again by that
// handle, sp_unprepare forgets it, and a forgotten handle is an error.
func TestPreparedByGoMSSQLDB(t *testing.T) {
	s := startServer(t, HandlerFunc(echoHandler))
	db := openDB(t, s.DSN("shop"))
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var handle int32
	var v string
	var w int64
	err = conn.QueryRowContext(ctx, "sp_prepexec", sql.Named("handle", sql.Out{Dest: &handle}),
		sql.Named("params", "@a nvarchar(10), @b bigint"), sql.Named("stmt", "select @a as v, @b as w"),
		sql.Named("a", "x"), sql.Named("b", int64(7))).Scan(&v, &w)
	if err != nil || v != "x" || w != 7 {
		t.Fatalf("sp_prepexec: %q %d %v", v, w, err)
	}
	// go-mssqldb assigns OUTPUT parameters when the rows are closed.
	if handle != 1 {
		t.Fatalf("sp_prepexec handle %d, want 1", handle)
	}
	if err := conn.QueryRowContext(ctx, "sp_execute", sql.Named("handle", handle), sql.Named("a", "y"), sql.Named("b", int64(8))).Scan(&v, &w); err != nil || v != "y" || w != 8 {
		t.Fatalf("sp_execute: %q %d %v", v, w, err)
	}
	if _, err := conn.ExecContext(ctx, "sp_unprepare", sql.Named("handle", handle)); err != nil {
		t.Fatal(err)
	}
	_, err = conn.ExecContext(ctx, "sp_execute", sql.Named("handle", handle), sql.Named("a", "z"), sql.Named("b", int64(9)))
	if err == nil || !strings.Contains(err.Error(), "could not find prepared statement with handle 1") {
		t.Fatalf("sp_execute after sp_unprepare: %v", err)
	}
	var got []string
	for _, r := range s.Requests() {
		got = append(got, r.Proc+" "+r.SQL)
	}
	// A request the server refuses before the Handler is not recorded.
	want := []string{"sp_prepexec select @a as v, @b as w", "sp_execute select @a as v, @b as w", "sp_unprepare "}
	if !slices.Equal(got, want) {
		t.Errorf("requests %q, want %q", got, want)
	}
}

// TestExecuteSQLByPosition: sp_executesql's statement and declarations are
// its first two parameters whatever their names (tedious names the first
// @statement, tiberius stmt and params), and unnamed values take the names
// declared at their positions.
func TestExecuteSQLByPosition(t *testing.T) {
	for _, tc := range []struct {
		stmt, params string
		vals         []rawParam
	}{
		{"", "", []rawParam{bigintParam("@x", 5), bigintParam("@y", 6)}},
		{"@statement", "@params", []rawParam{bigintParam("@x", 5), bigintParam("@y", 6)}},
		{"stmt", "params", []rawParam{bigintParam("", 5), bigintParam("", 6)}},
		{"@stmt", "@params", []rawParam{bigintParam("", 5), bigintParam("@y", 6)}},
	} {
		data := buildRPC(10, "", append([]rawParam{nvarcharParam(tc.stmt, "select @x, @y"), nvarcharParam(tc.params, "@x bigint, @y int")}, tc.vals...)...)
		req := &Request{}
		if err := fillRPC(req, data); err != nil {
			t.Fatalf("names %q %q: %v", tc.stmt, tc.params, err)
		}
		var got []string
		for _, p := range req.Params {
			got = append(got, fmt.Sprint(p.Name, " ", p.Decl, " ", p.Value))
		}
		if req.Proc != "sp_executesql" || req.SQL != "select @x, @y" || !slices.Equal(got, []string{"@x bigint 5", "@y int 6"}) {
			t.Errorf("names %q %q: %s %q %q", tc.stmt, tc.params, req.Proc, req.SQL, got)
		}
	}
	// A value past the declarations is refused, naming it.
	data := buildRPC(10, "", nvarcharParam("", "select 1"), nvarcharParam("", "@x bigint"), bigintParam("", 1), bigintParam("", 2))
	if err := fillRPC(&Request{}, data); err == nil || !strings.Contains(err.Error(), "value 2 is not declared") {
		t.Errorf("two values for one declaration: %v", err)
	}
}
