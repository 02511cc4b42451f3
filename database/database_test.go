package database

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

func names(results []Result) []string {
	var out []string
	for _, r := range results {
		out = append(out, r.CaptureInstance)
	}
	return out
}

// TestSelections: every selection keeps exactly the instances it says,
// each goes to its own target, largest table first, and each target holds
// its table's rows.
func TestSelections(t *testing.T) {
	db := smallDB(t, 4) // dbo_t00..03, sales_s00..03 with 0, 5, 10, 15 rows
	for _, tc := range []struct {
		name string
		sel  Selection
		want []string
	}{
		{"all", Selection{}, []string{"dbo_t03", "sales_s03", "dbo_t02", "sales_s02", "dbo_t01", "sales_s01", "dbo_t00", "sales_s00"}},
		{"schema", Selection{Schemas: []string{"SALES"}}, []string{"sales_s03", "sales_s02", "sales_s01", "sales_s00"}},
		{"pattern", Selection{Patterns: []string{"DBO_T0[12]", "*_s00"}}, []string{"dbo_t02", "dbo_t01", "sales_s00"}},
		{"schema and pattern", Selection{Schemas: []string{"dbo"}, Patterns: []string{"*0", "*3"}}, []string{"dbo_t03", "dbo_t00"}},
		{"names", Selection{Names: []string{"DBO_T01", "sales_s02"}}, []string{"sales_s02", "DBO_T01"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSinks(t)
			res, err := Bootstrap(context.Background(), newProbe(db), Options{Select: tc.sel, Target: "mem://{schema}/{table}", Open: s.open, Tables: 2, Connections: 3})
			if err != nil {
				t.Fatal(err)
			}
			if got := names(res); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for _, r := range res {
				want := "mem://" + r.SourceSchema + "/" + r.SourceTable
				if r.Target != want || !strings.EqualFold(r.SourceSchema+"_"+r.SourceTable, r.CaptureInstance) {
					t.Errorf("%s: target %q, table %s.%s", r.CaptureInstance, r.Target, r.SourceSchema, r.SourceTable)
				}
				dst := s.get(r.Target)
				if dst == nil || snapshotCommits(dst) != 1 || r.Snapshot.Rows != r.EstimatedRows || r.Snapshot.Existing {
					t.Fatalf("%s: %+v", r.CaptureInstance, r)
				}
				checkImage(t, db, r.CaptureInstance, dst)
			}
		})
	}
	_, err := Bootstrap(context.Background(), newProbe(db), Options{Select: Selection{Patterns: []string{"nothing*"}}, Target: "mem://{table}", Open: newSinks(t).open})
	if !errors.Is(err, ErrNoneSelected) {
		t.Fatalf("got %v, want ErrNoneSelected", err)
	}
}

// TestRerunReadsNothing: a second run finds every snapshot and reads no
// row.
func TestRerunReadsNothing(t *testing.T) {
	db := smallDB(t, 3)
	s := newSinks(t)
	opts := Options{Target: "mem://{capture_instance}", Open: s.open}
	if _, err := Bootstrap(context.Background(), newProbe(db), opts); err != nil {
		t.Fatal(err)
	}
	db.ResetStats()
	res, err := Bootstrap(context.Background(), newProbe(db), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if !r.Snapshot.Existing || snapshotCommits(s.get(r.Target)) != 1 {
			t.Errorf("%s: %+v", r.CaptureInstance, r.Snapshot)
		}
		st, err := db.Stats(r.SourceSchema, r.SourceTable)
		if err != nil || st.RangeReads != 0 {
			t.Errorf("%s: stats %+v, %v: the rerun read rows", r.CaptureInstance, st, err)
		}
	}
}

