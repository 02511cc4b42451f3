package sqlserver

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	mssql "github.com/microsoft/go-mssqldb"

	"github.com/cdcsnap/cdcsnap/internal/mssqlstmt"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

// The tests in this file each hold one fact of FACTS.md that a review
// found the source got wrong; each fails with the code before the fix.

// logBuffer is a slog handler's output, safe for the source's goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newTestSource(t *testing.T, f *fakeDB, opts Options) (*Source, *logBuffer) {
	t.Helper()
	db := f.open()
	t.Cleanup(func() { db.Close() })
	logs := &logBuffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, logs
}

// F04: SQL Server 2017 and later name the ordinal column column_ordinal,
// the 2008-era documentation ordinal_position. Either is read.
func TestCapturedColumnsTakeEitherOrdinalName(t *testing.T) {
	for _, cols := range [][]string{docCapturedColumns, docCapturedColumnsOld} {
		rs := resultSet{Columns: cols, Rows: [][]any{
			docCapturedColumn("dbo_t", "b", 2, 2, "nvarchar(10)"),
			docCapturedColumn("dbo_t", "a", 1, 1, "int"),
			docCapturedColumn("dbo_t", "c", 5, 3, "decimal(18,4)"),
		}}
		got, err := parseCapturedColumns(rs)
		if err != nil {
			t.Fatalf("%s: %v", cols[5], err)
		}
		var decl []string
		for _, c := range got {
			decl = append(decl, c.Name+" "+c.Declared())
		}
		if strings.Join(decl, ", ") != "a int, b nvarchar(10), c decimal(18,4)" {
			t.Errorf("%s: columns %q", cols[5], decl)
		}
	}
	rs := resultSet{Columns: append(append([]string(nil), docCapturedColumns[:5]...), docCapturedColumns[6:]...)}
	if _, err := parseCapturedColumns(rs); err == nil || !strings.Contains(err.Error(), "column_ordinal, ordinal_position") {
		t.Errorf("no ordinal column: %v", err)
	}
}

// binaryHandler describes dbo_blobs: binary and varbinary columns, whose
// character_maximum_length is NULL (F05), and an nvarchar, whose
// max_length counts bytes (F35).
func binaryHandler(q string, _ []any) ([]string, [][]any, error) {
	switch {
	case strings.HasPrefix(q, "EXEC sys.sp_cdc_help_change_data_capture"):
		return docHelpColumns, [][]any{docHelpRow("dbo", "blobs", "dbo_blobs", 7, mustLSN("0x0000002A00000F380001"), "PK_blobs", "[h]", "[h], [payload], [label]")}, nil
	case strings.HasPrefix(q, "EXEC sys.sp_cdc_get_captured_columns"):
		return docCapturedColumns, [][]any{
			docCapturedColumn("dbo_blobs", "h", 1, 1, "binary(4)"),
			docCapturedColumn("dbo_blobs", "payload", 2, 2, "varbinary(16)"),
			docCapturedColumn("dbo_blobs", "label", 3, 3, "nvarchar(10)"),
		}, nil
	case strings.HasPrefix(q, "SELECT [c].[name], [c].[collation_name]"):
		return docSysColumns, [][]any{
			docSysColumn("h", "", 0, false, false, 4),
			docSysColumn("payload", "", 0, true, false, 16),
			docSysColumn("label", "Latin1_General_CI_AS", 1252, true, false, 20),
		}, nil
	case strings.HasPrefix(q, "SELECT [i].[index_id]"):
		return docSysIndexes, [][]any{{int64(1), "PK_blobs", int64(1), true, int64(1), "h"}}, nil
	}
	return nil, nil, errors.New("unexpected " + q)
}

