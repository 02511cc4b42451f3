package keyrange_test

import (
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cdcsnap/cdcsnap/keyrange"
)

// The random tests print their seed; rerun one with -keyrange.seed=N or
// KEYRANGE_SEED=N, and scale them with -keyrange.cases or KEYRANGE_CASES.
var (
	seedFlag  = flag.Uint64("keyrange.seed", 0, "seed for the random keyrange tests (0: KEYRANGE_SEED or the clock)")
	casesFlag = flag.Int("keyrange.cases", 0, "cases per random keyrange test (0: KEYRANGE_CASES or 400)")
)

func testSeed(t *testing.T) uint64 {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		if s := os.Getenv("KEYRANGE_SEED"); s != "" {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				t.Fatalf("KEYRANGE_SEED=%q: %v", s, err)
			}
			seed = v
		}
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -keyrange.seed=%d or KEYRANGE_SEED=%d)", seed, seed, seed)
	return seed
}

func testCases(t *testing.T) int {
	t.Helper()
	n := *casesFlag
	if n == 0 {
		if s := os.Getenv("KEYRANGE_CASES"); s != "" {
			v, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("KEYRANGE_CASES=%q: %v", s, err)
			}
			n = v
		}
	}
	if n <= 0 {
		n = 400
	}
	if testing.Short() {
		n = max(n/10, 20)
	}
	return n
}

// ---- the column and value notation of the datadriven files and the
// examples: "a:int b:ci" declares columns; a tuple is comma-separated
// values, strings in single quotes ('' for a quote), NULL for NULL.

var kindByName = map[string]keyrange.Column{
	"int":   {Kind: keyrange.KindInt, SQLType: "int"},
	"ci":    {Kind: keyrange.KindString, SQLType: "varchar(20)", Collation: keyrange.ParseCollation("Latin1_General_CI_AS")},
	"cs":    {Kind: keyrange.KindString, SQLType: "varchar(20)", Collation: keyrange.ParseCollation("Latin1_General_CS_AS")},
	"bin":   {Kind: keyrange.KindString, SQLType: "varchar(20)", Collation: keyrange.ParseCollation("Latin1_General_BIN2")},
	"bytes": {Kind: keyrange.KindBytes, SQLType: "varbinary(16)"},
	"dec":   {Kind: keyrange.KindDecimal, SQLType: "decimal(18,4)"},
	"float": {Kind: keyrange.KindFloat, SQLType: "float"},
	"uuid":  {Kind: keyrange.KindUUID, SQLType: "uniqueidentifier"},
	"date":  {Kind: keyrange.KindDate, SQLType: "date"},
	"bool":  {Kind: keyrange.KindBool, SQLType: "bit"},
}

func parseCols(spec string) ([]keyrange.Column, error) {
	var cols []keyrange.Column
	for _, f := range strings.Fields(spec) {
		name, kind, ok := strings.Cut(f, ":")
		c, known := kindByName[kind]
		if !ok || !known {
			return nil, fmt.Errorf("column %q: want name:kind, kind one of int ci cs bin bytes dec float uuid date bool", f)
		}
		c.Name = name
		cols = append(cols, c)
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("no columns in %q", spec)
	}
	return cols, nil
}

// splitValues splits on commas outside single quotes.
func splitValues(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inQuote := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			inQuote = !inQuote
			cur.WriteByte(c)
		case c == ',' && !inQuote:
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	if inQuote {
		return nil, fmt.Errorf("unterminated quote in %q", s)
	}
	return append(out, strings.TrimSpace(cur.String())), nil
}

func parseTuple(cols []keyrange.Column, s string) (keyrange.Tuple, error) {
	parts, err := splitValues(s)
	if err != nil {
		return nil, err
	}
	if len(parts) != len(cols) {
		return nil, fmt.Errorf("%q has %d values for %d columns", s, len(parts), len(cols))
	}
	t := make(keyrange.Tuple, len(cols))
	for i, p := range parts {
		if t[i], err = parseValue(cols[i], p); err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
	}
	return t, nil
}

