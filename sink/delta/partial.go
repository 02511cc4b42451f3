package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cdcsnap/cdcsnap/internal/deltalog"
	"github.com/cdcsnap/cdcsnap/sink"
)

// A partial whole snapshot (sink.PartialSink) is recorded in plain objects
// beside the log, never in it, so no reader of the table sees it:
//
//	_cdcsnap/partial/<planID>/plan.json          its head and plan
//	_cdcsnap/partial/<planID>/part-<n>.<g>.json  partition n's sink.Part
//
// each written put-if-absent, as commits are. VACUUM skips folders whose
// name starts with "_" ("VACUUM will skip all directories that begin with
// an underscore", https://docs.databricks.com/sql/language-manual/delta-vacuum.html),
// so the records stay; the uncommitted data files they name do not: VACUUM
// removes files the log does not reference once they are older than its
// retention (7 days by default, same page). FindPartial therefore checks
// that every file of a recorded part exists, and reports the partitions
// whose files are gone as Lost. TestDeltaRSVacuumAndPartial holds delta-rs
// to this: its full VACUUM deletes exactly the uncommitted files and keeps
// _cdcsnap; its lite VACUUM deletes neither.
const partialDir = "_cdcsnap/partial/"

// errBadRecord is wrapped by errors for a partial snapshot's record that
// does not decode.
var errBadRecord = errors.New("not a partial snapshot record")

var _ sink.PartialSink = (*Table)(nil)

func partialPlanKey(planID string) string { return partialDir + planID + "/plan.json" }

// OpenPartial implements sink.PartialSink: it checks that the table can
// take the snapshot (its protocol, and info.Schema against the table's
// schema), then writes plan.json put-if-absent. An existing one must hold
// the same plan. A refused snapshot writes nothing.
func (t *Table) OpenPartial(ctx context.Context, info sink.Info, plan json.RawMessage) error {
	if err := validPlanID(info.PlanID); err != nil {
		return err
	}
	if !json.Valid(plan) {
		return fmt.Errorf("delta: table %s: the plan of partial snapshot %s is not JSON", t.url, info.PlanID)
	}
	if err := t.CheckSnapshot(ctx, info.CaptureInstance, info.Schema); err != nil {
		return err
	}
	key := partialPlanKey(info.PlanID)
	// plan.json is the sink.Partial FindPartial returns, without parts.
	head := sink.Partial{CaptureInstance: info.CaptureInstance, LSN: info.LSN, PlanID: info.PlanID, Replaces: info.Replaces,
		Created: time.Now().UTC(), Plan: plan}
	b, err := json.Marshal(head)
	if err != nil {
		return err
	}
	err = t.dlog.PutIfAbsent(ctx, key, b)
	if errors.Is(err, deltalog.ErrConflict) {
		old, err := t.readPartialHead(ctx, info.PlanID)
		if err != nil {
			return err
		}
		var a, o bytes.Buffer
		if json.Compact(&a, plan) != nil || json.Compact(&o, old.Plan) != nil || !bytes.Equal(a.Bytes(), o.Bytes()) {
			return fmt.Errorf("delta: table %s: %s exists with another plan", t.url, key)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("delta: table %s: recording the partial snapshot (%s): %w", t.url, key, err)
	}
	t.log.Info("partial snapshot recorded", "capture_instance", info.CaptureInstance, "plan_id", info.PlanID, "lsn", info.LSN.String())
	return nil
}

func (t *Table) readPartialHead(ctx context.Context, planID string) (sink.Partial, error) {
	var h sink.Partial
	key := partialPlanKey(planID)
	if err := t.readRecord(ctx, key, planID, &h); err != nil {
		return sink.Partial{}, err
	}
	if h.PlanID != planID {
		return sink.Partial{}, fmt.Errorf("delta: table %s: %s is the record of plan %s: %w", t.url, key, h.PlanID, errBadRecord)
	}
	return h, nil
}

// readRecord decodes the JSON record key of a partial snapshot into v. A
// record that is gone (dropped meanwhile) wraps sink.ErrNotFound, one that
// does not decode errBadRecord.
func (t *Table) readRecord(ctx context.Context, key, planID string, v any) error {
	b, err := t.store.ReadAll(ctx, key)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delta: table %s: partial snapshot %s: %w", t.url, planID, sink.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("delta: table %s: reading %s: %w", t.url, key, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("delta: table %s: %s: %v: %w", t.url, key, err, errBadRecord)
	}
	return nil
}

