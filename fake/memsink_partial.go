package fake

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/cdcsnap/cdcsnap/sink"
)

var (
	_ sink.PartialSink = (*MemSink)(nil)
	_ sink.Checker     = (*MemSink)(nil)
)

// CheckSnapshot implements sink.Checker: schema must be a bronze schema
// that the table can take (see ErrSchema).
func (s *MemSink) CheckSnapshot(ctx context.Context, captureInstance string, schema *arrow.Schema) error {
	if err := checkBronze(schema); err != nil {
		return fmt.Errorf("fake: memory sink: capture instance %q: %w", captureInstance, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.evolveLocked(schema); err != nil {
		return fmt.Errorf("fake: memory sink: capture instance %q: %w", captureInstance, err)
	}
	return nil
}

// memPartial is a partial whole snapshot's record.
type memPartial struct {
	head  sink.Partial // without Parts and Lost
	parts map[int]sink.Part
}

func (s *MemSink) partialLocked(planID string) *memPartial {
	for _, p := range s.partials {
		if p.head.PlanID == planID {
			return p
		}
	}
	return nil
}

// OpenPartial implements sink.PartialSink.
func (s *MemSink) OpenPartial(ctx context.Context, info sink.Info, plan json.RawMessage) error {
	where := fmt.Sprintf("fake: memory sink: open partial snapshot of %q (plan %q)", info.CaptureInstance, info.PlanID)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if info.PlanID == "" {
		return fmt.Errorf("%s: empty plan id", where)
	}
	if err := checkBronze(info.Schema); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrSinkClosed
	}
	if p := s.partialLocked(info.PlanID); p != nil {
		if !bytes.Equal(p.head.Plan, plan) {
			return fmt.Errorf("%s: the plan is recorded already with other contents", where)
		}
		return nil
	}
	s.partials = append(s.partials, &memPartial{
		head: sink.Partial{CaptureInstance: info.CaptureInstance, LSN: info.LSN, PlanID: info.PlanID, Replaces: info.Replaces,
			Created: s.nowLocked().UTC(), Plan: slices.Clone(plan)},
		parts: map[int]sink.Part{},
	})
	return nil
}

// SetClock makes now stamp the Created time of partial snapshots opened
// from here on (nil: time.Now), so tests can age them.
func (s *MemSink) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

func (s *MemSink) nowLocked() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// RecordPart implements sink.PartialSink.
func (s *MemSink) RecordPart(ctx context.Context, info sink.Info, part sink.Part) (sink.Part, error) {
	where := fmt.Sprintf("fake: memory sink: record partition %d of %q (plan %q)", part.Partition, info.CaptureInstance, info.PlanID)
	if err := ctx.Err(); err != nil {
		return sink.Part{}, fmt.Errorf("%s: %w", where, err)
	}
	if part.PlanID != info.PlanID {
		return sink.Part{}, fmt.Errorf("%s: the part belongs to plan %q", where, part.PlanID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sink.Part{}, ErrSinkClosed
	}
	p := s.partialLocked(info.PlanID)
	if p == nil {
		return sink.Part{}, fmt.Errorf("%s: %w", where, sink.ErrNotFound)
	}
	if old, ok := p.parts[part.Partition]; ok && s.intactLocked(old) {
		return old, fmt.Errorf("%s: %w", where, sink.ErrPartRecorded)
	}
	part.Data = slices.Clone(part.Data)
	p.parts[part.Partition] = part
	return part, nil
}

// FindPartial implements sink.PartialSink. A recorded part whose data the
// sink no longer holds uncommitted (VacuumUncommitted, or a commit took
// it) is in Lost.
func (s *MemSink) FindPartial(ctx context.Context, captureInstance string) (sink.Partial, error) {
	if err := ctx.Err(); err != nil {
		return sink.Partial{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sink.Partial{}, ErrSinkClosed
	}
	var best *memPartial
	for _, p := range s.partials {
		if sink.SameInstance(p.head.CaptureInstance, captureInstance) && (best == nil || !p.head.Created.Before(best.head.Created)) {
			best = p
		}
	}
	if best == nil {
		return sink.Partial{}, fmt.Errorf("fake: memory sink: capture instance %q has no partial snapshot: %w", captureInstance, sink.ErrNotFound)
	}
	out := best.head
	out.Plan = slices.Clone(out.Plan)
	for _, i := range slices.Sorted(maps.Keys(best.parts)) {
		part := best.parts[i]
		if !s.intactLocked(part) {
			out.Lost = append(out.Lost, i)
			continue
		}
		part.Data = slices.Clone(part.Data)
		out.Parts = append(out.Parts, part)
	}
	return out, nil
}

// intactLocked reports whether the sink still holds part's rows
// uncommitted.
func (s *MemSink) intactLocked(part sink.Part) bool {
	var d partData
	if json.Unmarshal(part.Data, &d) != nil {
		return false
	}
	pp, ok := s.pending[d.ID]
	return ok && pp.planID == part.PlanID && pp.partition == part.Partition
}

// DropPartial implements sink.PartialSink.
func (s *MemSink) DropPartial(ctx context.Context, captureInstance, planID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrSinkClosed
	}
	s.partials = slices.DeleteFunc(s.partials, func(p *memPartial) bool {
		return p.head.PlanID == planID && sink.SameInstance(p.head.CaptureInstance, captureInstance)
	})
	return nil
}

// VacuumUncommitted forgets every part written and not committed, as a
// Delta VACUUM deletes data files no commit references: a partial
// snapshot's recorded parts are then Lost.
func (s *MemSink) VacuumUncommitted() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, p := range s.pending {
		for _, r := range p.records {
			r.Release()
		}
		delete(s.pending, id)
	}
}
