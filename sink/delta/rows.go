package delta

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/internal/deltalog"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
)

// The rows are the truth. A txn record can disappear while its rows stay:
// the Delta protocol lets a checkpoint drop txn actions older than
// delta.setTransactionRetentionDuration ("Transaction Identifiers" in
// PROTOCOL.md; delta-rs and Spark both do), and OPTIMIZE, Z-order and
// VACUUM rewrite the files. When the record is gone, a whole snapshot, the
// last applied change batch and a chunked snapshot's waves are found from
// the bronze metadata columns instead, pruned by each file's statistics:
// a file whose stats show it holds only snapshot rows of one instance and
// one LSN is counted from its stats and never opened, a file that cannot
// hold a row of interest is skipped, and only the rest (files that
// compaction mixed, or without usable stats) have their metadata columns
// read.

// rowsWant says what a scan of the rows looks for.
type rowsWant int

const (
	wantSnapshot rowsWant = iota // whole-snapshot rows: _operation 0, _chunk NULL
	wantBatch                    // the largest _batch_id
	wantChunks                   // chunked-snapshot rows: _operation 0, _chunk set
)

// rowsFacts is what a scan found for one capture instance.
type rowsFacts struct {
	// snaps maps a whole snapshot's LSN to its rows.
	snaps map[lsn.LSN]*rowsSnap
	// batch is the largest _batch_id; hasBatch is false when none.
	batch    int64
	hasBatch bool
	// chunks maps a chunked snapshot's LSN to its largest _chunk.
	chunks map[lsn.LSN]int32
	// opened and skipped count the files whose metadata columns were read
	// and the files the stats settled without a read.
	opened, skipped int
}

type rowsSnap struct {
	rows     int64
	commitTS time.Time         // zero until a row's _commit_ts is read
	file     *deltalog.AddFile // a file that holds only this snapshot's rows
}

// newestSnapshot returns the snapshot with the highest LSN: LSNs only grow
// in a database, so a resnapshot's is above the one it replaced.
func (f *rowsFacts) newestSnapshot() (lsn.LSN, *rowsSnap, bool) {
	var best lsn.LSN
	var bs *rowsSnap
	for l, s := range f.snaps {
		if bs == nil || best.Less(l) {
			best, bs = l, s
		}
	}
	return best, bs, bs != nil
}

// foldRange returns the smallest and the largest string, byte-wise, that
// equal ci ignoring case (strings.EqualFold): each rune replaced by the
// least and the greatest rune of its simple case-folding orbit (UTF-8
// sorts as code points, and every such string has the same rune count).
func foldRange(ci string) (lo, hi string) {
	var l, h strings.Builder
	for _, r := range ci {
		mn, mx := r, r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			mn, mx = min(mn, f), max(mx, f)
		}
		l.WriteRune(mn)
		h.WriteRune(mx)
	}
	return l.String(), h.String()
}

// statInt reads an integer stat; ok is false when it is absent.
func statInt(m map[string]any, col string) (int64, bool) {
	n, ok := m[col].(json.Number)
	if !ok {
		return 0, false
	}
	v, err := n.Int64()
	return v, err == nil
}

// statsSay is what one file's statistics settle for a scan.
type statsSay int

const (
	statsRead  statsSay = iota // the file must be read
	statsSkip                  // it holds no row of interest
	statsExact                 // its rows of interest follow from the stats
)

// judge decides what a file's stats settle for want and ci. For
// statsExact it also returns the LSN (a snapshot's) and the largest
// batch id or chunk the stats give.
func judge(st deltalog.FileStats, want rowsWant, ci, ciLo, ciHi string) (statsSay, string, int64) {
	nulls := func(col string) (int64, bool) { n, ok := st.NullCount[col]; return n, ok }
	if n, ok := nulls(sink.ColCaptureInstance); ok && n == st.NumRecords {
		return statsSkip, "", 0
	}
	mn, ok1 := st.MinValues[sink.ColCaptureInstance].(string)
	mx, ok2 := st.MaxValues[sink.ColCaptureInstance].(string)
	if ok1 && ok2 && (ciHi < mn || mx < ciLo) {
		return statsSkip, "", 0
	}
	// One instance only, spelled as ci ignoring case, and not a truncated
	// prefix (a truncated max differs from the min).
	oneInstance := ok1 && ok2 && mn == mx && sink.SameInstance(mn, ci)
	if n, ok := nulls(sink.ColCaptureInstance); !ok || n != 0 {
		oneInstance = false
	}
	switch want {
	case wantBatch:
		if n, ok := nulls(sink.ColBatchID); ok && n == st.NumRecords {
			return statsSkip, "", 0
		}
		if b, ok := statInt(st.MaxValues, sink.ColBatchID); ok && oneInstance {
			return statsExact, "", b
		}
		return statsRead, "", 0
	default:
		if opMin, ok := statInt(st.MinValues, sink.ColOperation); ok && opMin > sink.OperationSnapshot {
			return statsSkip, "", 0
		}
		if n, ok := nulls(sink.ColOperation); ok && n == st.NumRecords {
			return statsSkip, "", 0
		}
		chunkNulls, ok := nulls(sink.ColChunk)
		if ok && want == wantSnapshot && chunkNulls == 0 {
			return statsSkip, "", 0
		}
		if ok && want == wantChunks && chunkNulls == st.NumRecords {
			return statsSkip, "", 0
		}
		opMax, ok1 := statInt(st.MaxValues, sink.ColOperation)
		opMin, ok2 := statInt(st.MinValues, sink.ColOperation)
		snapNulls, ok3 := nulls(sink.ColSnapshot)
		s1, ok4 := st.MinValues[sink.ColSnapshot].(string)
		s2, ok5 := st.MaxValues[sink.ColSnapshot].(string)
		// Only snapshot rows of ci, all of one LSN.
		pure := oneInstance && ok && ok1 && ok2 && opMin == 0 && opMax == 0 && ok3 && snapNulls == 0 && ok4 && ok5 && s1 == s2
		if pure && want == wantSnapshot && chunkNulls == st.NumRecords {
			return statsExact, s1, 0
		}
		if c, okc := statInt(st.MaxValues, sink.ColChunk); pure && okc && want == wantChunks && chunkNulls == 0 {
			return statsExact, s1, c
		}
		return statsRead, "", 0
	}
}