func parseValue(c keyrange.Column, s string) (any, error) {
	if s == "NULL" {
		return nil, nil
	}
	switch c.Kind {
	case keyrange.KindInt:
		return strconv.ParseInt(s, 10, 64)
	case keyrange.KindString:
		if len(s) < 2 || s[0] != '\'' || s[len(s)-1] != '\'' {
			return nil, fmt.Errorf("string %s needs single quotes", s)
		}
		return strings.ReplaceAll(s[1:len(s)-1], "''", "'"), nil
	case keyrange.KindBytes:
		if !strings.HasPrefix(s, "0x") {
			return nil, fmt.Errorf("bytes %s need 0x", s)
		}
		b, err := hex.DecodeString(s[2:])
		if b == nil {
			b = []byte{}
		}
		return b, err
	case keyrange.KindDecimal:
		return keyrange.Decimal(s), nil
	case keyrange.KindFloat:
		return strconv.ParseFloat(s, 64)
	case keyrange.KindUUID:
		return keyrange.ParseUUID(strings.Trim(s, "'"))
	case keyrange.KindDate:
		return time.Parse(time.DateOnly, strings.Trim(s, "'"))
	case keyrange.KindBool:
		return strconv.ParseBool(s)
	}
	return nil, fmt.Errorf("kind %s", c.Kind)
}

func fmtValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		return "'" + strings.ReplaceAll(x, "'", "''") + "'"
	case []byte:
		return fmt.Sprintf("0x%X", x)
	case keyrange.UUID:
		return "'" + x.String() + "'"
	case time.Time:
		return "'" + x.Format(time.DateOnly) + "'"
	case keyrange.Decimal:
		return string(x)
	default:
		return fmt.Sprint(x)
	}
}

func fmtTuple(t keyrange.Tuple) string {
	if t == nil {
		return "open"
	}
	s := make([]string, len(t))
	for i, v := range t {
		s[i] = fmtValue(v)
	}
	return "(" + strings.Join(s, ", ") + ")"
}

func fmtRange(r keyrange.Range) string {
	lo, hi := "-inf", "+inf"
	if r.Lower != nil {
		lo = fmtTuple(r.Lower)
	}
	if r.Upper != nil {
		hi = fmtTuple(r.Upper)
	}
	return fmt.Sprintf("%d: [%s, %s)", r.Index, lo, hi)
}

// fmtPiece renders a piece as a WHERE clause would read (a SQL-ish form,
// not any source's real text).
func fmtPiece(cols []keyrange.Column, p keyrange.Piece) string {
	var conds []string
	for i, v := range p.Eq {
		if v == nil {
			conds = append(conds, cols[i].Name+" IS NULL")
		} else {
			conds = append(conds, cols[i].Name+" = "+fmtValue(v))
		}
	}
	j := p.RangeColumn()
	bound := func(c *keyrange.Cond, gt, ge string) {
		if c == nil {
			return
		}
		switch {
		case c.Value == nil && c.Inclusive && gt == ">":
			conds = append(conds, cols[j].Name+" >= NULL (all)")
		case c.Value == nil && gt == ">":
			conds = append(conds, cols[j].Name+" IS NOT NULL")
		case c.Inclusive:
			conds = append(conds, cols[j].Name+" "+ge+" "+fmtValue(c.Value))
		default:
			conds = append(conds, cols[j].Name+" "+gt+" "+fmtValue(c.Value))
		}
	}
	bound(p.Lower, ">", ">=")
	bound(p.Upper, "<", "<=")
	if len(conds) == 0 {
		conds = append(conds, "(all rows)")
	}
	s := strings.Join(conds, " AND ")
	if g := p.Guard; g != nil {
		var gs []string
		if g.Below != nil {
			names := make([]string, len(g.Below))
			for i := range g.Below {
				names[i] = cols[g.From+i].Name
			}
			gs = append(gs, "("+strings.Join(names, ", ")+") < "+fmtTuple(g.Below))
		}
		if g.Above != nil {
			if g.Above.Value == nil {
				gs = append(gs, cols[g.From].Name+" IS NOT NULL")
			} else {
				gs = append(gs, cols[g.From].Name+" > "+fmtValue(g.Above.Value))
			}
		}
		s += "  guard: " + strings.Join(gs, " AND ")
	}
	return s
}

// ---- a Seeker over a sorted slice: the brute-force model of the source's
// TOP (k + 1) seeks, counting the keys each seek reads.