// RecordPart implements sink.PartialSink. Partition n's records are
// generations part-<n>.<g>.json, each written put-if-absent: the writer
// that creates generation g records its part; one that finds it taken
// returns that part if its files all exist (sink.ErrPartRecorded), or
// tries generation g+1 when they do not (a VACUUM took them). So of
// writers racing on one partition exactly one records, and FindPartial
// returns what it recorded.
func (t *Table) RecordPart(ctx context.Context, info sink.Info, part sink.Part) (sink.Part, error) {
	if err := validPlanID(info.PlanID); err != nil {
		return sink.Part{}, err
	}
	if part.Partition < 0 {
		return sink.Part{}, &PartsError{Partition: part.Partition, Reason: "negative partition"}
	}
	if _, err := t.readPartialHead(ctx, info.PlanID); err != nil {
		return sink.Part{}, err
	}
	if _, _, _, err := partAdds(info, []sink.Part{part}); err != nil {
		return sink.Part{}, err
	}
	b, err := json.Marshal(part)
	if err != nil {
		return sink.Part{}, err
	}
	for g := range maxPartGenerations {
		key := partialPartKey(info.PlanID, part.Partition, g)
		err := t.dlog.PutIfAbsent(ctx, key, b)
		if err == nil {
			return part, nil
		}
		if !errors.Is(err, deltalog.ErrConflict) {
			// Another process may have dropped the plan's folder (it
			// committed) between the check above and this write.
			if _, herr := t.readPartialHead(ctx, info.PlanID); errors.Is(herr, sink.ErrNotFound) {
				return sink.Part{}, herr
			}
			return sink.Part{}, fmt.Errorf("delta: table %s: recording partition %d (%s): %w", t.url, part.Partition, key, err)
		}
		old, intact, err := t.partRecord(ctx, key, info.PlanID, part.Partition)
		if err != nil {
			return sink.Part{}, err
		}
		if intact {
			return old, fmt.Errorf("delta: table %s: partition %d of partial snapshot %s: %w", t.url, part.Partition, info.PlanID, sink.ErrPartRecorded)
		}
	}
	return sink.Part{}, fmt.Errorf("delta: table %s: partition %d of partial snapshot %s: %d records, none with its files", t.url, part.Partition, info.PlanID, maxPartGenerations)
}

// maxPartGenerations bounds the records of one partition (each a write
// whose files later vanished).
const maxPartGenerations = 1000

func partialPartKey(planID string, partition, generation int) string {
	return fmt.Sprintf("%s%s/part-%06d.%d.json", partialDir, planID, partition, generation)
}

// partRecord reads one part record and says whether its files all exist.
func (t *Table) partRecord(ctx context.Context, key, planID string, partition int) (sink.Part, bool, error) {
	p, err := t.readPartialPart(ctx, key, planID, partition)
	if err != nil {
		return sink.Part{}, false, err
	}
	adds, _, _, err := partAdds(sink.Info{PlanID: planID}, []sink.Part{p})
	if err != nil {
		return sink.Part{}, false, fmt.Errorf("delta: table %s: %s: %w", t.url, key, err)
	}
	missing, err := t.missingFile(ctx, adds)
	return p, missing == "" && err == nil, err
}

// intactPart returns the first generation of the partition's records
// whose files all exist.
func (t *Table) intactPart(ctx context.Context, planID string, partition int) (sink.Part, bool, error) {
	for g := range maxPartGenerations {
		p, ok, err := t.partRecord(ctx, partialPartKey(planID, partition, g), planID, partition)
		if errors.Is(err, sink.ErrNotFound) {
			return sink.Part{}, false, nil // no generation g: none intact
		}
		if err != nil || ok {
			return p, ok, err
		}
	}
	return sink.Part{}, false, nil
}

func (t *Table) readPartialPart(ctx context.Context, key, planID string, partition int) (sink.Part, error) {
	var p sink.Part
	if err := t.readRecord(ctx, key, planID, &p); err != nil {
		return sink.Part{}, err
	}
	if p.PlanID != planID || p.Partition != partition {
		return sink.Part{}, fmt.Errorf("delta: table %s: %s is not the record of partition %d of plan %s: %w", t.url, key, partition, planID, errBadRecord)
	}
	return p, nil
}

