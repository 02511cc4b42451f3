package delta

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cdcsnap/cdcsnap/internal/deltalog"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
)

// A chunked snapshot (sink.ChunkSink) is recorded in txn actions too, so
// its state survives checkpoints and log cleanup (see the package doc):
//
//   - open: appId "cdcsnap/chunked/<ci>/<S>/<commit_ts>/<chunks>/<planID>"
//     (<ci> path-escaped, <S> "0x…", <commit_ts> Unix microseconds), in a
//     commit with no add action; its plan is the file
//     _cdcsnap/chunked/<planID>.json, written put-if-absent before that
//     commit, outside _delta_log (VACUUM skips folders starting with _).
//   - a wave: appId "cdcsnap/chunks/<planID>/<end>", chunks up to end
//     (exclusive) committed, in the commit that adds the wave's files.
//   - complete: appId "cdcsnap/chunked-complete/<planID>".
//
// Each txn's version is the table version of its commit. The newest open
// txn of an instance (highest version) is its newest chunked snapshot; its
// Committed is the highest <end> of its waves.
const (
	chunkedAppPrefix  = "cdcsnap/chunked/"
	chunksAppPrefix   = "cdcsnap/chunks/"
	completeAppPrefix = "cdcsnap/chunked-complete/"
	chunkedPlanDir    = "_cdcsnap/chunked/"
	chunkedHeadDir    = "_cdcsnap/chunked-head/"
)

// chunkedHeadKey names a chunked snapshot's head: its sink.Chunked without
// progress or plan, written put-if-absent before the open commit, so the
// snapshot is found again from its rows once its txns are gone (rows.go).
func chunkedHeadKey(planID string) string { return chunkedHeadDir + planID + ".json" }

var _ sink.ChunkSink = (*Table)(nil)

// errChunkedExists stops an open's commit: the plan is open already.
var errChunkedExists = errors.New("delta: chunked snapshot already open")

// errChunkedComplete stops a completion's commit: the snapshot is complete.
var errChunkedComplete = errors.New("delta: chunked snapshot already complete")

// validPlanID refuses a PlanID that is not a safe file name and appId
// path element: it names the plan's file.
func validPlanID(id string) error {
	if id == "" || len(id) > 200 || id == "." || id == ".." {
		return fmt.Errorf("delta: snapshot plan id %q: want 1 to 200 letters, digits, '.', '_' or '-'", id)
	}
	for _, c := range id {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return fmt.Errorf("delta: snapshot plan id %q: want 1 to 200 letters, digits, '.', '_' or '-'", id)
		}
	}
	return nil
}

func chunkedPlanKey(planID string) string { return chunkedPlanDir + planID + ".json" }

func chunkedAppID(info sink.Info, chunks int) string {
	return fmt.Sprintf("%s%s/%s/%d/%d/%s", chunkedAppPrefix, url.PathEscape(info.CaptureInstance), info.LSN, appIDMicros(info.CommitTS), chunks, info.PlanID)
}

func chunksAppID(planID string, end int) string {
	return fmt.Sprintf("%s%s/%d", chunksAppPrefix, planID, end)
}

func completeAppID(planID string) string { return completeAppPrefix + planID }

// parseChunkedTxn decodes an open txn; ok is false for other txns.
func parseChunkedTxn(tx deltalog.Txn) (sink.Chunked, bool) {
	rest, ok := strings.CutPrefix(tx.AppID, chunkedAppPrefix)
	if !ok {
		return sink.Chunked{}, false
	}
	p := strings.Split(rest, "/")
	if len(p) != 5 || validPlanID(p[4]) != nil {
		return sink.Chunked{}, false
	}
	ci, err := url.PathUnescape(p[0])
	if err != nil {
		return sink.Chunked{}, false
	}
	l, err := lsn.Parse(p[1])
	if err != nil {
		return sink.Chunked{}, false
	}
	ts, err1 := strconv.ParseInt(p[2], 10, 64)
	n, err2 := strconv.Atoi(p[3])
	if err1 != nil || err2 != nil || n < 1 {
		return sink.Chunked{}, false
	}
	return sink.Chunked{CaptureInstance: ci, LSN: l, CommitTS: appIDTime(ts), PlanID: p[4], Chunks: n, Version: tx.Version}, true
}

// chunkedOpens returns every open txn in s, decoded.
func chunkedOpens(s *deltalog.State) []sink.Chunked {
	var out []sink.Chunked
	for _, tx := range s.Txns {
		if c, ok := parseChunkedTxn(tx); ok {
			out = append(out, c)
		}
	}
	return out
}