type sliceSeeker struct {
	cols     []keyrange.Column
	keys     []keyrange.Tuple // sorted by CompareTuples, unique
	seeks    int
	examined int64
}

func newSliceSeeker(t testing.TB, cols []keyrange.Column, keys []keyrange.Tuple) *sliceSeeker {
	t.Helper()
	keys = slices.Clone(keys)
	var sortErr error
	slices.SortFunc(keys, func(a, b keyrange.Tuple) int {
		c, err := keyrange.CompareTuples(cols, a, b)
		if err != nil && sortErr == nil {
			sortErr = err
		}
		return c
	})
	if sortErr != nil {
		t.Fatal(sortErr)
	}
	return &sliceSeeker{cols: cols, keys: keys}
}

// SeekKey finds from's place as an index seek would (reading nothing), then
// reads k+1 keys, or what remains.
func (s *sliceSeeker) SeekKey(_ context.Context, from keyrange.Tuple, k int64) (keyrange.Tuple, bool, error) {
	s.seeks++
	i := 0
	if from != nil {
		var err error
		i, _ = slices.BinarySearchFunc(s.keys, from, func(e, target keyrange.Tuple) int {
			c, e2 := keyrange.CompareTuples(s.cols, e, target)
			if e2 != nil {
				err = e2
			}
			return c
		})
		if err != nil {
			return nil, false, err
		}
	}
	left := int64(len(s.keys) - i)
	if k < 0 {
		return nil, false, fmt.Errorf("negative k %d", k)
	}
	if k >= left {
		s.examined += left
		return nil, false, nil
	}
	s.examined += k + 1
	return s.keys[i+int(k)], true, nil
}

// ntileOf returns NTILE(n)'s tile (from 0) of each of rows sorted rows, by
// its definition: q = rows / n, the first rows % n tiles hold q + 1.
func ntileOf(rows, n int) []int {
	out := make([]int, rows)
	q, rem := rows/n, rows%n
	r := 0
	for tile := 0; tile < n && r < rows; tile++ {
		size := q
		if tile < rem {
			size++
		}
		for j := 0; j < size; j++ {
			out[r] = tile
			r++
		}
	}
	return out
}

// rangeOf returns the index of the one range holding key, failing the test
// when none or several do.
func rangeOf(t *testing.T, cols []keyrange.Column, ranges []keyrange.Range, key keyrange.Tuple) int {
	t.Helper()
	found := -1
	for i, r := range ranges {
		ok, err := r.Contains(cols, key)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			if found >= 0 {
				t.Fatalf("key %s is in ranges %d and %d", fmtTuple(key), found, i)
			}
			found = i
		}
	}
	if found < 0 {
		t.Fatalf("key %s is in no range of %v", fmtTuple(key), ranges)
	}
	return found
}

// ---- random keys.

type gen struct {
	r *rand.Rand
}

var genKinds = []string{"int", "ci", "cs", "bytes", "dec", "uuid"}

func (g gen) cols() []keyrange.Column {
	n := 1 + g.r.IntN(3)
	cols := make([]keyrange.Column, n)
	for i := range cols {
		c := kindByName[genKinds[g.r.IntN(len(genKinds))]]
		c.Name = string(rune('a' + i))
		cols[i] = c
	}
	return cols
}

var (
	genStrings  = []string{"", "a", "A", "b", "B", "n", "N", "ab", "aB", "Ab", "b\t", "a\x01", "z", "é", "É"}
	genDecimals = []string{"0", "-0", "0.0", "1", "1.0", "1.00", "-1", "-1.5", "0.5", ".5", "2.", "10", "9.99", "-10.000"}
	genBytes    = [][]byte{{}, {0}, {0, 0}, {1}, {0, 1}, {0xff}, {0x7f, 0xff}, {0x80}}
	genInts     = []int64{-9223372036854775808, -2, -1, 0, 1, 2, 3, 5, 8, 9223372036854775807}
)

func (g gen) uuid() keyrange.UUID {
	var u keyrange.UUID
	// Few bytes set, in different groups, so that the SQL Server order
	// differs from the RFC byte order.
	for range 1 + g.r.IntN(2) {
		u[g.r.IntN(16)] = byte(g.r.IntN(3))
	}
	return u
}

