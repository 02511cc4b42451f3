package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// The shapes benchmark compares like with like only if every shape
// carries the generator's values through go-mssqldb: each row read back
// (and unpacked) is the generator's row, NULLs in the same places.
func TestWireShapesCarryTheGeneratorsValues(t *testing.T) {
	ctx := context.Background()
	const rows = 2000
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
	for _, sh := range wireShapes() {
		t.Run(sh.label, func(t *testing.T) {
			got := readShape(t, db, sh)
			if len(got) != rows {
				t.Fatalf("read %d rows, want %d", len(got), rows)
			}
			for i, row := range got {
				v := g.Values(int64(i))
				want := []any{v[0], utf16Value(v[1]), utf16Value(v[2]), utf16Value(v[3]), unscaled(v[4]), microsValue(v[5]), microsValue(v[6]), utf16Value(v[7])}
				switch sh.label {
				case "key":
					want = want[:1]
				case "packed-key":
					want = append(want[:1], packedForm(want[1:])...)
				case "packed-row":
					want = packedForm(want)
				}
				if !reflect.DeepEqual(row, want) {
					t.Fatalf("row %d:\n got %#v\nwant %#v", i, row, want)
				}
			}
		})
	}
}

// The shapes table reads every shape and the read path in each round and
// prints a row for each.
func TestShapesTablePrintsEveryShape(t *testing.T) {
	ctx := context.Background()
	const rows = 500
	srv, err := startGenServer(ctx, NewGen(rows, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var out strings.Builder
	if err := shapesTable(ctx, srv.DSN("bench"), rows, 1, &out); err != nil {
		t.Fatal(err)
	}
	names := []string{"cdcsnap read path"}
	for _, sh := range wireShapes() {
		names = append(names, sh.name)
	}
	for _, name := range names {
		if !strings.Contains(out.String(), "| "+name) {
			t.Errorf("no row for %q in\n%s", name, out.String())
		}
	}
}

// packedForm is vals as unpackValues returns them: an int64 as its 8
// big-endian bytes.
func packedForm(vals []any) []any {
	out := make([]any, len(vals))
	for i, v := range vals {
		out[i] = v
		if x, ok := v.(int64); ok {
			out[i] = binary.BigEndian.AppendUint64(nil, uint64(x))
		}
	}
	return out
}

// readShape reads the table in shape sh and returns each row's values:
// datetime2 as microseconds since 1970, a packed column unpacked in place.
func readShape(t *testing.T, db *sql.DB, sh wireShape) [][]any {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), shapePrefix+sh.label+" */ * FROM [dbo].[orders]")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	kept := make([]keptValue, len(sh.cols))
	ptrs := make([]any, len(kept))
	for i := range kept {
		ptrs[i] = &kept[i]
	}
	var out [][]any
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var row []any
		for i, k := range kept {
			switch x := k.v.(type) {
			case time.Time:
				row = append(row, x.Sub(time.Unix(0, 0)).Microseconds())
			case []byte:
				if name := sh.cols[i].Name; name == "rest" || name == "row" {
					vals, err := unpackValues(x)
					if err != nil {
						t.Fatalf("row %d: %v", len(out), err)
					}
					row = append(row, vals...)
				} else {
					row = append(row, bytes.Clone(x))
				}
			default:
				row = append(row, x)
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// unpackValues splits bytes packed by packValues into their values,
// each a []byte or nil.
func unpackValues(b []byte) ([]any, error) {
	var vals []any
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("%d bytes left, want a 4-byte length", len(b))
		}
		n := binary.BigEndian.Uint32(b)
		b = b[4:]
		if n == 0xFFFFFFFF {
			vals = append(vals, nil)
			continue
		}
		if int(n) > len(b) {
			return nil, fmt.Errorf("length %d, %d bytes left", n, len(b))
		}
		vals = append(vals, bytes.Clone(b[:n]))
		b = b[n:]
	}
	return vals, nil
}
