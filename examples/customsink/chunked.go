package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
)

// FolderSink also implements sink.ChunkSink, so snapshot.Backfill can take
// chunked snapshots into it. Chunk rows are staged by WritePartition as a
// whole snapshot's are; the records of a chunked snapshot live under
// _chunked/<capture instance, lowercased>/:
//
//	open-<seq>.json        one per chunked snapshot opened; the highest seq is the newest
//	<planID>/plan.json     the plan, exactly as OpenChunked got it (written first)
//	<planID>/wave-<first>.json  a committed wave: chunks first..end-1 and their files
//	<planID>/complete.json the snapshot is complete
//
// Every record is created put-if-absent (createExclusive: link(2) of a
// synced temporary file, which fails if the name exists, across
// processes). That alone makes the rules hold: an open takes the seq after
// the newest it saw, so of two opens that saw the same newest only one
// lands; a wave is named by its first chunk and created only when that is
// the first uncommitted chunk, so two writers of one wave race for one
// name and a writer with a stale view finds its name taken. Committed is
// the end of the chain wave-0, wave-<end of wave-0>, ...
//
// Version counts the records: an open's is one more than the version of
// the snapshot it replaces (0 for the first), and each wave and the
// completion add one. FindSnapshot and ReadSnapshotRows never look here.
const chunkedDir = "_chunked"

var _ sink.ChunkSink = (*FolderSink)(nil)

// chunkOpen is an open-<seq>.json record.
type chunkOpen struct {
	CaptureInstance string    `json:"capture_instance"`
	LSN             lsn.LSN   `json:"lsn"`
	CommitTS        time.Time `json:"commit_ts"`
	PlanID          string    `json:"plan_id"`
	Chunks          int       `json:"chunks"`
	Replaces        string    `json:"replaces,omitempty"`
	Version         int64     `json:"version"`
	OpenedAt        time.Time `json:"opened_at"`
	// UserMetadata is what a Delta commit would carry.
	UserMetadata sink.ChunkedUserMetadata `json:"user_metadata"`

	seq int64
}

// chunkWave is a wave-<first>.json record.
type chunkWave struct {
	PlanID       string                   `json:"plan_id"`
	Wave         int                      `json:"wave"`
	First        int                      `json:"first"`
	End          int                      `json:"end"`
	Stamp        lsn.LSN                  `json:"stamp"`
	CommitTS     time.Time                `json:"commit_ts"`
	Rows         int64                    `json:"rows"`
	Files        []ManifestFile           `json:"files"`
	Version      int64                    `json:"version"`
	CommittedAt  time.Time                `json:"committed_at"`
	UserMetadata sink.ChunkedUserMetadata `json:"user_metadata"`
}

// chunkComplete is a complete.json record.
type chunkComplete struct {
	PlanID       string                   `json:"plan_id"`
	Version      int64                    `json:"version"`
	CompletedAt  time.Time                `json:"completed_at"`
	UserMetadata sink.ChunkedUserMetadata `json:"user_metadata"`
}

func (s *FolderSink) chunkedInstanceDir(ci string) string {
	return filepath.Join(s.dir, chunkedDir, instanceFile(ci))
}

func (s *FolderSink) planDir(ci, planID string) string {
	return filepath.Join(s.chunkedInstanceDir(ci), planID)
}

func metaTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000Z")
}

