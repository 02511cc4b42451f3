package tdsserver

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	mssql "github.com/microsoft/go-mssqldb"
)

// countingHandler streams n rows of one int column for "select rows", and
// answers "select 1" with one row.
func countingHandler(n int) HandlerFunc {
	return func(ctx context.Context, req *Request, w *ResponseWriter) error {
		if err := w.Columns([]Column{{Name: "n", Type: "int"}}); err != nil {
			return err
		}
		if !strings.HasPrefix(req.SQL, "select rows") {
			return w.Row(1)
		}
		for i := range n {
			if err := w.Row(i); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestInjectedFaultsReachTheDriver: each error number, and a dropped
// connection, strikes after the rows asked for: go-mssqldb returns those
// rows, then the error (the number itself, or a broken connection), and the
// pool goes on with a new connection.
func TestInjectedFaultsReachTheDriver(t *testing.T) {
	var next atomic.Pointer[Fault]
	s := startServer(t, countingHandler(5000), func(o *Options) {
		o.Inject = func(req *Request) (Fault, bool) {
			if !strings.HasPrefix(req.SQL, "select rows") {
				return Fault{}, false
			}
			f := next.Swap(nil)
			if f == nil {
				return Fault{}, false
			}
			return *f, true
		}
	})
	db := openDB(t, s.DSN("shop"))
	struck := int64(0)
	for _, n := range []int32{1205, 1222, 3960, 3961, 40613, 40197, 40501, 49918, 49919, 49920, 10928, 10929, 0} {
		for _, after := range []int64{0, 1, 2999, 5000} {
			f := TransientFault(n, after)
			next.Store(&f)
			rows, err := db.QueryContext(t.Context(), "select rows")
			got := int64(0)
			if err == nil {
				for rows.Next() {
					got++
				}
				err = rows.Err()
				_ = rows.Close()
			}
			struck++
			// A dropped connection loses the rows of the packet not yet
			// sent, as a cut connection does.
			if got > after || n != 0 && got != after {
				t.Errorf("%s: %d rows before it", f, got)
			}
			var me mssql.Error
			switch {
			case err == nil:
				t.Errorf("%s: no error", f)
			case n != 0 && (!errors.As(err, &me) || me.Number != n || me.Class != f.Class):
				t.Errorf("%s: %v (%T), want mssql.Error %d class %d", f, err, err, n, f.Class)
			case n == 0 && errors.As(err, &me):
				t.Errorf("%s: a server error %v, want a broken connection", f, err)
			}
			if testing.Verbose() && after == 1 {
				t.Logf("%s: the driver returned %T: %v", f, err, err)
			}
		}
	}
	if s.Faults() != struck {
		t.Errorf("Faults() = %d, want %d", s.Faults(), struck)
	}
	var one int
	if err := db.QueryRowContext(t.Context(), "select 1").Scan(&one); err != nil || one != 1 {
		t.Errorf("after the faults: %d, %v", one, err)
	}
}

// TestStoredCodePageBytes: a char/varchar value given as []byte goes out
// as the bytes a server stores, including those its code page leaves
// undefined, which go-mssqldb v1.11.2 turns into U+FFFD without an error
// (its internal/cp tables, FACTS.md F45, F82); a string holding 1252's
// undefined bytes as Windows maps them (U+0081 ...) encodes to those
// bytes.
func TestStoredCodePageBytes(t *testing.T) {
	cases := []struct {
		typ, coll string
		val       any
		want      string
	}{
		{"varchar(10)", "Latin1_General_CI_AS", []byte{'a', 0x81, 0x8D, 0x8F, 0x90, 0x9D, 'z'}, "a\ufffd\ufffd\ufffd\ufffd\ufffdz"},
		{"varchar(10)", "Latin1_General_CI_AS", "a\u0081\u009dz", "a\ufffd\ufffdz"},
		{"varchar(10)", "SQL_Latin1_General_CP1_CI_AS", []byte{0xC3, 0x81}, "Ã\ufffd"}, // UTF-8 "Á" stored in a Latin1 column
		{"char(4)", "Latin1_General_CI_AS", []byte{0xE9}, "é   "},
		{"varchar(10)", "Japanese_CI_AS", []byte{'a', 0x81, 0x20, 'b'}, "a\ufffdb"}, // lead byte, invalid trail
		{"varchar(10)", "Japanese_CI_AS", "日本", "日本"},
		{"varchar(10)", "Chinese_PRC_CI_AS", []byte{0x81, 0x7F}, "\ufffd"},
		{"varchar(10)", "Korean_Wansung_CI_AS", "한", "한"},
		{"varchar(10)", "Chinese_Taiwan_Stroke_CI_AS", "中", "中"},
	}
	h := HandlerFunc(func(ctx context.Context, req *Request, w *ResponseWriter) error {
		var i int
		for j := range cases {
			if req.SQL == "select case "+string(rune('a'+j)) {
				i = j
			}
		}
		c := cases[i]
		if err := w.Columns([]Column{{Name: "v", Type: c.typ, Collation: c.coll}}); err != nil {
			return err
		}
		return w.Row(c.val)
	})
	s := startServer(t, h)
	db := openDB(t, s.DSN("shop"))
	for j, c := range cases {
		var got string
		if err := db.QueryRowContext(t.Context(), "select case "+string(rune('a'+j))).Scan(&got); err != nil {
			t.Errorf("%s %s %q: %v", c.typ, c.coll, c.val, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s %s %q: read %q, want %q", c.typ, c.coll, c.val, got, c.want)
		}
	}
}
