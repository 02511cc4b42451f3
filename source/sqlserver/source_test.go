package sqlserver

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	mssql "github.com/microsoft/go-mssqldb"
	"go.uber.org/goleak"

	"github.com/cdcsnap/cdcsnap/internal/mssqlstmt"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// metadataHandler answers the metadata statements from the documented
// result sets (docresults_test.go).
func metadataHandler(q string, args []any) ([]string, [][]any, bool) {
	start := mustLSN("0x0000002A00000F380001")
	switch {
	case strings.HasPrefix(q, "EXEC sys.sp_cdc_help_change_data_capture"):
		return docHelpColumns, [][]any{
			docHelpRow("dbo", "Orders", "dbo_Orders", 101, start, "PK_Orders", "[id]", "[id], [name], [amount]"),
			docHelpRow("dbo", "snap_greek", "dbo_snap_greek", 102, start, "PK_snap_greek", "[name]", "[name], [v]"),
			docHelpRow("sales", "a]b", "sales_ab", 103, start, "PK_ab", "[co,mp], [id ]]x]", "[co,mp], [id ]]x]"),
		}, true
	case strings.HasPrefix(q, "EXEC sys.sp_cdc_get_captured_columns"):
		return docCapturedColumns, [][]any{
			docCapturedColumn("dbo_Orders", "amount", 3, 3, "money"),
			docCapturedColumn("dbo_Orders", "id", 1, 1, "int"),
			docCapturedColumn("dbo_Orders", "name", 2, 2, "varchar(20)"),
		}, true
	case strings.HasPrefix(q, "SELECT [c].[name], [c].[collation_name]"):
		return docSysColumns, [][]any{
			docSysColumn("id", "", 0, false, false, 4),
			docSysColumn("name", "Greek_CI_AS", 1253, false, false, 20),
			docSysColumn("amount", "", 0, true, false, 8),
		}, true
	case strings.HasPrefix(q, "SELECT [i].[index_id]"):
		return docSysIndexes, [][]any{{int64(1), "PK_Orders", int64(1), true, int64(1), "id"}}, true
	}
	return nil, nil, false
}