// readJSON decodes the file name into v; a missing file wraps fs.ErrNotExist.
func readJSON(name string, v any) error {
	b, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// opens returns ci's open records, oldest first.
func (s *FolderSink) opens(ci string) ([]chunkOpen, error) {
	dir := s.chunkedInstanceDir(ci)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []chunkOpen
	for _, e := range entries {
		var seq int64
		if n, _ := fmt.Sscanf(e.Name(), "open-%020d.json", &seq); n != 1 || e.Name() != fmt.Sprintf("open-%020d.json", seq) {
			continue
		}
		var o chunkOpen
		if err := readJSON(filepath.Join(dir, e.Name()), &o); err != nil {
			return nil, err
		}
		o.seq = seq
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out, nil
}

// openOf returns the open record of planID among ci's, or false.
func (s *FolderSink) openOf(ci, planID string) (chunkOpen, bool, error) {
	all, err := s.opens(ci)
	if err != nil {
		return chunkOpen{}, false, err
	}
	for _, o := range all {
		if o.PlanID == planID {
			return o, true, nil
		}
	}
	return chunkOpen{}, false, nil
}

// state reads o's waves, completion and plan.
func (s *FolderSink) state(o chunkOpen) (sink.Chunked, []chunkWave, error) {
	st := sink.Chunked{CaptureInstance: o.CaptureInstance, LSN: o.LSN, CommitTS: o.CommitTS, PlanID: o.PlanID, Chunks: o.Chunks, Version: o.Version}
	dir := s.planDir(o.CaptureInstance, o.PlanID)
	var waves []chunkWave
	for st.Committed < st.Chunks {
		var w chunkWave
		err := readJSON(filepath.Join(dir, fmt.Sprintf("wave-%010d.json", st.Committed)), &w)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return st, nil, err
		}
		if w.First != st.Committed || w.End <= w.First {
			return st, nil, fmt.Errorf("wave record of chunk %d says chunks %d..%d", st.Committed, w.First, w.End-1)
		}
		waves = append(waves, w)
		st.Committed, st.Version = w.End, w.Version
	}
	var c chunkComplete
	switch err := readJSON(filepath.Join(dir, "complete.json"), &c); {
	case err == nil:
		st.Complete, st.Version = true, c.Version
	case !errors.Is(err, fs.ErrNotExist):
		return st, nil, err
	}
	plan, err := os.ReadFile(filepath.Join(dir, "plan.json"))
	if err != nil {
		return st, nil, err
	}
	st.Plan = plan
	return st, waves, nil
}

// FindChunked returns the newest chunked snapshot of captureInstance.
func (s *FolderSink) FindChunked(ctx context.Context, captureInstance string) (sink.Chunked, error) {
	all, err := s.opens(captureInstance)
	if err != nil {
		return sink.Chunked{}, fmt.Errorf("folder sink: chunked snapshot of %q: %w", captureInstance, err)
	}
	if len(all) == 0 {
		return sink.Chunked{}, fmt.Errorf("folder sink: chunked snapshot of %q: %w", captureInstance, sink.ErrNotFound)
	}
	st, _, err := s.state(all[len(all)-1])
	if err != nil {
		return sink.Chunked{}, fmt.Errorf("folder sink: chunked snapshot of %q: %w", captureInstance, err)
	}
	return st, nil
}

// OpenChunked writes the plan, then creates open-<seq>.json with the seq
// after the newest open it saw, put-if-absent.
func (s *FolderSink) OpenChunked(ctx context.Context, info sink.Info, chunks int, plan json.RawMessage, replaces string) (sink.Chunked, error) {
	where := fmt.Sprintf("folder sink: open chunked snapshot %s of %q", info.PlanID, info.CaptureInstance)
	if err := ctx.Err(); err != nil {
		return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
	}
	if err := validPlanID(info.PlanID); err != nil {
		return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
	}
	if chunks < 1 || !json.Valid(plan) {
		return sink.Chunked{}, fmt.Errorf("%s: want at least one chunk (got %d) and a JSON plan", where, chunks)
	}
	for attempt := 0; ; attempt++ {
		all, err := s.opens(info.CaptureInstance)
		if err != nil {
			return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
		}
		o := chunkOpen{CaptureInstance: info.CaptureInstance, LSN: info.LSN, CommitTS: info.CommitTS.UTC().Truncate(time.Microsecond),
			PlanID: info.PlanID, Chunks: chunks, Replaces: replaces, OpenedAt: time.Now().UTC()}
		for _, e := range all {
			if e.PlanID == info.PlanID {
				st, _, err := s.state(e)
				if err != nil {
					return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
				}
				return st, nil
			}
		}
		if n := len(all); n > 0 {
			newest, _, err := s.state(all[n-1])
			if err != nil {
				return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
			}
			if newest.PlanID != replaces {
				return newest, fmt.Errorf("%s: chunked snapshot %s at %s opened first: %w", where, newest.PlanID, newest.LSN, sink.ErrSnapshotExists)
			}
			o.seq, o.Version = all[n-1].seq+1, newest.Version+1
		} else if replaces != "" {
			return sink.Chunked{}, fmt.Errorf("%s: it replaces chunked snapshot %q, which the sink does not hold", where, replaces)
		}
		if attempt > 0 {
			// The open lost a race but the newest it now sees is the one it
			// replaces: impossible unless records were removed by hand.
			return sink.Chunked{}, fmt.Errorf("%s: open-%020d.json exists but is not the newest open", where, o.seq)
		}
		dir := s.planDir(info.CaptureInstance, info.PlanID)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
		}
		if err := createExclusive(filepath.Join(dir, "plan.json"), plan); errors.Is(err, fs.ErrExist) {
			old, rerr := os.ReadFile(filepath.Join(dir, "plan.json"))
			if rerr != nil || !bytes.Equal(old, plan) {
				return sink.Chunked{}, fmt.Errorf("%s: plan.json exists with another plan (%v)", where, rerr)
			}
		} else if err != nil {
			return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
		}
		o.UserMetadata = sink.ChunkedUserMetadata{Snapshot: o.CaptureInstance, LSN: o.LSN.String(), PlanID: o.PlanID, Event: "open", CommitTS: metaTime(o.CommitTS)}
		b, err := json.MarshalIndent(o, "", "  ")
		if err != nil {
			return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
		}
		err = createExclusive(filepath.Join(s.chunkedInstanceDir(info.CaptureInstance), fmt.Sprintf("open-%020d.json", o.seq)), b)
		if errors.Is(err, fs.ErrExist) {
			continue // another open took the seq: look again
		}
		if err != nil {
			return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
		}
		return sink.Chunked{CaptureInstance: o.CaptureInstance, LSN: o.LSN, CommitTS: o.CommitTS, PlanID: o.PlanID, Chunks: chunks,
			Plan: append(json.RawMessage(nil), plan...), Version: o.Version}, nil
	}
}