// chunkedProgress fills c's Committed, Complete and Version from its wave and
// completion txns in s.
func chunkedProgress(s *deltalog.State, c sink.Chunked) sink.Chunked {
	prefix := chunksAppPrefix + c.PlanID + "/"
	for _, tx := range s.Txns {
		rest, ok := strings.CutPrefix(tx.AppID, prefix)
		if !ok {
			continue
		}
		end, err := strconv.Atoi(rest)
		if err != nil || end <= c.Committed {
			continue
		}
		c.Committed = end
		c.Version = max(c.Version, tx.Version)
	}
	if tx, ok := s.Txns[completeAppID(c.PlanID)]; ok {
		c.Complete = true
		c.Version = max(c.Version, tx.Version)
	}
	return c
}

// findChunked returns the newest chunked snapshot of ci (ignoring case)
// in s, without its plan: from its open txn, else (the txns expired) from
// the heads of the instance's chunked snapshots and the table's rows.
func (t *Table) findChunked(ctx context.Context, s *deltalog.State, ci string) (sink.Chunked, bool, error) {
	var best sink.Chunked
	found := false
	for _, c := range chunkedOpens(s) {
		if sink.SameInstance(c.CaptureInstance, ci) && (!found || c.Version > best.Version) {
			best, found = c, true
		}
	}
	if found {
		return chunkedProgress(s, best), true, nil
	}
	return t.chunkedFromRows(ctx, s, ci, "")
}

// chunkedByPlan returns the chunked snapshot planID in s, without its
// plan, found as findChunked finds one.
func (t *Table) chunkedByPlan(ctx context.Context, s *deltalog.State, planID string) (sink.Chunked, bool, error) {
	for _, c := range chunkedOpens(s) {
		if c.PlanID == planID {
			return chunkedProgress(s, c), true, nil
		}
	}
	return t.chunkedFromRows(ctx, s, "", planID)
}

// chunkedFromRows finds a chunked snapshot whose open txn is gone: of
// instance ci the newest, or the one planID. A head counts only with
// evidence that its open landed: a wave or completion txn, or rows of its
// chunks (a head whose open lost a race, or whose waves committed nothing
// visible, is a snapshot nobody can see: starting another one is safe).
// Committed is then the larger of what the wave txns and the rows say;
// chunks committed empty after the last chunk with rows are read again,
// which adds no row twice.
func (t *Table) chunkedFromRows(ctx context.Context, s *deltalog.State, ci, planID string) (sink.Chunked, bool, error) {
	heads, err := t.chunkedHeads(ctx, ci, planID)
	if err != nil || len(heads) == 0 {
		return sink.Chunked{}, false, err
	}
	name := ci
	if name == "" {
		name = heads[0].CaptureInstance
	}
	facts, err := t.scanRows(ctx, s, name, wantChunks)
	if err != nil {
		return sink.Chunked{}, false, fmt.Errorf("delta: table %s: finding chunked snapshots of %q from their rows: %w", t.url, name, err)
	}
	// A head whose open may have landed: its plan file exists (written
	// before the open commit) and no open txn of the instance has its LSN
	// (a head beside a live open of the same LSN lost that race).
	live := map[lsn.LSN]bool{}
	for _, c := range chunkedOpens(s) {
		if sink.SameInstance(c.CaptureInstance, name) {
			live[c.LSN] = true
		}
	}
	var best sink.Chunked
	found := false
	perLSN := map[lsn.LSN][]string{}
	for _, h := range heads {
		if live[h.LSN] {
			continue
		}
		if ok, err := deltalog.Exists(ctx, t.store, chunkedPlanKey(h.PlanID)); err != nil || !ok {
			if err != nil {
				return sink.Chunked{}, false, fmt.Errorf("delta: table %s: %w", t.url, err)
			}
			continue
		}
		h.Version = -1
		c := chunkedProgress(s, h)
		last, rows := facts.chunks[c.LSN]
		if !rows && c.Committed == 0 && !c.Complete {
			continue
		}
		if rows {
			c.Committed = max(c.Committed, int(last)+1)
		}
		perLSN[c.LSN] = append(perLSN[c.LSN], c.PlanID)
		if !found || best.LSN.Less(c.LSN) {
			best, found = c, true
		}
	}
	// Rows carry the LSN, not the plan: two plans of one LSN (both plan
	// files written, one open landed, every txn since expired) cannot be
	// told apart, and resuming the wrong ranges would read rows twice.
	if found && len(perLSN[best.LSN]) > 1 {
		return sink.Chunked{}, false, fmt.Errorf("delta: table %s: chunked snapshots %s of %q share LSN %s and their txn records expired: which one the table holds cannot be told from its rows; drop the head (%s) of the one that never opened",
			t.url, strings.Join(perLSN[best.LSN], ", "), name, best.LSN, chunkedHeadDir)
	}
	if found {
		t.log.Info("chunked snapshot found from its head and the table's rows: its open txn is gone (a checkpoint drops txns older than delta.setTransactionRetentionDuration)",
			"capture_instance", best.CaptureInstance, "plan_id", best.PlanID, "lsn", best.LSN.String(), "committed", best.Committed, "chunks", best.Chunks,
			"files_read", facts.opened, "files_settled_by_stats", facts.skipped)
	}
	return best, found, nil
}

