package delta

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cdcsnap/cdcsnap/internal/parquetprops"
)

// constColumns hands the Parquet writer (internal/pqfile over arrow-go's
// column writers) the bronze string columns that hold one
// value in every row of a batch (the capture instance, and a snapshot's
// LSN columns) as dictionary arrays whose indices are all 0. The writer then
// writes the indices without hashing each value and takes the column's
// statistics from the one-value dictionary: internal/bench measured this
// as the writer's largest cost after compression. The Parquet file is the
// same: the writer writes such a column as a dictionary-encoded UTF-8 column
// either way and stores no Arrow schema.
type constColumns struct {
	mem      memory.Allocator
	schema   *arrow.Schema         // the file's: dictType in cols
	dictType *arrow.DictionaryType // int32 indices into strings
	cols     []int                 // column indices written as dictionaries
	dicts    []arrow.Array         // per cols entry: the one-value dictionary last used
	constant []bool                // per cols entry: whether the last batch held one value
	zeros    arrow.Array           // int32 zeros, sliced per batch
}

// newConstColumns picks, from the first batch of a WritePartition call
// (the choice holds for every file it rolls), the bronze string columns
// that hold one non-NULL value in it. With none it returns
// nil and batches are written as they come.
func newConstColumns(schema *arrow.Schema, first arrow.RecordBatch) *constColumns {
	var cols []int
	for i, f := range schema.Fields() {
		if !parquetprops.AlwaysDictionary(f.Name) || !arrow.TypeEqual(f.Type, arrow.BinaryTypes.String) {
			continue
		}
		if _, ok := constantString(first.Column(i)); ok {
			cols = append(cols, i)
		}
	}
	if len(cols) == 0 {
		return nil
	}
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	fields := append([]arrow.Field(nil), schema.Fields()...)
	for _, i := range cols {
		fields[i].Type = dt
	}
	md := schema.Metadata()
	return &constColumns{
		mem:      memory.DefaultAllocator,
		schema:   arrow.NewSchema(fields, &md),
		dictType: dt,
		cols:     cols,
		dicts:    make([]arrow.Array, len(cols)),
		constant: make([]bool, len(cols)),
	}
}

// constantString returns the value every row of arr holds, ok false when
// a row is NULL or differs (or arr is empty).
func constantString(arr arrow.Array) (string, bool) {
	a, ok := arr.(*array.String)
	if !ok || a.Len() == 0 || a.NullN() != 0 {
		return "", false
	}
	v := a.Value(0)
	for i := 1; i < a.Len(); i++ {
		if a.Value(i) != v {
			return "", false
		}
	}
	return v, true
}

// convert returns rec in c.schema (release it after use). A batch in
// which a chosen column varies gets that column dictionary-encoded the
// general way; the writer then writes it correctly, only without the saving.
func (c *constColumns) convert(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	n := int(rec.NumRows())
	zeros := c.zerosOf(n)
	defer zeros.Release()
	cols := append([]arrow.Array(nil), rec.Columns()...)
	var made []arrow.Array
	defer func() {
		for _, a := range made {
			a.Release()
		}
	}()
	for k, i := range c.cols {
		var d arrow.Array
		v, ok := constantString(cols[i])
		c.constant[k] = ok
		if ok {
			if c.dicts[k] == nil || c.dicts[k].(*array.String).Value(0) != v {
				if c.dicts[k] != nil {
					c.dicts[k].Release()
				}
				c.dicts[k] = oneString(c.mem, v)
			}
			d = array.NewDictionaryArray(c.dictType, zeros, c.dicts[k])
		} else {
			b := array.NewDictionaryBuilder(c.mem, c.dictType).(*array.BinaryDictionaryBuilder)
			err := b.AppendArray(cols[i])
			if err == nil {
				d = b.NewArray()
			}
			b.Release()
			if err != nil {
				return nil, err
			}
		}
		made = append(made, d)
		cols[i] = d
	}
	return array.NewRecordBatch(c.schema, cols, int64(n)), nil
}

// zerosOf returns n int32 zeros, a slice of an array kept across batches.
func (c *constColumns) zerosOf(n int) arrow.Array {
	if c.zeros == nil || c.zeros.Len() < n {
		if c.zeros != nil {
			c.zeros.Release()
		}
		b := array.NewInt32Builder(c.mem)
		b.AppendValues(make([]int32, max(n, 8192)), nil)
		c.zeros = b.NewArray()
		b.Release()
	}
	return array.NewSlice(c.zeros, 0, int64(n))
}

func oneString(mem memory.Allocator, v string) arrow.Array {
	b := array.NewStringBuilder(mem)
	defer b.Release()
	b.Append(v)
	return b.NewArray()
}

// updateStats adds rec's values to stats, once per batch for the columns
// convert found constant.
func (c *constColumns) updateStats(stats []colStats, rec arrow.RecordBatch) {
	k := 0
	for i := range stats {
		if c != nil && k < len(c.cols) && c.cols[k] == i {
			if c.constant[k] {
				stats[i].str(c.dicts[k].(*array.String).Value(0))
				k++
				continue
			}
			k++
		}
		stats[i].update(rec.Column(i))
	}
}

// release frees the kept arrays.
func (c *constColumns) release() {
	if c == nil {
		return
	}
	for _, d := range c.dicts {
		if d != nil {
			d.Release()
		}
	}
	if c.zeros != nil {
		c.zeros.Release()
	}
}
