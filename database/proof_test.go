package database

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// proofTable is one table of the proof's database.
type proofTable struct {
	schema, name, ci string
	kind             string
}

// proofDB builds 200 captured tables in three schemas: bigint keys,
// composite (case-insensitive varchar, int) keys, case-insensitive string
// keys, empty tables and heaps (no primary key or unique index: CDC shows
// no key, and a snapshot reads them as one range), most with 0-40 rows, a
// few with 150.
func proofDB(t *testing.T, r *rand.Rand) (*fake.DB, []proofTable) {
	t.Helper()
	db := fake.New(fake.Options{})
	schemas := []string{"dbo", "sales", "hr"}
	var tables []proofTable
	for i := range 200 {
		pt := proofTable{schema: schemas[i%3], name: fmt.Sprintf("t%03d", i)}
		pt.ci = pt.schema + "_" + pt.name
		pt.kind = []string{"int", "composite", "string", "empty", "heap"}[i%5]
		def := fake.TableDef{Schema: pt.schema, Name: pt.name, CaptureInstance: pt.ci}
		v := fake.ColumnDef{Name: "v", Type: "nvarchar(20)", Nullable: true}
		n := r.IntN(41)
		if r.IntN(20) == 0 {
			n = 150
		}
		switch pt.kind {
		case "int", "empty", "heap":
			def.Columns = []fake.ColumnDef{{Name: "id", Type: "bigint"}, v}
			def.Key = []string{"id"}
			def.Keyless = pt.kind == "heap"
			if pt.kind == "empty" {
				n = 0
			}
			for k := range n {
				def.Rows = append(def.Rows, fake.Row{int64(k*7 - 50), testworld.Word(r, "abc", 6)})
			}
		case "composite":
			def.Columns = []fake.ColumnDef{{Name: "region", Type: "varchar(10)", Collation: "Latin1_General_CI_AS"}, {Name: "n", Type: "int"}, v}
			def.Key = []string{"region", "n"}
			for k := range n {
				def.Rows = append(def.Rows, fake.Row{[]string{"east", "West", "north "}[k%3], int64(k), testworld.Word(r, "xyz", 5)})
			}
		case "string":
			def.Columns = []fake.ColumnDef{{Name: "code", Type: "varchar(12)", Collation: "SQL_Latin1_General_CP1_CI_AS"}, v}
			def.Key = []string{"code"}
			for k := range n {
				def.Rows = append(def.Rows, fake.Row{fmt.Sprintf("c%04d", k), testworld.Word(r, "pq", 4)})
			}
		}
		if err := db.CreateTable(def); err != nil {
			t.Fatal(err)
		}
		if ci, err := db.CaptureInstance(context.Background(), pt.ci); err != nil || (len(ci.Key) == 0) != (pt.kind == "heap") {
			t.Fatalf("%s (%s): key %v, %v", pt.ci, pt.kind, ci.Key, err)
		}
		tables = append(tables, pt)
	}
	return db, tables
}

// change commits one random update, delete or insert (bigint keys and
// heaps) to a random table.
func change(db *fake.DB, tables []proofTable, r *rand.Rand, next *int64) error {
	pt := tables[r.IntN(len(tables))]
	info, err := db.Table(pt.schema, pt.name)
	if err != nil {
		return err
	}
	rows, err := db.Rows(pt.schema, pt.name)
	if err != nil {
		return err
	}
	keyOf := func(row fake.Row) []any {
		k := make([]any, len(info.KeyIndexes))
		for i, j := range info.KeyIndexes {
			k[i] = row[j]
		}
		return k
	}
	tx := db.Begin()
	switch op := r.IntN(3); {
	case op == 0 && len(rows) > 0:
		row := append(fake.Row(nil), rows[r.IntN(len(rows))]...)
		row[len(row)-1] = fmt.Sprintf("changed %d", r.IntN(1000))
		err = tx.Update(pt.schema, pt.name, keyOf(row), row)
	case op == 1 && len(rows) > 0:
		err = tx.Delete(pt.schema, pt.name, keyOf(rows[r.IntN(len(rows))]))
	case len(info.KeyIndexes) == 1 && len(info.Columns) == 2 && info.Columns[0].Name == "id":
		*next++
		err = tx.Insert(pt.schema, pt.name, fake.Row{*next, "inserted"})
	default:
		tx.Rollback()
		return nil
	}
	if err != nil {
		tx.Rollback()
		return err
	}
	_, err = tx.Commit()
	return err
}

