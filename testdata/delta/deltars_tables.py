"""Writes the delta-rs fixtures of testdata/delta (run by testdata/delta/make,
with the Python of .ci/pyenv: deltalake and pyarrow as .ci/requirements.txt
pins them).

Usage: deltars_tables.py OUT_DIR
"""
import datetime
import json
import os
import sys
import time

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

out = os.path.abspath(sys.argv[1])
BASE = datetime.datetime(2026, 11, 30, 12, 0, 0, tzinfo=datetime.timezone.utc)


def rows(first, n):
    ids = list(range(first, first + n))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "name": pa.array([f"name {i}" for i in ids]),
        "created": pa.array([BASE + datetime.timedelta(minutes=i) for i in ids], pa.timestamp("us", tz="UTC")),
    })


def path(name):
    return os.path.join(out, name)


def deltars_json_only():
    # Commits only: adds, an overwrite's removes, a delete that rewrites.
    p = path("deltars_json_only")
    write_deltalake(p, rows(0, 4))
    write_deltalake(p, rows(4, 3), mode="append")
    write_deltalake(p, rows(10, 3), mode="overwrite")
    write_deltalake(p, rows(20, 3), mode="append")
    DeltaTable(p).delete("id = 21")


def deltars_checkpoint():
    # delta-rs's own checkpoint (create_checkpoint) and a commit after it.
    p = path("deltars_checkpoint")
    write_deltalake(p, rows(0, 2))
    write_deltalake(p, rows(2, 2), mode="append")
    DeltaTable(p).create_checkpoint()
    write_deltalake(p, rows(4, 2), mode="append")


def deltars_log_cleaned():
    # delta-rs's log cleanup (cleanup_metadata, log retention 0) and VACUUM:
    # only the checkpoint at 3 and the commits after it remain, with the
    # files they hold.
    p = path("deltars_log_cleaned")
    write_deltalake(p, rows(0, 2), configuration={"delta.logRetentionDuration": "interval 0 seconds"})
    write_deltalake(p, rows(2, 2), mode="overwrite")
    write_deltalake(p, rows(4, 2), mode="append")
    write_deltalake(p, rows(6, 2), mode="append")
    dt = DeltaTable(p)
    dt.create_checkpoint()
    time.sleep(1.1)
    dt.cleanup_metadata()
    DeltaTable(p).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    write_deltalake(p, rows(8, 2), mode="append")


def unknown_reader_feature():
    # No writer writes a feature it does not know, so this one is made by
    # hand: a delta-rs table, then a commit the script appends whose protocol
    # action names a reader (and writer) feature no reader implements (Delta
    # PROTOCOL, "Table Features": a reader must refuse a table naming a reader
    # feature it does not support).
    p = path("unknown_reader_feature")
    write_deltalake(p, rows(0, 2))
    v = DeltaTable(p).version() + 1
    feature = "cdcsnapFixtureUnknownFeature"
    actions = [
        {"commitInfo": {"timestamp": int(BASE.timestamp() * 1000), "operation": "SET TBLPROPERTIES",
                        "operationParameters": {}, "clientVersion": "testdata/delta/make"}},
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                      "readerFeatures": [feature], "writerFeatures": [feature]}},
    ]
    with open(os.path.join(p, "_delta_log", f"{v:020d}.json"), "x") as f:
        f.write("".join(json.dumps(a) + "\n" for a in actions))


for make in (deltars_json_only, deltars_checkpoint, deltars_log_cleaned, unknown_reader_feature):
    make()
    print("delta-rs table:", make.__name__, file=sys.stderr)
