// Package mssqlconn connects the example programs to a real SQL Server: it
// opens the pool, pings it, and builds source/sqlserver's Source, with every
// error naming the server with its password redacted.
package mssqlconn

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/microsoft/go-mssqldb/azuread"
	"github.com/microsoft/go-mssqldb/msdsn"

	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// Open connects to the SQL Server dsn names. zone is the server machine's
// IANA time zone (commit times are its local wall clock); empty lets the
// source read the server's current UTC offset. close closes the pool.
func Open(ctx context.Context, dsn, zone string, logger *slog.Logger) (src *sqlserver.Source, close func(), err error) {
	return OpenMaxConns(ctx, dsn, zone, 0, logger)
}

// OpenMaxConns is Open with a pool of at most maxOpen connections (zero:
// no limit, database/sql's default), all of which it keeps idle when
// released instead of database/sql's default of two, so a run that uses
// maxOpen at once does not close and reopen them: the budget of
// database.Options.Connections, enforced by the pool too
// (https://go.dev/doc/database/manage-connections).
func OpenMaxConns(ctx context.Context, dsn, zone string, maxOpen int, logger *slog.Logger) (src *sqlserver.Source, close func(), err error) {
	src, db, err := open(ctx, dsn, zone, maxOpen, logger)
	if err != nil {
		return nil, nil, err
	}
	return src, func() { db.Close() }, nil
}

func open(ctx context.Context, dsn, zone string, maxOpen int, logger *slog.Logger) (*sqlserver.Source, *sql.DB, error) {
	if maxOpen < 0 {
		return nil, nil, fmt.Errorf("max open connections %d is negative", maxOpen)
	}
	var loc *time.Location
	if zone != "" {
		var err error
		if loc, err = time.LoadLocation(zone); err != nil {
			return nil, nil, fmt.Errorf("server time zone %q: %w", zone, err)
		}
	}
	db, err := openDB(dsn)
	if err != nil {
		return nil, nil, err
	}
	if maxOpen > 0 {
		db.SetMaxOpenConns(maxOpen)
		db.SetMaxIdleConns(maxOpen)
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
	return src, db, nil
}

// openDB opens dsn with go-mssqldb's "sqlserver" driver, or with its
// azuread package's "azuresql" driver when the DSN names a Microsoft Entra
// ID workflow (a fedauth parameter, go-mssqldb v1.11.2
// azuread/configuration.go validateParameters): the plain driver ignores
// fedauth and would try a SQL login.
func openDB(dsn string) (*sql.DB, error) {
	cfg, err := msdsn.Parse(dsn)
	if err != nil || cfg.Parameters["fedauth"] == "" {
		return sqlserver.Open(dsn) // which reports a DSN that does not parse, redacted
	}
	db, err := sql.Open(azuread.DriverName, dsn)
	if err != nil {
		msg := err.Error()
		if cfg.Password != "" {
			msg = strings.ReplaceAll(msg, cfg.Password, "<redacted>")
		}
		return nil, fmt.Errorf("opening %s with go-mssqldb's azuread driver: %s", sqlserver.RedactDSN(dsn), msg)
	}
	return db, nil
}
