"""Measures one snapshot four ways: workers as plain processes, and as Spark tasks.

Usage: bench.py FANOUT_BINARY WORKDIR [ROWS] [PARTITIONS]
(run with the Python of .ci/sparkenv; BENCHMARKS.md quotes its output)

  1. one process: `fanout worker` given every task line (one source, the
     partitions one after another), then commit;
  2. two processes: two `fanout worker`s at once, half the tasks each (the
     like-for-like of Spark local[2]), then commit;
  3. Spark local[2]: examples/spark/driver.py, one task per partition;
  4. Spark's own cost per task: the same number of tasks piped through
     `cat` in local[2], after a warm-up job.

Each worker prints one line per task on stderr: the time it took to open
the source (for the demo: building the 1M-row database in memory, which
each worker process does once; a real worker connects instead) and to
read and write its partition. Spark's overhead per task is the slot time
not spent in those: (2 slots x the tasks' wall time - the workers' time) /
tasks.
"""
import os
import re
import shutil
import subprocess
import sys
import time

fanout, work = sys.argv[1], sys.argv[2]
rows = int(sys.argv[3]) if len(sys.argv) > 3 else 1_000_000
partitions = int(sys.argv[4]) if len(sys.argv) > 4 else 8
here = os.path.dirname(os.path.abspath(__file__))
LINE = re.compile(r"fanout worker: partition \d+ \(attempt \d+\): \d+ rows, \d+ bytes; "
                  r"source opened in ([\d.]+)s, partition read and written in ([\d.]+)s")


def worker_times(stderr):
    opened = written = 0.0
    n = 0
    for m in LINE.finditer(stderr):
        opened += float(m.group(1))
        written += float(m.group(2))
        n += 1
    return n, opened, written


def fresh(name):
    d = os.path.join(work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def plan(d):
    common = ["-target", os.path.join(d, "bronze"), "-seed", "42", "-rows", str(rows)]
    t = time.time()
    out = subprocess.run([fanout, "plan", "-partitions", str(partitions), "-tasks", os.path.join(d, "tasks.jsonl")] + common,
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    with open(os.path.join(d, "plan.json"), "w") as f:
        f.write(out)
    with open(os.path.join(d, "tasks.jsonl")) as f:
        return common, f.read().splitlines(keepends=True), time.time() - t


def commit(d, common, parts):
    with open(os.path.join(d, "parts.jsonl"), "w") as f:
        f.write(parts)
    t = time.time()
    out = subprocess.run([fanout, "commit", "-plan", os.path.join(d, "plan.json")] + common + [os.path.join(d, "parts.jsonl")],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    assert f"committed: {rows + 3} rows" in out, out
    return time.time() - t


def processes(name, k):
    d = fresh(name)
    common, tasks, tplan = plan(d)
    t = time.time()
    procs = []
    for i in range(k):
        f = os.path.join(d, f"tasks-{i}.jsonl")
        with open(f, "w") as out:
            out.write("".join(tasks[i::k]))
        with open(f) as inp:  # a file, so every worker starts reading at once
            procs.append(subprocess.Popen([fanout, "worker"], stdin=inp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate() for p in procs]  # the others keep running meanwhile
    wall = time.time() - t
    assert all(p.returncode == 0 for p in procs), outs
    n, opened, written = worker_times("".join(e for _, e in outs))
    tcommit = commit(d, common, "".join(o for o, _ in outs))
    print(f"{name}: plan {tplan:.1f}s; {n} tasks in {k} process(es): {wall:.1f}s wall "
          f"(sources opened {opened:.1f}s, partitions read and written {written:.1f}s, summed over tasks); commit {tcommit:.1f}s")
    return wall


def spark():
    d = fresh("spark")
    t = time.time()
    p = subprocess.run([sys.executable, os.path.join(here, "driver.py"), "--fanout", fanout, "--target", os.path.join(d, "bronze"),
                        "--work", d, "--seed", "42", "--rows", str(rows), "--partitions", str(partitions), "--master", "local[2]"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    total = time.time() - t
    assert p.returncode == 0, p.stderr[-2000:]
    assert f"committed: {rows + 3} rows" in p.stdout, p.stdout
    tasks = float(re.search(r"parts from Spark \(([\d.]+)s for the tasks\)", p.stdout).group(1))
    n, opened, written = worker_times(p.stderr)
    assert n == partitions, (n, p.stderr[-2000:])
    per_task = (2 * tasks - opened - written) / n
    print(f"spark local[2]: driver {total:.1f}s in all (Python start, plan, Spark session, tasks, commit); "
          f"{n} tasks in {tasks:.1f}s wall (sources opened {opened:.1f}s, partitions read and written {written:.1f}s, summed); "
          f"slot time outside the workers: {per_task:.2f}s per task")


def noop():
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").getOrCreate()
    sc = spark.sparkContext
    sc.setLogLevel("ERROR")
    lines = [str(i) for i in range(partitions)]
    sc.parallelize(lines, partitions).pipe("cat").collect()  # warm-up: Python workers started
    best = None
    for _ in range(3):
        t = time.time()
        assert sc.parallelize(lines, partitions).pipe("cat", checkCode=True).collect() == lines
        w = time.time() - t
        best = w if best is None else min(best, w)
    spark.stop()
    print(f"spark local[2], {partitions} tasks piped through cat: {best:.2f}s wall (best of 3), "
          f"{2 * best / partitions * 1000:.0f} ms of slot time per task")


os.makedirs(work, exist_ok=True)
print(f"{rows} demo rows, {partitions} partitions, on {os.cpu_count()} cores")
processes("one process", 1)
processes("two processes", 2)
spark()
noop()