// chunkedHeads reads the heads of ci's chunked snapshots (ignoring case),
// or the head of planID.
func (t *Table) chunkedHeads(ctx context.Context, ci, planID string) ([]sink.Chunked, error) {
	keys := []string{chunkedHeadKey(planID)}
	if planID == "" {
		var err error
		if keys, err = t.dlog.ListKeys(ctx, chunkedHeadDir, false); err != nil {
			return nil, err
		}
	}
	var out []sink.Chunked
	for _, k := range keys {
		if !strings.HasSuffix(k, ".json") {
			continue
		}
		b, err := t.store.ReadAll(ctx, k)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("delta: table %s: reading %s: %w", t.url, k, err)
		}
		var h sink.Chunked
		if err := json.Unmarshal(b, &h); err != nil || h.PlanID == "" || h.Chunks <= 0 {
			return nil, fmt.Errorf("delta: table %s: %s is not a chunked snapshot's head: %v", t.url, k, err)
		}
		if ci == "" || sink.SameInstance(h.CaptureInstance, ci) {
			out = append(out, h)
		}
	}
	return out, nil
}

// withPlan reads c's plan file into c.Plan.
func (t *Table) withPlan(ctx context.Context, c sink.Chunked) (sink.Chunked, error) {
	b, err := t.store.ReadAll(ctx, chunkedPlanKey(c.PlanID))
	if err != nil {
		return c, fmt.Errorf("delta: table %s: reading the plan of chunked snapshot %s (%s): %w", t.url, c.PlanID, chunkedPlanKey(c.PlanID), err)
	}
	c.Plan = b
	return c, nil
}

