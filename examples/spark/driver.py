"""A whole cdcsnap snapshot with its partitions as Spark tasks.

The driver plans, Spark runs one task per partition, and the commit stays
the library's: one atomic Delta commit of every partition's files.

  1. `fanout plan -tasks tasks.jsonl > plan.json` (on the driver): finds the
     snapshot the table holds (then nothing is left to do), or resumes the
     partial one an earlier run recorded, or records a new plan; it writes
     one task line per partition left to read.
  2. The partitions left become an RDD with one partition each; each Spark
     task pipes its task line (the plan broadcast once, the partition and
     Spark's attempt number added on the executor) through `fanout worker`,
     which writes the partition's Parquet files into the table's folder,
     records its Part with the table and prints the Part as one JSON line.
     A failed task is retried by Spark. The first attempt of a partition to
     record a complete Part wins: a retry after that reports the recorded
     Part, and the files of every other attempt are orphans that no commit
     references.
  3. The driver collects the Part lines and runs `fanout commit`, which
     commits them, plus the recorded parts of partitions an earlier run
     finished, in one Delta commit (snapshot.CommitUsable).

Usage (local; see README.md beside this file for a cluster):

  go build -o /tmp/fanout ./examples/fanout
  python examples/spark/driver.py --master 'local[2,2]' --fanout /tmp/fanout \
      --target /tmp/bronze --rows 1000000 --partitions 8

The source is the demo database (--rows, --seed), or the SQL Server whose
connection string is in CDCSNAP_SOURCE_DSN or in the file
CDCSNAP_SOURCE_DSN_FILE names, in the environment of the driver and of
every executor: never on a command line.

How the worker is started: by default each task runs it with
subprocess.Popen in the executor's Python, so it inherits the executor's
environment (spark.executorEnv.*, a cluster's environment variables,
mounted secrets, pod identity variables), and stdin is always closed. With
--rdd-pipe the driver uses RDD.pipe instead, which the worker's protocol
fits (one task per stdin line, one Part per stdout line, non-zero exit on
failure): PySpark 4.0.1's RDD.pipe (pyspark/core/rdd.py) runs the command
with env= as its whole environment (Popen(env=env): nothing of the
executor's), built on the driver and shipped inside the task, and fails
the task on a non-zero exit only with checkCode=True. In local mode Spark
retries a failed task only if the master says so: local[N,F] allows F
attempts (SparkContext's LOCAL_N_FAILURES_REGEX); spark.task.maxFailures
(default 4) applies on clusters.
"""
import argparse
import json
import os
import subprocess
import sys
import time

# With --rdd-pipe, the driver's environment variables the workers get
# (RDD.pipe gives them nothing else): the source's DSN or DSN file, object
# store credentials and endpoints, and what a Go program needs to find a
# temporary folder.
PASS_PREFIXES = ("CDCSNAP_", "AWS_", "AZURE_", "GOOGLE_", "STORAGE_EMULATOR_HOST")
PASS_NAMES = ("HOME", "TMPDIR", "PATH", "SSL_CERT_FILE", "SSL_CERT_DIR")


def worker_env():
    """For --rdd-pipe: the driver's variables the worker needs."""
    return {k: v for k, v in os.environ.items() if k.startswith(PASS_PREFIXES) or k in PASS_NAMES}


def source_flags(args):
    flags = ["-seed", str(args.seed), "-rows", str(args.rows)]
    if args.server_time_zone:
        flags += ["-server-time-zone", args.server_time_zone]
    return flags


