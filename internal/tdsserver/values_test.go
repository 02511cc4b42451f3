package tdsserver

import (
	"testing"
	"time"
)

// TestDaysFromCivil checks the day count against the time package over
// the whole range SQL Server dates cover.
func TestDaysFromCivil(t *testing.T) {
	for d := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC); d.Year() <= 9999; d = d.AddDate(0, 0, 17) {
		want := d.Unix()/86400 + days0001To1970
		if got := daysFromCivil(d.Year(), int(d.Month()), d.Day()) + days0001To1970; got != want {
			t.Fatalf("%s: %d, want %d", d.Format(time.DateOnly), got, want)
		}
	}
	if got := daysFromCivil(9999, 12, 31) + days0001To1970; got != 3652058 {
		t.Errorf("9999-12-31 is day %d, want 3652058", got)
	}
}
