// Package tdsserver is a TDS 7.4 server on a loopback port that
// go-mssqldb (v1.11.2), Microsoft's ODBC Driver 18 and mssql-jdbc connect
// to, so that code written against database/sql and SQL Server runs
// against an in-process fake. It is protocol only: a Handler decides what every statement
// returns; this package frames packets, logs clients in, parses requests
// and encodes results.
//
// The sources of truth are the MS-TDS specification (sections cited in the
// code) and what go-mssqldb v1.11.2 decodes (its tds.go, token.go,
// types.go, rpc.go and buf.go; file names cited in the code); clients this
// repository did not write prove it in clients_test.go (ODBC Driver 18
// through mssql-python, mssql-jdbc).
//
// # What a client gets
//
//   - PRELOGIN's encryption negotiated as SQL Server does it with a
//     certificate (a self-signed one made at Start): ENCRYPT_OFF gets its
//     LOGIN7 encrypted, ENCRYPT_ON and ENCRYPT_REQ the whole connection,
//     ENCRYPT_NOT_SUP (go-mssqldb's encrypt=disable, which DSN uses) nothing;
//     the TLS 1.2 handshake travels in PRELOGIN packets (tls.go).
//   - LOGIN7 with SQL authentication against Options.User/Password; a bad
//     login gets ERROR 18456 and the connection closes. The answer is what
//     SQL Server sends: ENVCHANGE database, collation, language and packet
//     size, INFO 5701 and 5703, LOGINACK for TDS 7.4 (so go-mssqldb sends
//     time.Time parameters as datetimeoffset(7)), DONE.
//   - SQL batches and RPCs become Requests for the Handler: sp_executesql
//     (its statement and declarations by position), sp_prepexec and
//     sp_execute as the statement they run, with its values, any other
//     procedure by name. The server answers sp_prepare and sp_unprepare
//     itself and returns prepared handles in RETURNVALUE tokens
//     (prepared.go); transaction manager requests
//     (BeginTx, Commit, Rollback) are answered by the server itself.
//   - Results as COLMETADATA, ROW/NBCROW and DONE (batch) or DONEINPROC,
//     RETURNSTATUS and DONEPROC (RPC), split into packets of the
//     negotiated size and sent as they fill; ERROR and INFO tokens.
//   - ATTENTION cancels the running Handler's context (cause ErrAttention)
//     and is acknowledged with DONE_ATTN; the connection stays usable.
//   - RESETCONNECTION is reported in Request.Reset and acknowledged.
//
// # Not supported
//
// TDS 8.0 (encrypt=strict), client certificates, integrated and Azure AD
// authentication, MARS, Always Encrypted, output parameters other than
// prepared handles, table-valued, UDT, sql_variant and text/ntext/image
// parameters, several RPCs in one request, bulk load, and the UTF8_SUPPORT
// feature extension (go-mssqldb never asks for it).
//
// # Column types
//
// Result columns take the SQL Server type names listed at Column.Type,
// including the (max) types, text/ntext/image, uniqueidentifier, xml,
// rowversion, the hierarchyid/geometry/geography UDTs and sql_variant.
// char/varchar/text are encoded in their collation's code page (1250 to
// 1257, by golang.org/x/text) or, for a _UTF8 collation, as UTF-8 with the
// collation's UTF-8 flag set. go-mssqldb ignores that flag and decodes by
// the LCID's code page, so a client sees UTF-8 bytes as cp1252 text
// ("é" arrives as "Ã©") exactly as it would from SQL Server.
package tdsserver
