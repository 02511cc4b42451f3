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
