// Package cdcsnap bootstraps SQL Server Change Data Capture streams.
//
// A CDC stream only starts from what retention still holds: rows written
// before CDC was enabled, or changed only before retention's window, never
// reach the target. cdcsnap takes a full, lock-free snapshot of the source
// table that meets the stream at an exact LSN, writes it to a Delta Lake
// "bronze" table in one atomic commit, and hands that LSN to the caller's
// stream as its starting point: no gap, no lock on the source, and every
// overlap deduplicated by the latest-image order.
//
// The packages, lowest first:
//
//   - lsn: the 10-byte log sequence number (parse, format, compare,
//     increment and decrement as SQL Server does, database/sql and JSON).
//   - keyrange: how a table is cut into key ranges (uniform integer ranges,
//     NTILE-equal ranges by keyset seeks) and each range into seekable pieces.
//   - source: the Source interface a snapshot reads from; source/sqlserver
//     implements it on go-mssqldb.
//   - sink: the Sink interface a snapshot writes to and the bronze schema;
//     sink/delta implements it as a Delta table in a local folder or
//     memory, and sink/delta/blobstore opens one in any gocloud.dev bucket
//     (S3, GCS, Azure Blob).
//   - fake: an in-memory CDC database and sink that behave like the real
//     thing where it matters, for tests of this module and of yours.
//   - snapshot: one capture instance: whole snapshots (Take, Bootstrap, and
//     Prepare/Execute/Commit for fan-out), chunked snapshots next to a
//     running stream (Backfill), the stream's pieces (Changes, Poll) and the
//     latest-image merge order.
//   - database: many capture instances of one database in one run, each to
//     its own target, under one budget of source connections.
//   - reconcile: compares a source table with the latest image of its
//     target, tile by tile, and names the keys (or rows) that differ.
//   - source/sourcetest, sink/sinktest: conformance suites your own source
//     or sink runs from its tests.
//
// Start with snapshot.Bootstrap: it returns the first LSN your stream reads.
// The runnable program examples/bootstrap does the whole job against the
// embedded fake or a real SQL Server. DESIGN.md at the repository's root
// holds the rules every snapshot keeps (cited in the code as R1, R2, ...),
// the bronze schema and its merge order, and which tests prove what.
package cdcsnap
