package main

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"io"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/decimal128"

	"github.com/cdcsnap/cdcsnap/internal/tdsserver"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// The shapes benchmark (-wire-shapes): what go-mssqldb's public API costs
// a client per row before any decoding of its own, when the server sends
// the same values of the benchmark's table in fewer, cheaper columns. Each
// shape is read whole on one connection opened as source/sqlserver opens
// it (sqlserver.Open: 32767-byte packets), scanning every value into an
// sql.Scanner that keeps the driver's value, as source/sqlserver's reader
// does; interleaved rounds, the median kept. The child server does the
// packing, so no shape's client pays for it; whether a real SQL Server
// could build such rows as cheaply is not what this measures.

// wireShape is one way to send the benchmark's rows.
type wireShape struct {
	name string
	// label is the first line of the bench's statement for this shape;
	// genServer answers it with cols and row.
	label string
	cols  []tdsserver.Column
	// row appends one row's values to vals, from the generator's values
	// v; buf is the row's scratch for packed bytes.
	row func(vals []any, v []any, buf []byte) ([]any, []byte)
}

// shapePrefix starts every statement of the shapes benchmark.
const shapePrefix = "SELECT /* bench shape: "

// wireShapes are the shapes measured, the first as source/sqlserver reads
// the table today (FACTS.md F90, F91), the last the per-row floor.
func wireShapes() []wireShape {
	vb := func(name string, n int) tdsserver.Column {
		return tdsserver.Column{Name: name, Type: fmt.Sprintf("varbinary(%d)", n), Nullable: true}
	}
	bi := func(name string) tdsserver.Column {
		return tdsserver.Column{Name: name, Type: "bigint", Nullable: true}
	}
	dt := func(name string) tdsserver.Column {
		return tdsserver.Column{Name: name, Type: "datetime2(7)", Nullable: true}
	}
	today := []tdsserver.Column{bi("id"), vb("customer", 200), vb("status", 40), vb("note", 800), bi("amount"), dt("created"), dt("shipped"), vb("remark", 800)}
	return []wireShape{
		{name: "8 columns, as source/sqlserver reads them", label: "today", cols: today,
			row: func(vals, v []any, buf []byte) ([]any, []byte) {
				return append(vals, v[0], utf16Value(v[1]), utf16Value(v[2]), utf16Value(v[3]), unscaled(v[4]), timeValue(v[5]), timeValue(v[6]), utf16Value(v[7])), buf
			}},
		{name: "8 columns, datetime2 as bigint microseconds", label: "micros",
			cols: []tdsserver.Column{today[0], today[1], today[2], today[3], today[4], bi("created"), bi("shipped"), today[7]},
			row: func(vals, v []any, buf []byte) ([]any, []byte) {
				return append(vals, v[0], utf16Value(v[1]), utf16Value(v[2]), utf16Value(v[3]), unscaled(v[4]), microsValue(v[5]), microsValue(v[6]), utf16Value(v[7])), buf
			}},
		{name: "2 columns: the key, the other 7 values packed in one varbinary", label: "packed-key",
			cols: []tdsserver.Column{bi("id"), vb("rest", 8000)},
			row: func(vals, v []any, buf []byte) ([]any, []byte) {
				buf = packValues(buf[:0], utf16Value(v[1]), utf16Value(v[2]), utf16Value(v[3]), unscaled(v[4]), microsValue(v[5]), microsValue(v[6]), utf16Value(v[7]))
				return append(vals, v[0], buf), buf
			}},
		{name: "1 column: all 8 values packed in one varbinary", label: "packed-row",
			cols: []tdsserver.Column{vb("row", 8000)},
			row: func(vals, v []any, buf []byte) ([]any, []byte) {
				buf = packValues(buf[:0], v[0], utf16Value(v[1]), utf16Value(v[2]), utf16Value(v[3]), unscaled(v[4]), microsValue(v[5]), microsValue(v[6]), utf16Value(v[7]))
				return append(vals, buf), buf
			}},
		{name: "1 column: the key alone (go-mssqldb's cost per row)", label: "key",
			cols: []tdsserver.Column{bi("id")},
			row: func(vals, v []any, buf []byte) ([]any, []byte) {
				return append(vals, v[0]), buf
			}},
	}
}

// utf16Value is a generator string as SQL Server casts it to varbinary
// (UTF-16LE), nil for NULL.
func utf16Value(v any) any {
	if s, ok := v.(string); ok {
		return utf16LE(s)
	}
	return nil
}

// unscaled is a generator decimal(18,4) as its unscaled bigint (F91).
func unscaled(v any) any { return int64(v.(decimal128.Num).LowBits()) }

// timeValue is a generator timestamp as go-mssqldb's datetime2 value.
func timeValue(v any) any {
	if t, ok := v.(arrow.Timestamp); ok {
		return t.ToTime(arrow.Microsecond)
	}
	return nil
}

// microsValue is a generator timestamp as a bigint of microseconds.
func microsValue(v any) any {
	if t, ok := v.(arrow.Timestamp); ok {
		return int64(t)
	}
	return nil
}

