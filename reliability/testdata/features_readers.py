"""Reads bronze tables with Delta table features with delta-rs (deltalake
1.6.6, QueryBuilder, which applies deletion vectors) and DuckDB (1.5.5 with
the delta extension from PyPI), for reliability/features_test.go.

Usage: features_readers.py JOB.json
JOB.json: {"paths": [...]}. Prints one JSON object: per path and reader,
the row count, the count per _operation, sum(order_id) and count(customer),
or the reader's error. DeltaTable.to_pyarrow_table is tried too and its
answer (rows or error) reported: it refuses deletion vectors.
"""
import glob
import json
import os
import sys
import time

import deltalake
import pyarrow as pa
import duckdb
import duckdb_extension_delta

job = json.load(open(sys.argv[1]))
ext = glob.glob(os.path.join(os.path.dirname(duckdb_extension_delta.__file__), "extensions", "*", "delta.duckdb_extension"))
con = duckdb.connect()
con.execute(f"LOAD '{ext[0]}'")
out = {}


def agg(rows_by_op, fp):
    return {"rows": sum(rows_by_op.values()), "by_operation": rows_by_op, "sum_order_id": fp[0], "count_customer": fp[1]}


for path in job["paths"]:
    r = out.setdefault(path, {})
    start = time.time()
    try:
        dt = deltalake.DeltaTable(path)
        p = dt.protocol()
        r["deltars_protocol"] = {"reader": p.min_reader_version, "writer": p.min_writer_version,
                                 "readerFeatures": p.reader_features, "writerFeatures": p.writer_features}
        r["deltars_version"] = dt.version()
        qb = deltalake.QueryBuilder().register("t", dt)
        ops = pa.table(qb.execute('SELECT "_operation", count(*) AS n FROM t GROUP BY "_operation"').read_all()).to_pylist()
        fp = pa.table(qb.execute("SELECT sum(order_id) AS s, count(customer) AS c FROM t").read_all()).to_pylist()[0]
        r["deltars"] = agg({str(x["_operation"]): x["n"] for x in ops}, (fp["s"], fp["c"]))
    except Exception as e:
        r["deltars"] = {"error": f"{type(e).__name__}: {str(e)[:1500]}"}
    try:
        r["deltars_to_pyarrow_rows"] = deltalake.DeltaTable(path).to_pyarrow_table().num_rows
    except Exception as e:
        r["deltars_to_pyarrow_error"] = f"{type(e).__name__}: {str(e)[:300]}"
    try:
        lit = "'" + path.replace("'", "''") + "'"
        ops = con.execute(f"SELECT _operation, count(*) FROM delta_scan({lit}) GROUP BY _operation").fetchall()
        fp = con.execute(f"SELECT sum(order_id), count(customer) FROM delta_scan({lit})").fetchone()
        r["duckdb"] = agg({str(o): n for o, n in ops}, (int(fp[0]) if fp[0] is not None else None, fp[1]))
    except Exception as e:
        r["duckdb"] = {"error": f"{type(e).__name__}: {str(e)[:1500]}"}
    r["seconds"] = round(time.time() - start, 1)
print(json.dumps(out, default=str))

# deltalake 1.6.6 with pyarrow can abort during interpreter shutdown
# ("terminate called without an active exception"; see
# sink/delta/interop/interop.py): the answer is out, leave without teardown.
sys.stdout.flush()
os._exit(0)