// F05: binary and varbinary lengths come from sys.columns.max_length, since
// sp_cdc_get_captured_columns has NULL for them; a binary key binds as
// CAST(@p AS binary(4)).
func TestBinaryLengthsComeFromSysColumns(t *testing.T) {
	s, _ := newTestSource(t, &fakeDB{handler: binaryHandler}, Options{})
	ci, err := s.CaptureInstance(context.Background(), "dbo_blobs")
	if err != nil {
		t.Fatal(err)
	}
	var decl []string
	for _, c := range ci.Columns {
		decl = append(decl, c.Declared())
	}
	if strings.Join(decl, " ") != "binary(4) varbinary(16) nvarchar(10)" {
		t.Fatalf("declared %q", decl)
	}
	st, err := mssqlstmt.ReadRangeStatement(ci, keyrange.Range{Lower: keyrange.Tuple{[]byte{0, 0, 0, 9}}})
	if err != nil || !strings.Contains(st.SQL, "[h] >= CAST(@p3 AS binary(4))") {
		t.Fatalf("%v %s", err, st.SQL)
	}
}

// F07: sys.fn_cdc_get_min_lsn returns 0x00… for an instance that does not
// exist and for a caller who may not read it: an error, never "nothing
// captured yet", for MinLSN and for ReadChanges. NULL stays "not yet".
func TestZeroMinLSNIsAnAccessError(t *testing.T) {
	var min any
	f := &fakeDB{handler: func(q string, args []any) ([]string, [][]any, error) {
		if strings.HasPrefix(q, "SELECT sys.fn_cdc_get_min_lsn") {
			c, r := docScalar(min)
			return c, r, nil
		}
		return nil, nil, errors.New("unexpected " + q)
	}}
	s, _ := newTestSource(t, f, Options{})
	ctx := context.Background()
	ci := readTestInstance()

	min = make([]byte, 10)
	var ae *source.AccessError
	if _, _, err := s.MinLSN(ctx, ci.Name); !errors.As(err, &ae) || !errors.Is(err, source.ErrNotFound) {
		t.Errorf("MinLSN 0x00…: %v, want a *source.AccessError", err)
	}
	if rr, err := s.ReadChanges(ctx, ci, mustLSN("0x00000000000000000100"), lsn.Max); !errors.As(err, &ae) {
		if rr != nil {
			rr.Release()
		}
		t.Errorf("ReadChanges with min LSN 0x00…: %v, want a *source.AccessError", err)
	}

	min = nil
	if _, ok, err := s.MinLSN(ctx, ci.Name); ok || err != nil {
		t.Errorf("MinLSN NULL: ok %v, %v; want not yet, no error", ok, err)
	}
	rr, err := s.ReadChanges(ctx, ci, mustLSN("0x00000000000000000100"), lsn.Max)
	if err != nil || rr.Next() {
		t.Errorf("ReadChanges with min LSN NULL: %v, want an empty reader", err)
	}
	if rr != nil {
		rr.Release()
	}
}

