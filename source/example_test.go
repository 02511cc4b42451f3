package source_test

import (
	"errors"
	"fmt"

	"github.com/cdcsnap/cdcsnap/source"
)

// ExampleResolve shows how a capture instance name is matched: exactly
// first, else the one name equal ignoring case.
func ExampleResolve() {
	names := []string{"dbo_ORDER_ITEMS", "dbo_Customers", "dbo_customers"}
	got, _ := source.Resolve("dbo_order_items", names)
	fmt.Println(got)
	got, _ = source.Resolve("dbo_customers", names)
	fmt.Println(got)
	_, err := source.Resolve("DBO_CUSTOMERS", names)
	var amb *source.AmbiguousError
	fmt.Println(errors.As(err, &amb), err)
	// Output:
	// dbo_ORDER_ITEMS
	// dbo_customers
	// true capture instance "DBO_CUSTOMERS" is ambiguous: it matches dbo_Customers and dbo_customers ignoring case
}

// ExampleColumn_ArrowType shows the SQL Server to Arrow mapping of a few
// declared types.
func ExampleColumn_ArrowType() {
	for _, decl := range []string{"decimal(18,4)", "datetime2", "varchar(20)", "uniqueidentifier", "tinyint"} {
		c, err := source.ParseType(decl)
		if err != nil {
			fmt.Println(err)
			continue
		}
		t, _ := c.ArrowType()
		fmt.Printf("%-17s %s\n", c.Declared(), t)
	}
	// Output:
	// decimal(18,4)     decimal(18, 4)
	// datetime2(7)      timestamp[us, tz=UTC]
	// varchar(20)       utf8
	// uniqueidentifier  utf8
	// tinyint           int16
}

// ExampleCaptureInstance_SplitOn shows a heap without a unique index, as a
// source describes it, read by a split column instead: the copy is keyed
// by the column, through the index that leads with it, whose values
// repeat.
func ExampleCaptureInstance_SplitOn() {
	ci := &source.CaptureInstance{
		Name: "dbo_events", SourceSchema: "dbo", SourceTable: "events",
		Columns: []source.Column{{Name: "region", Type: "int", Nullable: true}, {Name: "payload", Type: "nvarchar", Length: -1, Nullable: true}},
		Indexes: []source.Index{{Name: "IX_events_region_day", Columns: []string{"region", "day"}}, {Name: "IX_events_region", Columns: []string{"region"}}},
		Heap:    true,
	}
	fmt.Println("key:", ci.Key, "heap:", ci.Heap)
	split, err := ci.SplitOn("region")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("key:", split.Key, "index:", split.KeyIndex.Name, "unique:", split.UniqueKey())
	_, err = ci.SplitOn("payload")
	fmt.Println(errors.Is(err, source.ErrNoSplitIndex))
	// Output:
	// key: [] heap: true
	// key: [region] index: IX_events_region unique: false
	// true
}