// CommitChunks checks the parts as CommitSnapshot does, then creates
// wave-<first>.json put-if-absent when first is the first uncommitted
// chunk.
func (s *FolderSink) CommitChunks(ctx context.Context, info sink.Info, wave sink.Wave, parts []sink.Part) (sink.Chunked, error) {
	where := fmt.Sprintf("folder sink: commit wave %d of chunked snapshot %s of %q", wave.Number, info.PlanID, info.CaptureInstance)
	if err := ctx.Err(); err != nil {
		return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
	}
	if err := validPlanID(info.PlanID); err != nil {
		return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
	}
	if len(parts) == 0 {
		return sink.Chunked{}, fmt.Errorf("%s: no parts", where)
	}
	o, ok, err := s.openOf(info.CaptureInstance, info.PlanID)
	if err != nil {
		return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
	}
	if !ok {
		return sink.Chunked{}, fmt.Errorf("%s: the sink holds no chunked snapshot with this plan", where)
	}
	files, rows, err := s.checkParts(info, parts)
	if err != nil {
		return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
	}
	first, seen := parts[0].Partition, map[int]bool{}
	for _, p := range parts {
		first = min(first, p.Partition)
		seen[p.Partition] = true
	}
	end := first + len(parts)
	for i := first; i < end; i++ {
		if !seen[i] {
			return sink.Chunked{}, fmt.Errorf("%s: a wave of %d chunks from chunk %d lacks chunk %d", where, len(parts), first, i)
		}
	}
	st, _, err := s.state(o)
	if err != nil {
		return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
	}
	switch {
	case st.Complete:
		return st, fmt.Errorf("%s: the snapshot is complete: %w", where, sink.ErrChunkCommitted)
	case st.LSN != info.LSN:
		return sink.Chunked{}, fmt.Errorf("%s: the snapshot's LSN is %s, not %s", where, st.LSN, info.LSN)
	case wave.Stamp.Less(st.LSN):
		return sink.Chunked{}, fmt.Errorf("%s: stamp %s is below the snapshot's LSN %s", where, wave.Stamp, st.LSN)
	case first != st.Committed:
		return st, fmt.Errorf("%s: the wave starts at chunk %d, the first uncommitted chunk is %d: %w", where, first, st.Committed, sink.ErrChunkCommitted)
	case end > st.Chunks:
		return sink.Chunked{}, fmt.Errorf("%s: chunk %d: the plan has %d chunks", where, end-1, st.Chunks)
	}
	w := chunkWave{PlanID: info.PlanID, Wave: wave.Number, First: first, End: end, Stamp: wave.Stamp, CommitTS: wave.CommitTS.UTC(), Rows: rows,
		Files: files, Version: st.Version + 1, CommittedAt: time.Now().UTC(),
		UserMetadata: sink.ChunkedUserMetadata{Snapshot: st.CaptureInstance, LSN: st.LSN.String(), PlanID: st.PlanID, Event: "wave",
			Chunks: []int{first, end}, Stamp: wave.Stamp.String(), CommitTS: metaTime(wave.CommitTS)}}
	b, err := json.MarshalIndent(w, "", "  ")
	if err != nil {
		return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
	}
	err = createExclusive(filepath.Join(s.planDir(o.CaptureInstance, o.PlanID), fmt.Sprintf("wave-%010d.json", first)), b)
	if errors.Is(err, fs.ErrExist) {
		now, _, rerr := s.state(o)
		return now, errors.Join(fmt.Errorf("%s: another writer committed chunk %d first: %w", where, first, sink.ErrChunkCommitted), rerr)
	}
	if err != nil {
		return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
	}
	st.Committed, st.Version = end, w.Version
	return st, nil
}

