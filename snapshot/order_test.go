package snapshot_test

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// TestOrderColumns reads each row's merge order from a bronze batch, NULLs
// as nil, and refuses a schema without the order columns.
func TestOrderColumns(t *testing.T) {
	schema, err := sink.BronzeSchema(arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil))
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i, f := range schema.Fields() {
		switch f.Name {
		case "id":
			b.Field(i).(*array.Int64Builder).AppendValues([]int64{1, 2}, nil)
		case sink.ColStartLSN:
			b.Field(i).(*array.StringBuilder).AppendValues([]string{"0x01", "0x02"}, nil)
		case sink.ColSeqval:
			b.Field(i).(*array.StringBuilder).AppendValues([]string{"", "0x05"}, []bool{false, true})
		case sink.ColCommandID:
			b.Field(i).(*array.Int32Builder).AppendValues([]int32{0, 7}, []bool{false, true})
		case sink.ColOperation:
			b.Field(i).(*array.Int32Builder).AppendValues([]int32{0, 4}, nil)
		default:
			b.Field(i).AppendNulls(2)
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	cols, err := snapshot.FindOrderColumns(schema)
	if err != nil {
		t.Fatal(err)
	}
	a, c := cols.Order(rec, 0), cols.Order(rec, 1)
	if a.StartLSN == nil || *a.StartLSN != "0x01" || a.CommandID != nil || a.Seqval != nil || a.Operation != 0 {
		t.Errorf("row 0: %+v", a)
	}
	if c.StartLSN == nil || *c.StartLSN != "0x02" || c.CommandID == nil || *c.CommandID != 7 || c.Seqval == nil || *c.Seqval != "0x05" || c.Operation != 4 {
		t.Errorf("row 1: %+v", c)
	}
	if snapshot.CompareOrder(a, c) >= 0 {
		t.Error("row 0 does not sort before row 1")
	}
	if _, err := snapshot.FindOrderColumns(arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)); err == nil || !strings.Contains(err.Error(), sink.ColStartLSN) {
		t.Errorf("a schema without order columns: %v, want an error naming %s", err, sink.ColStartLSN)
	}
}
