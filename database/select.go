package database

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/cdcsnap/cdcsnap/source"
)

// Lister is implemented by sources that can list their capture instances.
// Bootstrap needs it for every selection but an explicit list of names.
//
// On SQL Server the list is the result of sys.sp_cdc_help_change_data_capture
// called with no arguments: every capture instance the caller has SELECT
// access to (source/sqlserver/FACTS.md F01;
// https://learn.microsoft.com/en-us/sql/relational-databases/system-stored-procedures/sys-sp-cdc-help-change-data-capture-transact-sql).
type Lister interface {
	// ListCaptureInstances returns every capture instance the login can
	// read, with at least Name, SourceSchema and SourceTable set (Columns
	// and Key may be empty: Bootstrap describes each selected instance
	// with source.Source.CaptureInstance).
	ListCaptureInstances(ctx context.Context) ([]source.CaptureInstance, error)
}

// ErrCannotList means the selection needs the source's list of capture
// instances and the source does not implement Lister.
var ErrCannotList = errors.New("the source cannot list its capture instances (it does not implement database.Lister): name them in Selection.Names")

// Selection says which capture instances to bootstrap. The zero value
// selects every capture instance the source lists.
type Selection struct {
	// Names lists capture instances explicitly, each resolved as
	// snapshot.Options.CaptureInstance is (exact name first, else ignoring
	// case) and written to _capture_instance as given. It needs no Lister.
	// It cannot be combined with Schemas or Patterns.
	Names []string

	// Schemas keeps the instances whose source table is in one of these
	// schemas, compared ignoring case (as under SQL Server's default
	// collation). Empty keeps every schema.
	Schemas []string

	// Patterns keeps the instances whose name matches one of these
	// patterns, ignoring case, in path.Match syntax: '*' matches any run of
	// characters but '/', '?' any one character but '/', '[a-z]' and
	// '[^0-9]' character classes, a backslash escapes the next character. The
	// whole name must match ("dbo_*" selects dbo_orders, not
	// archive_dbo_orders). Empty keeps every name. With Schemas, an
	// instance must pass both.
	Patterns []string
}

// validate checks the selection before any I/O.
func (s Selection) validate() error {
	if len(s.Names) > 0 && (len(s.Schemas) > 0 || len(s.Patterns) > 0) {
		return fmt.Errorf("%w: Selection.Names cannot be combined with Schemas or Patterns", ErrInvalidOptions)
	}
	seen := map[string]bool{}
	for _, n := range s.Names {
		if n == "" {
			return fmt.Errorf("%w: Selection.Names holds an empty name", ErrInvalidOptions)
		}
		if seen[n] {
			return fmt.Errorf("%w: Selection.Names lists %q twice", ErrInvalidOptions, n)
		}
		seen[n] = true
	}
	for _, sc := range s.Schemas {
		if sc == "" {
			return fmt.Errorf("%w: Selection.Schemas holds an empty name", ErrInvalidOptions)
		}
	}
	for _, p := range s.Patterns {
		// path.Match reports a malformed pattern only when it gets that
		// far, so check against a name it must read to the end.
		if _, err := path.Match(strings.ToLower(p), strings.Repeat("a", len(p)+1)); err != nil {
			return fmt.Errorf("%w: Selection.Patterns: %q: %v", ErrInvalidOptions, p, err)
		}
	}
	return nil
}

// keeps says whether the selection (without Names) keeps ci.
func (s Selection) keeps(ci source.CaptureInstance) bool {
	if len(s.Schemas) > 0 {
		found := false
		for _, sc := range s.Schemas {
			found = found || strings.EqualFold(sc, ci.SourceSchema)
		}
		if !found {
			return false
		}
	}
	if len(s.Patterns) == 0 {
		return true
	}
	name := strings.ToLower(ci.Name)
	for _, p := range s.Patterns {
		if ok, _ := path.Match(strings.ToLower(p), name); ok {
			return true
		}
	}
	return false
}
