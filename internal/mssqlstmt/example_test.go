package mssqlstmt_test

import (
	"fmt"

	"github.com/cdcsnap/cdcsnap/internal/mssqlstmt"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/source"
)

// Statements are built without a server: here the read of one range of a
// table keyed by a Greek_CI_AS varchar column and an integer.
func Example() {
	ci := &source.CaptureInstance{
		Name: "dbo_snap_greek", SourceSchema: "dbo", SourceTable: "snap_greek",
		Key: []string{"name", "id"},
		Columns: []source.Column{
			{Name: "name", Type: "varchar", Length: 20, Collation: "Greek_CI_AS", CodePage: 1253},
			{Name: "id", Type: "int"},
		},
	}
	r := keyrange.Range{Lower: keyrange.Tuple{"Άλφα", int64(1)}, Upper: keyrange.Tuple{"Δέλτα", int64(7)}}
	st, err := mssqlstmt.ReadRangeStatement(ci, r)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(st.SQL)
	for i, a := range st.Args {
		fmt.Printf("@p%d = %v\n", i+1, a)
	}
	// Output:
	// SELECT CAST([name] AS nvarchar(20)) AS [name], [id] FROM [dbo].[snap_greek] WHERE [name] = CAST(@p1 COLLATE Greek_CI_AS AS varchar(20)) AND [id] >= CAST(@p2 AS int) AND (([name] < CAST(@p3 COLLATE Greek_CI_AS AS varchar(20))) OR ([name] = CAST(@p3 COLLATE Greek_CI_AS AS varchar(20)) AND [id] < CAST(@p4 AS int)))
	// UNION ALL
	// SELECT CAST([name] AS nvarchar(20)) AS [name], [id] FROM [dbo].[snap_greek] WHERE [name] > CAST(@p1 COLLATE Greek_CI_AS AS varchar(20)) AND [name] < CAST(@p3 COLLATE Greek_CI_AS AS varchar(20))
	// UNION ALL
	// SELECT CAST([name] AS nvarchar(20)) AS [name], [id] FROM [dbo].[snap_greek] WHERE [name] = CAST(@p3 COLLATE Greek_CI_AS AS varchar(20)) AND [id] < CAST(@p4 AS int) AND [name] > CAST(@p1 COLLATE Greek_CI_AS AS varchar(20))
	// @p1 = Άλφα
	// @p2 = 1
	// @p3 = Δέλτα
	// @p4 = 7
}

// The seek of a split column whose values repeat: the (k+1)-th key, then
// the first key at or above it and above from, so the next range starts
// past every duplicate of from.
func ExampleSeekKeyStatement_splitColumn() {
	ci := &source.CaptureInstance{
		Name: "dbo_events", SourceSchema: "dbo", SourceTable: "events", Heap: true,
		Columns: []source.Column{{Name: "region", Type: "int", Nullable: true}, {Name: "payload", Type: "nvarchar", Length: -1, Nullable: true}},
		Indexes: []source.Index{{Name: "IX_events_region", Columns: []string{"region"}}},
	}
	split, err := ci.SplitOn("region")
	if err != nil {
		fmt.Println(err)
		return
	}
	st, err := mssqlstmt.SeekKeyStatement(split, keyrange.Tuple{int64(7)}, 1000)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(st.SQL)
	fmt.Println(st.Args...)
	// Output:
	// SELECT [n].[region] FROM (SELECT [s].[region] FROM (
	// SELECT [q0].[region] FROM (SELECT TOP (@p1) [region] FROM [dbo].[events] WHERE [region] >= CAST(@p2 AS int) ORDER BY [region]) AS [q0]
	// ) AS [s] ORDER BY [s].[region] OFFSET @p3 ROWS FETCH NEXT 1 ROWS ONLY) AS [v]
	// CROSS APPLY (SELECT TOP (@p4) [t].[region] FROM [dbo].[events] AS [t] WHERE [t].[region] > CAST(@p2 AS int) AND ([v].[region] IS NULL OR [t].[region] >= [v].[region]) ORDER BY [t].[region]) AS [n]
	// 1001 7 1000 1
}