// value returns a random value of c; pool limits how many distinct values
// the leading column may take (one/few/many).
func (g gen) value(c keyrange.Column, pool int) any {
	if g.r.IntN(12) == 0 {
		return nil
	}
	pick := func(n int) int { return g.r.IntN(min(n, pool)) }
	switch c.Kind {
	case keyrange.KindInt:
		if pool > len(genInts) {
			return int64(g.r.IntN(pool)) - int64(pool/2)
		}
		return genInts[pick(len(genInts))]
	case keyrange.KindString:
		s := genStrings[pick(len(genStrings))]
		if g.r.IntN(4) == 0 {
			s += strings.Repeat(" ", 1+g.r.IntN(2))
		}
		return s
	case keyrange.KindBytes:
		return slices.Clone(genBytes[pick(len(genBytes))])
	case keyrange.KindDecimal:
		return keyrange.Decimal(genDecimals[pick(len(genDecimals))])
	case keyrange.KindUUID:
		if pool < 4 {
			return keyrange.UUID{15: byte(pick(4))}
		}
		return g.uuid()
	}
	panic("kind " + c.Kind.String())
}

func (g gen) tuple(cols []keyrange.Column, pool int) keyrange.Tuple {
	t := make(keyrange.Tuple, len(cols))
	for i, c := range cols {
		p := 1000
		if i == 0 {
			p = pool
		}
		t[i] = g.value(c, p)
	}
	return t
}

// twin returns a value that differs from v in Go but compares equal under
// c (case flipped, trailing spaces, decimal zeros), or v itself when c has
// none.
func (g gen) twin(c keyrange.Column, v any) any {
	switch x := v.(type) {
	case string:
		if c.Collation.CaseInsensitive && g.r.IntN(2) == 0 {
			if f := flipCase(x); f != x {
				return f
			}
		}
		if strings.HasSuffix(x, " ") && g.r.IntN(2) == 0 {
			return strings.TrimRight(x, " ")
		}
		return x + " "
	case keyrange.Decimal:
		if strings.Contains(string(x), ".") {
			return x + "0"
		}
		return x + ".0"
	case []byte:
		return slices.Clone(x)
	}
	return v
}

func flipCase(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case strings.ToUpper(string(r)) != string(r):
			b.WriteString(strings.ToUpper(string(r)))
		default:
			b.WriteString(strings.ToLower(string(r)))
		}
	}
	return b.String()
}

func (g gen) twinTuple(cols []keyrange.Column, t keyrange.Tuple) keyrange.Tuple {
	out := slices.Clone(t)
	for i := range out {
		if g.r.IntN(2) == 0 {
			out[i] = g.twin(cols[i], out[i])
		}
	}
	return out
}

// keys returns distinct keys (under CompareTuples), with the leading column
// drawn from one, a few or many values.
func (g gen) keys(t testing.TB, cols []keyrange.Column, pool, n int) []keyrange.Tuple {
	var out []keyrange.Tuple
	seen := map[string]bool{}
	for range n {
		k := g.tuple(cols, pool)
		ck, err := tupleKey(cols, k)
		if err != nil {
			t.Fatal(err)
		}
		if !seen[ck] {
			seen[ck] = true
			out = append(out, k)
		}
	}
	return out
}

func tupleKey(cols []keyrange.Column, k keyrange.Tuple) (string, error) {
	var b strings.Builder
	for i, c := range cols {
		s, err := keyrange.CollationKey(c, k[i])
		if err != nil {
			return "", err
		}
		b.WriteString(strconv.Quote(s))
		b.WriteByte('|')
	}
	return b.String(), nil
}

// bound returns a random bound: an existing key, a twin of one, a random
// tuple, or open.
func (g gen) bound(cols []keyrange.Column, keys []keyrange.Tuple, pool int) keyrange.Tuple {
	switch x := g.r.IntN(10); {
	case x == 0:
		return nil
	case x < 5 && len(keys) > 0:
		return slices.Clone(keys[g.r.IntN(len(keys))])
	case x < 7 && len(keys) > 0:
		return g.twinTuple(cols, keys[g.r.IntN(len(keys))])
	default:
		return g.tuple(cols, pool)
	}
}
