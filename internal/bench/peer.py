"""delta-rs peer for `go run ./internal/bench`: writes the bronze records of
an Arrow IPC file to a new Delta table with deltalake.write_deltalake and
prints {"rows", "seconds", "bytes", "deltalake", "pyarrow"} as JSON.

seconds runs from opening the (memory-mapped) IPC file to the end of the
commit: the same span the Go side times for sink/delta from the same file.

Usage: peer.py IPC_FILE TABLE_DIR
"""

import json
import os
import sys
import time

import deltalake
import pyarrow as pa


def main() -> None:
    ipc_path, table_dir = sys.argv[1], sys.argv[2]
    start = time.perf_counter()
    src = pa.ipc.open_file(pa.memory_map(ipc_path, "r"))
    n = src.num_record_batches
    reader = pa.RecordBatchReader.from_batches(src.schema, (src.get_batch(i) for i in range(n)))
    deltalake.write_deltalake(table_dir, reader, mode="error")
    seconds = time.perf_counter() - start
    dt = deltalake.DeltaTable(table_dir)
    adds = dt.get_add_actions(flatten=True)
    adds = pa.table(adds) if not isinstance(adds, pa.Table) else adds
    rows = sum(adds.column("num_records").to_pylist())
    size = sum(adds.column("size_bytes").to_pylist())
    print(json.dumps({"rows": rows, "seconds": seconds, "bytes": size,
                      "deltalake": deltalake.__version__, "pyarrow": pa.__version__}))


if __name__ == "__main__":
    main()
    # deltalake 1.6.6 with pyarrow can abort during interpreter shutdown
    # ("terminate called without an active exception": 2 of 12 runs of
    # the former sink/delta/fastsnappy test); the answer is out by then, so leave
    # without the teardown.
    sys.stdout.flush()
    os._exit(0)
