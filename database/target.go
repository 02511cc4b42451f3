package database

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cdcsnap/cdcsnap/source"
)

// The placeholders a target template may hold.
const (
	// PlaceholderSchema is replaced by the source table's schema.
	PlaceholderSchema = "{schema}"
	// PlaceholderTable is replaced by the source table's name.
	PlaceholderTable = "{table}"
	// PlaceholderCaptureInstance is replaced by the capture instance's name.
	PlaceholderCaptureInstance = "{capture_instance}"
)

// ErrInvalidTarget is wrapped by errors for a target template that cannot
// be used, and for a name that cannot be put into a target.
var ErrInvalidTarget = errors.New("invalid target template")

// ErrTargetCollision is wrapped by *CollisionError.
var ErrTargetCollision = errors.New("two capture instances map to one target")

// CollisionError means the template maps two selected capture instances
// to the same target (compared ignoring case: local folders on macOS and
// Windows fold case). A table with two capture instances (a schema
// change) needs {capture_instance} in the template.
type CollisionError struct {
	Target    string
	Instances [2]string
}

// Error implements error.
func (e *CollisionError) Error() string {
	return fmt.Sprintf("%v: %s and %s both go to %q (add %s to the target template?)",
		ErrTargetCollision, e.Instances[0], e.Instances[1], e.Target, PlaceholderCaptureInstance)
}

// Unwrap returns ErrTargetCollision.
func (e *CollisionError) Unwrap() error { return ErrTargetCollision }

// template is a parsed target template: literal text and placeholders, in
// order.
type template struct {
	parts []templatePart
}

type templatePart struct {
	literal     string
	placeholder string // one of the Placeholder constants, or "" for a literal
}

// parseTemplate parses a target template: text in which every '{' starts
// one of the placeholders and every '}' ends one. There is no escape: the
// URLs and paths a target names do not use braces.
func parseTemplate(s string) (template, error) {
	if strings.TrimSpace(s) == "" {
		return template{}, fmt.Errorf("%w: empty", ErrInvalidTarget)
	}
	var t template
	rest := s
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		if close := strings.IndexByte(rest, '}'); close >= 0 && (open < 0 || close < open) {
			return template{}, fmt.Errorf("%w: %q has a '}' that closes no placeholder", ErrInvalidTarget, s)
		}
		if open < 0 {
			t.parts = append(t.parts, templatePart{literal: rest})
			break
		}
		if open > 0 {
			t.parts = append(t.parts, templatePart{literal: rest[:open]})
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return template{}, fmt.Errorf("%w: %q has a '{' that is never closed", ErrInvalidTarget, s)
		}
		ph := rest[open : open+end+1]
		switch ph {
		case PlaceholderSchema, PlaceholderTable, PlaceholderCaptureInstance:
		default:
			return template{}, fmt.Errorf("%w: %q has %s; the placeholders are %s, %s and %s",
				ErrInvalidTarget, s, ph, PlaceholderSchema, PlaceholderTable, PlaceholderCaptureInstance)
		}
		t.parts = append(t.parts, templatePart{placeholder: ph})
		rest = rest[open+end+1:]
	}
	return t, nil
}

// expand returns ci's target. A name that would change the target's shape
// (a path separator, "." or "..", a URL's '?', '#' or '%', a control
// character) is refused rather than escaped: an escape would name a
// folder the user did not write.
func (t template) expand(ci *source.CaptureInstance) (string, error) {
	var b strings.Builder
	for _, p := range t.parts {
		if p.placeholder == "" {
			b.WriteString(p.literal)
			continue
		}
		v := ci.Name
		switch p.placeholder {
		case PlaceholderSchema:
			v = ci.SourceSchema
		case PlaceholderTable:
			v = ci.SourceTable
		}
		if why := unsafeSegment(v); why != "" {
			return "", fmt.Errorf("%w: %s of capture instance %q is %q, which %s", ErrInvalidTarget, p.placeholder, ci.Name, v, why)
		}
		b.WriteString(v)
	}
	return b.String(), nil
}

// unsafeSegment says why v cannot be one segment of a path or URL, or "".
func unsafeSegment(v string) string {
	switch v {
	case "":
		return "is empty"
	case ".", "..":
		return "names a relative folder"
	}
	for _, r := range v {
		switch {
		case r == '/' || r == '\\':
			return "holds a path separator"
		case r == '?' || r == '#' || r == '%':
			return "holds a character URLs give a meaning to"
		case r < 0x20 || r == 0x7f:
			return "holds a control character"
		}
	}
	return ""
}
