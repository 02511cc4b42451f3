package keyrange_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/cdcsnap/cdcsnap/keyrange"
)

// TestDataDriven runs the scripts under testdata/ (pieces, uniform,
// ntile); go test -run TestDataDriven -rewrite rewrites their expectations.
//
//	pieces
//	cols a:ci b:int
//	lower 'n', 2
//	upper 'N', 5
//	----
//	<one line per piece>
//
// lower/upper lines may be left out (open). "keys" lines list table keys
// whose piece is shown after the pieces.
//
//	uniform min=1 max=100 n=4
//
//	ntile rows=10 n=3 [tiles]
//	cols a:int
//	1
//	2
//	...
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if strings.Contains(path, "/fuzz") {
			return
		}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			out, err := runScript(t, d)
			if err != nil {
				return "error: " + err.Error() + "\n"
			}
			return out
		})
	})
}

func runScript(t *testing.T, d *datadriven.TestData) (string, error) {
	var b strings.Builder
	switch d.Cmd {
	case "pieces":
		var cols []keyrange.Column
		var r keyrange.Range
		var keys []keyrange.Tuple
		for _, line := range strings.Split(d.Input, "\n") {
			word, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
			var err error
			switch word {
			case "":
			case "cols":
				cols, err = parseCols(rest)
			case "lower":
				r.Lower, err = parseTuple(cols, rest)
			case "upper":
				r.Upper, err = parseTuple(cols, rest)
			case "key":
				var k keyrange.Tuple
				k, err = parseTuple(cols, rest)
				keys = append(keys, k)
			default:
				err = fmt.Errorf("unknown line %q", line)
			}
			if err != nil {
				d.Fatalf(t, "%v", err)
			}
		}
		ps, err := keyrange.Pieces(cols, r)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s\n", fmtRange(r))
		for i, p := range ps {
			fmt.Fprintf(&b, "%d: %s\n", i, fmtPiece(cols, p))
		}
		if len(ps) == 0 {
			b.WriteString("(no pieces: the range is empty)\n")
		}
		for _, k := range keys {
			in, err := r.Contains(cols, k)
			if err != nil {
				return "", err
			}
			var where []string
			for i, p := range ps {
				if ok, _ := p.Contains(cols, k); ok {
					where = append(where, fmt.Sprint(i))
				} else if ok, _ := p.InSeek(cols, k); ok {
					where = append(where, fmt.Sprintf("%d (seek only)", i))
				}
			}
			fmt.Fprintf(&b, "key %s: in range %v, pieces [%s]\n", fmtTuple(k), in, strings.Join(where, " "))
		}
		return b.String(), nil

	case "uniform":
		var lo, hi int64
		var n int
		d.ScanArgs(t, "min", &lo)
		d.ScanArgs(t, "max", &hi)
		d.ScanArgs(t, "n", &n)
		for _, r := range checkUniform(t, lo, hi, n) {
			fmt.Fprintln(&b, fmtRange(r))
		}
		return b.String(), nil

	case "ntile":
		var rows int64
		var n int
		d.ScanArgs(t, "rows", &rows)
		d.ScanArgs(t, "n", &n)
		lines := strings.Split(strings.TrimSpace(d.Input), "\n")
		if len(lines) == 0 || !strings.HasPrefix(lines[0], "cols ") {
			d.Fatalf(t, "want a cols line first")
		}
		cols, err := parseCols(strings.TrimPrefix(lines[0], "cols "))
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		var keys []keyrange.Tuple
		for _, l := range lines[1:] {
			k, err := parseTuple(cols, strings.TrimSpace(l))
			if err != nil {
				d.Fatalf(t, "%v", err)
			}
			keys = append(keys, k)
		}
		s := newSliceSeeker(t, cols, keys)
		var rs []keyrange.Range
		if d.HasArg("tiles") {
			rs, err = keyrange.Tiles(context.Background(), s, rows, n)
			if err == nil {
				checkTiles(t, cols, keys, n)
			}
		} else {
			rs, err = keyrange.NTile(context.Background(), s, rows, n)
			if err == nil {
				checkNTile(t, cols, keys, rows, n)
			}
		}
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%d seeks read %d keys\n", s.seeks, s.examined)
		for _, r := range rs {
			var in []string
			for _, k := range s.keys {
				if ok, _ := r.Contains(cols, k); ok {
					in = append(in, fmtTuple(k))
				}
			}
			fmt.Fprintf(&b, "%s: %d rows\n", fmtRange(r), len(in))
			if len(in) > 0 {
				fmt.Fprintf(&b, "  %s\n", strings.Join(in, " "))
			}
		}
		return b.String(), nil
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return "", nil
}
