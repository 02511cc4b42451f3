package sqlserver

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	mssql "github.com/microsoft/go-mssqldb"
)

func TestTransientClassifiesErrors(t *testing.T) {
	for _, n := range []int32{615, 926, 1205, 1222, 3961, 40613, 40197, 40501, 49918, 49919, 49920, 10928, 10929} {
		if !Transient(fmt.Errorf("reading: %w", mssql.Error{Number: n})) {
			t.Errorf("error %d: not transient", n)
		}
	}
	// 3960, a snapshot update conflict, strikes only a write (F80).
	if Transient(mssql.Error{Number: 3960}) {
		t.Error("error 3960: transient, but no read can get it")
	}
	// The number of the last error is not the only one that counts (F21).
	chain := mssql.Error{Number: 3621, All: []mssql.Error{{Number: 1205}, {Number: 3621}}}
	if !Transient(chain) || ServerErrorNumber(chain) != 1205 {
		t.Errorf("a deadlock followed by 3621: Transient %v, number %d", Transient(chain), ServerErrorNumber(chain))
	}
	for _, err := range []error{
		mssql.StreamError{InnerError: io.EOF},
		mssql.ServerError{},
		driver.ErrBadConn,
		&net.OpError{Op: "read", Err: errors.New("connection reset by peer")},
		io.ErrUnexpectedEOF,
		fmt.Errorf("wrapped: %w", io.EOF),
	} {
		if !Transient(err) {
			t.Errorf("%T %v: not transient", err, err)
		}
	}
	for _, err := range []error{
		nil,
		mssql.Error{Number: 229},
		mssql.Error{Number: 313},
		mssql.Error{Number: 208},
		context.Canceled,
		fmt.Errorf("%w: %w", context.DeadlineExceeded, io.EOF),
		errors.New("something else"),
	} {
		if Transient(err) {
			t.Errorf("%v: transient", err)
		}
	}
}

func TestRetryPauses(t *testing.T) {
	r := Retry{Initial: 100 * time.Millisecond, Max: time.Second}
	for n, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 40: time.Second} {
		if got := r.Pause(n, 0.999999); got > want || got < want*99/100 {
			t.Errorf("Pause(%d, ~1) = %s, want ~%s", n, got, want)
		}
		if got := r.Pause(n, 0); got != want/2 {
			t.Errorf("Pause(%d, 0) = %s, want %s", n, got, want/2)
		}
	}
	if got := (Retry{}).Pause(1, 1); got != DefaultRetryInitial {
		t.Errorf("zero Retry: first pause %s, want %s", got, DefaultRetryInitial)
	}
	if got := (Retry{}).Pause(100, 1); got != DefaultRetryMax {
		t.Errorf("zero Retry: pause 100 %s, want %s", got, DefaultRetryMax)
	}
	if err := (Retry{Initial: time.Second, Max: time.Millisecond}).validate(); err == nil {
		t.Error("Max below Initial: no error")
	}
}

func TestRetrierBudget(t *testing.T) {
	ctx := context.Background()
	deadlock := mssql.Error{Number: 1205}
	for _, tc := range []struct {
		policy Retry
		want   int
	}{{Retry{Attempts: 3}, 3}, {Retry{}, DefaultRetryAttempts}, {Retry{Attempts: -1}, 0}} {
		r := newRetrier(tc.policy)
		var slept []time.Duration
		r.sleep = func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }
		n := 0
		for {
			ok, err := r.again(ctx, deadlock)
			if !ok {
				var me mssql.Error
				if !errors.As(err, &me) || me.Number != 1205 {
					t.Errorf("gave up with %v, want the read's error", err)
				}
				break
			}
			n++
		}
		if n != tc.want || len(slept) != tc.want {
			t.Errorf("%+v: %d retries after %d pauses, want %d", tc.policy, n, len(slept), tc.want)
		}
	}
	r := newRetrier(Retry{})
	if ok, _ := r.again(ctx, mssql.Error{Number: 229}); ok {
		t.Error("permission denied retried")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if ok, _ := r.again(cancelled, deadlock); ok {
		t.Error("retried after the context ended")
	}
}