// F10, F11: changes come from the change table, ordered by __$command_id
// within an LSN, with _command_id set; a login that may not read it (error
// 229) gets the change function, the reason logged once, and the change
// table is not tried again.
func TestChangesComeFromTheChangeTableWithCommandID(t *testing.T) {
	l := mustLSN("0x0000002A00000F380010")
	ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	deny, denyNumber := false, int32(229)
	var ran []string
	f := &fakeDB{handler: func(q string, args []any) ([]string, [][]any, error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case strings.HasPrefix(q, "SELECT sys.fn_cdc_get_min_lsn"):
			c, r := docScalar(mustLSN("0x0000002A00000F380001").Bytes())
			return c, r, nil
		case strings.HasPrefix(q, "SELECT sys.fn_cdc_get_max_lsn"):
			c, r := docScalar(l.Bytes())
			return c, r, nil
		case strings.HasPrefix(q, "SELECT SYSDATETIMEOFFSET()"):
			return []string{"now"}, [][]any{{ts}}, nil
		case strings.HasPrefix(q, "SELECT CAST(SERVERPROPERTY("):
			return []string{"major", "edition"}, [][]any{{int64(15), int64(3)}}, nil
		case strings.Contains(q, "FROM [cdc].[dbo_Orders_CT] AS [c]"):
			ran = append(ran, "change table")
			if deny {
				if denyNumber == 208 {
					return nil, nil, mssql.Error{Number: 208, Message: "Invalid object name 'cdc.dbo_Orders_CT'."}
				}
				return nil, nil, mssql.Error{Number: 229, Message: "The SELECT permission was denied on the object 'dbo_Orders_CT', database 'shop', schema 'cdc'."}
			}
			// One UPDATE of a unique key: its delete (command 1) and insert
			// (command 2) share the LSN; __$seqval would put the insert first.
			return []string{"__$start_lsn", "__$seqval", "__$operation", "__$command_id", "id", "name", "__$commit_ts"}, [][]any{
				{l.Bytes(), mustLSN("0x0000002A00000F380012").Bytes(), int64(1), int64(1), int64(5), "a", ts},
				{l.Bytes(), mustLSN("0x0000002A00000F380011").Bytes(), int64(2), int64(2), int64(6), "a", nil},
			}, nil
		case strings.Contains(q, "fn_cdc_get_all_changes_dbo_Orders"):
			ran = append(ran, "function")
			return []string{"__$start_lsn", "__$seqval", "__$operation", "id", "name", "__$commit_ts"}, [][]any{
				{l.Bytes(), mustLSN("0x0000002A00000F380011").Bytes(), int64(2), int64(6), "a", ts},
			}, nil
		}
		return nil, nil, errors.New("unexpected " + q)
	}}
	ctx := context.Background()
	read := func(s *Source) [][2]string {
		t.Helper()
		rr, err := s.ReadChanges(ctx, readTestInstance(), mustLSN("0x0000002A00000F380001"), l)
		if err != nil {
			t.Fatal(err)
		}
		defer rr.Release()
		var out [][2]string
		for rr.Next() {
			rec := rr.RecordBatch()
			for i := range int(rec.NumRows()) {
				out = append(out, [2]string{rec.Column(2).ValueStr(i), rec.Column(5).ValueStr(i)})
			}
		}
		if rr.Err() != nil {
			t.Fatal(rr.Err())
		}
		return out
	}
	owner, _ := newTestSource(t, f, Options{})
	if got := read(owner); len(got) != 2 || got[0] != [2]string{"1", "1"} || got[1] != [2]string{"2", "2"} {
		t.Fatalf("from the change table: (operation, command id) %v, want the delete (1, 1) then the insert (2, 2)", got)
	}
	reader, logs := newTestSource(t, f, Options{AllowChangeFunction: true})
	mu.Lock()
	deny, ran = true, nil
	mu.Unlock()
	for range 2 {
		if got := read(reader); len(got) != 1 || got[0] != [2]string{"2", "(null)"} {
			t.Fatalf("from the function: %v, want one insert with a NULL command id", got)
		}
	}
	mu.Lock()
	if strings.Join(ran, ",") != "change table,function,function" {
		t.Errorf("statements ran %q: want the change table once, then the function", ran)
	}
	mu.Unlock()
	if n := strings.Count(logs.String(), "level=WARN msg=\"sqlserver: the login may not read the change table"); n != 1 || !strings.Contains(logs.String(), "SELECT permission was denied") {
		t.Errorf("the fallback was warned about %d times, want once with its reason:\n%s", n, logs)
	}
	// 208 (the object is not found) also comes from an instance dropped or
	// re-created since it was described: not remembered, the next read
	// tries the change table again.
	gone, _ := newTestSource(t, f, Options{AllowChangeFunction: true})
	mu.Lock()
	denyNumber, ran = 208, nil
	mu.Unlock()
	read(gone)
	read(gone)
	mu.Lock()
	if strings.Join(ran, ",") != "change table,function,change table,function" {
		t.Errorf("after error 208, statements ran %q: want the change table tried on each read", ran)
	}
	denyNumber = 229
	mu.Unlock()
	// By default the fallback is refused, naming the grant.
	strict, _ := newTestSource(t, f, Options{})
	rr, err := strict.ReadChanges(ctx, readTestInstance(), mustLSN("0x0000002A00000F380001"), l)
	if err == nil {
		rr.Release()
		t.Fatal("the default read through the change function")
	}
	if !errors.Is(err, ErrChangeTableDenied) || !strings.Contains(err.Error(), "GRANT SELECT ON cdc.[dbo_Orders_CT] TO <user>; GRANT SELECT ON cdc.lsn_time_mapping TO <user>") {
		t.Errorf("default: %v, want ErrChangeTableDenied naming both grants", err)
	}
}

