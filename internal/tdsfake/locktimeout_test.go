package tdsfake_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/tdsfake"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/source"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// lockHolder stands for another session holding a lock the reads need: it
// blocks the statements whose text matches until it has blocked n of them.
type lockHolder struct {
	mu      sync.Mutex
	match   string
	n, seen int
	held    chan struct{}
}

func (l *lockHolder) locked(sql string) <-chan struct{} {
	if !strings.Contains(sql, l.match) {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen++
	if l.seen > l.n {
		return nil
	}
	return l.held
}

// TestLockTimeoutEndsBlockedReads: a range read, a seek and a change read
// that another session's lock blocks fail on the server with error 1222
// once the connection's LOCK_TIMEOUT (Options.LockTimeout, set on each
// read's connection) has passed, and run again until the lock is gone,
// each retry counted; every connection that read had the time-out set,
// and gets it reset before it goes back to the pool. Without a time-out
// (a negative LockTimeout) the same read waits until its context ends.
func TestLockTimeoutEndsBlockedReads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	db := fake.New(fake.Options{})
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "t", Key: []string{"id"}, Columns: []fake.ColumnDef{
		{Name: "id", Type: "int"}, {Name: "v", Type: "varchar(10)", Nullable: true}}}); err != nil {
		t.Fatal(err)
	}
	var rows []fake.Row
	for i := range 50 {
		rows = append(rows, fake.Row{int64(i), "x"})
	}
	if _, err := db.Load("dbo", "t", rows...); err != nil {
		t.Fatal(err)
	}
	if _, err := db.EnableCDC("dbo", "t", "dbo_t"); err != nil {
		t.Fatal(err)
	}
	tx := db.Begin()
	if err := tx.Update("dbo", "t", []any{int64(3)}, fake.Row{int64(3), "y"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		match string // the blocked statement
		read  func(src *sqlserver.Source, ci *source.CaptureInstance) (int64, error)
	}{
		{"range read", "SELECT [id], CAST(CAST([v] AS nvarchar(10)) AS varbinary(20)) AS [v] FROM [dbo].[t]", func(src *sqlserver.Source, ci *source.CaptureInstance) (int64, error) {
			rr, err := src.ReadRange(ctx, ci, keyrange.Range{}, source.ReadOptions{})
			if err != nil {
				return 0, err
			}
			return count(rr)
		}},
		{"seek", " ROWS FETCH NEXT 1 ROWS ONLY", func(src *sqlserver.Source, ci *source.CaptureInstance) (int64, error) {
			k, ok, err := src.SeekKey(ctx, ci, source.ReadCommitted, nil, 10)
			if err != nil || !ok || k[0] != int64(10) {
				return 0, errors.Join(err, errors.New("want key 10"))
			}
			return 1, nil
		}},
		{"change read", " FROM [cdc].[dbo_t_CT]", func(src *sqlserver.Source, ci *source.CaptureInstance) (int64, error) {
			max, err := src.MaxLSN(ctx)
			if err != nil {
				return 0, err
			}
			rr, err := src.ReadChanges(ctx, ci, ci.StartLSN, max)
			if err != nil {
				return 0, err
			}
			return count(rr)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lock := &lockHolder{match: tc.match, n: 3, held: make(chan struct{})}
			reader := sdkmetric.NewManualReader()
			src, srv, _ := serve(t, db, tdsfake.Options{Locked: lock.locked}, sqlserver.Options{
				LockTimeout: 20 * time.Millisecond, Retry: sqlserver.Retry{Initial: time.Millisecond, Max: 2 * time.Millisecond},
				MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
			})
			ci, err := src.CaptureInstance(ctx, "dbo_t")
			if err != nil {
				t.Fatal(err)
			}
			n, err := tc.read(src, ci)
			if err != nil || n == 0 {
				t.Fatalf("%d rows, %v: want the read to get past the lock", n, err)
			}
			if got := retriesCounted(t, reader); got != 3 {
				t.Errorf("%d retries counted, want 3 (one per error 1222)", got)
			}
			// Each connection that ran the statement set the time-out
			// first, and reset it after.
			set := map[uint64]string{}
			reads := 0
			for _, r := range srv.Requests() {
				switch {
				case strings.HasPrefix(r.SQL, "SET LOCK_TIMEOUT "):
					set[r.ConnID] = r.SQL
				case strings.Contains(r.SQL, tc.match):
					reads++
					if set[r.ConnID] != "SET LOCK_TIMEOUT 20" {
						t.Errorf("connection %d read with %q in force, want SET LOCK_TIMEOUT 20", r.ConnID, set[r.ConnID])
					}
				}
			}
			if reads != 4 {
				t.Errorf("%d reads sent, want 4 (3 timed out)", reads)
			}
			if !slicesContainsValue(set, "SET LOCK_TIMEOUT -1") {
				t.Errorf("no connection's lock time-out was reset: %v", set)
			}
		})
	}
	// The control: no time-out, and the blocked read waits until its
	// context ends.
	lock := &lockHolder{match: "SELECT [id], CAST(CAST([v] AS nvarchar(10)) AS varbinary(20)) AS [v] FROM [dbo].[t]", n: 1, held: make(chan struct{})}
	src, _, _ := serve(t, db, tdsfake.Options{Locked: lock.locked}, sqlserver.Options{LockTimeout: -1})
	ci, err := src.CaptureInstance(ctx, "dbo_t")
	if err != nil {
		t.Fatal(err)
	}
	wait, stop := context.WithTimeout(ctx, 200*time.Millisecond)
	defer stop()
	rr, err := src.ReadRange(wait, ci, keyrange.Range{}, source.ReadOptions{})
	if err == nil {
		_, err = count(rr)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a blocked read without a lock time-out: %v, want it to wait until its context ends", err)
	}
}

func slicesContainsValue(m map[uint64]string, v string) bool {
	for _, x := range m {
		if x == v {
			return true
		}
	}
	return false
}

// count reads rr to its end and releases it.
func count(rr array.RecordReader) (int64, error) {
	defer rr.Release()
	var n int64
	for rr.Next() {
		n += rr.RecordBatch().NumRows()
	}
	return n, rr.Err()
}
