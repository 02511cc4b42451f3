package tdsfake

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cdcsnap/cdcsnap/internal/mssqlstmt"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/source"
)

// The statements source/sqlserver sends (built by internal/mssqlstmt,
// pinned by its golden files) are a small dialect of T-SQL; this file reads
// them back. It parses only that dialect: anything else is an error naming
// what it met, which the server answers as SQL Server answers a statement
// it cannot compile.

// splitTop splits s at sep where sep is outside parentheses, brackets and
// N” literals.
func splitTop(s, sep string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			j := closeBracket(s, i)
			if j < 0 {
				return append(out, s[start:])
			}
			i = j
			continue
		case '\'':
			for i++; i < len(s); i++ {
				if s[i] == '\'' {
					if i+1 < len(s) && s[i+1] == '\'' {
						i++
						continue
					}
					break
				}
			}
			continue
		case '(':
			depth++
		case ')':
			depth--
		}
		if depth == 0 && strings.HasPrefix(s[i:], sep) {
			out = append(out, s[start:i])
			i += len(sep) - 1
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// closeBracket returns the index of the ']' closing the name opened at i
// ("]]" is an escaped bracket), or -1.
func closeBracket(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		if s[j] == ']' {
			if j+1 < len(s) && s[j+1] == ']' {
				j++
				continue
			}
			return j
		}
	}
	return -1
}

// unquote reads one bracket-quoted name at the start of s and returns it
// and the rest of s.
func unquote(s string) (name, rest string, err error) {
	if !strings.HasPrefix(s, "[") {
		return "", s, fmt.Errorf("want a [quoted] name at %q", clip(s))
	}
	j := closeBracket(s, 0)
	if j < 0 {
		return "", s, fmt.Errorf("unterminated name at %q", clip(s))
	}
	return strings.ReplaceAll(s[1:j], "]]", "]"), s[j+1:], nil
}

// twoPart reads "[schema].[name]" and the rest.
func twoPart(s string) (schema, name, rest string, err error) {
	if schema, s, err = unquote(s); err != nil {
		return "", "", "", err
	}
	if !strings.HasPrefix(s, ".") {
		return "", "", "", fmt.Errorf("want .[name] at %q", clip(s))
	}
	name, rest, err = unquote(s[1:])
	return schema, name, rest, err
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// selected is one item of a select list: a captured column, read as it is
// or converted to another type (CAST([col] AS nvarchar(n)) AS [col]).
type selected struct {
	Name string
	Cast string // the type it is cast to; "" when read as it is
	// Times is the parameter a decimal is multiplied by before its cast
	// to bigint (CAST([col] * @pN AS bigint) AS [col]); "" for none.
	Times string
	Null  bool // CAST(NULL AS type): a column the table no longer has (FACTS.md F60)
	// Inner is the type of a cast inside the cast, CAST(CAST([col] AS
	// <Inner>) AS <Cast>); "" for none.
	Inner string
}

// parseSelectList reads a select list of [col], [q].[col] and CAST(... AS
// type) AS [col] items.
func parseSelectList(s string) ([]selected, error) {
	var out []selected
	for _, item := range splitTop(s, ", ") {
		item = strings.TrimSpace(item)
		if strings.HasPrefix(item, "CAST(") {
			inner := strings.TrimPrefix(item, "CAST(")
			close := strings.LastIndex(inner, ") AS [")
			if close < 0 {
				return nil, fmt.Errorf("select item %q: want CAST(<column> AS <type>) AS [name]", clip(item))
			}
			expr, alias := inner[:close], inner[close+len(") AS "):]
			name, rest, err := unquote(alias)
			if err != nil || rest != "" {
				return nil, fmt.Errorf("select item %q: bad alias", clip(item))
			}
			as := strings.LastIndex(expr, " AS ")
			if as < 0 {
				return nil, fmt.Errorf("select item %q: no AS in the CAST", clip(item))
			}
			sel := selected{Name: name, Cast: expr[as+4:], Null: expr[:as] == "NULL"}
			if in, ok := strings.CutPrefix(expr[:as], "CAST("); ok {
				if k := strings.LastIndex(in, " AS "); k >= 0 && strings.HasSuffix(in, ")") {
					sel.Inner = in[k+4 : len(in)-1]
				}
			}
			if _, times, ok := strings.Cut(expr[:as], " * "); ok {
				sel.Times = times
			}
			out = append(out, sel)
			continue
		}
		name, err := lastName(item)
		if err != nil {
			return nil, fmt.Errorf("select item %q: %w", clip(item), err)
		}
		out = append(out, selected{Name: name})
	}
	return out, nil
}

// lastName reads "[a]" or "[q].[a]" and returns a.
func lastName(s string) (string, error) {
	name, rest, err := unquote(s)
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(rest, ".") {
		name, rest, err = unquote(rest[1:])
		if err != nil {
			return "", err
		}
	}
	if rest != "" {
		return "", fmt.Errorf("unexpected %q after the name", clip(rest))
	}
	return name, nil
}

// args are a request's parameter values by number: args[1] is @p1.
type args map[int]any

func (a args) get(ref string) (any, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(ref, "@p"))
	if err != nil || !strings.HasPrefix(ref, "@p") {
		return nil, fmt.Errorf("want a parameter @pN, have %q", ref)
	}
	v, ok := a[n]
	if !ok {
		return nil, fmt.Errorf("parameter %s was not sent", ref)
	}
	return v, nil
}