// TestOneFailureDoesNotStopTheOthers: a table that cannot be read and a
// listed name that does not exist fail alone, each with its error.
func TestOneFailureDoesNotStopTheOthers(t *testing.T) {
	db := smallDB(t, 3)
	p := newProbe(db)
	p.fail = "dbo_t02"
	s := newSinks(t)
	res, err := Bootstrap(context.Background(), p, Options{
		Select: Selection{Names: []string{"dbo_t00", "dbo_t01", "dbo_t02", "sales_s01", "dbo_missing"}},
		Target: "mem://{capture_instance}", Open: s.open, Tables: 1,
	})
	var run *RunError
	if !errors.As(err, &run) || run.Tables != 5 || len(run.Failed) != 2 {
		t.Fatalf("got %v, want a *RunError with 2 of 5 failed", err)
	}
	if !errors.Is(err, errBroken) || !errors.Is(err, source.ErrNotFound) {
		t.Fatalf("%v does not wrap both causes", err)
	}
	for _, r := range res {
		var ie *InstanceError
		switch r.CaptureInstance {
		case "dbo_t02":
			if !errors.As(r.Err, &ie) || !errors.Is(ie, errBroken) || ie.Target != "mem://dbo_t02" {
				t.Errorf("dbo_t02: %v", r.Err)
			}
			if snapshotCommits(s.get(r.Target)) != 0 {
				t.Error("dbo_t02 committed")
			}
		case "dbo_missing":
			var nf *source.NotFoundError
			if !errors.As(r.Err, &nf) || r.Target != "" {
				t.Errorf("dbo_missing: %v, target %q", r.Err, r.Target)
			}
		default:
			if r.Err != nil || snapshotCommits(s.get(r.Target)) != 1 {
				t.Errorf("%s: %v", r.CaptureInstance, r.Err)
			}
		}
	}
}

// TestRefusedBeforeIO: options that cannot work are refused without a
// source call or a sink opened.
func TestRefusedBeforeIO(t *testing.T) {
	db := smallDB(t, 1)
	var opened atomic.Bool // the last case opens sinks from several goroutines
	open := func(context.Context, string) (sink.Sink, error) { opened.Store(true); return fake.NewMemSink(), nil }
	good := Options{Target: "mem://{table}", Open: open}
	for _, tc := range []struct {
		name string
		mod  func(*Options)
		src  source.Source
		want error
	}{
		{"no target", func(o *Options) { o.Target = "" }, nil, ErrInvalidTarget},
		{"bad placeholder", func(o *Options) { o.Target = "mem://{db}" }, nil, ErrInvalidOptions},
		{"no open", func(o *Options) { o.Open = nil }, nil, ErrInvalidOptions},
		{"negative tables", func(o *Options) { o.Tables = -1 }, nil, ErrInvalidOptions},
		{"negative connections", func(o *Options) { o.Connections = -1 }, nil, ErrInvalidOptions},
		{"names and schemas", func(o *Options) { o.Select = Selection{Names: []string{"a"}, Schemas: []string{"dbo"}} }, nil, ErrInvalidOptions},
		{"name twice", func(o *Options) { o.Select = Selection{Names: []string{"a", "a"}} }, nil, ErrInvalidOptions},
		{"bad pattern", func(o *Options) { o.Select = Selection{Patterns: []string{"dbo_[x"}} }, nil, ErrInvalidOptions},
		{"bad pattern at its end", func(o *Options) { o.Select = Selection{Patterns: []string{"zz[x"}} }, nil, ErrInvalidOptions},
		{"instance in snapshot options", func(o *Options) { o.Snapshot.CaptureInstance = "x" }, nil, ErrInvalidOptions},
		{"progress in snapshot options", func(o *Options) { o.Snapshot.Progress = func(snapshot.Progress) {} }, nil, ErrInvalidOptions},
		{"invalid snapshot template", func(o *Options) { o.Snapshot.Partitions = -1 }, nil, snapshot.ErrInvalidOptions},
		{"invalid snapshot isolation", func(o *Options) { o.Snapshot.Isolation = 9 }, nil, snapshot.ErrInvalidOptions},
		{"source cannot list", func(*Options) {}, struct{ source.Source }{db}, ErrCannotList},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProbe(db)
			var src source.Source = p
			if tc.src != nil {
				src = tc.src
			}
			opts := good
			tc.mod(&opts)
			db.ResetStats()
			_, err := Bootstrap(context.Background(), src, opts)
			if !errors.Is(err, tc.want) || tc.want == snapshot.ErrInvalidOptions && !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if p.ops.Load() != 0 || opened.Load() {
				t.Fatalf("%d source calls, sink opened %v", p.ops.Load(), opened.Load())
			}
		})
	}
	// A table whose PerTable makes its copy invalid fails alone, with
	// snapshot's sentinel; the other tables still get their snapshots.
	opts := good
	opts.PerTable = func(ci *source.CaptureInstance, o *snapshot.Options) {
		if ci.Name == "dbo_t00" {
			o.Partitions = -1
		}
	}
	results, err := Bootstrap(context.Background(), newProbe(db), opts)
	var runErr *RunError
	if !errors.As(err, &runErr) || !errors.Is(err, snapshot.ErrInvalidOptions) {
		t.Fatalf("got %v", err)
	}
	var failed, done int
	for _, r := range results {
		switch {
		case r.Err != nil && r.CaptureInstance == "dbo_t00" && errors.Is(r.Err, snapshot.ErrInvalidOptions):
			failed++
		case r.Err == nil:
			done++
		default:
			t.Errorf("%s: %v", r.CaptureInstance, r.Err)
		}
	}
	if failed != 1 || done != len(results)-1 || done == 0 {
		t.Fatalf("%d failed, %d done of %d", failed, done, len(results))
	}
}

