package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// openSQLServer connects to a real SQL Server for -dsn. Errors name the
// server with the password redacted.
func openSQLServer(ctx context.Context, dsn string, logger *slog.Logger) (changeSource, func(), error) {
	db, err := sqlserver.Open(dsn)
	if err != nil {
		return nil, nil, err
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("connecting to %s: %w", sqlserver.RedactDSN(dsn), err)
	}
	src, err := sqlserver.New(db, sqlserver.Options{Logger: logger})
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return src, func() { db.Close() }, nil
}
