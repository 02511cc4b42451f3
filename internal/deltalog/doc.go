// Package deltalog reads and writes the transaction log of a Delta Lake
// table (the Delta protocol's PROTOCOL.md): the actions (AddFile, Txn,
// Protocol, MetaData, ...), log replay from commits and checkpoints
// (classic, multi-part and v2) into a State, classic checkpoints, the
// table's Delta schema and its Arrow form, column mapping, deletion
// vectors, and the table features an appending writer must honour or
// refuse. Log holds a table's bucket and writes its log files atomically
// (put-if-absent commits; on a local folder, link and rename).
//
// It is the format layer under sink/delta, which adds what is cdcsnap's
// own (the bronze records, their txn appIds, snapshots and changes) and
// is the package users import; the error types users match are named
// there. It is internal because only sink/delta and the repository's
// tests need it.
package deltalog
