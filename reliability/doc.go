// Package reliability holds cdcsnap's reliability suite, tests only: a
// snapshot crashed at every step (in the fake source, in the Delta
// table's bucket through internal/faultblob, and by SIGKILL of a real
// process writing a local folder table), concurrent bootstraps, source
// faults that must leak nothing, hostile input, and credentials that must
// never reach an error or a log. See README.md beside this file for what
// each test proves and the figures of the last run.
package reliability
