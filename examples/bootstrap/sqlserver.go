package main

import (
	"context"
	"log/slog"

	"github.com/cdcsnap/cdcsnap/source"
)

// openSQLServer connects to a real SQL Server for -dsn.
func openSQLServer(ctx context.Context, dsn string, logger *slog.Logger) (source.Source, func(), error) {
	return nil, nil, errNoDSNSupport
}