// scanRows finds what the rows of s say about capture instance ci.
func (t *Table) scanRows(ctx context.Context, s *deltalog.State, ci string, want rowsWant) (*rowsFacts, error) {
	facts := &rowsFacts{snaps: map[lsn.LSN]*rowsSnap{}, chunks: map[lsn.LSN]int32{}}
	if s.Version < 0 || len(s.Files) == 0 {
		return facts, nil
	}
	ciLo, ciHi := foldRange(ci)
	cm, err := s.Mapping()
	if err != nil {
		return nil, err
	}
	var read []deltalog.AddFile
	for _, f := range s.SortedFiles() {
		st, err := f.ParseStats()
		if err != nil {
			read = append(read, f)
			continue
		}
		st = cm.DisplayStats(st)
		say, l, b := judge(st, want, ci, ciLo, ciHi)
		switch say {
		case statsRead:
			read = append(read, f)
			continue
		case statsExact:
			if want == wantBatch {
				facts.batch, facts.hasBatch = max(facts.batch, b), true
				break
			}
			parsed, err := lsn.Parse(l)
			if err != nil {
				read = append(read, f) // not our LSN form: let the rows say
				continue
			}
			if want == wantChunks {
				if c, ok := facts.chunks[parsed]; !ok || int32(b) > c {
					facts.chunks[parsed] = int32(b)
				}
				break
			}
			live := st.NumRecords - f.DeletionVector.DeletedRows()
			if live <= 0 {
				break // every row deleted (a deletion vector)
			}
			sn := facts.snap(parsed)
			sn.rows += live
			if sn.file == nil {
				sn.file = &f
			}
		}
		facts.skipped++
	}
	if len(read) > 0 {
		if err := t.readFacts(ctx, s, read, ci, want, facts); err != nil {
			return nil, err
		}
	}
	if want != wantSnapshot {
		return facts, nil
	}
	// A snapshot counted from stats alone still needs its _commit_ts,
	// which stats keep only to the millisecond (Spark): one row of one of
	// its files gives it.
	if l, sn, ok := facts.newestSnapshot(); ok && sn.commitTS.IsZero() && sn.file != nil {
		one := &rowsFacts{snaps: map[lsn.LSN]*rowsSnap{}, chunks: map[lsn.LSN]int32{}}
		if err := t.readFacts(ctx, s, []deltalog.AddFile{*sn.file}, ci, wantSnapshot, one); err != nil {
			return nil, err
		}
		if got, ok := one.snaps[l]; ok {
			sn.commitTS = got.commitTS
		}
		facts.opened += one.opened
	}
	return facts, nil
}

func (f *rowsFacts) snap(l lsn.LSN) *rowsSnap {
	sn, ok := f.snaps[l]
	if !ok {
		sn = &rowsSnap{}
		f.snaps[l] = sn
	}
	return sn
}

// factColumns are the bronze metadata columns a scan reads.
var factColumns = []string{sink.ColCaptureInstance, sink.ColOperation, sink.ColStartLSN, sink.ColSnapshot, sink.ColChunk, sink.ColBatchID, sink.ColCommitTS}