// str is parameter ref as text ("" when it was sent as another type).
func (a args) str(ref string) (string, error) {
	v, err := a.get(ref)
	s, _ := v.(string)
	return s, err
}

// keyValue converts a parameter's value as it came over the wire into the
// Go value keyrange holds for column c: bounds are sent as
// source/sqlserver's boundExpr binds them (FACTS.md F47): decimals and
// uniqueidentifiers as text, times as civil types (UTC wall clocks) or
// datetimeoffset.
func keyValue(c source.Column, v any) (any, error) {
	kc := c.KeyColumn()
	bad := func() (any, error) {
		return nil, fmt.Errorf("parameter for key column %q (%s): %T %v", c.Name, c.Declared(), v, v)
	}
	switch kc.Kind {
	case keyrange.KindInt:
		if x, ok := v.(int64); ok {
			return x, nil
		}
	case keyrange.KindBool:
		if x, ok := v.(bool); ok {
			return x, nil
		}
	case keyrange.KindFloat:
		if x, ok := v.(float64); ok {
			return x, nil
		}
	case keyrange.KindDecimal:
		switch x := v.(type) {
		case string:
			return keyrange.Decimal(x), nil
		case int64:
			// A numeric(p,0) identity read as its change table's bigint
			// (FACTS.md F64) has bigint bounds.
			return keyrange.Decimal(strconv.FormatInt(x, 10)), nil
		}
	case keyrange.KindString:
		if x, ok := v.(string); ok {
			return x, nil
		}
	case keyrange.KindBytes:
		if x, ok := v.([]byte); ok {
			return x, nil
		}
	case keyrange.KindUUID:
		if x, ok := v.(string); ok {
			return keyrange.ParseUUID(x)
		}
	case keyrange.KindDate:
		if x, ok := v.(time.Time); ok {
			return time.Date(x.Year(), x.Month(), x.Day(), 0, 0, 0, 0, time.UTC), nil
		}
	case keyrange.KindTime:
		if x, ok := v.(time.Time); ok {
			return time.Date(1, 1, 1, x.Hour(), x.Minute(), x.Second(), x.Nanosecond(), time.UTC), nil
		}
	case keyrange.KindDateTime:
		if x, ok := v.(time.Time); ok {
			return time.Date(x.Year(), x.Month(), x.Day(), x.Hour(), x.Minute(), x.Second(), x.Nanosecond(), time.UTC), nil
		}
	case keyrange.KindDateTimeOffset:
		if x, ok := v.(time.Time); ok {
			return x, nil
		}
	}
	return bad()
}

// pred is one predicate of a piece's WHERE.
type pred struct {
	col  int    // key column index
	op   string // "=", "IS NULL", "IS NOT NULL", ">=", ">", "<", "<|NULL" ((k IS NULL OR k < v)), "false" (1 = 0), "or" (a guard's disjunction)
	val  any
	disj [][]pred // op "or": each disjunct's predicates
}

// table is the key of the table a statement reads.
type table struct {
	key   []source.Column
	index map[string]int // quoted key column name -> index
}

