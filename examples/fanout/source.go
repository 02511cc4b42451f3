package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/mssqlconn"
	"github.com/cdcsnap/cdcsnap/source"
)

// The real source's connection string comes from the environment, never
// from a flag, a task line or a log line: a flag shows in ps and in
// Spark's and Kubernetes' UIs, and a task line is shipped to every
// executor and kept in files.
const (
	// envDSN holds the SQL Server connection string (sqlserver://...).
	envDSN = "CDCSNAP_SOURCE_DSN"
	// envDSNFile names a file that holds it: a mounted Kubernetes secret,
	// or a file a Databricks init script wrote from a secret scope.
	envDSNFile = "CDCSNAP_SOURCE_DSN_FILE"
)

// dsnFromEnv returns the DSN the environment gives, or "" when it gives
// none. A file's content is trimmed of surrounding white space.
func dsnFromEnv() (string, error) {
	dsn, file := os.Getenv(envDSN), os.Getenv(envDSNFile)
	switch {
	case dsn != "" && file != "":
		return "", fmt.Errorf("both %s and %s are set; set one", envDSN, envDSNFile)
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("%s: %w", envDSNFile, err)
		}
		if dsn = strings.TrimSpace(string(b)); dsn == "" {
			return "", fmt.Errorf("%s: %s is empty", envDSNFile, file)
		}
	}
	return dsn, nil
}

// openSource opens the source spec names: the SQL Server of the
// environment's DSN, or the demo database (then demo is it, for faults).
// The caller calls close when done.
func openSource(ctx context.Context, spec SourceSpec, logger *slog.Logger) (src source.Source, demo *fake.DB, close func(), err error) {
	dsn, err := dsnFromEnv()
	if err != nil {
		return nil, nil, nil, err
	}
	if spec.SQLServer != (dsn != "") {
		if spec.SQLServer {
			return nil, nil, nil, fmt.Errorf("the source is SQL Server, but neither %s nor %s is set in this process's environment", envDSN, envDSNFile)
		}
		return nil, nil, nil, fmt.Errorf("the source is the demo database, but %s or %s is set: plan and run every step with the same source", envDSN, envDSNFile)
	}
	if spec.SQLServer {
		s, closeDB, err := mssqlconn.Open(ctx, dsn, spec.ServerTimeZone, logger)
		if err != nil {
			return nil, nil, nil, err
		}
		return s, nil, closeDB, nil
	}
	db, err := newDemo(spec)
	if err != nil {
		return nil, nil, nil, err
	}
	return db, db, func() {}, nil
}

// errNotDemo is the error of a step only the demo database supports.
var errNotDemo = errors.New("only the demo database can be exported; a SQL Server source is its own reference")
