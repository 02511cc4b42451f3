package collate

import "testing"

func TestComparePadded(t *testing.T) {
	for _, tc := range []struct {
		x, y string
		want int
	}{
		{"a", "a  ", 0}, {"a", "a", 0}, {"a\t", "a", -1}, {"a", "a\t", 1}, {"a ", "ab", -1}, {"", "   ", 0}, {"b", "a  ", 1},
	} {
		if got := ComparePadded(tc.x, tc.y); got != tc.want {
			t.Errorf("ComparePadded(%q, %q) = %d, want %d", tc.x, tc.y, got, tc.want)
		}
	}
	if Fold("ÄbC") != Fold("äBc") || Fold("n") == Fold("ñ") {
		t.Error("Fold folds case only")
	}
}
