package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/internal/deltalog"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
)

// The durable records this package keeps in txn actions, which Delta
// checkpoints keep (commitInfo they drop) and which no log cleanup removes:
//
//   - a whole snapshot: appId "cdcsnap/snapshot/<ci>/<lsn>/<commit_ts>/<rows>"
//     with <ci> the capture instance as given, path-escaped, <lsn> its
//     canonical "0x…" form, <commit_ts> the commit time in Unix
//     microseconds and <rows> the rows committed; version is the table
//     version of the commit. Every field of sink.Snapshot comes from the
//     txn alone, and each snapshot has its own appId, so a resnapshot adds
//     one and the highest version wins.
//   - a change batch: appId "cdcsnap/changes/<lower ci>", version the last
//     batch id appended (Spark's foreachBatch idempotency).
//   - a chunked snapshot's open, waves and completion: see chunked.go.
const (
	snapshotAppPrefix = "cdcsnap/snapshot/"
	changesAppPrefix  = "cdcsnap/changes/"
)

// maxCommitAttempts bounds the retries of a commit that keeps losing races.
const maxCommitAttempts = 1000

// errNoop is returned by a prepare function when there is nothing to
// commit (the batch is already in the table).
var errNoop = errors.New("delta: nothing to commit")

func snapshotAppID(info sink.Info, rows int64) string {
	return fmt.Sprintf("%s%s/%s/%d/%d", snapshotAppPrefix, url.PathEscape(info.CaptureInstance), info.LSN, appIDMicros(info.CommitTS), rows)
}

// goZeroMicros is Go's zero time in Unix microseconds, which appIds held
// for a snapshot whose LSN had no commit time before 0 did.
const goZeroMicros = -62135596800000000

// appIDMicros is a commit time as an appId writes it: Unix microseconds,
// 0 when the source has no time for the LSN (a new instance's start_lsn - 1
// on a quiet database). A commit at exactly the Unix epoch, which no SQL
// Server commit is, would read back as no time.
func appIDMicros(ts time.Time) int64 {
	if ts.IsZero() {
		return 0
	}
	return ts.UnixMicro()
}

