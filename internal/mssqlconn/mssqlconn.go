// Package mssqlconn connects the example programs to a real SQL Server: it
// opens the pool, pings it, and builds source/sqlserver's Source, with every
// error naming the server with its password redacted.
package mssqlconn

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// Open connects to the SQL Server dsn names. zone is the server machine's
// IANA time zone (commit times are its local wall clock); empty lets the
// source read the server's current UTC offset. close closes the pool.
func Open(ctx context.Context, dsn, zone string, logger *slog.Logger) (src *sqlserver.Source, close func(), err error) {
	var loc *time.Location
	if zone != "" {
		if loc, err = time.LoadLocation(zone); err != nil {
			return nil, nil, fmt.Errorf("server time zone %q: %w", zone, err)
		}
	}
	db, err := sqlserver.Open(dsn)
	if err != nil {
		return nil, nil, err
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("connecting to %s: %w", sqlserver.RedactDSN(dsn), err)
	}
	src, err = sqlserver.New(db, sqlserver.Options{Logger: logger, ServerTimeZone: loc})
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return src, func() { db.Close() }, nil
}
