// Package mssqlstmt builds the T-SQL statements source/sqlserver sends to
// SQL Server, as pure functions returning a Stmt: T-SQL text and parameter
// values. internal/tdsfake recognizes the same statements by their text,
// so both take them from here; they are no part of source/sqlserver's API.
// Errors keep the "sqlserver:" prefix: they reach users through that
// package.
//
// Names are bracket-quoted as QUOTENAME quotes them (QuoteName); every
// value is a parameter; the only types written into the text are CAST
// targets rebuilt from the captured-column metadata and checked by
// InlineType, and the only other inlined names are collations checked by
// ValidCollation. A key bound is CAST(@pN AS <declared type>), and a
// char/varchar bound CAST(@pN COLLATE <column collation> AS varchar(n)),
// so the comparison keeps the column's type (an index seek, no
// CONVERT_IMPLICIT) and converts in the column's code page.
//
// A range of keys is read as the UNION ALL of its seekable pieces
// (keyrange.Pieces), with keyrange's NULL-first order: "key < v" is
// (key IS NULL OR key < v) on a nullable column, "key > NULL" is IS NOT
// NULL, "key = NULL" is IS NULL; guards become residual predicates.
//
// Every statement the package can emit is pinned in testdata/*.sql
// (go test ./internal/mssqlstmt -update rewrites them) and checked by
// .ci/check-sql.py with a T-SQL parser. FACTS.md rows cited here are in
// source/sqlserver/FACTS.md.
package mssqlstmt