// readFacts reads the metadata columns of files (only those columns) and
// adds what their rows of ci say to facts.
func (t *Table) readFacts(ctx context.Context, s *deltalog.State, files []deltalog.AddFile, ci string, want rowsWant, facts *rowsFacts) error {
	as, err := s.Schema.ArrowSchema()
	if err != nil {
		return err
	}
	var fields []arrow.Field
	for _, c := range factColumns {
		if idx := as.FieldIndices(c); len(idx) == 1 {
			fields = append(fields, as.Field(idx[0]))
		}
	}
	schema := arrow.NewSchema(fields, nil)
	for _, c := range []string{sink.ColCaptureInstance, sink.ColOperation, sink.ColStartLSN} {
		if len(schema.FieldIndices(c)) != 1 {
			return nil // not a bronze table: it holds no row of any instance
		}
	}
	r, err := t.newReader(ctx, s, files, schema)
	if err != nil {
		return err
	}
	r.project = true
	defer r.Release()
	col := func(rec arrow.RecordBatch, name string) arrow.Array {
		if idx := rec.Schema().FieldIndices(name); len(idx) == 1 {
			return rec.Column(idx[0])
		}
		return nil
	}
	for r.Next() {
		rec := r.RecordBatch()
		cis, ok1 := col(rec, sink.ColCaptureInstance).(*array.String)
		ops, ok2 := col(rec, sink.ColOperation).(*array.Int32)
		starts, ok3 := col(rec, sink.ColStartLSN).(*array.String)
		if !ok1 || !ok2 || !ok3 {
			return &deltalog.SchemaError{Column: sink.ColOperation, Reason: "the bronze metadata columns have unexpected types"}
		}
		snaps, _ := col(rec, sink.ColSnapshot).(*array.String)
		chunks, _ := col(rec, sink.ColChunk).(*array.Int32)
		batches, _ := col(rec, sink.ColBatchID).(*array.Int64)
		tss, _ := col(rec, sink.ColCommitTS).(*array.Timestamp)
		for i := 0; i < int(rec.NumRows()); i++ {
			if cis.IsNull(i) || !sink.SameInstance(cis.Value(i), ci) {
				continue
			}
			if want == wantBatch {
				if batches != nil && batches.IsValid(i) {
					facts.batch, facts.hasBatch = max(facts.batch, batches.Value(i)), true
				}
				continue
			}
			if ops.IsNull(i) || ops.Value(i) != sink.OperationSnapshot {
				continue
			}
			chunked := chunks != nil && chunks.IsValid(i)
			if chunked != (want == wantChunks) {
				continue
			}
			text := ""
			if snaps != nil && snaps.IsValid(i) {
				text = snaps.Value(i)
			} else if starts.IsValid(i) {
				text = starts.Value(i) // rows written before _snapshot existed
			}
			l, err := lsn.Parse(text)
			if err != nil {
				return fmt.Errorf("delta: table %s: a snapshot row of %q has LSN %q: %w", t.url, ci, text, err)
			}
			if chunked {
				if c, ok := facts.chunks[l]; !ok || chunks.Value(i) > c {
					facts.chunks[l] = chunks.Value(i)
				}
				continue
			}
			sn := facts.snap(l)
			sn.rows++
			if sn.commitTS.IsZero() && tss != nil && tss.IsValid(i) {
				unit := tss.DataType().(*arrow.TimestampType).Unit
				sn.commitTS = tss.Value(i).ToTime(unit).UTC()
			}
		}
	}
	facts.opened += len(files)
	if err := r.Err(); err != nil {
		return err
	}
	return nil
}

// snapshotFromRows finds the newest whole snapshot of ci from the rows of
// s, logging that the txn record was gone.
func (t *Table) snapshotFromRows(ctx context.Context, s *deltalog.State, ci string) (sink.Snapshot, bool, error) {
	facts, err := t.scanRows(ctx, s, ci, wantSnapshot)
	if err != nil {
		return sink.Snapshot{}, false, fmt.Errorf("delta: table %s: finding a snapshot of %q from its rows: %w", t.url, ci, err)
	}
	l, sn, ok := facts.newestSnapshot()
	if !ok {
		return sink.Snapshot{}, false, nil
	}
	t.log.Info("snapshot found from the table's rows: its txn record is gone (a checkpoint drops txns older than delta.setTransactionRetentionDuration)",
		"capture_instance", ci, "lsn", l.String(), "rows", sn.rows, "files_read", facts.opened, "files_settled_by_stats", facts.skipped)
	return sink.Snapshot{CaptureInstance: ci, LSN: l, CommitTS: sn.commitTS, Version: -1, Rows: sn.rows}, true, nil
}

// lastBatch returns the largest change batch id of ci that the table
// holds: from its txn record, or from the rows when the record is gone.
func (t *Table) lastBatch(ctx context.Context, s *deltalog.State, ci string) (int64, bool, error) {
	if tx, ok := s.Txns[changesAppID(ci)]; ok {
		return tx.Version, true, nil
	}
	facts, err := t.scanRows(ctx, s, ci, wantBatch)
	if err != nil {
		return 0, false, fmt.Errorf("delta: table %s: finding the last change batch of %q from its rows: %w", t.url, ci, err)
	}
	if facts.hasBatch {
		t.log.Info("last change batch found from the table's rows: its txn record is gone",
			"capture_instance", ci, "batch_id", facts.batch, "files_read", facts.opened, "files_settled_by_stats", facts.skipped)
	}
	return facts.batch, facts.hasBatch, nil
}
