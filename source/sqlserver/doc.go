// Package sqlserver implements source.Source on SQL Server with Change Data
// Capture, through database/sql and github.com/microsoft/go-mssqldb.
//
// It uses documented interfaces only: sys.sp_cdc_help_change_data_capture
// (capture instances, start LSN, key), sys.sp_cdc_get_captured_columns
// (declared types), sys.fn_cdc_get_max_lsn, sys.fn_cdc_get_min_lsn,
// sys.fn_cdc_map_lsn_to_time, the change table cdc.[<capture instance>_CT]
// and, for a login that may not read it, cdc.fn_cdc_get_all_changes_<capture
// instance>, sys.sp_spaceused (row counts), sys.columns (collations and their
// code pages, nullability, computed columns, lengths) and sys.indexes with
// sys.index_columns (the table's indexes and key columns, whether the key's
// index is clustered, whether the table is a heap).
//
// Source.ListCaptureInstances lists the capture instances the login can
// read (sys.sp_cdc_help_change_data_capture without arguments, F01), so a
// *Source is a database.Lister and database.Bootstrap can select among
// every instance of a database.
//
// # Facts
//
// Every behaviour of SQL Server and go-mssqldb the package relies on is in
// FACTS.md beside this file, with its Microsoft documentation page and the
// place in a peer that tests against a real server (Debezium, Estuary,
// Flink CDC, Airbyte) relying on the same fact; the code names the row it
// relies on (FACTS.md F13). Among them:
//
//   - sys.sp_cdc_get_captured_columns calls its ordinal column
//     column_ordinal on SQL Server 2017 and later and ordinal_position in
//     older documentation: either is read (F04).
//   - sys.fn_cdc_get_min_lsn returns 0x00… for an instance that does not
//     exist or that the login may not read: a *source.AccessError, never "no
//     changes" (F07).
//   - Changes come from the change table ordered by __$command_id within a
//     transaction, where __$seqval alone can put an update's insert before
//     its delete (F10); a login without SELECT on it (or on
//     cdc.lsn_time_mapping, which the read joins) gets an error wrapping
//     ErrChangeTableDenied naming the grant, unless
//     Options.AllowChangeFunction lets it read through the change function,
//     ordered by __$seqval, with a warning (F54). Source.ChangeAccess says
//     so before any change is read, from HAS_PERMS_BY_NAME (F86), for
//     snapshot.Inspect.
//   - A read that fails with a transient error (a deadlock victim, a lock
//     time-out, Azure SQL's reconfiguration errors, a broken connection)
//     runs again on a new connection (Options.Retry): a range read ordered
//     by its key after the last key it returned, a change read after its
//     last row; each retry is logged and counted (F80, F81). A read that
//     cannot go on in place (a range with no order to resume by that
//     already handed out rows, or the retries spent) fails wrapping
//     source.ErrTransient, and package snapshot reads that partition again
//     from its start. A read blocked
//     by another session's lock longer than Options.LockTimeout (SET
//     LOCK_TIMEOUT on its connection, 30 s by default) fails with 1222 and
//     so runs again, instead of waiting unseen (F83).
//   - Computed columns are NULL in every change row, so snapshots read them
//     as NULL too; large-object columns are NULL in some change rows; every
//     bronze column is nullable (F13, F52).
//   - go-mssqldb decodes char/varchar only in the code pages it has, never
//     UTF-8, and turns bytes a code page leaves undefined (1252's 0x81, 0x8D,
//     0x8F, 0x90, 0x9D, which UTF-8 written through a Latin1 column holds)
//     into U+FFFD: every char, varchar and text column is read converted by
//     the server, CAST(col AS nvarchar(n)), seeks still on the column itself
//     (F45, F46, F82); two bytes a character on the wire for one stored.
//   - Under Turkish and Azeri collations 'I' and 'i' are two keys (F23).
//   - The bytes of a uniqueidentifier depend on the DSN's "guid
//     conversion": the source probes a known value once (F44).
//   - Commit times are the server's local wall clock, of a commit's own
//     LSN only (NULL for any other, F08); change rows take them from
//     cdc.lsn_time_mapping by join, not by a scalar function per row (F42).
//     The zone is Options.ServerTimeZone, else the one SQL Server 2022 and
//     Azure SQL name (CURRENT_TIMEZONE_ID, mapped by CLDR's windowsZones;
//     on Azure SQL Database, whose instance runs on UTC, another name comes
//     from a database-scoped time zone that commit times may not follow,
//     and is refused with ErrZoneUnknown), else the server's current UTC
//     offset (an hour off across a daylight-saving change) (F37); the hour a fall-back repeats is read
//     in LSN order (F84).
//
// # Statements
//
// Every statement is built by a pure function of the capture instance and
// its bounds (internal/mssqlstmt). Names are bracket-quoted as QUOTENAME
// quotes them; every value is a parameter; the only types written into the
// text are CAST targets rebuilt from the captured-column metadata and
// checked against an allowlist, and the only other inlined names are
// collations of letters, digits and underscores. A key bound is
// CAST(@pN AS <declared type>), and a char/varchar bound CAST(@pN COLLATE
// <column collation> AS varchar(n)), so the comparison keeps the column's
// type (an index seek, no CONVERT_IMPLICIT) and converts in the column's
// code page. Every statement the package can emit is pinned in
// internal/mssqlstmt/testdata/*.sql and checked by .ci/check-sql.py with a
// T-SQL parser.
//
// A range of keys is read as the UNION ALL of its seekable pieces
// (keyrange.Pieces), with keyrange's NULL-first order: "key < v" is
// (key IS NULL OR key < v) on a nullable column, "key > NULL" is IS NOT
// NULL, "key = NULL" is IS NULL; guards become residual predicates.
//
// # Types
//
// Values are decoded exactly from the Go types go-mssqldb returns: decimal,
// numeric, money and smallmoney from their text ([]byte), never through
// float64; datetime2(7) to microseconds (the Delta timestamp's resolution);
// uniqueidentifier from SQL Server's mixed-endian bytes to its canonical
// string; time(n) to "hh:mm:ss.fffffff" text with n digits. sql_variant
// is refused with source.ErrUnsupportedType; hierarchyid, geometry and
// geography are carried as their raw CLR bytes. See source.Column.ArrowType
// for the whole mapping.
//
// Key bounds bind exactly, at full SQL Server precision: datetime2,
// datetime and smalldatetime as civil.DateTime (datetime2(7), 100 ns),
// date as civil.Date, time as civil.Time (time(7)), datetimeoffset as
// mssql.DateTimeOffset (datetimeoffset(7)), uniqueidentifier as its string,
// decimal and money as their exact text. Go keeps the 100 ns that drivers
// returning microseconds truncate (mssql-cdc-pyspark 0.8.0 allows a
// datetime2(7) or datetimeoffset(7) column only as a key's last for that
// reason, client/_sql_client.py), so a datetime2(7), datetimeoffset(7) or
// time(n) key column can take any key position here (DESIGN.md R4).
//
// # Split columns and heaps
//
// A capture instance lists its table's B-tree indexes (Indexes: enabled,
// not hypothetical, not filtered; clustered first) and says whether the
// table is a heap (Heap: no clustered index). A table whose instance has
// no unique index, or whose key is a poor one to cut, can be read by a
// split column: source.CaptureInstance.SplitOn(column) returns a copy
// keyed by that one column, with KeyIndex the index that leads with it,
// unique or not, and every Source method then plans, seeks and reads by
// it. Range predicates are on values (lower bound inclusive, upper
// exclusive, NULL below every value), so consecutive ranges hold every
// row exactly once however often a value repeats (FACTS.md F58). Only
// the seek changes: for a key that is not unique the seek returns
// the smallest key at or above the (k+1)-th and above from, with one more
// TOP (1) seek through CROSS APPLY (F38), so a bound never repeats and a
// run of one value longer than a range stays in one range. A heap
// without an index to split on is read as one range.
//
// # Readable secondaries
//
// To read from a readable secondary of an availability group, put
// ApplicationIntent=ReadOnly (exactly that value; it needs a database in
// the DSN) in the DSN given to Open and connect to the availability group
// listener, or to one secondary directly: go-mssqldb then sets LOGIN7's
// read-only intent and the listener's read-only routing sends each new
// connection to a readable secondary (FACTS.md F57). What changes there
// (F56):
//
//   - Every query runs under snapshot isolation, whatever the session set,
//     and locking hints are ignored: keep the default source.ReadCommitted
//     (the replica reads it as snapshot isolation anyway; whether an
//     explicit SNAPSHOT needs ALLOW_SNAPSHOT_ISOLATION there is not
//     documented), and no read takes locks the primary's writers wait for.
//     Long reads hold back ghost cleanup on the primary instead.
//   - The data is the log the replica has applied: seconds behind the
//     primary, more under load or while data movement is suspended. CDC
//     tables and functions are readable there (the capture job runs on the
//     primary), so L0 (sys.fn_cdc_get_max_lsn) and the rows come from the
//     replica's own past state, consistently, as long as both come from
//     the same replica.
//   - With load-balanced read-only routing, or several listeners, two
//     connections can reach two replicas with different lag, and a
//     partition read on a replica behind the one L0 came from would miss
//     rows that changed between its state and L0, which the stream, that
//     starts after L0, never brings. source.ReadOptions.NotBefore, which
//     package snapshot sets on every partition and chunk read (to the max
//     LSN its plan read, snapshot.Plan.MaxLSN), guards this: the connection that reads a range first checks that its own
//     replica's sys.fn_cdc_get_max_lsn() has reached it (a replica that
//     shows L0's row of cdc.lsn_time_mapping has applied every commit at
//     or below L0, since redo applies the log in order and the capture
//     job wrote that row after those commits), and fails with a
//     *source.ReplicaBehindError otherwise, which a retry can clear once
//     the replica catches up. ReadChanges takes its bounds, its rows and
//     its end check on one connection for the same reason, and refuses an
//     upper bound above that connection's own max LSN with a
//     *source.ReplicaBehindError, never reading less than asked without
//     saying so (snapshot.Poll then reads as far as that replica has
//     captured); a change read resumed after a transient error is held to
//     its first upper bound the same way. Seeks and row
//     counts are not checked: a bound from an older state is still a
//     correct bound.
//   - Pointing the DSN at one secondary's own address, not the listener,
//     keeps every connection on that replica: its state only moves
//     forward, so the check always passes.
//
// # Connections
//
// Each range read and each keyset seek runs on its own *sql.Conn, under
// READ COMMITTED or SNAPSHOT (never NOLOCK): SET TRANSACTION ISOLATION
// LEVEL sticks to a pooled connection, so the level is set before the read
// and reset to READ COMMITTED afterwards, or the connection is closed
// (Options.ConnPolicy, and always when the reset fails).
//
// # Integration tests
//
// The tests in integration/ run against a real SQL Server when
// CDCSNAP_MSSQL_DSN is set; integration/run.sh starts SQL Server 2022 with
// its agent in Docker, creates the test database and runs them, and
// .github/workflows/sqlserver.yml runs them on every push to a forge, on a
// SQL Server 2022 service container. They hold the server to the facts of
// FACTS.md marked IT.
package sqlserver