func newTable(ci *source.CaptureInstance) (*table, error) {
	t := &table{index: map[string]int{}}
	for i, k := range ci.Key {
		c, ok := ci.Column(k)
		if !ok {
			return nil, fmt.Errorf("key column %q is not captured", k)
		}
		t.key = append(t.key, c)
		q, err := mssqlstmt.QuoteName(k)
		if err != nil {
			return nil, err
		}
		t.index[q] = i
	}
	return t, nil
}

// parsePred reads one predicate of the dialect where() writes.
func (t *table) parsePred(s string, a args) (pred, error) {
	s = strings.TrimSpace(s)
	if s == "1 = 0" {
		return pred{op: "false"}, nil
	}
	if strings.HasPrefix(s, "((") {
		inner := strings.TrimSuffix(strings.TrimPrefix(s, "("), ")")
		var p pred
		p.op = "or"
		for _, d := range splitTop(inner, " OR ") {
			d = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(d), "("), ")")
			var conj []pred
			for _, c := range splitTop(d, " AND ") {
				q, err := t.parsePred(c, a)
				if err != nil {
					return pred{}, err
				}
				conj = append(conj, q)
			}
			p.disj = append(p.disj, conj)
		}
		return p, nil
	}
	if strings.HasPrefix(s, "([") {
		// ([k] IS NULL OR [k] < X) on a nullable column.
		inner := strings.TrimSuffix(strings.TrimPrefix(s, "("), ")")
		parts := splitTop(inner, " OR ")
		if len(parts) != 2 {
			return pred{}, fmt.Errorf("predicate %q: want ([k] IS NULL OR [k] < x)", clip(s))
		}
		lt, err := t.parsePred(parts[1], a)
		if err != nil || lt.op != "<" {
			return pred{}, fmt.Errorf("predicate %q: want ([k] IS NULL OR [k] < x)", clip(s))
		}
		lt.op = "<|NULL"
		return lt, nil
	}
	q, rest, err := unquote(s)
	if err != nil {
		return pred{}, fmt.Errorf("predicate %q: %w", clip(s), err)
	}
	col, ok := t.index["["+strings.ReplaceAll(q, "]", "]]")+"]"]
	if !ok {
		return pred{}, fmt.Errorf("predicate %q: [%s] is not a key column", clip(s), q)
	}
	rest = strings.TrimSpace(rest)
	switch rest {
	case "IS NULL", "IS NOT NULL":
		return pred{col: col, op: rest}, nil
	}
	op, expr, ok := strings.Cut(rest, " ")
	if !ok {
		return pred{}, fmt.Errorf("predicate %q: want an operator and a value", clip(s))
	}
	switch op {
	case "=", ">=", ">", "<":
	default:
		return pred{}, fmt.Errorf("predicate %q: operator %q is not the dialect's", clip(s), op)
	}
	// CAST(@pN AS type) or CAST(@pN COLLATE C AS type).
	if !strings.HasPrefix(expr, "CAST(@p") || !strings.HasSuffix(expr, ")") {
		return pred{}, fmt.Errorf("predicate %q: want CAST(@pN AS <type>)", clip(s))
	}
	ref, _, _ := strings.Cut(strings.TrimPrefix(expr, "CAST("), " ")
	raw, err := a.get(ref)
	if err != nil {
		return pred{}, fmt.Errorf("predicate %q: %w", clip(s), err)
	}
	// A char/varchar bound converts in its collation's code page, losing
	// what the code page lacks (FACTS.md F29, F96).
	if _, rest, ok := strings.Cut(expr, " COLLATE "); ok && (strings.Contains(rest, " AS varchar(") || strings.Contains(rest, " AS char(")) {
		if s, ok := raw.(string); ok {
			collation, _, _ := strings.Cut(rest, " ")
			if raw, err = convertBound(collation, s); err != nil {
				return pred{}, err
			}
		}
	}
	v, err := keyValue(t.key[col], raw)
	if err != nil {
		return pred{}, err
	}
	return pred{col: col, op: op, val: v}, nil
}