// TestCollision: a template that sends two instances of different tables
// to one target is refused before anything is opened; so is one that
// differs only in case. The two capture instances of one table (a schema
// change, FACTS.md F66) are one table: the one snapshot.PickAmong picks is
// bootstrapped, the newer into an empty target, and on a rerun the one
// whose snapshot the target holds.
func TestCollision(t *testing.T) {
	db := smallDB(t, 2)
	if _, err := db.EnableCDC("dbo", "t01", "dbo_t01_v2"); err != nil {
		t.Fatal(err)
	}
	for _, tmpl := range []string{"mem://{schema}", "mem://x"} {
		opened := false
		_, err := Bootstrap(context.Background(), newProbe(db), Options{Target: tmpl, Open: func(context.Context, string) (sink.Sink, error) {
			opened = true
			return fake.NewMemSink(), nil
		}})
		var ce *CollisionError
		if !errors.As(err, &ce) || !errors.Is(err, ErrTargetCollision) || opened {
			t.Fatalf("%s: got %v (opened %v), want a *CollisionError", tmpl, err, opened)
		}
	}
	// {capture_instance} tells them apart.
	if _, err := Bootstrap(context.Background(), newProbe(db), Options{Target: "mem://{schema}/{capture_instance}", Open: newSinks(t).open}); err != nil {
		t.Fatal(err)
	}
	_, err := Bootstrap(context.Background(), newProbe(db), Options{Select: Selection{Names: []string{"dbo_t00", "DBO_T00"}}, Target: "mem://{capture_instance}", Open: newSinks(t).open})
	if !errors.Is(err, ErrTargetCollision) {
		t.Fatalf("names differing in case: got %v", err)
	}
	// One table, two instances, one target.
	sinks := newSinks(t)
	results, err := Bootstrap(context.Background(), newProbe(db), Options{Target: "mem://{schema}/{table}", Open: sinks.open})
	if err != nil {
		t.Fatal(err)
	}
	var t01 []string
	for _, r := range results {
		if r.SourceTable == "t01" {
			t01 = append(t01, r.CaptureInstance)
		}
	}
	if len(t01) != 1 || t01[0] != "dbo_t01_v2" {
		t.Fatalf("the table with two instances bootstrapped as %v, want the newer dbo_t01_v2 alone", t01)
	}
	// A target holding the older instance's snapshot keeps it.
	older := newSinks(t)
	if _, err := Bootstrap(context.Background(), newProbe(db), Options{Select: Selection{Names: []string{"dbo_t01"}}, Target: "mem://{schema}/{table}", Open: older.open}); err != nil {
		t.Fatal(err)
	}
	results, err = Bootstrap(context.Background(), newProbe(db), Options{Select: Selection{Names: []string{"dbo_t01", "dbo_t01_v2"}}, Target: "mem://{schema}/{table}", Open: older.open})
	if err != nil || len(results) != 1 || results[0].CaptureInstance != "dbo_t01" {
		t.Fatalf("rerun with the older instance's snapshot in the target: %+v, %v", results, err)
	}
}

