package sinktest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/sinktest"
)

var _ sinktest.TableReader = (*fake.MemSink)(nil)

// TestRunChunkedMemSink runs the chunked-snapshot conformance suite on
// fake.MemSink, the reference implementation of sink.ChunkSink.
func TestRunChunkedMemSink(t *testing.T) {
	sinktest.RunChunked(t, func(t *testing.T) sink.ChunkSink {
		s := fake.NewMemSink()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

// brokenChunkEnv names the bug TestBrokenChunkSink gives its sinks.
const brokenChunkEnv = "SINKTEST_BROKEN_CHUNK_SINK"

// brokenChunkSink is fake.MemSink with one rule of sink.ChunkSink broken.
type brokenChunkSink struct {
	*fake.MemSink
	bug string
}

func (s brokenChunkSink) FindSnapshot(ctx context.Context, ci string) (sink.Snapshot, error) {
	if c, err := s.MemSink.FindChunked(ctx, ci); err == nil && s.bug == "findsChunked" {
		return sink.Snapshot{CaptureInstance: c.CaptureInstance, LSN: c.LSN, CommitTS: c.CommitTS, Version: c.Version, Rows: -1}, nil
	}
	return s.MemSink.FindSnapshot(ctx, ci)
}

func (s brokenChunkSink) FindChunked(ctx context.Context, ci string) (sink.Chunked, error) {
	c, err := s.MemSink.FindChunked(ctx, ci)
	if s.bug == "staleFind" {
		c.Committed = 0
	}
	return c, err
}

func (s brokenChunkSink) OpenChunked(ctx context.Context, info sink.Info, chunks int, plan json.RawMessage, replaces string) (sink.Chunked, error) {
	if s.bug == "reopenRefused" {
		if c, err := s.MemSink.FindChunked(ctx, info.CaptureInstance); err == nil && c.PlanID == info.PlanID {
			return c, fmt.Errorf("opened already: %w", sink.ErrSnapshotExists)
		}
	}
	return s.MemSink.OpenChunked(ctx, info, chunks, plan, replaces)
}

func (s brokenChunkSink) CommitChunks(ctx context.Context, info sink.Info, wave sink.Wave, parts []sink.Part) (sink.Chunked, error) {
	c, err := s.MemSink.CommitChunks(ctx, info, wave, parts)
	if s.bug == "hidesCommitted" && errors.Is(err, sink.ErrChunkCommitted) {
		return c, nil
	}
	return c, err
}

func (s brokenChunkSink) CompleteChunked(ctx context.Context, info sink.Info) (sink.Chunked, error) {
	c, err := s.MemSink.CompleteChunked(ctx, info)
	if s.bug == "completesEarly" && err != nil {
		c.Complete = true
		return c, nil
	}
	return c, err
}

// TestBrokenChunkSink runs RunChunked on a sink with one bug; it only runs
// as the child process of TestChunkedSuiteCatchesBugs.
func TestBrokenChunkSink(t *testing.T) {
	bug := os.Getenv(brokenChunkEnv)
	if bug == "" {
		t.Skip("runs as a child of TestChunkedSuiteCatchesBugs")
	}
	sinktest.RunChunked(t, func(t *testing.T) sink.ChunkSink {
		s := fake.NewMemSink()
		t.Cleanup(func() { _ = s.Close() })
		return brokenChunkSink{s, bug}
	})
}

// TestChunkedSuiteCatchesBugs proves RunChunked checks each rule: it fails
// on a sink that breaks it, in the subtest meant to catch it.
func TestChunkedSuiteCatchesBugs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the test binary once per bug")
	}
	cases := []struct{ bug, subtest string }{
		{"findsChunked", "OpenFindResume"},
		{"findsChunked", "WholeAndChunkedApart"},
		{"staleFind", "WavesInOrder"},
		{"reopenRefused", "OpenFindResume"},
		{"hidesCommitted", "WavesInOrder"},
		{"hidesCommitted", "ConcurrentWaveOneLands"},
		{"completesEarly", "WavesInOrder"},
	}
	for _, c := range cases {
		t.Run(c.bug+"/"+c.subtest, func(t *testing.T) {
			t.Parallel()
			expectSuiteFails(t, "TestBrokenChunkSink", brokenChunkEnv, c.bug, c.subtest)
		})
	}
}

// TestRunPartialMemSink runs the partial-snapshot conformance suite on
// fake.MemSink.
func TestRunPartialMemSink(t *testing.T) {
	sinktest.RunPartial(t, func(t *testing.T) sink.PartialSink {
		s := fake.NewMemSink()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

// brokenPartialEnv names the bug TestBrokenPartialSink gives its sinks.
const brokenPartialEnv = "SINKTEST_BROKEN_PARTIAL_SINK"

// brokenPartialSink is fake.MemSink with one rule of sink.PartialSink
// broken.
type brokenPartialSink struct {
	*fake.MemSink
	bug string
}

func (s brokenPartialSink) RecordPart(ctx context.Context, info sink.Info, part sink.Part) (sink.Part, error) {
	got, err := s.MemSink.RecordPart(ctx, info, part)
	if s.bug == "hidesRecorded" && errors.Is(err, sink.ErrPartRecorded) {
		return part, nil
	}
	return got, err
}

func (s brokenPartialSink) FindPartial(ctx context.Context, ci string) (sink.Partial, error) {
	p, err := s.MemSink.FindPartial(ctx, ci)
	if s.bug == "dropsParts" && len(p.Parts) > 1 {
		p.Parts = p.Parts[1:]
	}
	return p, err
}

func (s brokenPartialSink) DropPartial(ctx context.Context, ci, planID string) error {
	if s.bug == "dropIgnored" {
		return nil
	}
	return s.MemSink.DropPartial(ctx, ci, planID)
}

// TestBrokenPartialSink runs RunPartial on a sink with one bug; it only
// runs as the child process of TestPartialSuiteCatchesBugs.
func TestBrokenPartialSink(t *testing.T) {
	bug := os.Getenv(brokenPartialEnv)
	if bug == "" {
		t.Skip("runs as a child of TestPartialSuiteCatchesBugs")
	}
	sinktest.RunPartial(t, func(t *testing.T) sink.PartialSink {
		s := fake.NewMemSink()
		t.Cleanup(func() { _ = s.Close() })
		return brokenPartialSink{s, bug}
	})
}

// TestPartialSuiteCatchesBugs proves RunPartial checks each rule: it fails
// on a sink that breaks it, in the subtest meant to catch it.
func TestPartialSuiteCatchesBugs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the test binary once per bug")
	}
	cases := []struct{ bug, subtest string }{
		{"hidesRecorded", "RecordFindCommit"},
		{"hidesRecorded", "ConcurrentRecords"},
		{"dropsParts", "RecordFindCommit"},
		{"dropIgnored", "Drop"},
		{"dropIgnored", "NewestWins"},
	}
	for _, c := range cases {
		t.Run(c.bug+"/"+c.subtest, func(t *testing.T) {
			t.Parallel()
			expectSuiteFails(t, "TestBrokenPartialSink", brokenPartialEnv, c.bug, c.subtest)
		})
	}
}
