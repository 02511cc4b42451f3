package tdsserver

import (
	"fmt"
	"strings"
)

// The system procedures through which clients send parameterised
// statements (MS-TDS 2.2.6.6, ProcID; the parameters as SQL Server
// documents each procedure):
//
//   - sp_executesql (10): @stmt, @params, then the values. SQL Server takes
//     the first two by position whatever their names (go-mssqldb sends
//     them unnamed, tedious names the first @statement, tiberius stmt and
//     params).
//   - sp_prepexec (13): @handle OUTPUT, @params, @stmt, then the values:
//     prepares and runs, returning the new handle in a RETURNVALUE
//     (MS-TDS 2.2.7.19). ODBC and JDBC prepared statements send it.
//   - sp_prepare (11): @handle OUTPUT, @params, @stmt[, @options]: prepares
//     only.
//   - sp_execute (12): @handle, then the values: runs a prepared statement.
//   - sp_unprepare (15): @handle: forgets it.
//
// The Handler sees sp_executesql, sp_prepexec and sp_execute as a Request
// whose SQL is the statement and whose Params are the values, each value
// sent without a name taking the name of the declaration at its position
// (ODBC sends every value unnamed). The server answers sp_prepare and
// sp_unprepare itself.

// procCall is what the server adds to the Handler's answer of an RPC.
type procCall struct {
	// returnValues are RETURNVALUE tokens, sent after RETURNSTATUS.
	returnValues []byte
	// answered: the server answers the RPC alone; no Handler runs.
	answered bool
}

// decl is one declaration of @params: "@p1" and "bigint".
type decl struct{ name, typ string }

// prepared is a statement sp_prepare or sp_prepexec prepared.
type prepared struct {
	sql   string
	decls []decl
}

// preparedStmts are a connection's prepared statements by handle
// (handles are per connection, from 1, as SQL Server numbers them).
type preparedStmts struct {
	last  int32
	stmts map[int32]prepared
}

// fillRPC parses an RPC into req as a connection without prepared
// statements would.
func fillRPC(req *Request, data []byte) error {
	var ps preparedStmts
	_, err := ps.fill(req, data)
	return err
}

// systemProc returns the canonical name of the procedure call names among
// those above, or "".
func systemProc(call rpcCall) string {
	switch call.procID {
	case 10, 11, 12, 13, 15:
		return procIDName(call.procID)
	case 0:
		name := strings.ToLower(strings.NewReplacer("[", "", "]", "").Replace(call.proc))
		name = strings.TrimPrefix(name, "sys.")
		switch name {
		case "sp_executesql", "sp_prepare", "sp_execute", "sp_prepexec", "sp_unprepare":
			return name
		}
	}
	return ""
}

