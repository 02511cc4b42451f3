package main

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/source"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// The wire benchmark compares like with like only if source/sqlserver,
// reading genServer through go-mssqldb, produces exactly the generator's
// records: same schema, same values, NULLs in the same places.
func TestWireReadsWhatTheGeneratorMakes(t *testing.T) {
	ctx := context.Background()
	const rows = 3000
	g := NewGen(rows, 0)
	srv, err := startGenServer(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	db, err := sqlserver.Open(srv.DSN("bench") + "&packet+size=512")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	src, err := sqlserver.New(db, sqlserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gci := g.ci
	for _, r := range keyrange.UniformRanges(1, rows, 3) {
		wire := readColumns(t, src, wireInstance(g), r)
		gen := readColumns(t, g, &gci, r)
		if len(wire) != len(gen) {
			t.Fatalf("%v: %d columns over the wire, %d from the generator", r, len(wire), len(gen))
		}
		for i := range gen {
			if !array.Equal(wire[i], gen[i]) {
				t.Errorf("%v, column %d (%s): over the wire\n%v\ngenerator\n%v", r, i, gci.Columns[i].Name, wire[i], gen[i])
			}
			wire[i].Release()
			gen[i].Release()
		}
	}
}

// readColumns reads range r and concatenates each column's batches.
func readColumns(t *testing.T, src source.Source, ci *source.CaptureInstance, r keyrange.Range) []arrow.Array {
	t.Helper()
	rr, err := src.ReadRange(context.Background(), ci, r, source.ReadOptions{BatchRows: 700})
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	var parts [][]arrow.Array
	for rr.Next() {
		rec := rr.RecordBatch()
		if parts == nil {
			parts = make([][]arrow.Array, rec.NumCols())
		}
		for i := range parts {
			c := rec.Column(i)
			c.Retain()
			parts[i] = append(parts[i], c)
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatal(fmt.Errorf("%v: %w", r, err))
	}
	out := make([]arrow.Array, len(parts))
	for i, p := range parts {
		a, err := array.Concatenate(p, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range p {
			c.Release()
		}
		out[i] = a
	}
	return out
}

// TestWithCPUCountsAllocations: withCPU's allocation count is the heap
// objects the run allocated, the figure -wire-peers prints per row.
func TestWithCPUCountsAllocations(t *testing.T) {
	const n = 1000
	var keep [][]byte
	m, err := withCPU(func() (measure, error) {
		for range n {
			keep = append(keep, make([]byte, 64))
		}
		return measure{Rows: n}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(keep)
	if got := m.allocsPerRow(); got < 1 || got > 1.5 {
		t.Errorf("allocsPerRow = %.3f (%d objects for %d rows), want about 1 (one []byte per row)", got, m.Allocs, n)
	}
}