var errInjected = errors.New("injected fault")

// TestProofManyInstances is the proof on the fake: 200 capture
// instances (bigint, composite and string keys, empty tables, heaps, one
// whose every read fails), 4 tables at once and 8 connections, killed at
// random points (the run's context canceled after a random number of
// source operations or progress reports, a read failing after some rows,
// a sink commit failing) and rerun until no table is left but the broken
// one, with changes committed between runs and during reads. Then every
// table's target holds exactly one snapshot, the broken one's none, and
// each table's latest image (the snapshot and its stream from the run's
// StreamFrom) equals the source; source operations in flight never
// exceeded 8 (and reached more than 1), tables in flight never exceeded 4.
func TestProofManyInstances(t *testing.T) {
	seed := testworld.Seed(t, *seedFlag)
	r := rand.New(rand.NewPCG(seed, 18))
	db, tables := proofDB(t, r)
	p := newProbe(db)
	p.fail = tables[7].ci
	s := newSinks(t)

	var (
		changeMu sync.Mutex
		nextID   int64 = 1 << 20
	)
	commitChange := func() {
		changeMu.Lock()
		defer changeMu.Unlock()
		if err := change(db, tables, r, &nextID); err != nil {
			t.Error(err)
		}
	}
	db.SetPageHook(func(context.Context, fake.Page) error {
		changeMu.Lock()
		hit := r.IntN(10) == 0
		changeMu.Unlock()
		if hit {
			commitChange()
		}
		return nil
	})
	defer db.SetPageHook(nil)

	var (
		progressMu   sync.Mutex
		tablesAtOnce int
		resumed      int
	)
	run := func(kill func(ctx context.Context, cancel context.CancelFunc) (onProgress func())) ([]Result, error) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		onProgress := kill(ctx, cancel)
		return Bootstrap(ctx, p, Options{
			Target: "mem://lake/{schema}/{table}", Open: s.open, Tables: 4, Connections: 8,
			Snapshot: snapshot.Options{Partitions: 3, MinPartitionRows: -1, ReadOptions: snapshot.ReadOptions{BatchRows: 8}},
			Progress: func(pr Progress) {
				progressMu.Lock()
				tablesAtOnce = max(tablesAtOnce, pr.TablesRunning)
				progressMu.Unlock()
				if onProgress != nil {
					onProgress()
				}
			},
		})
	}

	// A kill lands within the run's first half, as far as the tables left
	// tell (about 2 source operations per table to describe them all, 10
	// per table to bootstrap, 2 or more progress reports per table): the
	// killed runs leave work for the next ones.
	var (
		kills     int
		effective int // kills that failed a table other than the broken one
		results   []Result
		left      = map[string]bool{}
	)
	for _, pt := range tables {
		left[pt.ci] = true
	}
	for attempt := 0; ; attempt++ {
		if attempt > 40 {
			t.Fatal("no complete run after 40 attempts")
		}
		for range r.IntN(4) {
			commitChange()
		}
		killing := attempt < 10
		var what string
		var armed *fake.MemSink
		res, err := run(func(ctx context.Context, cancel context.CancelFunc) func() {
			if !killing {
				return nil
			}
			kind := r.IntN(4)
			if effective < 3 {
				// Until three kills have stopped tables, kills cancel
				// the run, so that later ones still find tables left:
				// a single table's fault (2, 3) lets its run finish
				// nearly every other table.
				kind = r.IntN(2)
			}
			switch kind {
			case 0:
				ops := r.Int64N(int64(2*len(tables)+5*len(left))) + 1
				what = fmt.Sprintf("canceled after %d source operations", ops)
				var mu sync.Mutex
				f := func() {
					mu.Lock()
					defer mu.Unlock()
					if ops--; ops == 0 {
						cancel()
					}
				}
				p.onOp.Store(&f)
			case 1:
				n := r.IntN(len(left)+1) + 1
				what = fmt.Sprintf("canceled after %d progress reports", n)
				return func() {
					if n--; n == 0 {
						cancel()
					}
				}
			case 2:
				rows := r.Int64N(int64(10*len(left) + 1))
				what = fmt.Sprintf("a read failing after %d rows", rows)
				db.FailReadAfter(rows, errInjected)
			case 3:
				var names []string
				for _, pt := range tables {
					if left[pt.ci] && pt.ci != p.fail {
						names = append(names, "mem://lake/"+pt.schema+"/"+pt.name)
					}
				}
				if len(names) == 0 {
					break
				}
				target := names[r.IntN(len(names))]
				what = "the commit to " + target + " failing"
				dst, _ := s.open(ctx, target)
				armed = dst.(keptSink).MemSink
				armed.FailNextCommit(errInjected)
			}
			return nil
		})
		p.onOp.Store(nil)
		db.ClearFaults()
		if armed != nil {
			armed.FailNextCommit(nil)
		}
		var runErr *RunError
		if err != nil && !errors.As(err, &runErr) && !errors.Is(err, context.Canceled) {
			t.Fatalf("attempt %d (%s): %v", attempt, what, err)
		}
		failed := map[string]error{}
		for _, r := range res {
			if r.Err != nil {
				failed[r.CaptureInstance] = r.Err
			} else {
				delete(left, r.CaptureInstance)
			}
			if r.Snapshot.Resumed {
				resumed++
			}
		}
		if killing {
			kills++
			if len(failed) > 1 || len(res) < len(tables) {
				effective++
			}
			t.Logf("attempt %d: %s: %d of %d tables failed", attempt, what, len(failed), len(res))
		}
		// Every killing attempt runs, even after a complete run: a rerun
		// of a finished database is part of the proof too.
		if !killing && len(res) == len(tables) && len(failed) == 1 && errors.Is(failed[p.fail], errBroken) {
			results = res
			break
		}
		for ci, err := range failed {
			if ci != p.fail && !killing {
				t.Fatalf("attempt %d without a fault: %s failed: %v", attempt, ci, err)
			}
		}
	}
	db.SetPageHook(nil)

	if peak := p.peak.Load(); peak > 8 || peak < 2 {
		t.Errorf("source operations in flight peaked at %d: want 2..8", peak)
	}
	if tablesAtOnce > 4 || tablesAtOnce < 2 {
		t.Errorf("tables in flight peaked at %d: want 2..4", tablesAtOnce)
	}
	if resumed == 0 {
		t.Errorf("no run resumed a partial snapshot in %d kills", kills)
	}
	if effective < 3 {
		t.Errorf("only %d of %d kills stopped a table: the proof needs kills that land mid-run", effective, kills)
	}
	t.Logf("%d kills (%d stopped a table); %d tables resumed a partial snapshot; peak %d connections", kills, effective, resumed, p.peak.Load())

	sort.Slice(results, func(i, j int) bool { return results[i].CaptureInstance < results[j].CaptureInstance })
	sort.Slice(tables, func(i, j int) bool { return tables[i].ci < tables[j].ci })
	for i, res := range results {
		pt := tables[i]
		if res.CaptureInstance != pt.ci || res.Target != "mem://lake/"+pt.schema+"/"+pt.name {
			t.Fatalf("result %d is %s to %s, want %s", i, res.CaptureInstance, res.Target, pt.ci)
		}
		dst := s.get(res.Target)
		if pt.ci == p.fail {
			if dst != nil && snapshotCommits(dst) != 0 {
				t.Errorf("%s: the broken table committed", pt.ci)
			}
			continue
		}
		if n := snapshotCommits(dst); n != 1 {
			t.Fatalf("%s: %d snapshots, want 1", pt.ci, n)
		}
		streamChanges(t, p, res, dst)
		checkImage(t, db, pt.ci, dst)
	}
}
