package tdsserver

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// Fault is a failure the server injects into one response, standing for
// what a real server or network does to a statement mid-stream: an error
// that aborts it (a deadlock victim, a lock time-out, a failover's
// "database not available") or a connection cut without a word.
type Fault struct {
	// Number, Class, State and Message make the ERROR token (MS-TDS
	// 2.2.7.10) that ends the statement; the response then ends with
	// DONE_ERROR, as a batch aborted by the error does. TransientFault
	// fills them as SQL Server sends each transient error.
	Number       int32
	Class, State uint8
	Message      string
	// Drop closes the connection instead of writing an ERROR: the client
	// reads no more tokens, and its next read fails.
	Drop bool
	// AfterRows is how many rows of the response go out before the fault:
	// it strikes at the Row call after that many, or when the handler
	// ends a response with fewer rows (so every fault injected is
	// delivered).
	AfterRows int64
}

// String names the fault for logs and test output.
func (f Fault) String() string {
	if f.Drop {
		return fmt.Sprintf("dropped connection after %d rows", f.AfterRows)
	}
	return fmt.Sprintf("error %d after %d rows", f.Number, f.AfterRows)
}

// TransientFault returns the fault of SQL Server error number n after
// afterRows rows, with the class and message SQL Server sends for it
// (sys.messages; Database Engine events and errors 1000-1999, 3000-3999,
// 40000-49999; Azure SQL's list of transient fault error codes), or a dropped connection for n == 0. An unknown number gets
// class 16 and a generic message.
func TransientFault(n int32, afterRows int64) Fault {
	if n == 0 {
		return Fault{Drop: true, AfterRows: afterRows}
	}
	f := Fault{Number: n, Class: 16, State: 1, AfterRows: afterRows}
	switch n {
	case 1204:
		f.Class, f.Message = 19, "The instance of the SQL Server Database Engine cannot obtain a LOCK resource at this time."
	case 1205:
		f.Class, f.State, f.Message = 13, 51, "Transaction (Process ID 61) was deadlocked on lock resources with another process and has been chosen as the deadlock victim. Rerun the transaction."
	case 1222:
		f.Message = "Lock request time out period exceeded."
	case 615:
		f.Class, f.Message = 21, "Could not find database ID 5, name 'cdcsnap'. The database may be offline. Wait a few minutes and try again."
	case 926:
		f.Class, f.Message = 14, "Database 'replicatedmaster' cannot be opened. It has been marked SUSPECT by recovery. See the SQL Server errorlog for more information."
	case 3960:
		f.Message = "Snapshot isolation transaction aborted due to update conflict."
	case 3961:
		f.Message = "Snapshot isolation transaction failed in database 'cdcsnap' because the object accessed by the statement has been modified by a DDL statement in another concurrent transaction since the start of this transaction."
	case 40613:
		f.Class, f.Message = 17, "Database 'cdcsnap' on server 'tdsserver' is not currently available. Please retry the connection later."
	case 40197:
		f.Class, f.Message = 20, "The service has encountered an error processing your request. Please try again. Error code 4815."
	case 40501:
		f.Class, f.Message = 20, "The service is currently busy. Retry the request after 10 seconds."
	case 49918, 49919, 49920:
		f.Message = "Cannot process request. Not enough resources to process request."
	case 10928, 10929:
		f.Class, f.Message = 20, "Resource ID : 1. The request limit for the database is 30 and has been reached."
	default:
		f.Message = fmt.Sprintf("Injected error %d.", n)
	}
	return f
}

// errInjected is what a ResponseWriter returns once its fault struck: the
// handler stops writing, as a statement aborted by the error stops.
var errInjected = errors.New("tdsserver: the response ended with an injected fault")

// faultState is the fault armed for one response.
type faultState struct {
	f       Fault
	struck  bool
	sent    int64 // rows written so far
	drop    func()
	counter *atomic.Int64
}

// armFault arms f for w; drop closes the connection, counter counts the
// faults that struck.
func (w *ResponseWriter) armFault(f Fault, drop func(), counter *atomic.Int64) {
	w.fault = &faultState{f: f, drop: drop, counter: counter}
}

// strike delivers the armed fault when it is due: before the next row once
// AfterRows rows went out, or at the end of the response (atEnd). It
// reports whether the fault has struck.
func (w *ResponseWriter) strike(atEnd bool) bool {
	fs := w.fault
	if fs == nil || fs.struck || (!atEnd && fs.sent < fs.f.AfterRows) {
		return fs != nil && fs.struck
	}
	fs.struck = true
	fs.counter.Add(1)
	if fs.f.Drop {
		w.err = fmt.Errorf("%w: %s", errInjected, fs.f)
		fs.drop()
		return true
	}
	w.endResult()
	w.flushPending()
	w.emit(appendMessage(w.buf[:0], tokError, fs.f.Number, fs.f.State, fs.f.Class, fs.f.Message, w.serverName, w.procName, 1))
	w.stmtErr, w.anyErr = true, true
	return true
}

// faultErr is the error writes return after the armed fault struck.
func (w *ResponseWriter) faultErr() error {
	if w.fault != nil && w.fault.struck {
		return fmt.Errorf("%w: %s", errInjected, w.fault.f)
	}
	return nil
}

// Faults returns how many injected faults have struck so far.
func (s *Server) Faults() int64 { return s.faults.Load() }