def run(cmd):
    """Runs a step on the driver; its stderr goes to ours, a failure ends the driver."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"driver: {os.path.basename(cmd[0])} {cmd[1]} exited {p.returncode}")
    return p.stdout


def fault_arg(v):
    part, _, fault = v.partition(":")
    if fault not in ("crash-after-write", "fail-read"):
        raise argparse.ArgumentTypeError(f"{v!r}: want PARTITION:crash-after-write or PARTITION:fail-read")
    return int(part), fault


def run_tasks(sc, args, template, todo, attempts_dir):
    """Runs `fanout worker` for each partition of todo as one Spark task; returns the Part lines."""
    bc = sc.broadcast(template)  # the task without its partition: the plan travels once per executor
    faults = dict(args.fail_first)
    markers = os.path.abspath(attempts_dir) if faults else None
    ship, exe_path, exe_name = args.ship, args.fanout, os.path.basename(args.fanout)

    def tasks_of(partitions):
        from pyspark import TaskContext
        attempt = TaskContext.get().attemptNumber()
        for p in partitions:
            task = dict(bc.value, partition=p, attempt=attempt)
            if attempt == 0 and p in faults:
                task["fault"] = faults[p]
            if markers:  # the demo's evidence of retries; a local folder, so best effort
                try:
                    open(os.path.join(markers, f"partition-{p}-attempt-{attempt}"), "w").close()
                except OSError:
                    pass
            yield json.dumps(task)

    def exe():
        from pyspark import SparkFiles
        return SparkFiles.get(exe_name) if ship else exe_path

    def pipe(partitions):
        lines = "".join(t + "\n" for t in tasks_of(list(partitions)))
        # The executor's environment; the worker's stderr goes to the executor's log.
        proc = subprocess.Popen([exe(), "worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        out, _ = proc.communicate(lines)
        if proc.returncode != 0:
            raise RuntimeError(f"fanout worker exited {proc.returncode} (its error is in this executor's stderr)")
        return out.splitlines()

    if ship:
        sc.addFile(args.fanout)
    rdd = sc.parallelize(todo, len(todo))
    if args.rdd_pipe:
        if ship:
            sys.exit("driver: --rdd-pipe runs a command fixed on the driver; it cannot use --ship")
        return rdd.mapPartitions(tasks_of).pipe(f"{args.fanout} worker", env=worker_env(), checkCode=True).collect()
    return rdd.mapPartitions(pipe).collect()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fanout", required=True, help="the fanout binary: on the driver, and at the same path on every executor unless --ship")
    ap.add_argument("--ship", action="store_true", help="ship the binary to the executors (SparkContext.addFile, as spark-submit --files does)")
    ap.add_argument("--target", required=True, help="the Delta table's URL, reachable from the driver and every executor")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--capture-instance", default="sales_orders")
    ap.add_argument("--rows", type=int, default=100_000, help="demo source: rows")
    ap.add_argument("--seed", type=int, default=42, help="demo source: seed")
    ap.add_argument("--server-time-zone", default="", help="SQL Server source: the server's IANA time zone")
    ap.add_argument("--work", default=".", help="folder for plan.json, tasks.jsonl, parts.jsonl")
    ap.add_argument("--master", default="", help="Spark master, e.g. local[2,2] (2 threads, 2 attempts per task); empty keeps spark-submit's or the cluster's")
    ap.add_argument("--rdd-pipe", action="store_true", help="start the workers with RDD.pipe (the environment built on the driver)")
    ap.add_argument("--fail-first", type=fault_arg, action="append", default=[], metavar="PARTITION:FAULT",
                    help="demo: the partition's first attempt fails: crash-after-write (after recording its Part) or fail-read (mid-read)")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    plan_file = os.path.join(args.work, "plan.json")
    tasks_file = os.path.join(args.work, "tasks.jsonl")
    parts_file = os.path.join(args.work, "parts.jsonl")
    attempts_dir = os.path.join(args.work, "attempts")
    common = ["-target", args.target] + source_flags(args)
    t0 = time.time()

    plan = run([args.fanout, "plan", "-partitions", str(args.partitions), "-capture-instance", args.capture_instance,
                "-tasks", tasks_file] + common)
    if not plan.strip():
        print(f"driver: {args.target} already holds a snapshot of {args.capture_instance}; nothing to do")
        return
    with open(plan_file, "w") as f:
        f.write(plan)
    with open(tasks_file) as f:
        tasks = [json.loads(line) for line in f if line.strip()]
    todo = [t["partition"] for t in tasks]
    template = {k: v for k, v in tasks[0].items() if k != "partition"} if tasks else None
    plan_id = json.loads(plan)["id"]
    print(f"driver: plan {plan_id}: {len(json.loads(plan)['ranges'])} partitions, {len(todo)} to read "
          f"({time.time() - t0:.1f}s)", flush=True)

    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(f"cdcsnap snapshot {args.capture_instance}")
    if args.master:
        builder = builder.master(args.master)
    spark = builder.config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").getOrCreate()
    sc = spark.sparkContext
    sc.setLogLevel("ERROR")
    t1 = time.time()
    parts = []
    if todo:
        if args.fail_first:
            os.makedirs(attempts_dir, exist_ok=True)
        parts = run_tasks(sc, args, template, todo, attempts_dir)
    t2 = time.time()
    print(f"driver: {len(parts)} parts from Spark ({t2 - t1:.1f}s for the tasks)", flush=True)
    for p, fault in args.fail_first:
        tried = sorted(n for n in os.listdir(attempts_dir) if n.startswith(f"partition-{p}-"))
        print(f"driver: partition {p} ({fault} on its first attempt) ran as {', '.join(tried)}")
    with open(parts_file, "w") as f:
        f.write("".join(p + "\n" for p in parts))
    out = run([args.fanout, "commit", "-plan", plan_file, "-with-recorded"] + common + [parts_file])
    print(f"driver: {out.strip()} ({time.time() - t2:.1f}s to commit; {time.time() - t0:.1f}s in all)")
    spark.stop()


if __name__ == "__main__":
    main()
