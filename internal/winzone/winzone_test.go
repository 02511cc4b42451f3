package winzone

import (
	"testing"
	"time"
	_ "time/tzdata" // every zone loads whatever the machine has
)

// The names SQL Server's documentation shows CURRENT_TIMEZONE_ID()
// returning (W. Europe Standard Time; UTC on Azure SQL Database) and two
// with daylight saving time on either side of the Atlantic map as CLDR says,
// and every zone of the table loads.
func TestIANA(t *testing.T) {
	for win, want := range map[string]string{
		"W. Europe Standard Time": "Europe/Berlin",
		"UTC":                     "Etc/UTC",
		"Pacific Standard Time":   "America/Los_Angeles",
		"GMT Standard Time":       "Europe/London",
	} {
		if got, ok := IANA(win); !ok || got != want {
			t.Errorf("IANA(%q) = %q, %v; want %q", win, got, ok, want)
		}
	}
	if z, ok := IANA("Mars Standard Time"); ok {
		t.Errorf("an unknown name maps to %q", z)
	}
	for win, z := range zones {
		if _, err := time.LoadLocation(z); err != nil {
			t.Errorf("%q: %v", win, err)
		}
	}
}
