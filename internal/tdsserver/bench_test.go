package tdsserver

import (
	"context"
	"io"
	"testing"
	"time"
)

// BenchmarkServerRows measures rows per second for an 8-column row
// (bigint, varchar(20), nvarchar(40), decimal(18,4), datetime2(7), date,
// bit, uniqueidentifier; the shape of the demo's orders):
//
//   - go-mssqldb: b.N rows in one result set, streamed over loopback and
//     scanned by database/sql with go-mssqldb; the client is part of what
//     is measured (it is the slower side).
//   - encode: the server alone: ResponseWriter.Row into 4096-byte packets
//     written to io.Discard.
func BenchmarkServerRows(b *testing.B) {
	b.Run("go-mssqldb", func(b *testing.B) {
		placed := time.Date(2026, 12, 1, 8, 0, 7, 500_000_000, time.UTC)
		guid := make([]byte, 16)
		h := HandlerFunc(func(ctx context.Context, req *Request, w *ResponseWriter) error {
			if err := w.Columns(benchCols); err != nil {
				return err
			}
			for i := range b.N {
				if err := w.Row(benchRow(i, placed, guid)...); err != nil {
					return err
				}
			}
			return nil
		})
		s := startServer(b, h, func(o *Options) { o.NoRecord, o.Logger = true, nil })
		db := openDB(b, s.DSN("bench"))
		if err := db.Ping(); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		rows, err := db.Query("select bench")
		if err != nil {
			b.Fatal(err)
		}
		var (
			id               int64
			region, customer string
			amount           []byte
			at, ship         time.Time
			express          bool
			ref              []byte
		)
		n := 0
		for rows.Next() {
			if err := rows.Scan(&id, &region, &customer, &amount, &at, &ship, &express, &ref); err != nil {
				b.Fatal(err)
			}
			n++
		}
		if err := rows.Err(); err != nil || n != b.N {
			b.Fatalf("%d rows, %v", n, err)
		}
		b.ReportMetric(float64(n)/time.Since(start).Seconds(), "rows/s")
	})
	b.Run("encode", func(b *testing.B) {
		coll, _ := ParseCollation("SQL_Latin1_General_CP1_CI_AS")
		pw := newPacketWriter(io.Discard, 4096, 1)
		pw.begin(pktReply)
		w := &ResponseWriter{ctx: context.Background(), kind: Batch, pw: pw, defColl: coll}
		if err := w.Columns(benchCols); err != nil {
			b.Fatal(err)
		}
		placed := time.Date(2026, 12, 1, 8, 0, 7, 500_000_000, time.UTC)
		guid := make([]byte, 16)
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		for i := range b.N {
			if err := w.Row(benchRow(i, placed, guid)...); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.finish(false); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "rows/s")
	})
}
