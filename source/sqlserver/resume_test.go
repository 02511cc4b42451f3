package sqlserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	mssql "github.com/microsoft/go-mssqldb"

	"github.com/cdcsnap/cdcsnap/source"
)

// changeResumeDB answers a change read whose first statement is cut after
// its first row (a broken connection) and whose second returns the rows of
// that LSN in another order: what an order that is not total allows. rows
// are the change rows after their LSN (__$seqval, __$operation, then
// __$command_id on the change table, then id); commandID says which
// statement answers (without it the change table is refused, error 229).
func changeResumeDB(commandID bool, first, again [][]any) (*fakeDB, *int) {
	var mu sync.Mutex
	reads := 0
	l := mustLSN("0x0000002A00000F380010").Bytes()
	ts := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	row := func(r []any) []any { return append(append([]any{l}, r...), "a", ts) }
	return &fakeDB{handler: func(q string, _ []any) ([]string, [][]any, error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case strings.HasPrefix(q, "SELECT sys.fn_cdc_get_min_lsn"):
			c, r := docScalar(mustLSN("0x0000002A00000F380001").Bytes())
			return c, r, nil
		case strings.HasPrefix(q, "SELECT sys.fn_cdc_get_max_lsn"):
			c, r := docScalar(l)
			return c, r, nil
		case strings.HasPrefix(q, "SELECT SYSDATETIMEOFFSET()"):
			return []string{"now"}, [][]any{{ts}}, nil
		case strings.HasPrefix(q, "SELECT CAST(SERVERPROPERTY("):
			return []string{"major", "edition"}, [][]any{{int64(15), int64(3)}}, nil
		case strings.Contains(q, "_CT] AS [c]") && !commandID:
			return nil, nil, mssql.Error{Number: 229, Message: "The SELECT permission was denied on the object 'dbo_Orders_CT', database 'shop', schema 'cdc'."}
		case strings.Contains(q, " FROM [cdc]."):
			cols := []string{"__$start_lsn", "__$seqval", "__$operation", "id", "name", "__$commit_ts"}
			if commandID {
				cols = []string{"__$start_lsn", "__$seqval", "__$operation", "__$command_id", "id", "name", "__$commit_ts"}
			}
			reads++
			src := again
			if reads == 1 {
				src = first
			}
			var rows [][]any
			for _, r := range src {
				rows = append(rows, row(r))
			}
			if reads == 1 {
				return cols, rows, midStream{io.ErrUnexpectedEOF}
			}
			return cols, rows, nil
		}
		return nil, nil, errors.New("unexpected " + q)
	}}, &reads
}

// TestChangeReadResumesByIdentity (the review of issue 33, finding 2): a
// change read cut mid-LSN resumes from that LSN and drops the rows it had
// decoded by their identity, not by their count. Through the change
// function, whose order (__$start_lsn, __$seqval, __$operation) nothing
// documents as total, two rows sharing that identity in another order the
// second time refuse the resume as transient, instead of returning one row
// twice and losing the other; on the change table, ordered by its unique
// clustered key with __$command_id, the rows come once each.
func TestChangeReadResumesByIdentity(t *testing.T) {
	s1, s2 := mustLSN("0x0000002A00000F380011").Bytes(), mustLSN("0x0000002A00000F380012").Bytes()
	read := func(t *testing.T, f *fakeDB, opts Options) ([]string, error) {
		t.Helper()
		s, _ := newTestSource(t, f, opts)
		ci := readTestInstance()
		ctx := context.Background()
		rr, err := s.ReadChanges(ctx, ci, mustLSN("0x0000002A00000F380001"), mustLSN("0x0000002A00000F380010"))
		if err != nil {
			t.Fatal(err)
		}
		defer rr.Release()
		var ids []string
		for rr.Next() {
			rec := rr.RecordBatch()
			for i := range int(rec.NumRows()) {
				ids = append(ids, rec.Column(0).ValueStr(i))
			}
		}
		return ids, rr.Err()
	}
	t.Run("function with tied rows", func(t *testing.T) {
		// Rows (seqval, operation, id): two share (s1, 2).
		f, reads := changeResumeDB(false,
			[][]any{{s1, int64(2), int64(1)}},
			[][]any{{s1, int64(2), int64(2)}, {s1, int64(2), int64(1)}, {s2, int64(2), int64(3)}})
		ids, err := read(t, f, Options{AllowChangeFunction: true, Retry: Retry{Initial: time.Millisecond, Max: time.Millisecond}})
		if !errors.Is(err, source.ErrTransient) || !strings.Contains(fmt.Sprint(err), "share __$seqval and __$operation") {
			t.Fatalf("resume among tied rows: ids %v, %v; want a transient error naming the tie", ids, err)
		}
		if *reads != 2 {
			t.Fatalf("%d reads, want the first and its resume", *reads)
		}
	})
	t.Run("change table", func(t *testing.T) {
		// Rows (seqval, operation, command id, id) in the change table's
		// key order both times; the cut came after the first.
		rows := [][]any{{s2, int64(1), int64(1), int64(1)}, {s1, int64(2), int64(2), int64(2)}, {s1, int64(2), int64(3), int64(3)}}
		f, _ := changeResumeDB(true, rows[:1], rows)
		ids, err := read(t, f, Options{Retry: Retry{Initial: time.Millisecond, Max: time.Millisecond}})
		if err != nil || strings.Join(ids, ",") != "1,2,3" {
			t.Fatalf("resumed read: ids %v, %v; want 1,2,3", ids, err)
		}
	})
}