// fill parses an RPC into req and says what the server answers of it.
func (ps *preparedStmts) fill(req *Request, data []byte) (procCall, error) {
	call, err := parseRPC(data)
	if err != nil {
		return procCall{}, err
	}
	req.Proc, req.Params = call.proc, call.params
	proc := systemProc(call)
	if proc == "" {
		return procCall{}, nil
	}
	req.Proc = proc
	args := call.params
	arg := func(i int, what string) (Param, error) {
		if i >= len(args) {
			return Param{}, fmt.Errorf("tdsserver: %s without %s (parameter %d)", proc, what, i+1)
		}
		return args[i], nil
	}
	text := func(i int, what string, null bool) (string, error) {
		p, err := arg(i, what)
		if err != nil {
			return "", err
		}
		if p.Value == nil && null {
			return "", nil
		}
		s, ok := p.Value.(string)
		if !ok {
			return "", fmt.Errorf("tdsserver: %s: %s is %s %v, not a string", proc, what, p.Type.Name, p.Value)
		}
		return s, nil
	}
	handle := func(i int) (int32, error) {
		p, err := arg(i, "@handle")
		if err != nil {
			return 0, err
		}
		n, ok := p.Value.(int64)
		if !ok || int64(int32(n)) != n {
			return 0, fmt.Errorf("tdsserver: %s: @handle is %s %v, not an int", proc, p.Type.Name, p.Value)
		}
		return int32(n), nil
	}
	var pc procCall
	var st prepared
	switch proc {
	case "sp_executesql":
		if st.sql, err = text(0, "@stmt", false); err != nil {
			return pc, err
		}
		args = args[1:]
		if len(args) > 0 {
			d, err := text(0, "@params", true)
			if err != nil {
				return pc, err
			}
			st.decls, args = splitDecls(d), args[1:]
		}
	case "sp_prepare", "sp_prepexec":
		h, err := arg(0, "@handle")
		if err != nil {
			return pc, err
		}
		d, err := text(1, "@params", true)
		if err != nil {
			return pc, err
		}
		if st.sql, err = text(2, "@stmt", false); err != nil {
			return pc, err
		}
		st.decls = splitDecls(d)
		if ps.stmts == nil {
			ps.stmts = map[int32]prepared{}
		}
		ps.last++
		ps.stmts[ps.last] = st
		pc.returnValues = appendHandle(nil, h.Name, ps.last)
		if proc == "sp_prepare" {
			req.SQL, req.Params, pc.answered = st.sql, nil, true
			return pc, nil
		}
		args = args[3:]
	case "sp_execute":
		h, err := handle(0)
		if err != nil {
			return pc, err
		}
		var ok bool
		if st, ok = ps.stmts[h]; !ok {
			return pc, fmt.Errorf("tdsserver: %s: could not find prepared statement with handle %d (SQL Server: error 8179)", proc, h)
		}
		args = args[1:]
	case "sp_unprepare":
		h, err := handle(0)
		if err != nil {
			return pc, err
		}
		if _, ok := ps.stmts[h]; !ok {
			return pc, fmt.Errorf("tdsserver: %s: could not find prepared statement with handle %d (SQL Server: error 8179)", proc, h)
		}
		delete(ps.stmts, h)
		req.Params, pc.answered = nil, true
		return pc, nil
	}
	if err := bindDecls(args, st.decls); err != nil {
		return pc, fmt.Errorf("tdsserver: %s: %w", proc, err)
	}
	req.SQL, req.Params = st.sql, args
	return pc, nil
}

// bindDecls gives each value its declaration: a value sent without a name
// is the declaration at its position, a named one the declaration of its
// name (matched ignoring case). A named value that is not declared keeps
// its own type as its declaration.
func bindDecls(vals []Param, decls []decl) error {
	for i := range vals {
		p := &vals[i]
		if p.Name == "" {
			if i >= len(decls) {
				return fmt.Errorf("value %d is not declared (%d declarations)", i+1, len(decls))
			}
			p.Name, p.Decl = decls[i].name, decls[i].typ
			continue
		}
		for _, d := range decls {
			if strings.EqualFold(d.name, p.Name) {
				p.Decl = d.typ
				break
			}
		}
	}
	return nil
}

// appendHandle appends the RETURNVALUE of an @handle OUTPUT parameter
// (MS-TDS 2.2.7.19): ParamOrdinal 0, the name the client sent, Status 0x01
// (an output parameter), UserType 0, Flags fNullable, TYPE_INFO INTN(4) and
// the value.
func appendHandle(b []byte, name string, h int32) []byte {
	b = appendU16(append(b, tokReturnValue), 0)
	b = append(appendBVarChar(b, name), 0x01)
	b = appendU16(appendU32(b, 0), 0x0001)
	b = append(b, typeIntN, 4, 4)
	return appendU32(b, uint32(h))
}

// splitDecls reads a @params declaration list ("@p1 bigint,@p2 decimal(18,
// 4) OUTPUT") into declarations in order, without OUTPUT.
func splitDecls(s string) []decl {
	var decls []decl
	depth, start := 0, 0
	add := func(item string) {
		f := strings.Fields(item)
		if len(f) < 2 {
			return
		}
		if last := strings.ToLower(f[len(f)-1]); len(f) > 2 && (last == "output" || last == "out") {
			f = f[:len(f)-1]
		}
		decls = append(decls, decl{f[0], strings.Join(f[1:], " ")})
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				add(s[start:i])
				start = i + 1
			}
		}
	}
	add(s[start:])
	return decls
}
