package sqlserver

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cdcsnap/cdcsnap/lsn"
)

// serverClock turns the times SQL Server keeps in its own local wall clock
// (cdc.lsn_time_mapping's tran_end_time, FACTS.md F08) into instants. In a
// zone with daylight saving time the hour a fall-back repeats is read twice:
// a commit in it is at the first reading unless the server's clock went
// back before it, which the commits' order by LSN shows (F84). secondFrom
// finds, for one repeated hour, the LSN of the first commit the clock went
// back for.
type serverClock struct {
	loc *time.Location
	// secondFrom returns the LSN of the first commit at or below upTo
	// whose time, inside the repeated hour [start, end) of wall clocks,
	// reads more than a minute before the commit before it: from there on
	// the hour is read the second time. found is false when there is none
	// (the clock had not gone back by upTo). Nil: every repeated time is
	// read the first time.
	secondFrom func(ctx context.Context, start, end time.Time, upTo lsn.LSN) (at lsn.LSN, found bool, err error)
}

// fixedClock is a clock in loc that never looks for a fall-back (a fixed
// offset has none).
func fixedClock(loc *time.Location) *serverClock { return &serverClock{loc: loc} }

// drop is what one read learnt of a repeated hour: from which LSN on (if
// any) its commits read it the second time.
type drop struct {
	at    lsn.LSN
	found bool
}

// instant returns the instant of wall, a commit's time at LSN l as the
// server's clock read it (its fields; go-mssqldb returns it labelled UTC,
// F51). seen caches, per repeated hour, what secondFrom said (upTo the
// read's upper LSN); it may be nil.
func (c *serverClock) instant(ctx context.Context, wall time.Time, l, upTo lsn.LSN, seen map[time.Time]drop) (time.Time, error) {
	loc := time.UTC
	if c != nil && c.loc != nil {
		loc = c.loc
	}
	r := readWall(wall, loc)
	if !r.twice {
		return r.first, nil
	}
	if c.secondFrom == nil {
		return r.first, nil
	}
	d, ok := seen[r.start]
	if !ok {
		at, found, err := c.secondFrom(ctx, r.start, r.end, upTo)
		if err != nil {
			return time.Time{}, fmt.Errorf("the hour from %s repeated by the server's clock (%s): %w", r.start.Format("2006-01-02 15:04"), loc, err)
		}
		d = drop{at: at, found: found}
		if seen != nil {
			seen[r.start] = d
		}
	}
	if d.found && !l.Less(d.at) {
		return r.second, nil
	}
	return r.first, nil
}

// reading is a wall clock time read in a zone: its instant, or, in the hour
// a fall-back repeats, its two instants and that hour's wall clocks
// [start, end).
type reading struct {
	first, second time.Time
	twice         bool
	start, end    time.Time // wall clocks, labelled UTC
}

// readWall reads the fields of wall as a wall clock in loc.
func readWall(wall time.Time, loc *time.Location) reading {
	asUTC := time.Date(wall.Year(), wall.Month(), wall.Day(), wall.Hour(), wall.Minute(), wall.Second(), wall.Nanosecond(), time.UTC)
	// The instants whose wall clock in loc is wall: one per offset in
	// force around it that maps back to it. Zones change offset months
	// apart, so the offsets a day and a half either side cover both sides
	// of a change.
	var at []time.Time
	for _, probe := range []time.Duration{-36 * time.Hour, 0, 36 * time.Hour} {
		_, off := asUTC.Add(probe).In(loc).Zone()
		u := asUTC.Add(-time.Duration(off) * time.Second)
		if _, o := u.In(loc).Zone(); o == off && !slices.ContainsFunc(at, u.Equal) {
			at = append(at, u)
		}
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	if len(at) < 2 {
		// One reading; none in a spring-forward's gap, which no clock
		// shows: time.Date's reading then.
		t := time.Date(asUTC.Year(), asUTC.Month(), asUTC.Day(), asUTC.Hour(), asUTC.Minute(), asUTC.Second(), asUTC.Nanosecond(), loc)
		return reading{first: t.UTC()}
	}
	first, second := at[0].UTC(), at[len(at)-1].UTC()
	_, change := first.In(loc).ZoneBounds() // the instant the clock went back
	_, before := first.In(loc).Zone()
	_, after := second.In(loc).Zone()
	start := change.UTC().Add(time.Duration(after) * time.Second) // its wall clock after the change
	return reading{first: first, second: second, twice: true, start: start, end: start.Add(time.Duration(before-after) * time.Second)}
}
