package snapshot

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/source"
)

// Order is where a bronze row sorts in the latest-image merge: by
// (_start_lsn, _command_id, _seqval, _operation), NULLs first. The last row
// per key wins; a delete (1) and an update-before (3) remove their key: under
// SQL Server's trace flag 8207 an update of a key column of a unique index
// that is no constraint is logged as 3 and 4, the before image holding the
// old key (source/sqlserver/FACTS.md F14; a primary key's stays 1 and 2),
// and when the key stays the same the after image (4) follows and wins. A
// snapshot row (operation 0, stamped with the snapshot's LSN, NULL
// command id and seqval) sorts before every change read after it. Rows are
// grouped by their stored key value (keyrange.RowKey), whatever the
// collation takes for equal.
type Order struct {
	StartLSN  *string
	CommandID *int32
	Seqval    *string
	Operation int32
}

// CompareOrder returns -1, 0 or +1 as a sorts before, with or after b.
func CompareOrder(a, b Order) int {
	if c := compareNullable(a.StartLSN, b.StartLSN); c != 0 {
		return c
	}
	if c := compareNullable(a.CommandID, b.CommandID); c != 0 {
		return c
	}
	if c := compareNullable(a.Seqval, b.Seqval); c != 0 {
		return c
	}
	return cmp.Compare(a.Operation, b.Operation)
}

func compareNullable[T cmp.Ordered](a, b *T) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	return cmp.Compare(*a, *b)
}

// OrderColumns are where a bronze schema holds a row's Order.
type OrderColumns struct{ startLSN, commandID, seqval, operation int }

// FindOrderColumns locates the Order columns of a bronze schema.
func FindOrderColumns(schema *arrow.Schema) (OrderColumns, error) {
	var c OrderColumns
	for _, p := range []struct {
		name string
		at   *int
	}{{sink.ColStartLSN, &c.startLSN}, {sink.ColCommandID, &c.commandID}, {sink.ColSeqval, &c.seqval}, {sink.ColOperation, &c.operation}} {
		j := schema.FieldIndices(p.name)
		if len(j) != 1 {
			return c, fmt.Errorf("the rows have no column %q: not a bronze table", p.name)
		}
		*p.at = j[0]
	}
	return c, nil
}

// Order returns the Order of row r of rec (a batch of the schema c was
// found in).
func (c OrderColumns) Order(rec arrow.RecordBatch, r int) Order {
	o := Order{
		StartLSN:  stringAt(rec.Column(c.startLSN), r),
		CommandID: int32At(rec.Column(c.commandID), r),
		Seqval:    stringAt(rec.Column(c.seqval), r),
	}
	if op := int32At(rec.Column(c.operation), r); op != nil {
		o.Operation = *op
	}
	return o
}

// Image is a table's rows by key, each as the text of its captured columns
// (Arrow's ValueStr, "NULL" for nulls): what a target converges to. Build
// one from bronze rows with AddBronze (the latest-image merge) or from a
// source's current rows with AddRows, and compare two with Diff. It keeps
// every key in memory: it is meant for verification and tests; a lakehouse
// applies the same order with MERGE.
type Image struct {
	columns []string
	key     []keyrange.Column
	rows    map[string]imageRow
}

type imageRow struct {
	order  Order
	delete bool
	values []string
}

// NewImage returns an empty image of the captured columns, keyed by key
// (matched by name).
func NewImage(columns []source.Column, key []keyrange.Column) *Image {
	names := make([]string, len(columns))
	for i, c := range columns {
		names[i] = c.Name
	}
	return &Image{columns: names, key: key, rows: map[string]imageRow{}}
}

// Len returns the number of live keys.
func (im *Image) Len() int {
	n := 0
	for _, r := range im.rows {
		if !r.delete {
			n++
		}
	}
	return n
}

// AddBronze merges bronze rows into the image by their Order.
func (im *Image) AddBronze(rec arrow.RecordBatch) error {
	return im.add(rec, true)
}

// AddRows sets the image's rows from plain rows of the captured columns
// (a source's current table); a key seen twice is an error.
func (im *Image) AddRows(rec arrow.RecordBatch) error {
	return im.add(rec, false)
}

