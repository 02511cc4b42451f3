package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// openSQLServer connects to a real SQL Server for -dsn. Errors name the
// server with the password redacted. zone is the server's IANA time zone
// (-server-time-zone); empty lets the source read the server's UTC offset.
func openSQLServer(ctx context.Context, dsn, zone string, logger *slog.Logger) (changeSource, func(), error) {
	var loc *time.Location
	if zone != "" {
		var err error
		if loc, err = time.LoadLocation(zone); err != nil {
			return nil, nil, fmt.Errorf("-server-time-zone %q: %w", zone, err)
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
	src, err := sqlserver.New(db, sqlserver.Options{Logger: logger, ServerTimeZone: loc})
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return src, func() { db.Close() }, nil
}