// FindPartial implements sink.PartialSink. It lists _cdcsnap/partial/,
// reads each plan.json, and for the instance's newest one lists its part
// records and keeps, per partition, the first whose files all exist.
func (t *Table) FindPartial(ctx context.Context, captureInstance string) (sink.Partial, error) {
	ids, err := t.dlog.ListKeys(ctx, partialDir, true)
	if err != nil {
		return sink.Partial{}, err
	}
	var best *sink.Partial
	for _, dir := range ids {
		id := strings.TrimSuffix(strings.TrimPrefix(dir, partialDir), "/")
		if validPlanID(id) != nil {
			continue
		}
		h, err := t.readPartialHead(ctx, id)
		if errors.Is(err, sink.ErrNotFound) {
			continue // dropped while we listed, or a drop that did not finish
		}
		if errors.Is(err, errBadRecord) {
			// Not ours to judge for every instance: skip it, say so.
			t.log.Warn("skipping a partial snapshot record that does not decode", "plan_id", id, "err", err)
			continue
		}
		if err != nil {
			return sink.Partial{}, err
		}
		if sink.SameInstance(h.CaptureInstance, captureInstance) && (best == nil || !h.Created.Before(best.Created)) {
			best = &h
		}
	}
	if best == nil {
		return sink.Partial{}, fmt.Errorf("delta: table %s: capture instance %q has no partial snapshot: %w", t.url, captureInstance, sink.ErrNotFound)
	}
	out := *best
	out.Parts, out.Lost = nil, nil
	prefix := partialDir + best.PlanID + "/part-"
	keys, err := t.dlog.ListKeys(ctx, prefix, false)
	if err != nil {
		return sink.Partial{}, err
	}
	recorded := map[int]bool{}
	for _, key := range keys {
		n, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(key, prefix), ".", 2)[0])
		if err != nil || n < 0 || recorded[n] {
			continue
		}
		recorded[n] = true
		p, ok, err := t.intactPart(ctx, best.PlanID, n)
		if err != nil {
			return sink.Partial{}, err
		}
		if ok {
			out.Parts = append(out.Parts, p)
		} else {
			out.Lost = append(out.Lost, n)
		}
	}
	// sort.Slice, not slices.SortFunc: a generic sort of this struct
	// type alone is 14 KB of every program that writes a snapshot.
	sort.Slice(out.Parts, func(i, j int) bool { return out.Parts[i].Partition < out.Parts[j].Partition })
	slices.Sort(out.Lost)
	// A drop that ran while we read makes parts look lost: the plan is gone.
	if _, err := t.readPartialHead(ctx, best.PlanID); err != nil {
		return sink.Partial{}, err
	}
	return out, nil
}

// missingFile returns the path of the first file of adds that is not in
// the table's folder with the size its add action records ("" if none).
func (t *Table) missingFile(ctx context.Context, adds []deltalog.AddFile) (string, error) {
	for _, a := range adds {
		size, err := t.store.Size(ctx, a.Key())
		if errors.Is(err, fs.ErrNotExist) {
			return a.Path, nil
		}
		if err != nil {
			return "", fmt.Errorf("delta: table %s: checking %s: %w", t.url, a.Path, err)
		}
		if size != a.Size {
			return a.Path, nil
		}
	}
	return "", nil
}

// DropPartial implements sink.PartialSink: it deletes plan.json first (so
// FindPartial no longer sees the plan, and RecordPart refuses it), then the
// part records. Data files are left alone.
func (t *Table) DropPartial(ctx context.Context, captureInstance, planID string) error {
	if err := validPlanID(planID); err != nil {
		return err
	}
	h, err := t.readPartialHead(ctx, planID)
	if errors.Is(err, sink.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !sink.SameInstance(h.CaptureInstance, captureInstance) {
		return fmt.Errorf("delta: table %s: partial snapshot %s is of %q, not %q", t.url, planID, h.CaptureInstance, captureInstance)
	}
	if err := t.deleteKey(ctx, partialPlanKey(planID)); err != nil {
		return err
	}
	keys, err := t.dlog.ListKeys(ctx, partialDir+planID+"/", false)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := t.deleteKey(ctx, k); err != nil {
			return err
		}
	}
	if t.localRoot != "" {
		// A folder is a real directory here, and left empty it would be
		// listed by every FindPartial. A record written meanwhile keeps it.
		_ = os.Remove(filepath.Join(t.localRoot, filepath.FromSlash(partialDir+planID)))
	}
	t.log.Info("partial snapshot dropped", "capture_instance", captureInstance, "plan_id", planID)
	return nil
}

func (t *Table) deleteKey(ctx context.Context, key string) error {
	if err := t.store.Delete(ctx, key); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delta: table %s: deleting %s: %w", t.url, key, err)
	}
	return nil
}
