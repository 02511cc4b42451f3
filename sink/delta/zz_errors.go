package delta

import (
	"errors"
	"fmt"
)

// PartsError reports parts that CommitSnapshot refuses: written for
// another plan, duplicated, missing, or inconsistent with their data.
type PartsError struct {
	// Partition is the offending part's partition index (-1 when the
	// problem is not one part's).
	Partition int
	// Reason says what is wrong.
	Reason string
}

// Error implements error.
func (e *PartsError) Error() string {
	if e.Partition < 0 {
		return "delta: refusing parts: " + e.Reason
	}
	return fmt.Sprintf("delta: refusing part %d: %s", e.Partition, e.Reason)
}

// ErrClosed is returned by a Table's methods after Close.
var ErrClosed = errors.New("delta: table is closed")