// packValues appends vals to b, each as a 4-byte big-endian length
// (0xFFFFFFFF for NULL) and its bytes; an int64 is 8 big-endian bytes.
func packValues(b []byte, vals ...any) []byte {
	for _, v := range vals {
		switch x := v.(type) {
		case nil:
			b = binary.BigEndian.AppendUint32(b, 0xFFFFFFFF)
		case []byte:
			b = binary.BigEndian.AppendUint32(b, uint32(len(x)))
			b = append(b, x...)
		case int64:
			b = binary.BigEndian.AppendUint32(b, 8)
			b = binary.BigEndian.AppendUint64(b, uint64(x))
		}
	}
	return b
}

// serveShape answers a statement of the shapes benchmark with the whole
// table in that shape.
func (s genServer) serveShape(ctx context.Context, label string, w *tdsserver.ResponseWriter) error {
	var sh *wireShape
	for _, x := range wireShapes() {
		if x.label == label {
			sh = &x
		}
	}
	if sh == nil {
		return fmt.Errorf("bench: no shape %q", label)
	}
	if err := w.Columns(sh.cols); err != nil {
		return err
	}
	var vals []any
	var buf []byte
	for i := range s.g.rows {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		vals, buf = sh.row(vals[:0], s.g.Values(i), buf)
		if err := w.Row(vals...); err != nil {
			return err
		}
	}
	return nil
}

// keptValue is an sql.Scanner that keeps the driver's value, as
// source/sqlserver's reader scans (its driverValue).
type keptValue struct{ v any }

// Scan implements sql.Scanner.
func (k *keptValue) Scan(src any) error {
	k.v = src
	return nil
}

// shapePeer reads the table in shape sh, keeping each driver value.
func shapePeer(db *sql.DB, sh wireShape) wirePeer {
	p := wirePeer{name: sh.name, passes: wirePeerPasses, allocs: true}
	p.read = func(ctx context.Context, passes int) ([]measure, error) {
		return scanPasses(ctx, db, shapePrefix+sh.label+" */ * FROM [dbo].[orders]", passes, func(n int) []any {
			kept := make([]keptValue, n)
			ptrs := make([]any, n)
			for i := range kept {
				ptrs[i] = &kept[i]
			}
			return ptrs
		})
	}
	return p
}

// runWireShapes runs the shapes benchmark for each -rows size.
func runWireShapes(ctx context.Context, cfg config, w io.Writer) error {
	fmt.Fprintf(w, "machine: %s\n", machine())
	for _, n := range cfg.rows {
		if err := wireShapesTable(ctx, cfg, n, w); err != nil {
			return err
		}
	}
	return nil
}

func wireShapesTable(ctx context.Context, cfg config, n int64, w io.Writer) error {
	srv, err := startWireServer(n, 0)
	if err != nil {
		return err
	}
	defer srv.close()
	return shapesTable(ctx, srv.dsn, n, max(cfg.reps, 3), w)
}

// shapesTable reads the n rows served at dsn in every shape, rounds
// times, and prints the table.
func shapesTable(ctx context.Context, dsn string, n int64, rounds int, w io.Writer) error {
	db, err := sqlserver.Open(dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	src, err := sqlserver.New(db, sqlserver.Options{})
	if err != nil {
		return err
	}
	// The read path itself first, for reference: the same server, process
	// and collector settings.
	peers := []wirePeer{cdcsnapPeer(src, wireInstance(NewGen(n, 0)), "")}
	shapes := wireShapes()
	for _, sh := range shapes {
		peers = append(peers, shapePeer(db, sh))
	}
	fmt.Fprintf(w, "\nReading %d rows of the benchmark's values in each shape from internal/tdsserver on loopback, one connection as sqlserver.Open makes it, go-mssqldb's database/sql loop keeping each driver value (no decoding); %d rounds, interleaved, %d passes per round, the last counted; median over the rounds\n\n",
		n, rounds, wirePeerPasses)
	results, err := interleave(ctx, peers, rounds, n)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "| shape | columns | client CPU µs/row | client allocs/row | rows/s |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: |")
	for i, p := range peers {
		name, cols := p.name, 8
		if i == 0 {
			name += ", decoding too"
		} else {
			cols = len(shapes[i-1].cols)
		}
		fmt.Fprintf(w, "| %s | %d | %.2f | %.2f | %.0f |\n", name, cols,
			median(mapSlice(results[i], measure.cpuPerRow)), median(mapSlice(results[i], measure.allocsPerRow)), median(mapSlice(results[i], measure.rowsPerSec)))
	}
	return nil
}

// isShapeStatement reports whether sql is a statement of the shapes
// benchmark, and which shape it asks for.
func isShapeStatement(sql string) (string, bool) {
	rest, ok := strings.CutPrefix(sql, shapePrefix)
	if !ok {
		return "", false
	}
	label, _, ok := strings.Cut(rest, " */")
	return label, ok
}
