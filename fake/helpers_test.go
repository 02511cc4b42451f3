package fake_test

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"go.uber.org/goleak"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// readAll drains rr into rows of Go values (via a MemSink-free conversion)
// and releases it.
func readAll(t testing.TB, rr array.RecordReader) ([][]any, error) {
	t.Helper()
	defer rr.Release()
	var out [][]any
	for rr.Next() {
		rec := rr.RecordBatch()
		out = append(out, recordRows(t, rec)...)
	}
	return out, rr.Err()
}

func recordRows(t testing.TB, rec arrow.RecordBatch) [][]any {
	t.Helper()
	var out [][]any
	for i := 0; i < int(rec.NumRows()); i++ {
		row := make([]any, rec.NumCols())
		for j := range row {
			v, err := fake.ArrowValue(rec.Column(j), i)
			if err != nil {
				t.Fatal(err)
			}
			row[j] = v
		}
		out = append(out, row)
	}
	return out
}

func mustReadAll(t testing.TB) func(array.RecordReader, error) [][]any {
	return func(rr array.RecordReader, err error) [][]any {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		rows, err := readAll(t, rr)
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

type arrowReader = array.RecordReader

// seeker adapts a DB and capture instance to keyrange.Seeker.
type seeker struct {
	db *fake.DB
	ci *source.CaptureInstance
}

func (s seeker) SeekKey(ctx context.Context, from keyrange.Tuple, k int64) (keyrange.Tuple, bool, error) {
	return s.db.SeekKey(ctx, s.ci, source.ReadCommitted, from, k)
}

type arrowSchema = arrow.Schema

// maxLSN is db's max LSN: the upper bound of a change read of everything
// captured (a read above it is refused, never cut short).
func maxLSN(t testing.TB, db *fake.DB) lsn.LSN {
	t.Helper()
	l, err := db.MaxLSN(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return l
}
