"""Microsoft ODBC Driver 18 (through mssql-python) reads one statement from
internal/tdsfake for TestODBCAgreesWithGoMSSQLDB and prints every value as
JSON, one row a line, each value [kind, value] in a form Go rebuilds from
go-mssqldb's value: ["int", 5], ["bool", true], ["float", "repr"],
["dec", "exact text"], ["date", [y, m, d]], ["ts", [y, m, d, h, mi, s, us]],
["tstz", [..., offset minutes]], ["time_ns", ns since midnight],
["str", s], ["bytes", hex], ["uuid", text], or null.

time(n) comes from the driver's Arrow fetch (cursor.arrow: time64[ns],
all seven digits); everything else from fetchall, whose datetime holds
microseconds (mssql-python drops the seventh digit of datetime2 and
datetimeoffset).

Usage: odbc_read.py PORT USER PASSWORD STATEMENT
"""

import datetime
import decimal
import json
import sys
import uuid

import mssql_python
import pyarrow as pa


def cell(v):
    if v is None:
        return None
    if isinstance(v, bool):
        return ["bool", v]
    if isinstance(v, int):
        return ["int", v]
    if isinstance(v, float):
        return ["float", repr(v)]
    if isinstance(v, decimal.Decimal):
        return ["dec", format(v, "f")]
    if isinstance(v, datetime.datetime):
        parts = [v.year, v.month, v.day, v.hour, v.minute, v.second, v.microsecond]
        if v.tzinfo is None:
            return ["ts", parts]
        return ["tstz", parts + [int(v.utcoffset().total_seconds() // 60)]]
    if isinstance(v, datetime.time):
        return ["time", v.isoformat()]  # replaced by the Arrow fetch's
    if isinstance(v, datetime.date):
        return ["date", [v.year, v.month, v.day]]
    if isinstance(v, str):
        return ["str", v]
    if isinstance(v, (bytes, bytearray)):
        return ["bytes", bytes(v).hex()]
    if isinstance(v, uuid.UUID):
        return ["uuid", str(v)]
    raise TypeError(f"unexpected {type(v).__name__} {v!r}")


def main() -> None:
    port, user, password, stmt = sys.argv[1:5]
    conn = mssql_python.connect(
        f"Server=tcp:127.0.0.1,{port};Database=cdcsnap;UID={user};PWD={{{password}}};"
        "Encrypt=yes;TrustServerCertificate=yes")
    cur = conn.cursor()
    cur.execute(stmt)
    rows = [[cell(v) for v in r] for r in cur.fetchall()]
    cur.execute(stmt)
    table = cur.arrow()
    for j, col in enumerate(table.columns):
        if pa.types.is_time(col.type):
            ns = col.cast(pa.time64("ns")).cast(pa.int64()).to_pylist()
            for i, v in enumerate(ns):
                rows[i][j] = None if v is None else ["time_ns", v]
    conn.close()
    for r in rows:
        print(json.dumps(r, ensure_ascii=False))


if __name__ == "__main__":
    main()
