package sink_test

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/cdcsnap/cdcsnap/sink"
)

// ExampleBronzeSchema shows the schema every sink receives: the captured
// columns, then the bronze metadata columns.
func ExampleBronzeSchema() {
	captured := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	bronze, err := sink.BronzeSchema(captured)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range bronze.Fields() {
		fmt.Println(f.Name, f.Type)
	}
	// A captured column that collides with a metadata column is refused.
	_, err = sink.BronzeSchema(arrow.NewSchema([]arrow.Field{{Name: "_Operation", Type: arrow.PrimitiveTypes.Int32}}, nil))
	fmt.Println(err)
	// Output:
	// id int64
	// name utf8
	// _capture_instance utf8
	// _operation int32
	// _start_lsn utf8
	// _seqval utf8
	// _command_id int32
	// _batch_id int64
	// _commit_ts timestamp[us, tz=UTC]
	// _snapshot utf8
	// _chunk int32
	// captured column "_Operation" collides with the bronze metadata column "_operation"
}