// parsePiece reads the WHERE of one SELECT of a range read (empty: the
// whole table) as the keyrange.Piece where() wrote it from. ok is false
// for a piece that holds no row (1 = 0).
func (t *table) parsePiece(where string, a args) (keyrange.Piece, bool, error) {
	var p keyrange.Piece
	if where == "" {
		return p, true, nil
	}
	preds := splitTop(where, " AND ")
	i := 0
	var ps []pred
	for _, s := range preds {
		q, err := t.parsePred(s, a)
		if err != nil {
			return p, false, err
		}
		ps = append(ps, q)
	}
	// Equalities on the leading columns.
	for i < len(ps) && ps[i].col == len(p.Eq) && (ps[i].op == "=" || ps[i].op == "IS NULL") {
		p.Eq = append(p.Eq, ps[i].val)
		i++
	}
	j := len(p.Eq)
	// The range on the next column: lower, then upper.
	if i < len(ps) && ps[i].col == j && (ps[i].op == ">=" || ps[i].op == ">" || ps[i].op == "IS NOT NULL") {
		p.Lower = &keyrange.Cond{Value: ps[i].val, Inclusive: ps[i].op == ">="}
		i++
	}
	if i < len(ps) && ps[i].col == j && (ps[i].op == "<" || ps[i].op == "<|NULL") {
		p.Upper = &keyrange.Cond{Value: ps[i].val}
		i++
	}
	// The guard: below (a disjunction), and above (a column among the
	// equalities).
	for ; i < len(ps); i++ {
		q := ps[i]
		switch {
		case q.op == "false":
			return p, false, nil
		case q.op == "or":
			g, err := t.guardBelow(q)
			if err != nil {
				return p, false, err
			}
			if p.Guard == nil {
				p.Guard = g
			} else {
				p.Guard.Below = g.Below
			}
		case (q.op == ">" || q.op == "IS NOT NULL") && q.col < j:
			if p.Guard == nil {
				p.Guard = &keyrange.Guard{From: q.col}
			}
			if p.Guard.From != q.col {
				return p, false, fmt.Errorf("a guard above column %d and below from column %d", q.col, p.Guard.From)
			}
			p.Guard.Above = &keyrange.Cond{Value: q.val}
		default:
			return p, false, fmt.Errorf("predicate %d (%s on key column %d) is out of the dialect's order", i+1, q.op, q.col)
		}
	}
	return p, true, nil
}

// guardBelow rebuilds a guard key[From:] < Below from its disjunction:
// disjunct n holds equalities on Below[0..n-1] and Below[n] as an upper
// bound; a disjunct whose bound is NULL was left out (nothing is below
// NULL), and NULLs past the last one are padding.
func (t *table) guardBelow(q pred) (*keyrange.Guard, error) {
	if len(q.disj) == 0 || len(q.disj[0]) == 0 {
		return nil, fmt.Errorf("an empty guard")
	}
	from := q.disj[0][0].col
	below := make(keyrange.Tuple, len(t.key)-from)
	for _, d := range q.disj {
		for k, c := range d {
			if c.col-from != k || c.col >= len(t.key) {
				return nil, fmt.Errorf("a guard's disjunct is out of order")
			}
			switch c.op {
			case "=", "<", "<|NULL":
				below[k] = c.val
			case "IS NULL":
				below[k] = nil
			default:
				return nil, fmt.Errorf("a guard's disjunct holds %s", c.op)
			}
		}
	}
	return &keyrange.Guard{From: from, Below: below}, nil
}

// rangeRead is a parsed ReadRangeStatement.
type rangeRead struct {
	schema, name string // the table
	sel          []selected
	where        []string // each SELECT's WHERE ("" for none), without the guard
	// guardName and guardID are the parameters of the guard every SELECT
	// starts its WHERE with, OBJECT_ID(@pN) = @pM (FACTS.md F93); "" for
	// none.
	guardName, guardID string
	ordered            bool // it ends in ORDER BY the key
}

// cutGuard cuts the object guard off the front of a WHERE: its two
// parameters and the rest.
func cutGuard(where string) (name, id, rest string, ok bool) {
	g, ok := strings.CutPrefix(where, "OBJECT_ID(")
	if !ok {
		return "", "", where, false
	}
	name, g, ok = strings.Cut(g, ") = ")
	if !ok {
		return "", "", where, false
	}
	id, rest, _ = strings.Cut(g, " AND ")
	return name, id, rest, true
}