// CompleteChunked creates complete.json once every chunk is committed.
func (s *FolderSink) CompleteChunked(ctx context.Context, info sink.Info) (sink.Chunked, error) {
	where := fmt.Sprintf("folder sink: complete chunked snapshot %s of %q", info.PlanID, info.CaptureInstance)
	if err := ctx.Err(); err != nil {
		return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
	}
	if err := validPlanID(info.PlanID); err != nil {
		return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
	}
	o, ok, err := s.openOf(info.CaptureInstance, info.PlanID)
	if err != nil {
		return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
	}
	if !ok {
		return sink.Chunked{}, fmt.Errorf("%s: the sink holds no chunked snapshot with this plan", where)
	}
	st, _, err := s.state(o)
	switch {
	case err != nil:
		return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
	case st.Complete:
		return st, nil
	case st.Committed != st.Chunks:
		return st, fmt.Errorf("%s: only %d of %d chunks are committed", where, st.Committed, st.Chunks)
	}
	c := chunkComplete{PlanID: st.PlanID, Version: st.Version + 1, CompletedAt: time.Now().UTC(),
		UserMetadata: sink.ChunkedUserMetadata{Snapshot: st.CaptureInstance, LSN: st.LSN.String(), PlanID: st.PlanID, Event: "complete", CommitTS: metaTime(st.CommitTS)}}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
	}
	if err := createExclusive(filepath.Join(s.planDir(o.CaptureInstance, o.PlanID), "complete.json"), b); err != nil && !errors.Is(err, fs.ErrExist) {
		return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
	}
	st, _, err = s.state(o)
	if err != nil {
		return sink.Chunked{}, fmt.Errorf("%s: %w", where, err)
	}
	return st, nil
}

// ReadAll returns every committed row: the files of every whole
// snapshot's manifests and of every committed wave (it implements
// sinktest.TableReader). With no committed file the reader is empty, in
// the bronze metadata columns. The caller releases the reader.
func (s *FolderSink) ReadAll(ctx context.Context) (array.RecordReader, error) {
	var paths []string
	instances, err := os.ReadDir(filepath.Join(s.dir, snapshotsDir))
	if err != nil {
		return nil, fmt.Errorf("folder sink: read all: %w", err)
	}
	for _, in := range instances {
		ms, err := os.ReadDir(filepath.Join(s.dir, snapshotsDir, in.Name()))
		if err != nil {
			return nil, fmt.Errorf("folder sink: read all: %w", err)
		}
		for _, e := range ms {
			var v int64
			if n, _ := fmt.Sscanf(e.Name(), "%020d.json", &v); n != 1 || !strings.HasSuffix(e.Name(), ".json") {
				continue
			}
			var m Manifest
			if err := readJSON(filepath.Join(s.dir, snapshotsDir, in.Name(), e.Name()), &m); err != nil {
				return nil, fmt.Errorf("folder sink: read all: %w", err)
			}
			for _, f := range m.Files {
				paths = append(paths, f.Path)
			}
		}
	}
	chunked, err := os.ReadDir(filepath.Join(s.dir, chunkedDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("folder sink: read all: %w", err)
	}
	for _, in := range chunked {
		var all []chunkOpen
		if all, err = s.opensIn(in.Name()); err != nil {
			return nil, fmt.Errorf("folder sink: read all: %w", err)
		}
		for _, o := range all {
			_, waves, err := s.state(o)
			if err != nil {
				return nil, fmt.Errorf("folder sink: read all: %w", err)
			}
			for _, w := range waves {
				for _, f := range w.Files {
					paths = append(paths, f.Path)
				}
			}
		}
	}
	var (
		schema *arrow.Schema
		recs   []arrow.RecordBatch
	)
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	for _, p := range paths {
		sc, err := s.readFile(ctx, p, func(rec arrow.RecordBatch) {
			rec.Retain()
			recs = append(recs, rec)
		})
		if err != nil {
			return nil, fmt.Errorf("folder sink: read all: %s: %w", p, err)
		}
		if schema == nil {
			schema = sc
		} else if !schema.Equal(sc) {
			return nil, fmt.Errorf("folder sink: read all: %s has schema %s, other files %s", p, sc, schema)
		}
	}
	if schema == nil {
		schema = arrow.NewSchema(sink.MetadataFields(), nil)
	}
	return array.NewRecordReader(schema, recs)
}

// opensIn is opens for the instance folder named name (instanceFile's
// form): the records name the instance as given.
func (s *FolderSink) opensIn(name string) ([]chunkOpen, error) {
	entries, err := os.ReadDir(filepath.Join(s.dir, chunkedDir, name))
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "open-") {
			var o chunkOpen
			if err := readJSON(filepath.Join(s.dir, chunkedDir, name, e.Name()), &o); err != nil {
				return nil, err
			}
			return s.opens(o.CaptureInstance)
		}
	}
	return nil, nil
}
