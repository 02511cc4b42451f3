package tdsserver_test

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/cdcsnap/cdcsnap/internal/tdsserver"
	_ "github.com/microsoft/go-mssqldb"
)

// A handler answering one statement; go-mssqldb connects with the
// server's DSN and reads the result through database/sql.
func ExampleStart() {
	h := tdsserver.HandlerFunc(func(ctx context.Context, req *tdsserver.Request, w *tdsserver.ResponseWriter) error {
		if req.SQL != "SELECT name, qty FROM dbo.items WHERE qty > @p1" {
			return w.Error(208, 16, 1, "Invalid object name.")
		}
		least := req.Params[0].Value.(int64)
		if err := w.Columns([]tdsserver.Column{
			{Name: "name", Type: "varchar(20)", Collation: "Greek_CI_AS"},
			{Name: "qty", Type: "decimal(9,2)", Nullable: true},
		}); err != nil {
			return err
		}
		for _, row := range [][]any{{"αλφα", "12.50"}, {"βήτα", nil}} {
			if row[1] == nil || least < 100 {
				if err := w.Row(row...); err != nil {
					return err
				}
			}
		}
		return nil
	})
	srv, err := tdsserver.Start(context.Background(), h, tdsserver.Options{User: "app", Password: "secret"})
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	db, err := sql.Open("sqlserver", srv.DSN("shop"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT name, qty FROM dbo.items WHERE qty > @p1", 10)
	if err != nil {
		panic(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var qty sql.NullString
		if err := rows.Scan(&name, &qty); err != nil {
			panic(err)
		}
		fmt.Println(name, qty.String, qty.Valid)
	}
	req := srv.Requests()[0]
	fmt.Println(req.Kind, req.Proc, req.Params[0].Name, req.Params[0].Decl)
	// Output:
	// αλφα 12.50 true
	// βήτα  false
	// rpc sp_executesql @p1 bigint
}