func (im *Image) add(rec arrow.RecordBatch, bronze bool) error {
	idx := func(name string) (int, error) {
		j := rec.Schema().FieldIndices(name)
		if len(j) != 1 {
			return 0, fmt.Errorf("image: rows have no column %q", name)
		}
		return j[0], nil
	}
	cols := make([]int, len(im.columns))
	for i, name := range im.columns {
		j, err := idx(name)
		if err != nil {
			return err
		}
		cols[i] = j
	}
	keyCols := make([]int, len(im.key))
	for i, k := range im.key {
		j, err := idx(k.Name)
		if err != nil {
			return err
		}
		keyCols[i] = j
	}
	var orderCols OrderColumns
	if bronze {
		var err error
		if orderCols, err = FindOrderColumns(rec.Schema()); err != nil {
			return fmt.Errorf("image: %w", err)
		}
	}
	for r := 0; r < int(rec.NumRows()); r++ {
		var kb strings.Builder
		for i, j := range keyCols {
			part, err := keyText(im.key[i], rec.Column(j), r)
			if err != nil {
				return err
			}
			kb.WriteString(part)
			kb.WriteByte(0)
		}
		k := kb.String()
		row := imageRow{values: make([]string, len(cols))}
		for i, j := range cols {
			row.values[i] = valueText(rec.Column(j), r)
		}
		if !bronze {
			if _, dup := im.rows[k]; dup {
				return fmt.Errorf("image: key %q appears twice", k)
			}
			im.rows[k] = row
			continue
		}
		row.order = orderCols.Order(rec, r)
		if op := row.order.Operation; op == 1 || op == 3 {
			row.delete = true // 3: the old key of a key update under trace flag 8207
		}
		if old, ok := im.rows[k]; ok && CompareOrder(old.order, row.order) > 0 {
			continue
		}
		im.rows[k] = row
	}
	return nil
}

func keyText(c keyrange.Column, a arrow.Array, r int) (string, error) {
	if a.IsNull(r) {
		return "\x00null", nil
	}
	if c.Kind == keyrange.KindString {
		s, ok := a.(*array.String)
		if !ok {
			return "", fmt.Errorf("image: key column %q is %s, not a string", c.Name, a.DataType())
		}
		return keyrange.RowKey(c, s.Value(r))
	}
	return a.ValueStr(r), nil
}

func valueText(a arrow.Array, r int) string {
	if a.IsNull(r) {
		return "NULL"
	}
	return a.ValueStr(r)
}

func stringAt(a arrow.Array, r int) *string {
	s, ok := a.(*array.String)
	if !ok || s.IsNull(r) {
		return nil
	}
	v := s.Value(r)
	return &v
}

func int32At(a arrow.Array, r int) *int32 {
	s, ok := a.(*array.Int32)
	if !ok || s.IsNull(r) {
		return nil
	}
	v := s.Value(r)
	return &v
}

// Diff lists how other differs from im, one line per key (missing, extra,
// different), sorted, at most limit lines (zero: all). Empty means equal.
func (im *Image) Diff(other *Image, limit int) []string {
	var out []string
	for k, a := range im.rows {
		b, ok := other.rows[k]
		switch {
		case a.delete && (!ok || b.delete):
		case !ok || b.delete:
			out = append(out, fmt.Sprintf("key %q: missing from the other (%v)", k, a.values))
		case a.delete:
			out = append(out, fmt.Sprintf("key %q: extra in the other (%v)", k, b.values))
		case !slices.Equal(a.values, b.values):
			out = append(out, fmt.Sprintf("key %q: %v here, %v in the other", k, a.values, b.values))
		}
	}
	for k, b := range other.rows {
		if _, ok := im.rows[k]; !ok && !b.delete {
			out = append(out, fmt.Sprintf("key %q: extra in the other (%v)", k, b.values))
		}
	}
	slices.Sort(out)
	if limit > 0 && len(out) > limit {
		out = append(out[:limit], fmt.Sprintf("... and %d more", len(out)-limit))
	}
	return out
}

// ReadImage adds every record of rr to im, as bronze rows (AddBronze) or
// plain rows (AddRows), and releases rr.
func ReadImage(ctx context.Context, im *Image, rr array.RecordReader, bronze bool) error {
	defer rr.Release()
	for rr.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := im.add(rr.RecordBatch(), bronze); err != nil {
			return err
		}
	}
	return rr.Err()
}

// SourceImage reads the current rows of the capture instance's table into
// a new image.
func SourceImage(ctx context.Context, src source.Source, ci *source.CaptureInstance) (*Image, error) {
	key, err := ci.KeyColumns()
	if err != nil {
		return nil, err
	}
	im := NewImage(ci.Columns, key)
	rr, err := src.ReadRange(ctx, ci, keyrange.Whole()[0], source.ReadOptions{})
	if err != nil {
		return nil, err
	}
	return im, ReadImage(ctx, im, rr, false)
}
