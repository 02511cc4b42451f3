package snapshot

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// tokenLog is a Limiter that records every WaitN and fails the call
// numbered failAt (from 1; 0 never).
type tokenLog struct {
	burst  int
	calls  []int
	failAt int
}

var errNoTokens = errors.New("no tokens")

func (l *tokenLog) WaitN(_ context.Context, n int) error {
	l.calls = append(l.calls, n)
	if len(l.calls) == l.failAt {
		return errNoTokens
	}
	return nil
}

func (l *tokenLog) Burst() int { return l.burst }

// TestWaitRowsSplitsAtBurst: a batch larger than the burst waits in
// pieces no larger than the burst that add up to the batch, a burst below
// 1 waits row by row, and the first failed wait stops the rest.
func TestWaitRowsSplitsAtBurst(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ burst, rows int }{{7, 50}, {7, 7}, {7, 6}, {100, 1}, {0, 5}, {-3, 4}, {5, 0}} {
		l := &tokenLog{burst: c.burst}
		if err := waitRows(ctx, l, c.rows); err != nil {
			t.Fatal(err)
		}
		sum, limit := 0, max(1, c.burst)
		for _, n := range l.calls {
			if n < 1 || n > limit {
				t.Fatalf("burst %d, %d rows: a wait for %d tokens (calls %v)", c.burst, c.rows, n, l.calls)
			}
			sum += n
		}
		if sum != c.rows {
			t.Fatalf("burst %d, %d rows: waited for %d tokens (calls %v)", c.burst, c.rows, sum, l.calls)
		}
		if want := (c.rows + limit - 1) / limit; len(l.calls) != want {
			t.Fatalf("burst %d, %d rows: %d waits, want %d", c.burst, c.rows, len(l.calls), want)
		}
	}
	l := &tokenLog{burst: 3, failAt: 2}
	if err := waitRows(ctx, l, 10); !errors.Is(err, errNoTokens) || len(l.calls) != 2 {
		t.Fatalf("failing limiter: err %v after %d calls, want errNoTokens after 2", err, len(l.calls))
	}
}

// TestWaitRowsRateLimiter: a real rate.Limiter refuses a WaitN above its
// burst; waitRows gets a batch ten times its burst through it. The rate is
// infinite, so nothing waits on the clock.
func TestWaitRowsRateLimiter(t *testing.T) {
	l := rate.NewLimiter(rate.Inf, 10)
	l.SetLimit(1e12)
	if err := l.WaitN(context.Background(), 100); err == nil {
		t.Fatal("rate.Limiter took 100 tokens at once with a burst of 10; the split is not needed")
	}
	if err := waitRows(context.Background(), l, 100); err != nil {
		t.Fatal(err)
	}
}

// TestRowsLimiter: the per-snapshot limiter has the asked rate, a burst of
// a tenth of it (at least 1), and starts with no tokens saved.
func TestRowsLimiter(t *testing.T) {
	now := time.Now()
	if rowsLimiter(0, now) != nil || rowsLimiter(-5, now) != nil {
		t.Fatal("no limit must be no limiter")
	}
	for _, c := range []struct{ rate, burst int }{{1000, 100}, {5, 1}, {1, 1}, {123456, 12345}} {
		l := rowsLimiter(c.rate, now)
		if l.Limit() != rate.Limit(c.rate) || l.Burst() != c.burst {
			t.Fatalf("RowsPerSecond %d: limit %v burst %d, want burst %d", c.rate, l.Limit(), l.Burst(), c.burst)
		}
		if tokens := l.TokensAt(now); tokens != 0 {
			t.Fatalf("RowsPerSecond %d: starts with %v tokens, want none", c.rate, tokens)
		}
		if tokens := l.TokensAt(now.Add(time.Second)); tokens != float64(c.burst) {
			t.Fatalf("RowsPerSecond %d: %v tokens a second later, want the burst %d", c.rate, tokens, c.burst)
		}
	}
}
