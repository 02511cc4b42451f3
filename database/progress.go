package database

import (
	"sync"
	"time"

	"github.com/cdcsnap/cdcsnap/snapshot"
)

// Progress reports how far a run has come, all tables together.
type Progress struct {
	// Tables is the number of capture instances selected.
	Tables int
	// TablesDone counts those with a snapshot: committed by this run, or
	// found committed earlier (TablesExisting among them, read nothing).
	TablesDone     int
	TablesExisting int
	// TablesFailed counts those that failed; TablesRunning those in
	// flight. The run is over when TablesDone + TablesFailed == Tables.
	TablesFailed  int
	TablesRunning int
	// Rows is the number of rows written so far, every table together,
	// RowsResumed among them those that partial snapshots of earlier runs
	// had written (this run read Rows - RowsResumed).
	Rows        int64
	RowsResumed int64
	// EstimatedRows is what Rows will be at the end, as far as is known:
	// the rows of every finished table, and for every other one the larger
	// of its metadata row count (stale by nature) and its rows so far. A
	// table found already committed counts 0.
	EstimatedRows int64
	// Elapsed is the time since the run started.
	Elapsed time.Duration
}

// Rate returns the rows this run read per second so far (resumed rows do
// not count: they were not read).
func (p Progress) Rate() float64 {
	if p.Elapsed <= 0 {
		return 0
	}
	return float64(p.Rows-p.RowsResumed) / p.Elapsed.Seconds()
}

// ETA estimates the time left from the rows left (EstimatedRows - Rows)
// at the rate so far; ok is false until there is a rate, and once every
// table is finished.
func (p Progress) ETA() (eta time.Duration, ok bool) {
	rate := p.Rate()
	if rate <= 0 || p.TablesDone+p.TablesFailed >= p.Tables {
		return 0, false
	}
	left := max(p.EstimatedRows-p.Rows, 0)
	return time.Duration(float64(left) / rate * float64(time.Second)), true
}

// tracker adds up every table's progress and reports it, one call at a
// time.
type tracker struct {
	mu     sync.Mutex
	report func(Progress)
	start  time.Time
	p      Progress
	tables []tableState
}

type tableState struct {
	estimate      int64 // metadata row count, 0 when unknown
	rows, resumed int64
	counted       int64 // this table's share of p.EstimatedRows
	finished      bool
}

func newTracker(report func(Progress), estimates []int64) *tracker {
	t := &tracker{report: report, start: time.Now(), tables: make([]tableState, len(estimates))}
	t.p.Tables = len(estimates)
	for i, e := range estimates {
		t.tables[i].estimate = max(e, 0)
		t.tables[i].counted = t.tables[i].estimate
		t.p.EstimatedRows += t.tables[i].estimate
	}
	return t
}

// set records table i's rows and what it is expected to end with; the
// caller holds t.mu.
func (t *tracker) setLocked(i int, rows, resumed, expected int64) {
	s := &t.tables[i]
	t.p.Rows += rows - s.rows
	t.p.RowsResumed += resumed - s.resumed
	t.p.EstimatedRows += expected - s.counted
	s.rows, s.resumed, s.counted = rows, resumed, expected
}

func (t *tracker) emitLocked() {
	if t.report == nil {
		return
	}
	p := t.p
	p.Elapsed = time.Since(t.start)
	t.report(p)
}

func (t *tracker) started() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.p.TablesRunning++
	t.emitLocked()
}

// snapshotProgress is table i's snapshot.Options.Progress.
func (t *tracker) snapshotProgress(i int) func(snapshot.Progress) {
	return func(sp snapshot.Progress) {
		t.mu.Lock()
		defer t.mu.Unlock()
		s := &t.tables[i]
		if s.finished {
			return
		}
		if sp.EstimatedRows >= 0 {
			s.estimate = sp.EstimatedRows // counted at planning, fresher than ours
		}
		t.setLocked(i, sp.Rows, sp.RowsResumed, max(s.estimate, sp.Rows))
		t.emitLocked()
	}
}

// finished records how table i ended: res when err is nil.
func (t *tracker) finished(i int, res snapshot.Result, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := &t.tables[i]
	s.finished = true
	t.p.TablesRunning--
	switch {
	case err != nil:
		t.p.TablesFailed++
		t.setLocked(i, s.rows, s.resumed, s.rows)
	case res.Existing:
		t.p.TablesDone++
		t.p.TablesExisting++
		t.setLocked(i, 0, 0, 0)
	default:
		t.p.TablesDone++
		t.setLocked(i, res.Rows, res.RowsResumed, res.Rows)
	}
	t.emitLocked()
}

// skipped records table i as failed without having run.
func (t *tracker) skipped(i int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tables[i].finished = true
	t.p.TablesFailed++
	t.setLocked(i, 0, 0, 0)
	t.emitLocked()
}
