package tdsfake_test

import (
	"context"
	"testing"
	"time"
	_ "time/tzdata"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/tdsfake"
	"github.com/cdcsnap/cdcsnap/source"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// commitAt is one commit of the daylight-saving test: its instant and the
// table it changes.
type commitAt struct {
	at    time.Time
	table string
}

// dstCommits commits on dbo.t and dbo.other across both of Berlin's clock
// changes of 2026: the spring-forward (01:00 UTC on 29 March, 02:00 CET
// becomes 03:00 CEST) and the fall-back (01:00 UTC on 25 October, 03:00
// CEST becomes 02:00 CET, so the wall clocks 02:00-03:00 come twice). Around
// the fall-back dbo.t's own commits read 02:20 then 02:30: only dbo.other's,
// in between, show the clock going back.
func dstCommits() []commitAt {
	var out []commitAt
	utc := func(mo time.Month, d, h, mi int) time.Time { return time.Date(2026, mo, d, h, mi, 0, 0, time.UTC) }
	for i := range 36 { // 22:00 to 03:50 UTC, every 10 minutes
		at := utc(3, 28, 22, 0).Add(time.Duration(i) * 10 * time.Minute)
		table := "other"
		if i%3 == 0 {
			table = "t"
		}
		out = append(out, commitAt{at, table})
	}
	return append(out, []commitAt{
		{utc(10, 24, 22, 30), "t"}, {utc(10, 24, 23, 40), "other"}, {utc(10, 25, 0, 10), "t"},
		{utc(10, 25, 0, 20), "t"},     // 02:20 CEST, the first reading
		{utc(10, 25, 0, 50), "other"}, // 02:50 CEST
		{utc(10, 25, 1, 5), "other"},  // 02:05 CET: the clock went back
		{utc(10, 25, 1, 30), "t"},     // 02:30 CET, the second reading
		{utc(10, 25, 1, 45), "t"}, {utc(10, 25, 1, 59), "other"}, {utc(10, 25, 2, 0), "t"}, {utc(10, 25, 2, 40), "t"},
	}...)
}

// TestCommitTimesCrossDaylightSavingChanges: a server on Berlin's clock
// keeps commit times as wall clocks; the source, told nothing, asks the
// server for its zone (CURRENT_TIMEZONE_ID, mapped to Europe/Berlin by
// CLDR's windowsZones), and every change row's _commit_ts and every
// LSNTime equals the commit's instant across both clock changes, the hour
// the fall-back repeats ordered by LSN. A server that names no zone
// (before SQL Server 2022) gets its offset now applied to every commit, an
// hour off on one side of each change: what the source did before.
func TestCommitTimesCrossDaylightSavingChanges(t *testing.T) {
	ctx := context.Background()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	commits := dstCommits()
	next := 0
	db := fake.New(fake.Options{Now: func() time.Time {
		if next >= len(commits) {
			return commits[len(commits)-1].at.Add(time.Hour)
		}
		return commits[next].at
	}})
	for _, name := range []string{"t", "other"} {
		if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: name, Key: []string{"id"}, Columns: []fake.ColumnDef{{Name: "id", Type: "int"}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.EnableCDC("dbo", name, "dbo_"+name); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range commits {
		next = i
		if _, err := db.Load("dbo", c.table, fake.Row{int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	ci, err := db.CaptureInstance(ctx, "dbo_t")
	if err != nil {
		t.Fatal(err)
	}
	max, err := db.MaxLSN(ctx)
	if err != nil {
		t.Fatal(err)
	}
	truth, err := db.ChangeRows(ctx, ci, ci.StartLSN, max)
	if err != nil {
		t.Fatal(err)
	}
	mapping, err := db.Mapping(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// wrong counts the change rows and the LSNTimes whose commit time is
	// not the commit's.
	wrong := func(t *testing.T, src *sqlserver.Source, what string, report bool) int {
		t.Helper()
		n := 0
		rr, err := src.ReadChanges(ctx, ci, ci.StartLSN, max)
		if err != nil {
			t.Fatal(err)
		}
		defer rr.Release()
		var got []time.Time
		for rr.Next() {
			rec := rr.RecordBatch()
			ts := rec.Column(rec.Schema().FieldIndices(source.ColCommitTS)[0]).(*array.Timestamp)
			for i := range ts.Len() {
				got = append(got, time.UnixMicro(int64(ts.Value(i))).UTC())
			}
		}
		if err := rr.Err(); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(truth) {
			t.Fatalf("%s: %d change rows, want %d", what, len(got), len(truth))
		}
		for i, r := range truth {
			if !got[i].Equal(r.CommitTS) {
				n++
				if report {
					t.Errorf("%s: change row %d at %s: _commit_ts %s (%s in Berlin), want %s", what, i, r.StartLSN, got[i], got[i].In(berlin).Format("15:04 MST"), r.CommitTS)
				}
			}
		}
		for _, m := range mapping {
			got, err := src.LSNTime(ctx, m.LSN)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(m.Time) {
				n++
				if report {
					t.Errorf("%s: LSNTime(%s) = %s (%s in Berlin), want %s", what, m.LSN, got, got.In(berlin).Format("15:04 MST"), m.Time)
				}
			}
		}
		return n
	}
	src, _, _ := serve(t, db, tdsfake.Options{TimeZone: berlin, TimeZoneID: "W. Europe Standard Time"}, sqlserver.Options{})
	if n := wrong(t, src, "SQL Server 2022", true); n != 0 {
		t.Errorf("SQL Server 2022: %d commit times wrong", n)
	}
	old, _, _ := serve(t, db, tdsfake.Options{TimeZone: berlin, ProductMajorVersion: 15}, sqlserver.Options{})
	if n := wrong(t, old, "SQL Server 2019", false); n == 0 {
		t.Errorf("SQL Server 2019, its offset now applied to every commit: no commit time wrong")
	}
}
