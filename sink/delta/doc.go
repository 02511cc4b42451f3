// Package delta implements sink.Sink as a Delta Lake table. Open takes a
// local folder (a plain path or file://) or mem://; package blobstore
// opens a table in a cloud store (s3://, gs://, azblob://, through
// gocloud.dev/blob) with the store's driver imported
// (_ "gocloud.dev/blob/s3blob", gcsblob, azureblob, or package alldrivers
// for all three), so a program that writes to a folder links no cloud
// SDK, nor gocloud.dev. OpenStore takes any other Store.
//
// # Writing
//
// WritePartition streams Arrow records into Parquet files (Snappy,
// timestamps INT64 microseconds, dictionary encoding only on
// low-cardinality columns, DELTA_BINARY_PACKED on ascending integer, date
// and timestamp columns, which Spark's vectorized reader reads from 3.3.0;
// internal/parquetprops) rolled at Options.TargetFileSize, with
// bounded memory (one buffered row group per writer). Each file's add
// action carries statistics (numRecords, minValues, maxValues, nullCount)
// gathered while it was written. The files stay invisible until
// CommitSnapshot writes one commit referencing every partition's files.
// AppendChanges appends change rows in one commit, idempotently per
// (capture instance, batch id).
//
// A snapshot partition's bronze string constants (capture instance, start
// LSN, snapshot LSN) reach the writer as one-value dictionaries, so they are
// neither hashed nor compared row by row; the file is the same. Files are
// assembled from arrow-go's column writers by internal/pqfile, which
// compresses data pages with s2's fast Snappy encoder per writer: arrow-go's
// own codec is s2's slower "better" mode, and changing it would change
// every Parquet writer in the importing program. Each
// partition write's Parquet writers share a pool of the large buffers a
// buffered row group grows and frees (up to 32 MiB held), instead of
// asking Go's allocator and garbage collector for new ones every row group.
//
// Commits are written put-if-absent: the store's conditional write on
// S3, GCS and Azure, and a hard link of a finished temporary file on a
// local folder (atomic across processes). A commit that loses a race re-reads the log and
// retries at the next version, unless a snapshot of the same capture
// instance landed meanwhile: then CommitSnapshot returns that snapshot and
// an error wrapping sink.ErrSnapshotExists. A classic Parquet checkpoint
// is written every Options.CheckpointInterval commits.
//
// On a local folder every file reaches the disk before the log names it:
// a data file's bytes are synced before it gets its name, and the folders
// holding the name after, all before its write returns; a commit,
// checkpoint or _last_checkpoint is synced the same way before the call
// that writes it returns, and Open syncs the folders it makes. A power
// loss or kernel crash then never leaves a commit naming a data file that
// is empty or missing (Linux's fsync(2) makes a name durable only through
// a sync of its folder). Untested on Windows, where folders are not
// synced, and on macOS.
//
// The store must honour the condition. Before a Table's first conditional
// write to a store other than a folder it writes a probe object
// (_cdcsnap/probe/<uuid>) twice put-if-absent, deletes it, and refuses the store with
// ErrNoConditionalWrites if the second write succeeded: an S3-compatible
// store that ignores If-None-Match would let two writers of one version
// overwrite each other's commit. AWS S3 (since August 2024), GCS and
// Azure honour it, and package reliability runs every commit path against
// moto, fake-gcs-server and Azurite.
//
// The first write creates the table in the records' schema: unpartitioned
// at protocol 1/2, or as Options.Create asks (partition columns, table
// properties, features; column-mapped physical names follow from each
// column's position and name, so data files written before the creating
// commit, in any process, already use them).
// Records with extra nullable columns add them to the schema (the bronze
// migration that added _snapshot and _chunk); any other difference is a
// *SchemaError naming the column, before anything is written.
//
// # The durable snapshot record
//
// Delta checkpoints drop commitInfo, so a snapshot is recorded twice: in
// commitInfo.userMetadata ({"snapshot", "lsn", "commit_ts"}, for people
// reading the history) and in a txn action, which checkpoints keep and log
// cleanup never removes. Its appId is
//
//	cdcsnap/snapshot/<capture instance, path-escaped>/<LSN>/<commit_ts µs>/<rows>
//
// and its version is the table version of the commit. FindSnapshot reads
// txn actions (from the checkpoint and the commits after it), never
// commitInfo; the newest version of an instance wins, so a resnapshot
// supersedes the earlier one. Change batches use appId
// "cdcsnap/changes/<capture instance folded to lower case>" with the batch
// id as version.
//
// # When the txn records are gone: the rows are the truth
//
// The protocol lets a checkpoint drop txn actions older than
// delta.setTransactionRetentionDuration, and delta-rs and Spark do; with
// log cleanup the record is then gone for good. So when a record is
// missing, the package finds the same facts from the table's rows:
//
//   - a whole snapshot: the rows with _operation 0, the instance in
//     _capture_instance (ignoring case) and _chunk NULL; the newest is the
//     highest coalesce(_snapshot, _start_lsn), its Rows the count of its
//     rows, its CommitTS their _commit_ts, and its Version -1;
//   - the last change batch: the largest _batch_id of the instance's
//     rows (an empty batch leaves no row, so it is appended again, which
//     appends nothing);
//   - a chunked snapshot: its head (_cdcsnap/chunked-head/<planID>.json,
//     written before the open commit) with evidence that it is visible (a
//     wave txn or rows with its LSN in _snapshot and _chunk set); Committed
//     is one past the largest _chunk of its rows.
//
// The search is pruned by each file's statistics: a file that cannot hold
// a row of interest is skipped, a file holding only one instance's
// snapshot rows of one LSN (what this package writes) is counted from its
// stats, and only the rest (files OPTIMIZE or Z-order mixed, or written
// without stats for the metadata columns, e.g. past
// delta.dataSkippingNumIndexedCols) have their metadata columns read; one
// row of one file gives the exact commit time. The log says which path
// found a record ("found from the table's rows").
//
// # Chunked snapshots
//
// Table also implements sink.ChunkSink (snapshot.Backfill), with the same
// kind of records, each txn's version the table version of its commit:
//
//	cdcsnap/chunked/<capture instance, path-escaped>/<S>/<commit_ts µs>/<chunks>/<planID>
//	cdcsnap/chunks/<planID>/<end>
//	cdcsnap/chunked-complete/<planID>
//
// OpenChunked writes the plan to _cdcsnap/chunked/<planID>.json
// put-if-absent (outside _delta_log; VACUUM skips folders starting with
// _), then commits the open txn with no data. Each CommitChunks commits a
// wave's add actions with the txn of its end (chunks 0..end-1 are then
// committed), CompleteChunked the completion txn. FindChunked reads the
// instance's newest open txn, the highest <end> of its plan and the
// completion txn, and the plan file: never commitInfo, which carries
// sink.ChunkedUserMetadata for people reading the history. Every check
// (the newest open is the one replaced; a wave starts at the first
// uncommitted chunk) is made against the log the commit follows, and
// again after a lost put-if-absent race, so of two writers of one wave
// exactly one lands and no chunk is ever visible twice. FindSnapshot and
// ReadSnapshotRows never see chunked snapshots (their rows have _chunk
// set).
//
// Table implements sink.PartialSink too: a whole snapshot not yet
// committed is recorded in plain objects beside the log, which no Delta
// reader looks at and VACUUM skips (folders starting with _):
//
//	_cdcsnap/partial/<planID>/plan.json              head and plan, put-if-absent
//	_cdcsnap/partial/<planID>/part-<n>-<uuid>.json   partition n's sink.Part
//
// CheckSnapshot (sink.Checker) reads only the log: package snapshot calls
// it before it records a snapshot's LSN, and its error names every
// unsupported writer feature and every column that does not fit.
// OpenPartial first checks the table's protocol and schema against the
// snapshot's, so a snapshot the table cannot take is refused before a row
// is read and nothing is written. FindPartial reads the newest plan.json
// of the instance and, per partition, the first record whose data files
// all exist (VACUUM deletes uncommitted files older than its retention, 7
// days by default; a partition whose files are gone is Lost and read
// again). DropPartial removes plan.json, then the part records; the data
// files stay (committed, or left to VACUUM).
//
// # Reading
//
// The reader replays the log from the newest complete classic checkpoint
// (single or multi-part; _last_checkpoint is only a hint, so a stale or
// missing one is fine) and the JSON commits after it, to list the live
// files, the schema, the txn records and the snapshots. A logical file is
// (path, deletion vector): every read (ReadAll, ReadSnapshotRows, the
// rows fallback) skips the rows a file's deletion vector deletes (inline
// or in a deletion_vector_<uuid>.bin file, portable or native
// RoaringBitmapArray format, CRC-checked), so tables with the
// deletionVectors feature, on by default on Databricks, are read as
// Spark reads them. Checkpoints may be classic, multi-part or v2 spec
// (UUID-named, JSON or Parquet, with sidecar files). Column-mapped tables
// (name or id mode) are read by physical name or Parquet field id, their
// stats by physical name. Tables that need a reader feature it does not
// implement are refused with an *UnsupportedProtocolError naming the
// feature, never misread. ReadAll reads the live files back into Arrow.
//
// # Tables with features
//
// A bronze table created by Spark 4 or Databricks (protocol 3/7) is
// appended to when an appending writer can do what each of its writer
// features asks (see internal/deltalog/features.go): appendOnly,
// changeDataFeed (appends need no cdc files), deletionVectors, domainMetadata, vacuumProtocolCheck
// and v2Checkpoint ask nothing of it (it writes no checkpoint into a table
// with features); timestamp_ntz columns take the bronze timestamps as
// wall-clock values; columns widened by typeWidening take the bronze
// values cast to the wider type; inCommitTimestamp gets a
// commitInfo first in every commit with its inCommitTimestamp; rowTracking
// gets fresh baseRowId and defaultRowCommitVersion on every add and the
// delta.rowTracking high water mark; columnMapping (name or id mode) gets
// data files that name columns by physical name with their ids as Parquet
// field ids, and stats keyed by physical name (a mapped table does not
// gain columns here: add them with the engine that mapped it). A feature
// that would make it enforce something is refused before anything is
// read, naming what: each CHECK constraint (delta.constraints.<name>),
// column invariant, generated or identity column, and any other writer
// feature.
//
// A table partitioned by captured columns (string, integer, date,
// timestamp, timestamp_ntz, boolean or decimal) gets each data file under
// <column>=<value>/ (Hive's escaping, __HIVE_DEFAULT_PARTITION__ for
// NULL), the values in the add action's partitionValues (ISO 8601 UTC for
// timestamps) and not in the file, as Spark writes; at most 16 files are
// open at once per writer. Reads fill partition columns from the add
// actions. An empty string in a string partition column becomes NULL, as
// in Spark.
package delta