// TestBudget: the connection budget holds for every call and every open
// reader, whatever goroutines ask, and is reached; a caller waiting for a
// slot gives up when its context ends.
func TestBudget(t *testing.T) {
	db := smallDB(t, 3)
	p := newProbe(db)
	lim := newLimited(p, 3)
	ci, err := db.CaptureInstance(context.Background(), "dbo_t02")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Go(func() {
			ctx := context.Background()
			var err error
			switch i % 4 {
			case 0:
				_, err = lim.CaptureInstance(ctx, "dbo_t01")
			case 1:
				_, err = lim.RowCount(ctx, ci)
			default:
				rr, rerr := lim.ReadRange(ctx, ci, keyrange.Whole()[0], source.ReadOptions{})
				if err = rerr; err == nil {
					time.Sleep(time.Millisecond) // hold the reader while others ask
					for rr.Next() {
					}
					rr.Release()
				}
			}
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if peak := p.peak.Load(); peak != 3 || p.inUse.Load() != 0 {
		t.Fatalf("peak %d (want 3), %d still in use", peak, p.inUse.Load())
	}

	rr, err := lim.ReadRange(context.Background(), ci, keyrange.Whole()[0], source.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rr.Retain()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	lim2 := newLimited(p, 1)
	held, err := lim2.ReadRange(context.Background(), ci, keyrange.Whole()[0], source.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lim2.MaxLSN(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a full budget: got %v, want the context's error", err)
	}
	held.Release()
	if _, err := lim2.MaxLSN(context.Background()); err != nil {
		t.Fatalf("the slot was not freed by Release: %v", err)
	}
	rr.Release()
	if n := p.inUse.Load(); n != 1 {
		t.Fatalf("after one of two releases %d in use, want 1 (the reader stays open while retained)", n)
	}
	rr.Release()
	if n := p.inUse.Load(); n != 0 {
		t.Fatalf("%d in use after the last release", n)
	}
}

func TestProgressRateAndETA(t *testing.T) {
	p := Progress{Tables: 4, TablesDone: 1, Rows: 3000, RowsResumed: 1000, EstimatedRows: 10000, Elapsed: 2 * time.Second}
	if r := p.Rate(); r != 1000 {
		t.Fatalf("rate %v, want 1000", r)
	}
	if eta, ok := p.ETA(); !ok || eta != 7*time.Second {
		t.Fatalf("ETA %v %v, want 7s", eta, ok)
	}
	p.TablesFailed, p.TablesDone = 1, 3
	if _, ok := p.ETA(); ok {
		t.Fatal("an ETA for a finished run")
	}
	if _, ok := (Progress{Tables: 1}).ETA(); ok {
		t.Fatal("an ETA without a rate")
	}
}

// TestProgressAddsUp: the run's progress ends with every table done and
// every row counted, and rows never go backwards.
func TestProgressAddsUp(t *testing.T) {
	db := smallDB(t, 5) // 2 * (0+5+10+15+20) = 100 rows
	var (
		last  Progress
		calls int
		maxOn int
	)
	_, err := Bootstrap(context.Background(), newProbe(db), Options{Target: "mem://{capture_instance}", Open: newSinks(t).open, Tables: 3,
		Snapshot: snapshot.Options{ReadOptions: snapshot.ReadOptions{BatchRows: 2}},
		Progress: func(p Progress) {
			if p.Rows < last.Rows || p.TablesDone < last.TablesDone {
				t.Errorf("progress went back: %+v after %+v", p, last)
			}
			last = p
			calls++
			maxOn = max(maxOn, p.TablesRunning)
		}})
	if err != nil {
		t.Fatal(err)
	}
	want := Progress{Tables: 10, TablesDone: 10, Rows: 100, EstimatedRows: 100}
	last.Elapsed = 0
	if last != want || calls < 50 || maxOn < 2 || maxOn > 3 {
		t.Fatalf("last %+v (want %+v) after %d calls, %d tables at once", last, want, calls, maxOn)
	}
}

// TestPerTable: PerTable sees each table's capture instance and adjusts
// its snapshot options alone; the run still sets the instance's name.
func TestPerTable(t *testing.T) {
	db := smallDB(t, 3)
	var (
		mu   sync.Mutex
		seen []string
	)
	res, err := Bootstrap(context.Background(), newProbe(db), Options{Target: "mem://{capture_instance}", Open: newSinks(t).open,
		Select:   Selection{Schemas: []string{"dbo"}},
		Snapshot: snapshot.Options{Partitions: 3, MinPartitionRows: -1},
		PerTable: func(ci *source.CaptureInstance, o *snapshot.Options) {
			mu.Lock()
			seen = append(seen, ci.SourceSchema+"."+ci.SourceTable)
			mu.Unlock()
			if ci.SourceTable == "t01" {
				o.Partitions = 1
			}
			o.CaptureInstance = "ignored"
		}})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(seen)
	if !slices.Equal(seen, []string{"dbo.t00", "dbo.t01", "dbo.t02"}) {
		t.Fatalf("PerTable saw %v", seen)
	}
	for _, r := range res {
		want := 3 // t02's 10 rows in 3 uniform ranges
		if r.SourceTable != "t02" {
			want = 1 // t01 as PerTable asked, t00 empty
		}
		if r.Err != nil || r.Snapshot.Partitions != want {
			t.Errorf("%s: %d partitions (want %d), %v", r.CaptureInstance, r.Snapshot.Partitions, want, r.Err)
		}
	}
}

// TestSmallTablesFewPartitions: one set of snapshot options over tables of
// 2, 9,000, 25,000 and 45,000 rows (keyed by bigint, and by (region, id)
// for keyset ranges): each gets the partitions its size is worth, one per
// snapshot.DefaultMinPartitionRows (10,000) rows by metadata and never
// more than Partitions, so the 2-row table is one partition, not eight;
// and every table holds its rows once.
func TestSmallTablesFewPartitions(t *testing.T) {
	db := fake.New(fake.Options{})
	sizes := map[string]int{"tiny": 2, "small": 9_000, "mid": 25_000, "big": 45_000}
	for name, n := range sizes {
		for _, composite := range []bool{false, true} {
			def := fake.TableDef{Schema: "dbo", Name: name, Key: []string{"id"}, CaptureInstance: "dbo_" + name,
				Columns: []fake.ColumnDef{{Name: "region", Type: "varchar(8)"}, {Name: "id", Type: "bigint"}}}
			if composite {
				def.Schema, def.CaptureInstance, def.Key = "sales", "sales_"+name, []string{"region", "id"}
			}
			for k := range n {
				def.Rows = append(def.Rows, fake.Row{fmt.Sprintf("r%d", k%3), int64(k)})
			}
			if err := db.CreateTable(def); err != nil {
				t.Fatal(err)
			}
		}
	}
	sinks := newSinks(t)
	res, err := Bootstrap(context.Background(), newProbe(db), Options{Target: "mem://{capture_instance}", Open: sinks.open,
		Snapshot: snapshot.Options{Partitions: 4}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 8 {
		t.Fatalf("%d results, want 8", len(res))
	}
	for _, r := range res {
		n := sizes[r.SourceTable]
		want := map[int]int{2: 1, 9_000: 1, 25_000: 2, 45_000: 4}[n]
		if r.Err != nil || r.Snapshot.Rows != int64(n) || r.Snapshot.Partitions != want {
			t.Errorf("%s: %d rows in %d partitions, %v; want %d rows in %d", r.CaptureInstance, r.Snapshot.Rows, r.Snapshot.Partitions, r.Err, n, want)
		}
		checkImage(t, db, r.CaptureInstance, sinks.get(r.Target))
	}
}
