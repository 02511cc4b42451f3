"""Microsoft ODBC Driver 18 (through mssql-python) as a client of
internal/tdsserver's TestODBCDriver18: connects with the Encrypt setting
given, runs a batch, a parameterised statement twice (the driver prepares
it: sp_prepexec) and an Arrow fetch, and prints one JSON line per result.

Usage: odbc_client.py PORT USER PASSWORD ENCRYPT
"""

import json
import sys

import mssql_python


def main() -> None:
    port, user, password, encrypt = sys.argv[1:5]
    conn = mssql_python.connect(
        f"Server=tcp:127.0.0.1,{port};Database=shop;UID={user};PWD={{{password}}};"
        f"Encrypt={encrypt};TrustServerCertificate=yes")
    cur = conn.cursor()
    cur.execute("select 'batch' as v, 0 as w")
    print(json.dumps([list(r) for r in cur.fetchall()], ensure_ascii=False))
    for i in (1, 2):
        cur.execute("select ? as v, ? as w", (f"é{i}", i))
        print(json.dumps([list(r) for r in cur.fetchall()], ensure_ascii=False))
    cur.execute("select 'arrow' as v, 3 as w")
    print(json.dumps(cur.arrow().to_pylist()))
    conn.close()


if __name__ == "__main__":
    main()
