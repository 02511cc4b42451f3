package sqlserver

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/internal/mssqldocs"
	"github.com/cdcsnap/cdcsnap/internal/mssqlstmt"
)

// F86: ChangeAccess asks HAS_PERMS_BY_NAME about the change table and
// cdc.lsn_time_mapping, reads nothing else, and names what is missing: 0
// and NULL (a check that failed, an object the login cannot see) are both
// refusals; AllowChangeFunction lets a refused change table through.
func TestChangeAccessNamesWhatIsMissing(t *testing.T) {
	for _, tc := range []struct {
		name       string
		row        []any
		allowFunc  bool
		wantDenied []string // substrings of the refusal; nil: not refused
	}{
		{"both granted", []any{int64(1), int64(1)}, false, nil},
		{"change table denied", []any{int64(0), int64(1)}, false, []string{"may not SELECT from cdc.[dbo_Orders_CT] (HAS_PERMS_BY_NAME)", "GRANT SELECT ON cdc.[dbo_Orders_CT] TO <user>; GRANT SELECT ON cdc.lsn_time_mapping TO <user> (<user>: the login's database user; not GRANT SELECT ON SCHEMA::cdc"}},
		{"change table unseen", []any{nil, int64(1)}, false, []string{"may not SELECT from cdc.[dbo_Orders_CT] (HAS_PERMS_BY_NAME)"}},
		{"mapping denied", []any{int64(1), int64(0)}, false, []string{"may not SELECT from cdc.lsn_time_mapping (HAS_PERMS_BY_NAME)"}},
		{"both denied", []any{int64(0), int64(0)}, false, []string{"may not SELECT from cdc.[dbo_Orders_CT] and cdc.lsn_time_mapping"}},
		{"denied, change function allowed", []any{int64(0), int64(0)}, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := mssqlstmt.ChangeAccessStatement("dbo_Orders")
			if err != nil {
				t.Fatal(err)
			}
			var ran []string
			f := &fakeDB{handler: func(q string, args []any) ([]string, [][]any, error) {
				ran = append(ran, q)
				if q != want.SQL || !reflect.DeepEqual(args, want.Args) {
					return nil, nil, errors.New("unexpected " + q)
				}
				return mssqldocs.Names(mssqldocs.ChangeAccess), [][]any{tc.row}, nil
			}}
			s, _ := newTestSource(t, f, Options{AllowChangeFunction: tc.allowFunc})
			denied, err := s.ChangeAccess(context.Background(), readTestInstance())
			if err != nil {
				t.Fatal(err)
			}
			if len(ran) != 1 {
				t.Errorf("ran %q, want the one check", ran)
			}
			if tc.wantDenied == nil {
				if denied != nil {
					t.Errorf("denied: %v, want nil", denied)
				}
				return
			}
			if !errors.Is(denied, ErrChangeTableDenied) {
				t.Fatalf("denied: %v, want ErrChangeTableDenied", denied)
			}
			for _, w := range tc.wantDenied {
				if !strings.Contains(denied.Error(), w) {
					t.Errorf("denied: %v\nwant it to say %q", denied, w)
				}
			}
		})
	}

	// A check that fails is an error, not a refusal.
	boom := errors.New("connection reset")
	f := &fakeDB{handler: func(string, []any) ([]string, [][]any, error) { return nil, nil, boom }}
	s, _ := newTestSource(t, f, Options{})
	if denied, err := s.ChangeAccess(context.Background(), readTestInstance()); denied != nil || !errors.Is(err, boom) {
		t.Errorf("failed check: denied %v, err %v; want the error", denied, err)
	}
	// A result that is not HAS_PERMS_BY_NAME's shape is an error too.
	f = &fakeDB{handler: func(string, []any) ([]string, [][]any, error) {
		return []string{"change_table"}, [][]any{{int64(1)}}, nil
	}}
	s, _ = newTestSource(t, f, Options{})
	if denied, err := s.ChangeAccess(context.Background(), readTestInstance()); denied != nil || err == nil || !strings.Contains(err.Error(), "lsn_time_mapping") {
		t.Errorf("a result without lsn_time_mapping: denied %v, err %v; want an error naming the column", denied, err)
	}
}