// F13: a computed column is not read; the snapshot has NULL for it, as
// every change row does.
func TestComputedColumnsReadAsNull(t *testing.T) {
	ci := &source.CaptureInstance{Name: "dbo_t", SourceSchema: "dbo", SourceTable: "t", Key: []string{"id"}, Columns: []source.Column{
		{Name: "id", Type: "int"}, {Name: "total", Type: "int", Computed: true}, {Name: "n", Type: "int"}}}
	f := &fakeDB{handler: func(q string, args []any) ([]string, [][]any, error) {
		if q != "SELECT [id], [n] FROM [dbo].[t]" {
			return nil, nil, errors.New("unexpected " + q)
		}
		return []string{"id", "n"}, [][]any{{int64(1), int64(7)}}, nil
	}}
	s, _ := newTestSource(t, f, Options{})
	rr, err := s.ReadRange(context.Background(), ci, keyrange.Range{}, source.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	if !rr.Next() {
		t.Fatal(rr.Err())
	}
	rec := rr.RecordBatch()
	if rec.Column(0).ValueStr(0) != "1" || !rec.Column(1).IsNull(0) || rec.Column(2).ValueStr(0) != "7" {
		t.Fatalf("row: %v", rec)
	}
	key := *ci
	key.Key = []string{"total"}
	if _, err := mssqlstmt.ReadRangeStatement(&key, keyrange.Range{Lower: keyrange.Tuple{int64(1)}}); err == nil || !strings.Contains(err.Error(), "computed") {
		t.Errorf("a computed key column: %v", err)
	}
}

// F44: the bytes of a uniqueidentifier depend on the DSN's "guid
// conversion"; the source probes a known value once and decodes either way
// to the same canonical text.
func TestUniqueidentifierByteOrderIsProbed(t *testing.T) {
	want := "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
	u, _ := keyrange.ParseUUID(want)
	ci := &source.CaptureInstance{Name: "dbo_docs", SourceSchema: "dbo", SourceTable: "docs", Key: []string{"id"}, Columns: []source.Column{{Name: "id", Type: "uniqueidentifier"}}}
	for _, conv := range []bool{false, true} {
		probes := 0
		f := &fakeDB{handler: func(q string, args []any) ([]string, [][]any, error) {
			switch {
			case strings.HasPrefix(q, "SELECT CAST(@p1 AS uniqueidentifier)"):
				probes++
				c, r := docScalar(docProbeGUID(conv))
				return c, r, nil
			case strings.HasPrefix(q, "SELECT [id] FROM [dbo].[docs]"):
				b := u.SQLServerBytes()
				if conv {
					b = u[:]
				}
				return []string{"id"}, [][]any{{b}}, nil
			}
			return nil, nil, errors.New("unexpected " + q)
		}}
		s, _ := newTestSource(t, f, Options{})
		for range 2 {
			rr, err := s.ReadRange(context.Background(), ci, keyrange.Range{}, source.ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !rr.Next() {
				t.Fatal(rr.Err())
			}
			if got := rr.RecordBatch().Column(0).(*array.String).Value(0); got != want {
				t.Errorf("guid conversion %v: read %s, want %s", conv, got, want)
			}
			rr.Release()
		}
		if probes != 1 {
			t.Errorf("guid conversion %v: probed %d times, want once", conv, probes)
		}
	}
}

// F36: a capture instance whose unique index is nonclustered is described
// so, and logged.
func TestNonclusteredKeyIndexIsReported(t *testing.T) {
	f := &fakeDB{handler: func(q string, args []any) ([]string, [][]any, error) {
		if strings.HasPrefix(q, "SELECT [i].[index_id]") {
			// A heap: its row, the nonclustered primary key, and a
			// non-unique index on two columns.
			return docSysIndexes, [][]any{
				{int64(0), nil, int64(0), false, nil, nil},
				{int64(2), "PK_Orders", int64(2), true, int64(1), "id"},
				{int64(3), "IX_Orders_name", int64(2), false, int64(1), "name"},
				{int64(3), "IX_Orders_name", int64(2), false, int64(2), "amount"},
			}, nil
		}
		if c, r, ok := metadataHandler(q, args); ok {
			return c, r, nil
		}
		return nil, nil, errors.New("unexpected " + q)
	}}
	s, logs := newTestSource(t, f, Options{})
	ci, err := s.CaptureInstance(context.Background(), "dbo_Orders")
	if err != nil {
		t.Fatal(err)
	}
	if ci.KeyIndex == nil || ci.KeyIndex.Clustered || ci.KeyIndex.Name != "PK_Orders" || !ci.KeyIndex.Unique {
		t.Fatalf("key index %+v", ci.KeyIndex)
	}
	want := []source.Index{
		{Name: "IX_Orders_name", Columns: []string{"name", "amount"}},
		{Name: "PK_Orders", Columns: []string{"id"}, Unique: true},
	}
	if !ci.Heap || !reflect.DeepEqual(ci.Indexes, want) {
		t.Fatalf("heap %v, indexes %+v; want a heap with %+v", ci.Heap, ci.Indexes, want)
	}
	if !strings.Contains(logs.String(), "nonclustered") {
		t.Errorf("not logged:\n%s", logs)
	}
}

// F08, F37: fn_cdc_map_lsn_to_time returns the server's local wall clock.
// Without Options.ServerTimeZone the source asks a server that can name its
// zone (SQL Server 2022, Azure SQL) for it once and maps the Windows name
// by CLDR; an older one for its offset once (logged, with the
// daylight-saving caveat); with ServerTimeZone set it never asks.
func TestServerZoneIsDetectedWhenNotGiven(t *testing.T) {
	local := time.Date(2026, 7, 1, 14, 0, 0, 0, time.UTC) // the server's wall clock, labelled UTC by the driver (F51)
	for _, tc := range []struct {
		name      string
		zone      *time.Location
		major     int64
		want      time.Time
		askedZone int // CURRENT_TIMEZONE_ID
		askedNow  int // SYSDATETIMEOFFSET
		log       string
	}{
		{"2019, no zone", nil, 15, time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC), 0, 1, "daylight saving"}, // 14:00 at +02:00 now
		{"2022, no zone", nil, 16, time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC), 1, 0, ""},                // Europe/Berlin in summer
		{"ServerTimeZone", time.FixedZone("", -3*3600), 16, time.Date(2026, 7, 1, 17, 0, 0, 0, time.UTC), 0, 0, ""},
	} {
		askedZone, askedNow := 0, 0
		f := &fakeDB{handler: func(q string, args []any) ([]string, [][]any, error) {
			switch {
			case strings.HasPrefix(q, "SELECT SYSDATETIMEOFFSET()"):
				askedNow++
				return []string{"now"}, [][]any{{time.Date(2026, 12, 3, 9, 0, 0, 0, time.FixedZone("", 2*3600))}}, nil
			case strings.HasPrefix(q, "SELECT CAST(SERVERPROPERTY("):
				return []string{"major", "edition"}, [][]any{{tc.major, int64(3)}}, nil
			case strings.HasPrefix(q, "SELECT CURRENT_TIMEZONE_ID()"):
				askedZone++
				return []string{"zone"}, [][]any{{"W. Europe Standard Time"}}, nil
			case strings.HasPrefix(q, "SELECT sys.fn_cdc_map_lsn_to_time"):
				c, r := docScalar(local)
				return c, r, nil
			}
			return nil, nil, errors.New("unexpected " + q)
		}}
		s, logs := newTestSource(t, f, Options{ServerTimeZone: tc.zone})
		for range 2 {
			got, err := s.LSNTime(context.Background(), mustLSN("0x0000002A00000F380001"))
			if err != nil || !got.Equal(tc.want) {
				t.Fatalf("%s: LSNTime %v, %v; want %v", tc.name, got, err, tc.want)
			}
		}
		if askedZone != tc.askedZone || askedNow != tc.askedNow || !strings.Contains(logs.String(), tc.log) {
			t.Errorf("%s: asked for the zone %d times, the offset %d times (want %d, %d), log:\n%s", tc.name, askedZone, askedNow, tc.askedZone, tc.askedNow, logs)
		}
	}
}
