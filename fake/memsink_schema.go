package fake

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/cdcsnap/cdcsnap/internal/collate"
)

// The table schema a MemSink keeps: like a Delta table's, one schema for
// every commit, which a commit can change only as sink/delta lets it (its
// evolve, after the Delta protocol): a nullable column new to the table is
// added; a column may arrive in a type narrower than the table's (an
// integer into a wider integer or a decimal with room for it, float32 into
// float64, a decimal into one with at least its integer digits and scale),
// which a writer casts; a wider one is refused unless type widening is on
// (the typeWidening table feature, PROTOCOL.md "Type Widening"), which
// then widens the table's column; records may lack a nullable column of
// the table (their rows read it as NULL); any other type change is
// refused. A refusal commits nothing.

// ErrSchema is wrapped by a MemSink's refusal of records whose schema its
// table cannot take.
var ErrSchema = errors.New("the table cannot take the records' schema")

// SetTypeWidening turns type widening on or off, as a Delta table's
// delta.enableTypeWidening property does.
func (s *MemSink) SetTypeWidening(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.typeWidening = on
}

// ArrowSchema returns the table's schema: the union of every commit's
// columns, by name, in the order they arrived; nil before the first
// commit.
func (s *MemSink) ArrowSchema(ctx context.Context) (*arrow.Schema, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.table, nil
}

// evolveLocked checks that records of schema rec can be committed and
// returns the table's schema after the commit.
func (s *MemSink) evolveLocked(rec *arrow.Schema) (*arrow.Schema, error) {
	if s.table == nil {
		return rec, nil
	}
	byName := map[string]arrow.Field{}
	for _, f := range rec.Fields() {
		byName[collate.Fold(f.Name)] = f
	}
	var problems []string
	out := append([]arrow.Field(nil), s.table.Fields()...)
	known := map[string]bool{}
	for i, tf := range out {
		known[collate.Fold(tf.Name)] = true
		f, ok := byName[collate.Fold(tf.Name)]
		switch {
		case !ok && tf.Nullable:
			// The records' rows read it as NULL (sink/delta writes files
			// without it).
		case !ok:
			problems = append(problems, fmt.Sprintf("column %q: the table has it and the records do not", tf.Name))
		case arrow.TypeEqual(f.Type, tf.Type) || narrower(f.Type, tf.Type):
		case narrower(tf.Type, f.Type) && s.typeWidening:
			out[i].Type = f.Type
		case narrower(tf.Type, f.Type):
			problems = append(problems, fmt.Sprintf("column %q: the records' type %s is wider than the table's %s, and the table has no type widening", tf.Name, f.Type, tf.Type))
		default:
			problems = append(problems, fmt.Sprintf("column %q: the table has type %s, the records %s", tf.Name, tf.Type, f.Type))
		}
	}
	for _, f := range rec.Fields() {
		if known[collate.Fold(f.Name)] {
			continue
		}
		if !f.Nullable {
			problems = append(problems, fmt.Sprintf("column %q is new to the table and not nullable", f.Name))
			continue
		}
		out = append(out, f)
	}
	if problems != nil {
		return nil, fmt.Errorf("%w: %s", ErrSchema, strings.Join(problems, "; "))
	}
	return arrow.NewSchema(out, nil), nil
}

// narrower reports whether every value of Arrow type a fits type b without
// loss, b being another type: Delta's type widening's pairs (sink/delta's
// widens) on the types a bronze table has: integers to wider integers,
// float32 and integers of 32 bits or fewer to float64, integers to
// decimals with 10 integer digits (20 for int64), decimals to decimals
// with at least their integer digits and scale.
func narrower(a, b arrow.DataType) bool {
	ints := map[arrow.Type]int{arrow.INT16: 1, arrow.INT32: 2, arrow.INT64: 3}
	ia, aInt := ints[a.ID()]
	ib, bInt := ints[b.ID()]
	switch {
	case aInt && bInt:
		return ia < ib
	case a.ID() == arrow.FLOAT32 && b.ID() == arrow.FLOAT64:
		return true
	case aInt && ia <= 2 && b.ID() == arrow.FLOAT64:
		return true
	case aInt && b.ID() == arrow.DECIMAL128:
		d := b.(*arrow.Decimal128Type)
		return int(d.Precision-d.Scale) >= map[bool]int{false: 10, true: 20}[a.ID() == arrow.INT64]
	case a.ID() == arrow.DECIMAL128 && b.ID() == arrow.DECIMAL128:
		x, y := a.(*arrow.Decimal128Type), b.(*arrow.Decimal128Type)
		return y.Scale >= x.Scale && y.Precision-y.Scale >= x.Precision-x.Scale && (x.Precision != y.Precision || x.Scale != y.Scale)
	}
	return false
}
