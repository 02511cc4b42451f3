"""ODBC Driver 18 peer of `go run ./internal/bench -wire-peers`: mssql-python
(Microsoft's driver, bundling the ODBC Driver 18) reads one query several
times on one connection with its Arrow fetch (cursor.arrow_reader, record
batches of 8192 rows, streamed as source/sqlserver streams them) and
prints, per pass, one JSON line: {"rows", "seconds", "cpu_seconds"}.
cpu_seconds is this process's CPU time over the pass
(time.process_time: every thread, the driver's included).

Usage: peer_odbc.py PORT USER PASSWORD QUERY PASSES
"""

import json
import sys
import time

import mssql_python


def main() -> None:
    port, user, password, query, passes = sys.argv[1:6]
    conn = mssql_python.connect(
        f"Server=tcp:127.0.0.1,{port};Database=bench;UID={user};PWD={{{password}}};"
        "Encrypt=no;TrustServerCertificate=yes", autocommit=True)
    cur = conn.cursor()
    for _ in range(int(passes)):
        cpu0, t0 = time.process_time(), time.perf_counter()
        cur.execute(query)
        rows = 0
        for batch in cur.arrow_reader(batch_size=8192):
            rows += batch.num_rows
        seconds = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        print(json.dumps({"rows": rows, "seconds": seconds, "cpu_seconds": cpu}), flush=True)
    conn.close()


if __name__ == "__main__":
    main()