func TestCaptureInstanceResolvesIgnoringCase(t *testing.T) {
	f := &fakeDB{handler: func(q string, args []any) ([]string, [][]any, error) {
		if c, r, ok := metadataHandler(q, args); ok {
			return c, r, nil
		}
		return nil, nil, errors.New("unexpected " + q)
	}}
	db := f.open()
	defer db.Close()
	s, err := New(db, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ci, err := s.CaptureInstance(context.Background(), "DBO_ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	if ci.Name != "dbo_Orders" || ci.SourceTable != "Orders" || len(ci.Key) != 1 || ci.Key[0] != "id" {
		t.Fatalf("%+v", ci)
	}
	var decls []string
	for _, c := range ci.Columns {
		decls = append(decls, c.Name+" "+c.Declared()+" "+c.Collation)
	}
	if got := strings.Join(decls, ", "); got != "id int , name varchar(20) Greek_CI_AS, amount money " || ci.Columns[1].CodePage != 1253 {
		t.Fatalf("columns: %s", got)
	}
	if ci.Columns[0].Nullable || !ci.Columns[2].Nullable {
		t.Fatalf("nullability from sys.columns not applied: %+v", ci.Columns)
	}
	if ci.StartLSN != mustLSN("0x0000002A00000F380001") {
		t.Fatalf("start lsn %s", ci.StartLSN)
	}
	if ci.KeyIndex == nil || ci.KeyIndex.Name != "PK_Orders" || !ci.KeyIndex.Clustered {
		t.Fatalf("key index %+v, want the clustered PK_Orders", ci.KeyIndex)
	}
	_, err = s.CaptureInstance(context.Background(), "dbo_nope")
	var nf *source.NotFoundError
	if !errors.As(err, &nf) || !errors.Is(err, source.ErrNotFound) || len(nf.Available) != 3 {
		t.Fatalf("not found: %v", err)
	}
}

func readTestInstance() *source.CaptureInstance {
	return &source.CaptureInstance{Name: "dbo_Orders", SourceSchema: "dbo", SourceTable: "Orders", Key: []string{"id"},
		Columns: []source.Column{{Name: "id", Type: "int"}, {Name: "name", Type: "varchar", Length: 20, Collation: "Greek_CI_AS", CodePage: 1253, Nullable: true}}}
}

func TestReadRangeSetsAndResetsIsolation(t *testing.T) {
	for _, policy := range []ConnPolicy{ResetConn, CloseConn} {
		f := &fakeDB{handler: func(q string, args []any) ([]string, [][]any, error) {
			if !strings.HasPrefix(q, "SELECT [id], CAST(CAST([name] AS nvarchar(20)) AS varbinary(40)) AS [name] FROM [dbo].[Orders] WHERE [id] >= CAST(@p1 AS int)") {
				return nil, nil, errors.New("unexpected " + q)
			}
			if len(args) != 1 || args[0] != int64(10) {
				return nil, nil, errors.New("bad args")
			}
			var rows [][]any
			for i := int64(10); i < 15; i++ {
				rows = append(rows, []any{i, "Δέλτα"})
			}
			return []string{"id", "name"}, rows, nil
		}}
		db := f.open()
		s, _ := New(db, Options{ConnPolicy: policy})
		rr, err := s.ReadRange(context.Background(), readTestInstance(), keyrange.Range{Lower: keyrange.Tuple{int64(10)}}, source.ReadOptions{Isolation: source.Snapshot, BatchRows: 2})
		if err != nil {
			t.Fatal(err)
		}
		var sizes []int64
		for rr.Next() {
			sizes = append(sizes, rr.RecordBatch().NumRows())
		}
		if rr.Err() != nil {
			t.Fatal(rr.Err())
		}
		rr.Release()
		if len(sizes) != 3 || sizes[0] != 2 || sizes[2] != 1 {
			t.Fatalf("batches %v", sizes)
		}
		logs, closed := f.logs()
		if len(logs) != 1 {
			t.Fatalf("connections %d", len(logs))
		}
		want := []string{"SET TRANSACTION ISOLATION LEVEL SNAPSHOT", "SET LOCK_TIMEOUT 30000", "SELECT"}
		if policy == ResetConn {
			want = append(want, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED", "SET LOCK_TIMEOUT -1")
		}
		if len(logs[0]) != len(want) {
			t.Fatalf("policy %d: statements %q", policy, logs[0])
		}
		for i, w := range want {
			if !strings.HasPrefix(logs[0][i], w) {
				t.Fatalf("policy %d: statement %d %q want %q", policy, i, logs[0][i], w)
			}
		}
		if policy == CloseConn && !closed[0] {
			t.Fatalf("CloseConn left the connection open")
		}
		if policy == ResetConn && closed[0] {
			t.Fatalf("ResetConn closed a healthy connection")
		}
		db.Close()
	}
}

func TestFailedResetClosesTheConnection(t *testing.T) {
	f := &fakeDB{failSQL: "READ COMMITTED", handler: func(q string, args []any) ([]string, [][]any, error) {
		return []string{"company", "id"}, [][]any{{int64(3), int64(9)}}, nil
	}}
	db := f.open()
	defer db.Close()
	s, _ := New(db, Options{})
	key, ok, err := s.SeekKey(context.Background(), ciComposite, source.Snapshot, nil, 5)
	if err != nil || !ok || key[0] != int64(3) || key[1] != int64(9) {
		t.Fatalf("%v %v %v", key, ok, err)
	}
	_, closed := f.logs()
	if !closed[0] {
		t.Fatal("a connection whose reset failed went back to the pool")
	}
}

func TestReadChangesDataLoss(t *testing.T) {
	min := mustLSN("0x00000000000000000100")
	max := mustLSN("0x00000000000000000900")
	var changeArgs []any
	f := &fakeDB{handler: func(q string, args []any) ([]string, [][]any, error) {
		switch {
		case strings.HasPrefix(q, "SELECT sys.fn_cdc_get_min_lsn"):
			return []string{""}, [][]any{{min.Bytes()}}, nil
		case strings.HasPrefix(q, "SELECT sys.fn_cdc_get_max_lsn"):
			return []string{""}, [][]any{{max.Bytes()}}, nil
		case strings.HasPrefix(q, "SELECT SYSDATETIMEOFFSET()"):
			return []string{"now"}, [][]any{{time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}}, nil
		case strings.HasPrefix(q, "SELECT CAST(SERVERPROPERTY("):
			return []string{"major", "edition"}, [][]any{{int64(15), int64(3)}}, nil
		case strings.Contains(q, "_CT] AS [c]"):
			return nil, nil, mssql.Error{Number: 229, Message: "The SELECT permission was denied on the object 'dbo_Orders_CT', database 'shop', schema 'cdc'."}
		case strings.Contains(q, "fn_cdc_get_all_changes_"):
			changeArgs = args
			if lsn.LSN(args[0].([]byte)) == mustLSN("0x00000000000000000200") {
				return nil, nil, mssql.Error{Number: 313, Message: "An insufficient number of arguments were supplied for the procedure or function cdc.fn_cdc_get_all_changes_ ..."}
			}
			return []string{"__$start_lsn", "__$seqval", "__$operation", "id", "name", "__$commit_ts"},
				[][]any{{max.Bytes(), max.Bytes(), int64(2), int64(1), "x", time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}}, nil
		}
		return nil, nil, errors.New("unexpected " + q)
	}}
	db := f.open()
	defer db.Close()
	s, _ := New(db, Options{AllowChangeFunction: true})
	ci := readTestInstance()
	ctx := context.Background()

	_, err := s.ReadChanges(ctx, ci, mustLSN("0x00000000000000000050"), max)
	var dl *source.DataLossError
	if !errors.As(err, &dl) || !errors.Is(err, source.ErrDataLoss) || dl.MinLSN != min {
		t.Fatalf("below min: %v", err)
	}
	_, err = s.ReadChanges(ctx, ci, mustLSN("0x00000000000000000200"), max)
	if !errors.As(err, &dl) || !strings.Contains(err.Error(), "313") {
		t.Fatalf("error 313: %v", err)
	}
	// Above the max LSN is no shorter read: the caller would take what
	// lies above it as read (FACTS.md F56).
	var rb *source.ReplicaBehindError
	if _, err = s.ReadChanges(ctx, ci, mustLSN("0x00000000000000000300"), lsn.Max); !errors.As(err, &rb) || rb.Have != max || rb.Need != lsn.Max {
		t.Fatalf("ReadChanges to above the max LSN: %v, want a *source.ReplicaBehindError having %s", err, max)
	}
	rr, err := s.ReadChanges(ctx, ci, mustLSN("0x00000000000000000300"), max)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(0)
	for rr.Next() {
		n += rr.RecordBatch().NumRows()
	}
	rr.Release()
	if n != 1 || lsn.LSN(changeArgs[1].([]byte)) != max {
		t.Fatalf("rows %d, upper bound %x (want the max)", n, changeArgs[1])
	}
	rr, err = s.ReadChanges(ctx, ci, max, min)
	if err != nil || rr.Next() {
		t.Fatalf("empty interval: %v", err)
	}
	rr.Release()
}

func TestNewRejectsBadOptions(t *testing.T) {
	if _, err := New(nil, Options{}); err == nil {
		t.Fatal("nil db accepted")
	}
	f := &fakeDB{}
	db := f.open()
	defer db.Close()
	if _, err := New(db, Options{BatchRows: -1}); err == nil {
		t.Fatal("negative BatchRows accepted")
	}
	if _, err := New(db, Options{ConnPolicy: 9}); err == nil {
		t.Fatal("unknown policy accepted")
	}
}

// TestListCaptureInstances: one EXEC sys.sp_cdc_help_change_data_capture
// lists every instance it returns, in its order, with name, table, start
// LSN and key from its row and no columns (the procedure gives no types),
// and a listing that fails says so.
func TestListCaptureInstances(t *testing.T) {
	var statements []string
	fail := false
	f := &fakeDB{handler: func(q string, args []any) ([]string, [][]any, error) {
		statements = append(statements, q)
		if fail {
			return nil, nil, errors.New("permission denied")
		}
		if c, r, ok := metadataHandler(q, args); ok {
			return c, r, nil
		}
		return nil, nil, errors.New("unexpected " + q)
	}}
	db := f.open()
	defer db.Close()
	s, err := New(db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	cis, err := s.ListCaptureInstances(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(statements) != 1 || statements[0] != mssqlstmt.ListCaptureInstancesStatement().SQL {
		t.Fatalf("sent %q, want one %q", statements, mssqlstmt.ListCaptureInstancesStatement().SQL)
	}
	var got []string
	for _, ci := range cis {
		got = append(got, ci.Name+" "+ci.SourceSchema+"."+ci.SourceTable+" "+ci.StartLSN.String()+" "+strings.Join(ci.Key, "|"))
		if len(ci.Columns) != 0 {
			t.Fatalf("%s: columns %+v, want none", ci.Name, ci.Columns)
		}
	}
	want := "dbo_Orders dbo.Orders 0x0000002A00000F380001 id; dbo_snap_greek dbo.snap_greek 0x0000002A00000F380001 name; sales_ab sales.a]b 0x0000002A00000F380001 co,mp|id ]x"
	if g := strings.Join(got, "; "); g != want {
		t.Fatalf("listed %s\nwant     %s", g, want)
	}
	fail = true
	if _, err := s.ListCaptureInstances(context.Background()); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("a failed listing: %v", err)
	}
}
