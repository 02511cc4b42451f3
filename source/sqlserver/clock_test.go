package sqlserver

import (
	"context"
	"testing"
	"time"
	_ "time/tzdata"

	"github.com/cdcsnap/cdcsnap/lsn"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func wall(y int, m time.Month, d, h, mi int) time.Time {
	return time.Date(y, m, d, h, mi, 0, 0, time.UTC)
}

// A wall clock in the hour a fall-back repeats has two readings, an hour
// apart, and the hour's bounds; one in the hour a spring-forward skips, or
// any other, has one.
func TestReadWall(t *testing.T) {
	berlin, la := mustZone(t, "Europe/Berlin"), mustZone(t, "America/Los_Angeles")
	for _, tc := range []struct {
		loc           *time.Location
		wall          time.Time
		first, second time.Time // second zero: read once
		start, end    time.Time
	}{
		{berlin, wall(2026, 10, 25, 2, 30), wall(2026, 10, 25, 0, 30), wall(2026, 10, 25, 1, 30), wall(2026, 10, 25, 2, 0), wall(2026, 10, 25, 3, 0)},
		{berlin, wall(2026, 10, 25, 2, 0), wall(2026, 10, 25, 0, 0), wall(2026, 10, 25, 1, 0), wall(2026, 10, 25, 2, 0), wall(2026, 10, 25, 3, 0)},
		{berlin, wall(2026, 10, 25, 3, 0), wall(2026, 10, 25, 2, 0), time.Time{}, time.Time{}, time.Time{}},
		{berlin, wall(2026, 10, 25, 1, 59), wall(2026, 10, 24, 23, 59), time.Time{}, time.Time{}, time.Time{}},
		{berlin, wall(2026, 3, 29, 1, 30), wall(2026, 3, 29, 0, 30), time.Time{}, time.Time{}, time.Time{}},
		{berlin, wall(2026, 3, 29, 3, 30), wall(2026, 3, 29, 1, 30), time.Time{}, time.Time{}, time.Time{}},
		{la, wall(2026, 11, 1, 1, 30), wall(2026, 11, 1, 8, 30), wall(2026, 11, 1, 9, 30), wall(2026, 11, 1, 1, 0), wall(2026, 11, 1, 2, 0)},
		{time.UTC, wall(2026, 11, 1, 1, 30), wall(2026, 11, 1, 1, 30), time.Time{}, time.Time{}, time.Time{}},
	} {
		r := readWall(tc.wall, tc.loc)
		if !r.first.Equal(tc.first) || r.twice != !tc.second.IsZero() || (r.twice && (!r.second.Equal(tc.second) || !r.start.Equal(tc.start) || !r.end.Equal(tc.end))) {
			t.Errorf("%s %s: %+v; want first %s, second %s, hour [%s, %s)", tc.loc, tc.wall.Format("2006-01-02 15:04"), r, tc.first, tc.second, tc.start, tc.end)
		}
	}
}

// In the repeated hour the clock's answer decides: commits from the first
// one the clock went back for read the hour the second time; one lookup per
// hour and read.
func TestClockOrdersTheRepeatedHourByLSN(t *testing.T) {
	berlin := mustZone(t, "Europe/Berlin")
	back := lsn.LSN{9: 10}
	calls := 0
	c := &serverClock{loc: berlin, secondFrom: func(_ context.Context, start, end time.Time, upTo lsn.LSN) (lsn.LSN, bool, error) {
		calls++
		if !start.Equal(wall(2026, 10, 25, 2, 0)) || !end.Equal(wall(2026, 10, 25, 3, 0)) {
			t.Errorf("asked for the hour [%s, %s)", start, end)
		}
		return back, !upTo.Less(back), nil
	}}
	seen := map[time.Time]drop{}
	for _, tc := range []struct {
		l    lsn.LSN
		wall time.Time
		want time.Time
	}{
		{lsn.LSN{9: 8}, wall(2026, 10, 25, 2, 50), wall(2026, 10, 25, 0, 50)},
		{lsn.LSN{9: 10}, wall(2026, 10, 25, 2, 5), wall(2026, 10, 25, 1, 5)},
		{lsn.LSN{9: 11}, wall(2026, 10, 25, 2, 55), wall(2026, 10, 25, 1, 55)},
		{lsn.LSN{9: 12}, wall(2026, 10, 25, 3, 5), wall(2026, 10, 25, 2, 5)},
	} {
		got, err := c.instant(context.Background(), tc.wall, tc.l, lsn.LSN{9: 20}, seen)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("%s at %s: %s, %v; want %s", tc.wall.Format("15:04"), tc.l, got, err, tc.want)
		}
	}
	if calls != 1 {
		t.Errorf("%d lookups, want 1", calls)
	}
	// Read up to an LSN before the clock went back: the first reading.
	got, err := c.instant(context.Background(), wall(2026, 10, 25, 2, 5), lsn.LSN{9: 9}, lsn.LSN{9: 9}, nil)
	if err != nil || !got.Equal(wall(2026, 10, 25, 0, 5)) {
		t.Errorf("before the clock went back: %s, %v", got, err)
	}
}
