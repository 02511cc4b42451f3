// Package fake is an in-memory SQL Server CDC database and an in-memory
// sink: the executable model of SQL Server that cdcsnap's snapshot logic is
// proven against, for the tests of this module and of its users.
//
// DB implements source.Source. It reproduces what snapshot logic depends on
// rather than simplifying it:
//
//   - Tables have columns declared as SQL Server types ("varchar(20)",
//     "decimal(18,4)", "datetime2(7)") and a primary key of one or more
//     columns. Values are checked against their type; char(n) and binary(n)
//     are padded as SQL Server stores them. One CreateTable call can also
//     load a table's first rows and enable CDC on it (TableDef.Rows,
//     TableDef.CaptureInstance), the setup a bootstrap test starts from.
//   - Tables can declare other indexes (TableDef.Indexes, unique or not,
//     one of them clustered), a nonclustered primary key
//     (TableDef.KeyNonclustered) or no key at all (TableDef.Keyless: Key
//     then only addresses rows, as a row locator would). Capture instances
//     list the indexes, the key's index and whether the table is a heap,
//     and every read follows the key the capture instance it is given
//     names: a source.CaptureInstance.SplitOn copy reads, seeks and counts
//     through the index leading with its column, entries ordered by index
//     key, then Key; a column no index leads with is read by scans.
//   - Keys order and compare as SQL Server's ORDER BY and "=" do
//     (keyrange.Compare): NULL first, strings by their column's collation
//     with trailing spaces ignored in every collation, so under a
//     case-insensitive collation 'a' and 'A  ' are the same key and a
//     table cannot hold both. Unlike SQL Server, the fake allows NULL keys.
//   - Transactions commit at strictly increasing LSNs. Each change gets a
//     __$seqval (increasing within the commit, and across commits) and a
//     __$command_id (one per statement, increasing within the transaction).
//     An update writes a before image (operation 3) and an after image (4)
//     that share their seqval; an update that changes the key is logged as
//     a delete (1) and an insert (2) with one command id, as SQL Server logs
//     updates of unique-index columns.
//   - Capture instances (two per table at most, names resolved exactly then
//     ignoring case) record commits from their start_lsn, which is the LSN
//     the next commit gets. A capture job, which runs at every commit by
//     default (Options.CaptureEvery, Options.ManualCapture,
//     DB.RunCaptureJob), decides what fn_cdc_get_max_lsn, fn_cdc_get_min_lsn,
//     fn_cdc_map_lsn_to_time and the change tables show: min LSN is NULL
//     until the job has processed past the instance's start_lsn, and on a
//     quiet database max LSN stays below a new instance's start_lsn until a
//     later commit is captured.
//   - Retention cleanup (DB.Cleanup) purges change rows and raises the
//     minimum LSN; reading changes from below it is a *source.DataLossError.
//   - sp_spaceused's row count can be made stale (DB.SetRowCountSkew).
//   - Every read counts the rows it examines as an index seek would
//     (DB.Stats): a keyrange.Piece reads the rows of its seek range
//     (Piece.InSeek), its guard filtering among them; SeekKey merges the
//     pieces of [from, +inf) in key order under a TOP (k + 1), reading the
//     first row of every piece the merge opens and stopping after k + 1 keys
//     (and, for a key that is not unique, one more row: the seek beyond
//     from). A piece of a key no index leads with counts every row of the
//     table, as a scan.
//   - ReadRange reads page by page, each page a keyset continuation after the
//     last key read. Under READ COMMITTED each page sees the rows committed
//     before it, so a change committed between pages shows in later pages
//     (and a row whose key moves backwards or forwards can be missed or read
//     twice, as on SQL Server); under SNAPSHOT the read sees the rows as they
//     were when ReadRange was called. DB.SetPageHook runs code between pages,
//     with no lock held, so a test can commit while a snapshot reads.
//   - DB.ListCaptureInstances lists the capture instances the login may
//     read, as sys.sp_cdc_help_change_data_capture does (DB.DenyChanges
//     hides one), so DB implements database.Lister as source/sqlserver
//     does.
//   - A read that must see a database at least as recent as an LSN
//     (source.ReadOptions.NotBefore) is refused with a
//     *source.ReplicaBehindError when the max LSN is below it, and so is a
//     change read whose upper bound is above the max LSN (never a shorter
//     read); DB.SetReplicaMaxLSN makes reads answer as on a readable
//     secondary whose redo lags behind the primary.
//   - Faults: DB.FailNext fails the next call of an operation (including
//     commits), DB.FailReadAfter fails a read after a number of rows; every
//     read honours its context between pages.
//
// MemSink implements sink.Sink in memory: parts are invisible until
// CommitSnapshot makes them visible at once, a snapshot that landed while
// another was written refuses the second (sink.ErrSnapshotExists), and
// commits and writes can be made to fail.
//
// The fake holds tables sorted by key in copy-on-write chunks, so reads are
// O(log n + k) and a million-row table loads in about a second and reads at
// millions of rows per second.
package fake
