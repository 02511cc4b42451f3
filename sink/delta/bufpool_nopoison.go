//go:build !cdcsnap_poison

package delta

// poison: see bufpool_poison.go.
const poison = false