// chunkedMeta renders a chunked commit's commitInfo.userMetadata.
func chunkedMeta(c sink.Chunked, event string, first, end int, wave *sink.Wave) string {
	m := sink.ChunkedUserMetadata{Snapshot: c.CaptureInstance, LSN: c.LSN.String(), PlanID: c.PlanID, Event: event}
	if !c.CommitTS.IsZero() {
		m.CommitTS = c.CommitTS.UTC().Format("2006-01-02T15:04:05.000000Z")
	}
	if end > first {
		m.Chunks = []int{first, end}
	}
	if wave != nil {
		m.Stamp = wave.Stamp.String()
		if !wave.CommitTS.IsZero() {
			m.CommitTS = wave.CommitTS.UTC().Format("2006-01-02T15:04:05.000000Z")
		}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// FindChunked returns the newest chunked snapshot of captureInstance
// (ignoring case), open or complete, from the log's txn actions and its
// plan file: it works after checkpoints and log cleanup and reads no data
// file.
func (t *Table) FindChunked(ctx context.Context, captureInstance string) (sink.Chunked, error) {
	s, err := t.current(ctx)
	if err != nil {
		return sink.Chunked{}, err
	}
	c, ok, err := t.findChunked(ctx, s, captureInstance)
	if err != nil {
		return sink.Chunked{}, err
	}
	if !ok {
		return sink.Chunked{}, fmt.Errorf("delta: table %s, capture instance %q has no chunked snapshot: %w", t.url, captureInstance, sink.ErrNotFound)
	}
	return t.withPlan(ctx, c)
}

// OpenChunked records a new chunked snapshot (see sink.ChunkSink): it
// writes plan to _cdcsnap/chunked/<PlanID>.json put-if-absent, then
// commits the open txn with no data, creating the table (in info.Schema)
// if it does not exist. The checks against the sink's newest chunked
// snapshot of the instance are made against the log the commit follows,
// and again after every lost put-if-absent race. PlanID must be 1 to 200
// letters, digits, '.', '_' or '-'. A plan file left by an open that lost
// stays unreferenced.
func (t *Table) OpenChunked(ctx context.Context, info sink.Info, chunks int, plan json.RawMessage, replaces string) (sink.Chunked, error) {
	where := fmt.Sprintf("delta: table %s: opening chunked snapshot %s of %q", t.url, info.PlanID, info.CaptureInstance)
	if err := validPlanID(info.PlanID); err != nil {
		return sink.Chunked{}, err
	}
	if chunks < 1 {
		return sink.Chunked{}, fmt.Errorf("%s: %d chunks planned, want at least 1", where, chunks)
	}
	if !json.Valid(plan) {
		return sink.Chunked{}, fmt.Errorf("%s: the plan is not JSON", where)
	}
	if info.Schema != nil {
		if _, err := deltalog.SchemaFromArrow(info.Schema); err != nil {
			return sink.Chunked{}, err
		}
	}
	st := sink.Chunked{CaptureInstance: info.CaptureInstance, LSN: info.LSN, CommitTS: appIDTime(appIDMicros(info.CommitTS)),
		PlanID: info.PlanID, Chunks: chunks}
	var found sink.Chunked
	// check decides from s whether to open: errChunkedExists (found is
	// this plan), sink.ErrSnapshotExists (found is the newest), another
	// error, or nil.
	check := func(s *deltalog.State) error {
		c, ok, err := t.chunkedByPlan(ctx, s, info.PlanID)
		if err != nil {
			return err
		}
		if ok {
			found = c
			if !sink.SameInstance(c.CaptureInstance, info.CaptureInstance) {
				return fmt.Errorf("%s: the plan id is open already for capture instance %q", where, c.CaptureInstance)
			}
			return errChunkedExists
		}
		newest, ok, err := t.findChunked(ctx, s, info.CaptureInstance)
		if err != nil {
			return err
		}
		switch {
		case ok && newest.PlanID != replaces:
			found = newest
			return sink.ErrSnapshotExists
		case !ok && replaces != "":
			return fmt.Errorf("%s: it replaces chunked snapshot %q, which the table does not hold", where, replaces)
		case s.Version < 0 && info.Schema == nil:
			return fmt.Errorf("%s: the table does not exist and info.Schema is nil", where)
		}
		return nil
	}
	s, err := t.current(ctx)
	if err != nil {
		return sink.Chunked{}, err
	}
	if err = check(s); err == nil {
		head, _ := json.Marshal(sink.Chunked{CaptureInstance: st.CaptureInstance, LSN: st.LSN, CommitTS: st.CommitTS, PlanID: st.PlanID, Chunks: st.Chunks})
		if err := t.putSame(ctx, chunkedHeadKey(info.PlanID), head); err != nil {
			return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
		}
		if err := t.putSame(ctx, chunkedPlanKey(info.PlanID), plan); err != nil {
			return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
		}
		um := chunkedMeta(st, "open", 0, 0, nil)
		st.Version, err = t.commit(ctx, func(s *deltalog.State, v int64) ([]deltalog.Action, error) {
			if err := check(s); err != nil {
				return nil, err
			}
			acts := []deltalog.Action{{CommitInfo: commitInfo("WRITE", um, map[string]any{"mode": "Append"})}}
			if info.Schema != nil {
				head, err := t.schemaActions(s, info.Schema)
				if err != nil {
					return nil, err
				}
				acts = append(acts, head...)
			}
			return append(acts, deltalog.Action{Txn: &deltalog.Txn{AppID: chunkedAppID(info, chunks), Version: v, LastUpdated: time.Now().UnixMilli()}}), nil
		})
	}
	switch {
	case errors.Is(err, errChunkedExists):
		return t.withPlan(ctx, found)
	case errors.Is(err, sink.ErrSnapshotExists):
		found, perr := t.withPlan(ctx, found)
		t.log.Info("a chunked snapshot of the capture instance opened first", "capture_instance", info.CaptureInstance, "plan_id", found.PlanID, "lsn", found.LSN.String())
		return found, errors.Join(fmt.Errorf("%s: chunked snapshot %s at %s (version %d) opened first: %w", where, found.PlanID, found.LSN, found.Version, sink.ErrSnapshotExists), perr)
	case err != nil:
		return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
	}
	st.Plan = slices.Clone(plan)
	t.log.Info("chunked snapshot opened", "capture_instance", info.CaptureInstance, "plan_id", info.PlanID, "lsn", info.LSN.String(), "chunks", chunks, "version", st.Version)
	return st, nil
}

// putSame writes a file put-if-absent; one that exists already must hold
// the same bytes (an earlier attempt of this open).
func (t *Table) putSame(ctx context.Context, key string, plan []byte) error {
	err := t.dlog.PutIfAbsent(ctx, key, plan)
	if !errors.Is(err, deltalog.ErrConflict) {
		if err != nil {
			return fmt.Errorf("writing %s: %w", key, err)
		}
		return nil
	}
	old, err := t.store.ReadAll(ctx, key)
	if err != nil {
		return fmt.Errorf("reading %s: %w", key, err)
	}
	if !bytes.Equal(old, plan) {
		return fmt.Errorf("%s exists with another plan", key)
	}
	return nil
}

// CommitChunks commits one wave of a chunked snapshot (see
// sink.ChunkSink): the parts' add actions and the wave's txn in one
// commit. The parts must be chunks first..first+n-1, each once, of
// info.PlanID; first must be the snapshot's Committed in the log the
// commit follows (re-checked after every lost race), else nothing is
// committed and the error wraps sink.ErrChunkCommitted, so no chunk is
// ever visible twice. A complete snapshot wraps sink.ErrChunkCommitted
// too; an unknown PlanID, another capture instance or LSN than the
// snapshot's, a stamp below its LSN and chunks beyond its plan are
// refused. The files of a refused wave stay unreferenced (VACUUM removes
// them): a commit whose outcome was unknown may have landed them.
func (t *Table) CommitChunks(ctx context.Context, info sink.Info, wave sink.Wave, parts []sink.Part) (sink.Chunked, error) {
	where := fmt.Sprintf("delta: table %s: committing wave %d of chunked snapshot %s of %q", t.url, wave.Number, info.PlanID, info.CaptureInstance)
	if info.Schema == nil {
		return sink.Chunked{}, fmt.Errorf("%s: info.Schema is nil", where)
	}
	if _, err := deltalog.SchemaFromArrow(info.Schema); err != nil {
		return sink.Chunked{}, err
	}
	if len(parts) == 0 {
		return sink.Chunked{}, fmt.Errorf("%s: no parts", where)
	}
	adds, rows, seen, err := partAdds(info, parts)
	if err != nil {
		return sink.Chunked{}, err
	}
	first := parts[0].Partition
	for _, p := range parts {
		first = min(first, p.Partition)
	}
	end := first + len(parts)
	for i := first; i < end; i++ {
		if !seen[i] {
			return sink.Chunked{}, &PartsError{Partition: i, Reason: fmt.Sprintf("missing: a wave of %d chunks from chunk %d must be chunks %d..%d", len(parts), first, first, end-1)}
		}
	}
	var cur sink.Chunked
	v, err := t.commit(ctx, func(s *deltalog.State, v int64) ([]deltalog.Action, error) {
		c, ok, err := t.chunkedByPlan(ctx, s, info.PlanID)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("the table holds no chunked snapshot with this plan id")
		}
		cur = c
		switch {
		case c.Complete:
			return nil, fmt.Errorf("the snapshot is complete: %w", sink.ErrChunkCommitted)
		case !sink.SameInstance(c.CaptureInstance, info.CaptureInstance) || c.LSN != info.LSN:
			return nil, fmt.Errorf("the plan id is the chunked snapshot of %q at %s, not of %q at %s", c.CaptureInstance, c.LSN, info.CaptureInstance, info.LSN)
		case wave.Stamp.Less(c.LSN):
			return nil, fmt.Errorf("stamp %s is below the snapshot's LSN %s", wave.Stamp, c.LSN)
		case first < c.Committed:
			return nil, fmt.Errorf("chunk %d is committed already (chunks 0..%d are): %w", first, c.Committed-1, sink.ErrChunkCommitted)
		case first > c.Committed:
			return nil, fmt.Errorf("the wave starts at chunk %d, the first uncommitted chunk is %d: %w", first, c.Committed, sink.ErrChunkCommitted)
		case end > c.Chunks:
			return nil, fmt.Errorf("chunk %d: the plan has %d chunks", end-1, c.Chunks)
		}
		head, err := t.schemaActions(s, info.Schema)
		if err != nil {
			return nil, err
		}
		if err := t.checkLayout(s, info.Schema, adds); err != nil {
			return nil, err
		}
		acts := []deltalog.Action{{CommitInfo: commitInfo("WRITE", chunkedMeta(c, "wave", first, end, &wave), map[string]any{"mode": "Append"})}}
		acts = append(acts, head...)
		acts = append(acts, deltalog.Action{Txn: &deltalog.Txn{AppID: chunksAppID(info.PlanID, end), Version: v, LastUpdated: time.Now().UnixMilli()}})
		for i := range adds {
			acts = append(acts, deltalog.Action{Add: &adds[i]})
		}
		return acts, nil
	})
	if errors.Is(err, sink.ErrChunkCommitted) {
		cur, perr := t.withPlan(ctx, cur)
		t.log.Info("wave refused: its chunks are committed, or it does not start at the first uncommitted one", "plan_id", info.PlanID, "first", first, "committed", cur.Committed)
		return cur, errors.Join(fmt.Errorf("%s: %w", where, err), perr)
	}
	if err != nil {
		return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
	}
	cur.Committed, cur.Version = end, v
	t.log.Info("chunks committed", "capture_instance", info.CaptureInstance, "plan_id", info.PlanID, "chunks", fmt.Sprintf("%d..%d", first, end-1), "rows", rows, "stamp", wave.Stamp.String(), "version", v)
	return t.withPlan(ctx, cur)
}

// CompleteChunked records that the chunked snapshot info.PlanID is
// complete (see sink.ChunkSink): a commit with its completion txn, only
// when every chunk is committed. Completing a complete snapshot returns
// its state.
func (t *Table) CompleteChunked(ctx context.Context, info sink.Info) (sink.Chunked, error) {
	where := fmt.Sprintf("delta: table %s: completing chunked snapshot %s of %q", t.url, info.PlanID, info.CaptureInstance)
	var cur sink.Chunked
	v, err := t.commit(ctx, func(s *deltalog.State, v int64) ([]deltalog.Action, error) {
		c, ok, err := t.chunkedByPlan(ctx, s, info.PlanID)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("the table holds no chunked snapshot with this plan id")
		}
		cur = c
		switch {
		case c.Complete:
			return nil, errChunkedComplete
		case c.Committed != c.Chunks:
			return nil, fmt.Errorf("only %d of %d chunks are committed", c.Committed, c.Chunks)
		}
		acts := []deltalog.Action{{CommitInfo: commitInfo("WRITE", chunkedMeta(c, "complete", 0, 0, nil), map[string]any{"mode": "Append"})}}
		return append(acts, deltalog.Action{Txn: &deltalog.Txn{AppID: completeAppID(info.PlanID), Version: v, LastUpdated: time.Now().UnixMilli()}}), nil
	})
	switch {
	case errors.Is(err, errChunkedComplete):
		return t.withPlan(ctx, cur)
	case err != nil && cur.PlanID != "":
		cur, _ = t.withPlan(ctx, cur)
		return cur, fmt.Errorf("%s: %w", where, err)
	case err != nil:
		return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
	}
	cur.Complete, cur.Version = true, v
	t.log.Info("chunked snapshot complete", "capture_instance", cur.CaptureInstance, "plan_id", info.PlanID, "lsn", cur.LSN.String(), "chunks", cur.Chunks, "version", v)
	return t.withPlan(ctx, cur)
}

