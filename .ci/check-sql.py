#!/usr/bin/env python3
"""Parse every statement in cdcsnap's SQL golden files as T-SQL and check the
project's own rules.

Usage: check-sql.py PATH [PATH ...]
  Each PATH is a golden file or a folder searched for *.sql files
  (internal/mssqlstmt/testdata). Entries look like:

    -- name: pieces/int/first
    -- @p1 = bigint 100
    SELECT ... ;

Checks, per statement:
  * sqlglot (dialect tsql, error_level RAISE) parses it as exactly one
    statement. SET statements are the exception sqlglot warns about: they must
    be exactly SET TRANSACTION ISOLATION LEVEL READ COMMITTED | SNAPSHOT or
    SET LOCK_TIMEOUT <integer milliseconds, -1 for none>, and
    the "unsupported syntax ... Command" warning is expected for them only.
  * every identifier is bracket-quoted, except the system schema `sys` and the
    documented CDC procedures and functions, called by their bare names;
  * cdc.fn_cdc_get_all_changes_<ci> is called as [cdc].[fn_cdc_get_all_changes_...];
    other functions are the documented CDC ones (sys.fn_cdc_...) or built-ins;
  * every inlined char/varchar/nchar/nvarchar/binary/varbinary type carries a
    length, decimal/numeric a precision and scale, time/datetime2/
    datetimeoffset a scale;
  * COLLATE names are plain collation names;
  * no literal values besides N'all update old' and the `1 = 0` of an empty
    piece: every value is a parameter, and every @pN used is declared in the
    entry's "-- @pN =" lines and the other way round;
  * the text checks never look inside a bracket-quoted name or an N'...'
    literal ([a;b] is one name, not two statements);
  * never NOLOCK / READ UNCOMMITTED.
Exits 1 with one line per failure, 0 when every statement passes.
"""
import logging
import os
import re
import sys

import sqlglot
from sqlglot import exp

BARE_SCHEMAS = {"sys"}
PROCEDURES = {"sp_cdc_help_change_data_capture", "sp_cdc_get_captured_columns", "sp_cdc_get_ddl_history", "sp_spaceused"}
FUNCTIONS = {"fn_cdc_get_max_lsn", "fn_cdc_get_min_lsn", "fn_cdc_map_lsn_to_time"}
# Built-in functions sqlglot has no expression type for, called unqualified.
BUILTINS = {"COLLATIONPROPERTY", "SERVERPROPERTY", "CURRENT_TIMEZONE_ID", "TYPE_NAME", "HAS_PERMS_BY_NAME"}
SET_RE = re.compile(r"^(SET TRANSACTION ISOLATION LEVEL (READ COMMITTED|SNAPSHOT)|SET LOCK_TIMEOUT (-1|[0-9]{1,10}))$")
LENGTH_TYPES = {"CHAR", "VARCHAR", "NCHAR", "NVARCHAR", "BINARY", "VARBINARY"}
# Text check independent of how sqlglot maps type names.
TEXT_TYPE_RE = re.compile(
    r"\bAS\s+(char|varchar|nchar|nvarchar|binary|varbinary|decimal|numeric|datetime2|datetimeoffset|time)\b(?!\s*\()",
    re.IGNORECASE,
)
DECIMAL_RE = re.compile(r"\bAS\s+(decimal|numeric)\s*\(\s*\d+\s*,\s*\d+\s*\)", re.IGNORECASE)
DECIMAL_ANY_RE = re.compile(r"\bAS\s+(decimal|numeric)\b", re.IGNORECASE)
COLLATE_RE = re.compile(r"\bCOLLATE\s+(\S+)", re.IGNORECASE)
PARAM_RE = re.compile(r"@p(\d+)\b")


class Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def entries(path):
    """Yields (file, line, name, declared params, sql) per entry."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    cur = None
    for i, line in enumerate(lines, 1):
        if line.startswith("-- name: "):
            if cur:
                yield cur
            cur = [path, i, line[len("-- name: "):].strip(), set(), []]
        elif cur is None:
            if line.strip():
                yield (path, i, "<before first entry>", set(), [line])
        elif line.startswith("-- @p") and not cur[4]:
            m = re.match(r"-- @p(\d+) = ", line)
            if not m:
                cur[4].append(line)
            else:
                cur[3].add(int(m.group(1)))
        else:
            cur[4].append(line)
    if cur:
        yield cur


def in_datatype(node):
    p = node.parent
    while p is not None:
        if isinstance(p, exp.DataType):
            return True
        p = p.parent
    return False


def is_empty_piece(node):
    """The `1 = 0` the package writes for a piece that holds no row."""
    return (isinstance(node, exp.EQ)
            and all(isinstance(x, exp.Literal) and not x.is_string for x in (node.this, node.expression))
            and (node.this.this, node.expression.this) == ("1", "0"))


BRACKET_RE = re.compile(r"\[(?:[^\]]|\]\])*\]")
NSTRING_RE = re.compile(r"N'(?:[^']|'')*'")


def mask(text):
    """text with every bracket-quoted name and N'...' literal made opaque, so
    the text checks below never read inside a name: [a;b] or [x AS varchar]
    are names, not a second statement or an inlined type."""
    text = BRACKET_RE.sub("[_]", text)
    return NSTRING_RE.sub(lambda m: "N'all update old'" if m.group(0) == "N'all update old'" else "N'_'", text)


def check_tree(tree, errs):
    for ident in tree.find_all(exp.Identifier):
        if ident.quoted:
            continue
        parent = ident.parent
        name = ident.this
        ok = False
        if name.lower() in BARE_SCHEMAS and isinstance(parent, (exp.Dot, exp.Table)):
            ok = True
        if isinstance(parent, exp.Table) and isinstance(parent.parent, exp.Execute) and parent.args.get("this") is ident:
            ok = name in PROCEDURES
        if not ok:
            errs.append(f"identifier {name!r} is not bracket-quoted")
    for fn in tree.find_all(exp.Anonymous):
        name = fn.this
        if isinstance(name, exp.Identifier):
            table = fn.parent
            if not (name.quoted and name.this.startswith("fn_cdc_get_all_changes_")
                    and isinstance(table, exp.Table) and table.args.get("db") is not None
                    and table.args["db"].this == "cdc" and table.args["db"].quoted):
                errs.append(f"function {name.sql('tsql')} is not [cdc].[fn_cdc_get_all_changes_<ci>]")
        elif name.upper() in BUILTINS:
            continue
        elif name not in FUNCTIONS:
            errs.append(f"function {name!r} is not one of the documented CDC functions")
        elif not isinstance(fn.parent, exp.Dot):
            errs.append(f"function {name!r} must be called as sys.{name}")
    for dt in tree.find_all(exp.DataType):
        t = dt.this.name if hasattr(dt.this, "name") else str(dt.this)
        params = dt.expressions
        if t in LENGTH_TYPES and not params:
            errs.append(f"type {dt.sql('tsql')} has no length")
        if t in {"DECIMAL"} and len(params) != 2:
            errs.append(f"type {dt.sql('tsql')} needs precision and scale")
        if t in {"DATETIME2", "TIME", "TIMESTAMPTZ"} and len(params) != 1:
            errs.append(f"type {dt.sql('tsql')} needs a scale")
    for lit in tree.find_all(exp.Literal):
        if in_datatype(lit):
            continue
        if is_empty_piece(lit.parent):
            continue
        if isinstance(lit.parent, (exp.Fetch,)):
            continue
        errs.append(f"literal {lit.sql('tsql')} inlined: values must be parameters")
    for nat in tree.find_all(exp.National):
        if nat.this != "all update old":
            errs.append(f"literal {nat.sql('tsql')} inlined: values must be parameters")


def check_entry(path, line, name, declared, sql_lines):
    errs = []
    text = "\n".join(sql_lines).strip()
    if not text:
        return [f"{path}:{line}: {name}: empty statement"]
    if text.endswith(";"):
        text = text[:-1].rstrip()
    masked = mask(text)
    if ";" in masked:
        errs.append("more than one statement (a ';' inside)")
    if re.search(r"NOLOCK|READUNCOMMITTED|READ\s+UNCOMMITTED", masked, re.IGNORECASE):
        errs.append("NOLOCK / READ UNCOMMITTED is never allowed")
    used = {int(n) for n in PARAM_RE.findall(masked)}
    if used != declared:
        errs.append(f"parameters used {sorted(used)} but declared {sorted(declared)}")
    if used and sorted(used) != list(range(1, max(used) + 1)):
        errs.append(f"parameters are not numbered @p1..@pN: {sorted(used)}")
    for m in TEXT_TYPE_RE.finditer(masked):
        errs.append(f"inlined type {m.group(1)} has no length/precision/scale")
    if len(DECIMAL_ANY_RE.findall(masked)) != len(DECIMAL_RE.findall(masked)):
        errs.append("a decimal/numeric type lacks precision and scale")
    for m in COLLATE_RE.finditer(masked):
        if not re.fullmatch(r"[A-Za-z0-9_]{1,128}", m.group(1)):
            errs.append(f"COLLATE {m.group(1)!r} is not a collation name")

    if text.upper().startswith("SET"):
        if not SET_RE.match(text):
            errs.append(f"unexpected SET statement {text!r}")
        # sqlglot parses some levels (READ COMMITTED) as a Set; for others
        # (SNAPSHOT) RAISE fails and WARN falls back to an opaque Command with
        # an "unsupported syntax" warning: expected for SET statements only.
        handler = Warnings()
        logger = logging.getLogger("sqlglot")
        logger.addHandler(handler)
        logger.propagate = False
        old_level = logger.level
        logger.setLevel(logging.WARNING)
        try:
            try:
                trees = sqlglot.parse(text, read="tsql", error_level=sqlglot.ErrorLevel.RAISE)
                if len(trees) != 1 or not isinstance(trees[0], exp.Set):
                    errs.append("SET did not parse as one SET statement")
            except Exception:  # noqa: BLE001
                try:
                    trees = sqlglot.parse(text, read="tsql", error_level=sqlglot.ErrorLevel.WARN)
                except Exception as e:  # noqa: BLE001
                    errs.append(f"sqlglot: {e}")
                    trees = []
                if len(trees) != 1 or not isinstance(trees[0], exp.Command):
                    errs.append("SET did not parse as one Command")
                if not any("unsupported syntax" in m for m in handler.messages):
                    errs.append(f"expected sqlglot's unsupported-syntax warning for SET, got {handler.messages}")
        finally:
            logger.removeHandler(handler)
            logger.propagate = True
            logger.setLevel(old_level)
    else:
        try:
            trees = sqlglot.parse(text, read="tsql", error_level=sqlglot.ErrorLevel.RAISE)
        except Exception as e:  # noqa: BLE001
            trees = None
            errs.append("sqlglot tsql: " + " ".join(str(e).split()))
        if trees is not None:
            if len([t for t in trees if t is not None]) != 1:
                errs.append(f"want one statement, parsed {len(trees)}")
            for t in trees:
                if t is None:
                    continue
                if isinstance(t, exp.Command):
                    errs.append("parsed only as an opaque Command")
                check_tree(t, errs)
    return [f"{path}:{line}: {name}: {e}" for e in errs]


def files(args):
    for a in args:
        if os.path.isdir(a):
            for root, _, names in os.walk(a):
                for n in sorted(names):
                    if n.endswith(".sql"):
                        yield os.path.join(root, n)
        else:
            yield a


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.ERROR)
    failures, count, nfiles = [], 0, 0
    for path in files(argv[1:]):
        nfiles += 1
        for e in entries(path):
            count += 1
            failures.extend(check_entry(*e))
    if nfiles == 0:
        print("check-sql: no .sql golden files found in " + " ".join(argv[1:]), file=sys.stderr)
        return 1
    if failures:
        for f in failures:
            print("check-sql: FAIL " + f, file=sys.stderr)
        print(f"check-sql: {len(failures)} problem(s) in {count} statements", file=sys.stderr)
        return 1
    print(f"check-sql: {count} statements in {nfiles} files parse as T-SQL and follow the project's rules")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