// parseRangeRead reads "SELECT <list> FROM [s].[t][ WHERE ...]" joined by
// "\nUNION ALL\n".
func parseRangeRead(sql string) (rangeRead, error) {
	var r rangeRead
	if body, order, ok := strings.Cut(sql, "\nORDER BY "); ok {
		// The key order (sqlserver.OrderedRange).
		sql, r.ordered = body, true
		if strings.Contains(order, "\n") {
			return r, fmt.Errorf("unexpected %q after ORDER BY", clip(order))
		}
	}
	for i, part := range strings.Split(sql, "\nUNION ALL\n") {
		rest, ok := strings.CutPrefix(part, "SELECT ")
		if !ok {
			return r, fmt.Errorf("part %d: want SELECT", i+1)
		}
		fields := splitTop(rest, " FROM ")
		if len(fields) != 2 {
			return r, fmt.Errorf("part %d: want one FROM", i+1)
		}
		sel, err := parseSelectList(fields[0])
		if err != nil {
			return r, err
		}
		schema, name, tail, err := twoPart(fields[1])
		if err != nil {
			return r, fmt.Errorf("part %d: %w", i+1, err)
		}
		where := ""
		if tail != "" {
			if where, ok = strings.CutPrefix(tail, " WHERE "); !ok {
				return r, fmt.Errorf("part %d: unexpected %q after the table", i+1, clip(tail))
			}
		}
		gName, gID, rest, guarded := cutGuard(where)
		if i == 0 {
			r.schema, r.name, r.sel = schema, name, sel
			r.guardName, r.guardID = gName, gID
		} else if schema != r.schema || name != r.name {
			return r, fmt.Errorf("part %d reads another table", i+1)
		} else if gName != r.guardName || gID != r.guardID {
			return r, fmt.Errorf("part %d has another guard", i+1)
		}
		if guarded {
			where = rest
		}
		r.where = append(r.where, where)
	}
	return r, nil
}

// seekRead is a parsed SeekKeyStatement.
type seekRead struct {
	schema, name string
	sel          []selected // the outer select list (key columns)
	where        []string   // each piece's WHERE
	top, offset  string     // the TOP and OFFSET parameters
}

// parseSeek reads SeekKeyStatement's text: "SELECT <outer> FROM (\n" parts
// "\n) AS [s] ORDER BY ... OFFSET @pK ROWS FETCH NEXT 1 ROWS ONLY", each
// part "SELECT [qi]... FROM (SELECT TOP (@pT) <keys> FROM [s].[t][ WHERE
// ...] ORDER BY <keys>) AS [qi]".
func parseSeek(sql string) (seekRead, error) {
	var r seekRead
	head, body, ok := strings.Cut(sql, " FROM (\n")
	if !ok || !strings.HasPrefix(head, "SELECT ") {
		return r, fmt.Errorf("want SELECT ... FROM (")
	}
	sel, err := parseSelectList(strings.TrimPrefix(head, "SELECT "))
	if err != nil {
		return r, err
	}
	r.sel = sel
	inner, tail, ok := strings.Cut(body, "\n) AS [s] ORDER BY ")
	if !ok {
		return r, fmt.Errorf("want ) AS [s] ORDER BY")
	}
	_, off, ok := strings.Cut(tail, " OFFSET ")
	if !ok {
		return r, fmt.Errorf("want OFFSET")
	}
	r.offset, _, _ = strings.Cut(off, " ")
	for i, part := range strings.Split(inner, "\nUNION ALL\n") {
		_, sub, ok := strings.Cut(part, " FROM (SELECT TOP (")
		if !ok {
			return r, fmt.Errorf("part %d: want FROM (SELECT TOP (", i+1)
		}
		top, sub, ok := strings.Cut(sub, ") ")
		if !ok {
			return r, fmt.Errorf("part %d: want TOP (@pN)", i+1)
		}
		r.top = top
		fields := splitTop(sub, " FROM ")
		if len(fields) != 2 {
			return r, fmt.Errorf("part %d: want one FROM", i+1)
		}
		schema, name, rest, err := twoPart(fields[1])
		if err != nil {
			return r, fmt.Errorf("part %d: %w", i+1, err)
		}
		r.schema, r.name = schema, name
		cut := strings.Index(rest, " ORDER BY ")
		if cut < 0 {
			return r, fmt.Errorf("part %d: want ORDER BY", i+1)
		}
		where := strings.TrimPrefix(rest[:cut], " WHERE ")
		if rest[:cut] == "" {
			where = ""
		}
		r.where = append(r.where, where)
	}
	return r, nil
}

