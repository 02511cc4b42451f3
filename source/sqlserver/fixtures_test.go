package sqlserver

import (
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

// ciComposite is a capture instance keyed by two integer columns.
var ciComposite = &source.CaptureInstance{
	Name: "dbo_lines", SourceSchema: "dbo", SourceTable: "lines", Key: []string{"company", "id"},
	Columns: []source.Column{{Name: "company", Type: "int"}, {Name: "id", Type: "bigint"}, {Name: "qty", Type: "int", Nullable: true}},
}

func mustLSN(s string) lsn.LSN {
	l, err := lsn.Parse(s)
	if err != nil {
		panic(err)
	}
	return l
}