// appIDTime reads appIDMicros back: 0, and the Go zero time older appIds
// hold, are no time (the zero time.Time).
func appIDTime(us int64) time.Time {
	if us == 0 || us == goZeroMicros {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

func changesAppID(ci string) string {
	return changesAppPrefix + url.PathEscape(foldKey(ci))
}

// foldKey is one spelling for all names equal ignoring case
// (strings.EqualFold, which sink.SameInstance uses): each rune becomes the
// lower case of the least rune of its case-folding orbit. It is
// strings.ToLower for ASCII names, but also maps "ſ" (U+017F) and "K"
// (U+212A), which EqualFold matches to s and k, where ToLower does not.
func foldKey(ci string) string {
	return strings.Map(func(r rune) rune {
		mn := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			mn = min(mn, f)
		}
		return unicode.ToLower(mn)
	}, ci)
}

// parseSnapshotTxn decodes a snapshot txn; ok is false for other txns.
func parseSnapshotTxn(tx deltalog.Txn) (sink.Snapshot, bool) {
	rest, ok := strings.CutPrefix(tx.AppID, snapshotAppPrefix)
	if !ok {
		return sink.Snapshot{}, false
	}
	p := strings.Split(rest, "/")
	if len(p) != 4 {
		return sink.Snapshot{}, false
	}
	ci, err := url.PathUnescape(p[0])
	if err != nil {
		return sink.Snapshot{}, false
	}
	l, err := lsn.Parse(p[1])
	if err != nil {
		return sink.Snapshot{}, false
	}
	ts, err1 := strconv.ParseInt(p[2], 10, 64)
	rows, err2 := strconv.ParseInt(p[3], 10, 64)
	if err1 != nil || err2 != nil {
		return sink.Snapshot{}, false
	}
	return sink.Snapshot{CaptureInstance: ci, LSN: l, CommitTS: appIDTime(ts), Version: tx.Version, Rows: rows}, true
}

// findSnapshot returns the newest snapshot of ci (ignoring case) in s.
func findSnapshot(s *deltalog.State, ci string) (sink.Snapshot, bool) {
	var best sink.Snapshot
	found := false
	for _, tx := range s.Txns {
		sn, ok := parseSnapshotTxn(tx)
		if !ok || !sink.SameInstance(sn.CaptureInstance, ci) {
			continue
		}
		if !found || sn.Version > best.Version {
			best, found = sn, true
		}
	}
	return best, found
}

// Snapshots returns every whole snapshot recorded in the table, oldest
// first.
func (t *Table) Snapshots(ctx context.Context) ([]sink.Snapshot, error) {
	s, err := t.current(ctx)
	if err != nil {
		return nil, err
	}
	var out []sink.Snapshot
	for _, tx := range s.Txns {
		if sn, ok := parseSnapshotTxn(tx); ok {
			out = append(out, sn)
		}
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Version < out[j-1].Version; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, nil
}

// FindSnapshot returns the newest whole snapshot of captureInstance
// (ignoring case). It reads the log's txn actions, which survive
// checkpoints and log cleanup; when a checkpoint has dropped the record
// (txns older than delta.setTransactionRetentionDuration), it finds the
// snapshot from the table's rows, pruned by file statistics (see
// rows.go), and the Snapshot's Version is then -1.
func (t *Table) FindSnapshot(ctx context.Context, captureInstance string) (sink.Snapshot, error) {
	s, err := t.current(ctx)
	if err != nil {
		return sink.Snapshot{}, err
	}
	sn, ok, err := t.newestSnapshot(ctx, s, captureInstance)
	if err != nil {
		return sink.Snapshot{}, err
	}
	if ok {
		return sn, nil
	}
	return sink.Snapshot{}, fmt.Errorf("delta: table %s, capture instance %q: %w", t.url, captureInstance, sink.ErrNotFound)
}

// newestSnapshot returns the newest whole snapshot of ci in s: from its
// txn record, else from the rows.
func (t *Table) newestSnapshot(ctx context.Context, s *deltalog.State, ci string) (sink.Snapshot, bool, error) {
	if sn, ok := findSnapshot(s, ci); ok {
		return sn, true, nil
	}
	return t.snapshotFromRows(ctx, s, ci)
}

// WritePartition writes the records of rr into new data files that no
// reader sees until CommitSnapshot references them. Part.Data is the JSON
// array of their add actions (paths relative to the table root, with
// stats). A schema the
// table cannot take (even by adding nullable columns) is a *SchemaError
// naming the column, and nothing is written.
func (t *Table) WritePartition(ctx context.Context, info sink.Info, partition int, rr array.RecordReader) (sink.Part, error) {
	schema := rr.Schema()
	if info.Schema != nil && !info.Schema.Equal(schema) {
		return sink.Part{}, schemaMismatch(info.Schema, schema)
	}
	if err := t.CheckSnapshot(ctx, info.CaptureInstance, schema); err != nil {
		return sink.Part{}, err
	}
	adds, rows, err := t.writeRecords(ctx, schema, partition, rr, true)
	if err != nil {
		return sink.Part{}, fmt.Errorf("delta: partition %d: %w", partition, err)
	}
	var size int64
	for _, a := range adds {
		size += a.Size
	}
	if adds == nil {
		adds = []deltalog.AddFile{}
	}
	data, err := json.Marshal(adds)
	if err != nil {
		return sink.Part{}, fmt.Errorf("delta: partition %d: %w", partition, err)
	}
	t.log.Debug("partition written", "partition", partition, "rows", rows, "files", len(adds), "bytes", size)
	return sink.Part{Partition: partition, PlanID: info.PlanID, Rows: rows, Bytes: size, Data: data}, nil
}

var _ sink.Checker = (*Table)(nil)

// CheckSnapshot implements sink.Checker: the table (when it exists) must
// be readable and writable by this package (its protocol and features,
// unpartitioned) and its schema must take schema's columns; the error
// names every unsupported feature (*UnsupportedProtocolError) and every
// column that does not fit (*SchemaError), joined. It reads the log only.
func (t *Table) CheckSnapshot(ctx context.Context, captureInstance string, schema *arrow.Schema) error {
	if schema == nil {
		return errors.New("delta: CheckSnapshot: no schema")
	}
	s, err := t.current(ctx)
	if err != nil {
		return err
	}
	return errors.Join(t.checkWrite(s), t.checkSchema(s, schema))
}

// checkSchema refuses, before anything is written, records the table
// cannot take.
func (t *Table) checkSchema(s *deltalog.State, schema *arrow.Schema) error {
	if s.Version < 0 {
		_, err := deltalog.SchemaFromArrow(schema)
		return err
	}
	ns, changed, err := deltalog.Evolve(s.Schema, schema, s.TypeWidening(), s.Meta.PartitionColumns)
	if err != nil && s.TypeWideningPreview() {
		return fmt.Errorf("%w (the table has type widening only as the typeWidening-preview feature, whose readers, Delta 3.2 and 3.3, take fewer type changes and other metadata than the stable typeWidening this writer records: the sink widens only tables with typeWidening, Delta 4.0 and later)", err)
	}
	if err != nil || !changed {
		return err
	}
	for _, f := range ns.Fields[len(s.Schema.Fields):] {
		if f.TypeName() == "timestamp_ntz" && !deltalog.HasWriterFeature(s.Protocol, "timestampNtz") {
			return &deltalog.SchemaError{Column: f.Name, Reason: "is a timestamp without a time zone (timestamp_ntz), which the table's protocol does not allow (no timestampNtz feature)"}
		}
	}
	// New columns of a mapped table need physical names and ids that
	// its data files carry before the commit that adds them: add them
	// with the engine that mapped the table.
	if cm, err := s.Mapping(); (err != nil || cm.On()) && len(ns.Fields) > len(s.Schema.Fields) {
		var added []string
		for _, f := range ns.Fields[len(s.Schema.Fields):] {
			added = append(added, f.Name)
		}
		return &deltalog.SchemaError{Column: strings.Join(added, ", "), Reason: "the table maps its columns (delta.columnMapping.mode); add these columns first, e.g. ALTER TABLE ... ADD COLUMNS in Spark"}
	}
	return nil
}

// CommitSnapshot validates parts (all of info.PlanID, partitions 0..n-1
// once each, rows and bytes matching their files) and writes one commit:
// commitInfo with the snapshot's userMetadata, protocol and metaData when
// it creates the table, metaData when it adds columns, the snapshot's txn
// record, and every part's add actions. If the table's newest snapshot of
// the capture instance (ignoring case) is not info.Replaces (the zero LSN:
// none), another writer landed meanwhile: it returns that snapshot and an
// error wrapping sink.ErrSnapshotExists, and the parts stay invisible
// (their files are never referenced). The check is made against the log
// the commit follows, so it holds under concurrent commits: a commit that
// loses the put-if-absent race re-reads the log and checks again.
func (t *Table) CommitSnapshot(ctx context.Context, info sink.Info, parts []sink.Part) (sink.Snapshot, error) {
	if info.Schema == nil {
		return sink.Snapshot{}, errors.New("delta: CommitSnapshot: info.Schema is nil")
	}
	if _, err := deltalog.SchemaFromArrow(info.Schema); err != nil {
		return sink.Snapshot{}, err
	}
	adds, rows, err := validateParts(info, parts)
	if err != nil {
		return sink.Snapshot{}, err
	}
	// A commit never references a file that is not there: a part resumed
	// days later may have lost its files to a VACUUM.
	for _, p := range parts {
		var pa []deltalog.AddFile
		_ = json.Unmarshal(p.Data, &pa) // validateParts decoded it
		missing, err := t.missingFile(ctx, pa)
		if err != nil {
			return sink.Snapshot{}, err
		}
		if missing != "" {
			return sink.Snapshot{}, &PartsError{Partition: p.Partition, Reason: fmt.Sprintf("its file %s is not in the table's folder (or has another size): removed by a VACUUM of uncommitted files?", missing)}
		}
	}
	snap := sink.Snapshot{CaptureInstance: info.CaptureInstance, LSN: info.LSN, CommitTS: appIDTime(appIDMicros(info.CommitTS)), Rows: rows}
	var existing sink.Snapshot
	um, _ := json.Marshal(sink.NewUserMetadata(info))
	v, err := t.commit(ctx, func(s *deltalog.State, v int64) ([]deltalog.Action, error) {
		sn, ok, err := t.newestSnapshot(ctx, s, info.CaptureInstance)
		if err != nil {
			return nil, err
		}
		if ok && sn.LSN != info.Replaces {
			existing = sn
			return nil, sink.ErrSnapshotExists
		}
		head, err := t.schemaActions(s, info.Schema)
		if err != nil {
			return nil, err
		}
		if err := t.checkLayout(s, info.Schema, adds); err != nil {
			return nil, err
		}
		acts := []deltalog.Action{{CommitInfo: commitInfo("WRITE", string(um), map[string]any{"mode": "Append"})}}
		acts = append(acts, head...)
		acts = append(acts, deltalog.Action{Txn: &deltalog.Txn{AppID: snapshotAppID(info, rows), Version: v, LastUpdated: time.Now().UnixMilli()}})
		for i := range adds {
			acts = append(acts, deltalog.Action{Add: &adds[i]})
		}
		return acts, nil
	})
	if errors.Is(err, sink.ErrSnapshotExists) {
		t.log.Info("a snapshot of the capture instance landed first", "capture_instance", info.CaptureInstance, "version", existing.Version, "lsn", existing.LSN.String())
		return existing, fmt.Errorf("delta: table %s, capture instance %q: snapshot at version %d (LSN %s): %w", t.url, info.CaptureInstance, existing.Version, existing.LSN, sink.ErrSnapshotExists)
	}
	if err != nil {
		return sink.Snapshot{}, fmt.Errorf("delta: committing snapshot of %q: %w", info.CaptureInstance, err)
	}
	snap.Version = v
	t.log.Info("snapshot committed", "capture_instance", info.CaptureInstance, "version", v, "lsn", info.LSN.String(), "rows", rows)
	return snap, nil
}

func validateParts(info sink.Info, parts []sink.Part) ([]deltalog.AddFile, int64, error) {
	adds, rows, seen, err := partAdds(info, parts)
	if err != nil {
		return nil, 0, err
	}
	for i := range parts {
		if !seen[i] {
			return nil, 0, &PartsError{Partition: i, Reason: fmt.Sprintf("missing: %d parts must be partitions 0..%d", len(parts), len(parts)-1)}
		}
	}
	return adds, rows, nil
}

// partAdds checks each part (of info.PlanID, given once, its add actions
// well formed and matching its rows and bytes) and returns every add
// action, the rows, and the partitions seen.
func partAdds(info sink.Info, parts []sink.Part) ([]deltalog.AddFile, int64, map[int]bool, error) {
	seen := map[int]bool{}
	var adds []deltalog.AddFile
	var rows int64
	for _, p := range parts {
		if p.PlanID != info.PlanID {
			return nil, 0, nil, &PartsError{Partition: p.Partition, Reason: fmt.Sprintf("written for plan %q, committing plan %q", p.PlanID, info.PlanID)}
		}
		if seen[p.Partition] {
			return nil, 0, nil, &PartsError{Partition: p.Partition, Reason: "given twice"}
		}
		seen[p.Partition] = true
		var pa []deltalog.AddFile
		if err := json.Unmarshal(p.Data, &pa); err != nil {
			return nil, 0, nil, &PartsError{Partition: p.Partition, Reason: fmt.Sprintf("Data is not this sink's add actions: %v", err)}
		}
		var r, b int64
		for _, a := range pa {
			st, err := a.ParseStats()
			if err != nil {
				return nil, 0, nil, &PartsError{Partition: p.Partition, Reason: err.Error()}
			}
			if !dataPath(a.Key()) {
				return nil, 0, nil, &PartsError{Partition: p.Partition, Reason: fmt.Sprintf("bad file path %q", a.Path)}
			}
			r += st.NumRecords
			b += a.Size
			if a.PartitionValues == nil {
				a.PartitionValues = deltalog.StringMap{}
			}
			adds = append(adds, a)
		}
		if r != p.Rows || b != p.Bytes {
			return nil, 0, nil, &PartsError{Partition: p.Partition, Reason: fmt.Sprintf("says %d rows and %d bytes, its files hold %d rows and %d bytes", p.Rows, p.Bytes, r, b)}
		}
		rows += r
	}
	return adds, rows, seen, nil
}

// AppendChanges appends change rows (in the bronze schema) in one commit,
// idempotent per (capture instance, batchID): a txn action records the
// batch, and a batch at or below the last one recorded for the instance
// is a no-op that returns the current version. It returns the version
// committed.
func (t *Table) AppendChanges(ctx context.Context, captureInstance string, batchID int64, rr array.RecordReader) (int64, error) {
	appID := changesAppID(captureInstance)
	s, err := t.current(ctx)
	if err != nil {
		return 0, err
	}
	if err := t.checkWrite(s); err != nil {
		return 0, err
	}
	if last, ok, err := t.lastBatch(ctx, s, captureInstance); err != nil {
		return 0, err
	} else if ok && last >= batchID {
		t.log.Info("change batch already appended", "capture_instance", captureInstance, "batch_id", batchID)
		return s.Version, nil
	}
	schema := rr.Schema()
	if err := t.checkSchema(s, schema); err != nil {
		return 0, err
	}
	if _, err := deltalog.SchemaFromArrow(schema); err != nil {
		return 0, err
	}
	adds, rows, err := t.writeRecords(ctx, schema, 0, rr, false)
	if err != nil {
		return 0, fmt.Errorf("delta: appending changes of %q: %w", captureInstance, err)
	}
	um, _ := json.Marshal(map[string]any{"changes": captureInstance, "batch_id": batchID})
	v, err := t.commit(ctx, func(s *deltalog.State, v int64) ([]deltalog.Action, error) {
		if last, ok, err := t.lastBatch(ctx, s, captureInstance); err != nil {
			return nil, err
		} else if ok && last >= batchID {
			return nil, errNoop
		}
		head, err := t.schemaActions(s, schema)
		if err != nil {
			return nil, err
		}
		if err := t.checkLayout(s, schema, adds); err != nil {
			return nil, err
		}
		acts := []deltalog.Action{{CommitInfo: commitInfo("WRITE", string(um), map[string]any{"mode": "Append"})}}
		acts = append(acts, head...)
		acts = append(acts, deltalog.Action{Txn: &deltalog.Txn{AppID: appID, Version: batchID, LastUpdated: time.Now().UnixMilli()}})
		for i := range adds {
			acts = append(acts, deltalog.Action{Add: &adds[i]})
		}
		return acts, nil
	})
	if errors.Is(err, errNoop) {
		// The files stay (VACUUM removes them if unreferenced): the batch
		// may be in the table because this very commit landed and its
		// answer was lost (a store's retried conditional write answers
		// 412), and then they are the batch's files.
		return t.Version(ctx)
	}
	if err != nil {
		return 0, fmt.Errorf("delta: appending changes of %q: %w", captureInstance, err)
	}
	t.log.Info("changes appended", "capture_instance", captureInstance, "batch_id", batchID, "version", v, "rows", rows)
	return v, nil
}

// honourFeatures does what the table's features ask of a commit's
// actions (see internal/deltalog/features.go): fresh row ids and commit
// versions on the adds with the new high water mark (rowTracking), and
// the commitInfo's inCommitTimestamp, one millisecond past the previous
// commit's at least (inCommitTimestamp).
func (t *Table) honourFeatures(ctx context.Context, s *deltalog.State, v int64, acts []deltalog.Action) ([]deltalog.Action, error) {
	created := s.Version < 0
	if created {
		// The creating commit honours the features it turns on.
		s = deltalog.EmptyState()
		for i := range acts {
			if acts[i].Protocol != nil || acts[i].MetaData != nil {
				if err := s.Apply(&acts[i]); err != nil {
					return nil, err
				}
			}
		}
		if s.Protocol == nil {
			return acts, nil
		}
	}
	if deltalog.RowTracking(s) {
		hwm, err := s.RowIDHighWaterMark()
		if err != nil {
			return nil, err
		}
		added := false
		for i := range acts {
			a := acts[i].Add
			if a == nil {
				continue
			}
			st, err := a.ParseStats()
			if err != nil {
				return nil, fmt.Errorf("delta: row tracking needs the row count of %s: %w", a.Path, err)
			}
			base, version := hwm+1, v
			a.BaseRowID, a.DefaultRowCommitVersion = &base, &version
			hwm += st.NumRecords
			added = true
		}
		if added {
			conf, _ := json.Marshal(map[string]int64{"rowIdHighWaterMark": hwm})
			dm, _ := json.Marshal(deltalog.DomainMetadata{Domain: deltalog.RowTrackingDomain, Configuration: string(conf)})
			acts = append(acts, deltalog.Action{DomainMetadata: dm})
		}
	}
	if deltalog.InCommitTimestamps(s) {
		if len(acts) == 0 || acts[0].CommitInfo == nil {
			return nil, fmt.Errorf("delta: commit %d: in-commit timestamps need the commitInfo first", v)
		}
		var prev int64
		if !created {
			var err error
			if prev, err = t.inCommitTimestamp(ctx, s.Version); err != nil {
				return nil, err
			}
		}
		ict := max(time.Now().UnixMilli(), prev+1)
		var ci map[string]any
		if err := json.Unmarshal(acts[0].CommitInfo, &ci); err != nil {
			return nil, err
		}
		ci["inCommitTimestamp"], ci["timestamp"] = ict, ict
		b, err := json.Marshal(ci)
		if err != nil {
			return nil, err
		}
		acts[0].CommitInfo = b
	}
	return acts, nil
}

// inCommitTimestamp returns commit v's inCommitTimestamp, 0 when it has
// none (a commit from before the feature was enabled).
func (t *Table) inCommitTimestamp(ctx context.Context, v int64) (int64, error) {
	acts, err := t.dlog.ReadCommit(ctx, v)
	if err != nil {
		return 0, fmt.Errorf("delta: reading the in-commit timestamp of version %d: %w", v, err)
	}
	for _, a := range acts {
		if a.CommitInfo == nil {
			continue
		}
		var ci struct {
			ICT int64 `json:"inCommitTimestamp"`
		}
		if err := json.Unmarshal(a.CommitInfo, &ci); err != nil {
			return 0, fmt.Errorf("delta: commitInfo of version %d: %w", v, err)
		}
		return ci.ICT, nil
	}
	return 0, nil
}

func commitInfo(op, userMetadata string, params map[string]any) json.RawMessage {
	ci := map[string]any{
		"timestamp":           time.Now().UnixMilli(),
		"operation":           op,
		"operationParameters": params,
		"isBlindAppend":       true,
		"engineInfo":          "cdcsnap",
		"txnId":               deltalog.NewUUID(),
	}
	if userMetadata != "" {
		ci["userMetadata"] = userMetadata
	}
	b, _ := json.Marshal(ci)
	return b
}

// schemaActions returns protocol and metaData for a new table, metaData
// for a table the records add columns to, or nothing.
func (t *Table) schemaActions(s *deltalog.State, schema *arrow.Schema) ([]deltalog.Action, error) {
	if s.Version < 0 {
		ds, err := deltalog.SchemaFromArrow(schema)
		if err != nil {
			return nil, err
		}
		if err := t.opts.Create.validate(); err != nil {
			return nil, err
		}
		return t.opts.Create.createActions(ds, deltalog.NewUUID(), time.Now().UnixMilli())
	}
	if err := t.checkSchema(s, schema); err != nil {
		return nil, err
	}
	ns, changed, err := deltalog.Evolve(s.Schema, schema, s.TypeWidening(), s.Meta.PartitionColumns)
	if err != nil || !changed {
		return nil, err
	}
	md := *s.Meta
	md.SchemaString = ns.String()
	if md.PartitionColumns == nil {
		md.PartitionColumns = []string{}
	}
	if md.Configuration == nil {
		md.Configuration = deltalog.StringMap{}
	}
	if md.Format.Options == nil {
		md.Format.Options = deltalog.StringMap{}
	}
	added := []string{}
	for _, f := range ns.Fields[len(s.Schema.Fields):] {
		added = append(added, f.Name)
	}
	var widened []string
	for i, f := range s.Schema.Fields {
		if f.TypeName() != ns.Fields[i].TypeName() {
			widened = append(widened, f.Name+" "+f.TypeName()+" -> "+ns.Fields[i].TypeName())
		}
	}
	t.log.Info("evolving the table schema", "added", added, "widened", widened)
	return []deltalog.Action{{MetaData: &md}}, nil
}

// commit writes one commit at the next version, put-if-absent, retrying
// at the next version after a conflict. prepare builds the actions from
// the state the commit follows; its error stops the loop.
func (t *Table) commit(ctx context.Context, prepare func(s *deltalog.State, v int64) ([]deltalog.Action, error)) (int64, error) {
	for attempt := 0; attempt < maxCommitAttempts; attempt++ {
		s, err := t.current(ctx)
		if err != nil {
			return 0, err
		}
		if err := t.checkWrite(s); err != nil {
			return 0, err
		}
		v := s.Version + 1
		acts, err := prepare(s, v)
		if err != nil {
			return 0, err
		}
		if acts, err = t.honourFeatures(ctx, s, v, acts); err != nil {
			return 0, err
		}
		var buf bytes.Buffer
		for i := range acts {
			b, err := json.Marshal(&acts[i])
			if err != nil {
				return 0, fmt.Errorf("delta: encoding commit %d: %w", v, err)
			}
			buf.Write(b)
			buf.WriteByte('\n')
		}
		err = t.dlog.PutIfAbsent(ctx, deltalog.CommitKey(v), buf.Bytes())
		if errors.Is(err, deltalog.ErrConflict) {
			t.log.Debug("commit conflict, re-reading the log", "version", v, "attempt", attempt)
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("delta: writing commit %d: %w", v, err)
		}
		next := s.Clone()
		for i := range acts {
			_ = next.Apply(&acts[i])
		}
		next.Version = v
		t.mu.Lock()
		if t.cache == nil || t.cache.Version < v {
			t.cache = next
		}
		t.mu.Unlock()
		t.maybeCheckpoint(ctx, next)
		return v, nil
	}
	return 0, fmt.Errorf("delta: gave up committing after %d conflicts", maxCommitAttempts)
}

// dataPath reports whether key (an add's decoded path) names a data file
// inside the table: relative, no "." or ".." segment, no scheme, and not
// in the log or this package's records. A partition folder may start
// with "_" (a column like _capture_instance) or hold "..".
func dataPath(key string) bool {
	if key == "" || strings.HasPrefix(key, "/") || strings.Contains(key, "://") ||
		strings.HasPrefix(key, deltalog.LogDir) || strings.HasPrefix(key, "_cdcsnap/") {
		return false
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// checkWrite refuses, naming each, the table features and constraints
// this package cannot honour when it appends (see
// internal/deltalog/features.go).
func (t *Table) checkWrite(s *deltalog.State) error {
	if s.Version < 0 {
		return nil
	}
	p := deltalog.FeatureProblems(s)
	if _, err := partitionColumns(s); err != nil {
		p = append(p, "partitionColumns ("+err.Error()+")")
	}
	if len(p) > 0 {
		return &deltalog.UnsupportedProtocolError{Table: t.url, Feature: strings.Join(p, ", "), Write: true}
	}
	return nil
}

// checkRecordTxn refuses a snapshot record that does not parse: ignoring
// it would hide a snapshot, and a rerun would take a second one.
func checkRecordTxn(tx deltalog.Txn) error {
	if strings.HasPrefix(tx.AppID, snapshotAppPrefix) {
		if _, ok := parseSnapshotTxn(tx); !ok {
			return fmt.Errorf("snapshot record %q does not parse", tx.AppID)
		}
	}
	return nil
}

// checkSnapshotRows refuses a commit whose snapshot record counts other
// rows than its added files hold: a commit file cut short on a store
// without atomic writes. Files without stats are not counted (nor checked).
func checkSnapshotRows(acts []deltalog.Action) error {
	var rec *deltalog.Txn
	var rows int64
	for i := range acts {
		switch a := &acts[i]; {
		case a.Txn != nil && strings.HasPrefix(a.Txn.AppID, snapshotAppPrefix):
			rec = a.Txn
		case a.Add != nil:
			st, err := a.Add.ParseStats()
			if err != nil {
				return nil
			}
			rows += st.NumRecords
		}
	}
	if rec == nil {
		return nil
	}
	sn, _ := parseSnapshotTxn(*rec)
	if sn.Rows != rows {
		return fmt.Errorf("snapshot record %q counts %d rows but the commit's files hold %d (the commit file is incomplete)", rec.AppID, sn.Rows, rows)
	}
	return nil
}