// parseSeekBeyond reads SeekKeyStatement's text for a key that is not
// unique: "SELECT <outer> FROM (SELECT [s].[k]" + the unique seek's body
// + ") AS [v]\nCROSS APPLY (...) AS [n]". It returns the outer select list
// (one key column, possibly cast) and the (k+1)-th key's seek, whose
// pieces say from.
func parseSeekBeyond(sql string) ([]selected, seekRead, error) {
	head, rest, ok := strings.Cut(sql, " FROM (SELECT ")
	if !ok || !strings.HasPrefix(head, "SELECT ") {
		return nil, seekRead{}, fmt.Errorf("want SELECT ... FROM (SELECT")
	}
	inner, _, ok := strings.Cut(rest, ") AS [v]\nCROSS APPLY (")
	if !ok {
		return nil, seekRead{}, fmt.Errorf("want ) AS [v] CROSS APPLY (")
	}
	outer, err := parseSelectList(strings.TrimPrefix(head, "SELECT "))
	if err != nil {
		return nil, seekRead{}, err
	}
	if len(outer) != 1 {
		return nil, seekRead{}, fmt.Errorf("want one key column, have %d", len(outer))
	}
	r, err := parseSeek("SELECT " + inner)
	return outer, r, err
}

// changeRead is a parsed ChangeTableStatement or ChangesStatement.
type changeRead struct {
	instance    string // the capture instance
	changeTable bool   // read from cdc.[<ci>_CT]; else the change function
	sel         []selected
	from, to    string // the parameters of the interval
}

// changeTableJoin follows the change table in ChangeTableStatement: the
// commit times joined from cdc.lsn_time_mapping, then the interval.
const changeTableJoin = " AS [c] LEFT JOIN [cdc].[lsn_time_mapping] AS [m] ON [m].[start_lsn] = [c].[__$start_lsn] WHERE [c].[__$start_lsn] >= "

// parseChanges reads both change reads.
func parseChanges(sql string) (changeRead, error) {
	var r changeRead
	rest, ok := strings.CutPrefix(sql, "SELECT ")
	if !ok {
		return r, fmt.Errorf("want SELECT")
	}
	fields := splitTop(rest, " FROM [cdc].")
	if len(fields) != 2 {
		return r, fmt.Errorf("want one FROM [cdc].<object>")
	}
	items := splitTop(fields[0], ", ")
	lead := 3
	if len(items) > 3 && items[3] == "[c].[__$command_id]" {
		lead = 4
	}
	if len(items) < lead+1 || !strings.HasSuffix(items[len(items)-1], "AS [__$commit_ts]") {
		return r, fmt.Errorf("want the change metadata, the columns and [__$commit_ts]")
	}
	sel, err := parseSelectList(strings.Join(items[lead:len(items)-1], ", "))
	if err != nil {
		return r, err
	}
	r.sel = sel
	obj, tail, err := unquote(fields[1])
	if err != nil {
		return r, err
	}
	switch {
	case strings.HasPrefix(tail, changeTableJoin) && strings.HasSuffix(obj, "_CT"):
		r.changeTable, r.instance = true, strings.TrimSuffix(obj, "_CT")
		b := strings.TrimPrefix(tail, changeTableJoin)
		r.from, b, _ = strings.Cut(b, " ")
		_, b, _ = strings.Cut(b, "<= ")
		r.to, _, _ = strings.Cut(b, " ")
	case strings.HasPrefix(obj, "fn_cdc_get_all_changes_") && strings.HasPrefix(tail, "(@p"):
		r.instance = strings.TrimPrefix(obj, "fn_cdc_get_all_changes_")
		b := strings.TrimPrefix(tail, "(")
		r.from, b, _ = strings.Cut(b, ", ")
		r.to, _, _ = strings.Cut(b, ", ")
	default:
		return r, fmt.Errorf("want cdc.[<instance>_CT] or cdc.[fn_cdc_get_all_changes_<instance>](...)")
	}
	return r, nil
}