// ChunkedSnapshots returns every chunked snapshot recorded in the table,
// oldest first, with their plans; those whose txn records expired come
// last, found from their heads and rows (Version -1).
func (t *Table) ChunkedSnapshots(ctx context.Context) ([]sink.Chunked, error) {
	s, err := t.current(ctx)
	if err != nil {
		return nil, err
	}
	opens := chunkedOpens(s)
	slices.SortFunc(opens, func(a, b sink.Chunked) int { return cmp.Compare(a.Version, b.Version) })
	out := make([]sink.Chunked, 0, len(opens))
	listed := map[string]bool{}
	for _, c := range opens {
		c, err := t.withPlan(ctx, chunkedProgress(s, c))
		if err != nil {
			return nil, err
		}
		out = append(out, c)
		listed[c.PlanID] = true
	}
	// Those whose open txn expired, found from their heads and rows
	// (Version -1), after the others.
	heads, err := t.chunkedHeads(ctx, "", "")
	if err != nil {
		return nil, err
	}
	for _, h := range heads {
		if listed[h.PlanID] {
			continue
		}
		c, ok, err := t.chunkedFromRows(ctx, s, "", h.PlanID)
		if err != nil {
			return nil, err
		}
		if ok {
			if c, err = t.withPlan(ctx, c); err != nil {
				return nil, err
			}
			out = append(out, c)
		}
	}
	return out, nil
}
