package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cdcsnap/cdcsnap/database"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// progressPrinter shows a snapshot's progress: one line redrawn in place on
// a terminal, a plain line every interval otherwise (logs, CI).
type progressPrinter struct {
	w        io.Writer
	tty      bool
	interval time.Duration
	last     time.Time
	width    int
}

func (p *progressPrinter) update(pr snapshot.Progress) {
	finished := pr.PartitionsDone == pr.Partitions
	p.show(finished, func() string { return formatProgress(pr) })
}

// updateRun shows a many-instance run's progress, every table together.
func (p *progressPrinter) updateRun(pr database.Progress) {
	finished := pr.TablesDone+pr.TablesFailed == pr.Tables
	p.show(finished, func() string { return formatRunProgress(pr) })
}

// show draws the line line makes, at most once an interval but always
// when finished.
func (p *progressPrinter) show(finished bool, line func() string) {
	now := time.Now()
	if !finished && now.Sub(p.last) < p.interval {
		return
	}
	p.last = now
	p.draw(line(), finished)
}

func (p *progressPrinter) draw(line string, finished bool) {
	if p.tty {
		pad := max(p.width-len(line), 0)
		fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", pad))
		p.width = len(line)
		if finished {
			fmt.Fprintln(p.w)
		}
		return
	}
	fmt.Fprintln(p.w, line)
}

// formatProgress renders rows, rate and ETA (from the metadata row count,
// which may be stale: the ETA is a guide, and is omitted once rows pass it).
func formatProgress(pr snapshot.Progress) string {
	secs := pr.Elapsed.Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(pr.Rows-pr.RowsResumed) / secs
	}
	s := fmt.Sprintf("%s rows", groupDigits(pr.Rows))
	if pr.EstimatedRows > 0 {
		s += fmt.Sprintf(" of ~%s (%3.0f%%)", groupDigits(pr.EstimatedRows), 100*min(1, float64(pr.Rows)/float64(pr.EstimatedRows)))
	}
	s += fmt.Sprintf("  %s rows/s  partitions %d/%d", groupDigits(int64(rate)), pr.PartitionsDone, pr.Partitions)
	if pr.PartitionsResumed > 0 {
		s += fmt.Sprintf(" (%d resumed)", pr.PartitionsResumed)
	}
	if pr.EstimatedRows > pr.Rows && rate > 0 && pr.PartitionsDone < pr.Partitions {
		eta := time.Duration(float64(pr.EstimatedRows-pr.Rows) / rate * float64(time.Second))
		s += "  ETA " + eta.Round(100*time.Millisecond).String()
	}
	return s
}

// formatRunProgress renders a many-instance run: tables done, rows, rate
// and ETA (from the tables' metadata row counts, a guide as above).
func formatRunProgress(pr database.Progress) string {
	s := fmt.Sprintf("tables %d/%d", pr.TablesDone, pr.Tables)
	var notes []string
	if pr.TablesRunning > 0 {
		notes = append(notes, fmt.Sprintf("%d running", pr.TablesRunning))
	}
	if pr.TablesExisting > 0 {
		notes = append(notes, fmt.Sprintf("%d done before", pr.TablesExisting))
	}
	if pr.TablesFailed > 0 {
		notes = append(notes, fmt.Sprintf("%d failed", pr.TablesFailed))
	}
	if len(notes) > 0 {
		s += " (" + strings.Join(notes, ", ") + ")"
	}
	s += fmt.Sprintf("  %s rows", groupDigits(pr.Rows))
	if pr.EstimatedRows > 0 {
		s += fmt.Sprintf(" of ~%s (%3.0f%%)", groupDigits(pr.EstimatedRows), 100*min(1, float64(pr.Rows)/float64(pr.EstimatedRows)))
	}
	s += fmt.Sprintf("  %s rows/s", groupDigits(int64(pr.Rate())))
	if eta, ok := pr.ETA(); ok && pr.EstimatedRows > pr.Rows {
		s += "  ETA " + eta.Round(100*time.Millisecond).String()
	}
	return s
}

func groupDigits(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
