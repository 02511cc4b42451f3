//go:build cdcsnap_poison

package delta

// poison makes bufferPool fill freed buffers with poisonByte and check,
// before reusing one, that nothing wrote to it: a test build
// (`go test -tags cdcsnap_poison ./sink/delta/`, run by .ci/run) under
// which a read or write of a buffer after arrow-go freed it shows up as
// wrong rows or an error.
const poison = true
