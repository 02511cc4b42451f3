package database

import (
	"errors"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/source"
)

func TestTemplate(t *testing.T) {
	ci := &source.CaptureInstance{Name: "sales_Orders_v2", SourceSchema: "sales", SourceTable: "Orders"}
	for _, tc := range []struct{ tmpl, want string }{
		{"s3://lake/bronze/{schema}/{table}", "s3://lake/bronze/sales/Orders"},
		{"./bronze/{capture_instance}", "./bronze/sales_Orders_v2"},
		{"{schema}.{table}-{capture_instance}{table}", "sales.Orders-sales_Orders_v2Orders"},
		{"mem://one", "mem://one"},
	} {
		tm, err := parseTemplate(tc.tmpl)
		if err != nil {
			t.Fatalf("%q: %v", tc.tmpl, err)
		}
		if got, err := tm.expand(ci); err != nil || got != tc.want {
			t.Errorf("%q expands to %q, %v; want %q", tc.tmpl, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ tmpl, says string }{
		{"", "empty"},
		{"  ", "empty"},
		{"s3://x/{Schema}", "{Schema}"},
		{"s3://x/{db}/{table}", "{db}"},
		{"s3://x/{schema", "never closed"},
		{"s3://x/schema}", "closes no placeholder"},
		{"s3://x/}{table}", "closes no placeholder"},
		{"s3://x/{{table}}", "{{table}"},
	} {
		_, err := parseTemplate(tc.tmpl)
		if !errors.Is(err, ErrInvalidTarget) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%q: got %v, want ErrInvalidTarget saying %q", tc.tmpl, err, tc.says)
		}
	}
}

// TestTemplateRefusesUnsafeNames: a name that would change the target's
// shape fails its instance instead of writing somewhere else.
func TestTemplateRefusesUnsafeNames(t *testing.T) {
	tm, err := parseTemplate("/lake/{schema}/{table}")
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"a/b", `a\b`, "..", ".", "", "a?b", "a#b", "100%", "a\nb"} {
		_, err := tm.expand(&source.CaptureInstance{Name: "ci", SourceSchema: "dbo", SourceTable: table})
		if !errors.Is(err, ErrInvalidTarget) {
			t.Errorf("table %q: got %v, want ErrInvalidTarget", table, err)
		}
	}
	// Spaces, dots, dashes, brackets and non-ASCII letters are kept.
	got, err := tm.expand(&source.CaptureInstance{Name: "ci", SourceSchema: "Ventas Año", SourceTable: "orders.v2-[x]"})
	if err != nil || got != "/lake/Ventas Año/orders.v2-[x]" {
		t.Errorf("got %q, %v", got, err)
	}
}

// FuzzParseTemplate: parsing never panics, and a template it accepts
// expands back to itself when every placeholder's value is the
// placeholder's own text (so parsing loses and invents nothing).
func FuzzParseTemplate(f *testing.F) {
	for _, s := range []string{"s3://lake/{schema}/{table}", "{capture_instance}", "a{b}c", "}{", "{schema}{", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tm, err := parseTemplate(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidTarget) {
				t.Fatalf("%q: error %v does not wrap ErrInvalidTarget", s, err)
			}
			return
		}
		got, err := tm.expand(&source.CaptureInstance{Name: PlaceholderCaptureInstance, SourceSchema: PlaceholderSchema, SourceTable: PlaceholderTable})
		if err != nil || got != s {
			t.Fatalf("%q expands to %q, %v", s, got, err)
		}
	})
}
