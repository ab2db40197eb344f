#!/usr/bin/env python3
"""cluster.py - builds per second and hit rate of a CI-farm-like mix on one
replica and on a cluster of replicas (bench/cluster.md).

The mix: every program of examples/ for three targets (sm_80, sm_90a,
compute_80: 24 builds), asked by --jobs CI jobs at once, each job asking
every build once in its own random order (like `tlclient prebuild` in
each job), job j talking to replica j mod R.  A cold round (empty caches)
then a warm round (each job asks the mix --warm-repeat times, 10 by
default, so that it lasts long enough to time).  For each set-up, fresh processes from
deploy/cluster.sh:

  one         1 replica, no tier
  three-local 3 replicas, each with its own cache and no tier (what a
              cluster without the tier does: each replica compiles alone)
  three-tier  3 replicas sharing a Redis tier (--tier)

Reported per round: requests, wall seconds, builds per second (answers per
second), compiles run (from /metrics, summed over the replicas) and the hit
rate (1 - compiles / requests).

  python3 bench/cluster.py [--jobs 6] [--workers 1] [--warm-repeat 10]
                           [--setups one,three-local,three-tier]
"""
import argparse, glob, json, os, random, shutil, subprocess, sys, tempfile, threading, time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = ["sm_80", "sm_90a", "compute_80"]


def env_of(d):
    e = {}
    for line in open(os.path.join(d, "cluster.env")):
        k, _, v = line.strip().partition("=")
        e[k] = v
    return e


def metric(port, series):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[1])
    return 0.0


def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/compile", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())["results"][0]["status"]


def run_round(ports, bodies, jobs, seed, repeat=1):
    errors = []

    def job(j):
        order = list(range(len(bodies))) * repeat
        random.Random(seed * 100 + j).shuffle(order)
        port = ports[j % len(ports)]
        for i in order:
            try:
                if post(port, bodies[i]) != "ok":
                    errors.append(i)
            except Exception as e:  # noqa: BLE001 - counted and reported
                errors.append(f"{i}: {e}")

    before = sum(metric(p, 'tlserverd_compiles_total{outcome="ok"}') for p in ports)
    t0 = time.monotonic()
    threads = [threading.Thread(target=job, args=(j,)) for j in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    compiles = sum(metric(p, 'tlserverd_compiles_total{outcome="ok"}') for p in ports) - before
    n = jobs * len(bodies) * repeat
    return {"requests": n, "wall_s": round(wall, 2), "builds_per_s": round(n / wall, 1),
            "compiles": int(compiles), "hit_rate": round(1 - compiles / n, 3), "errors": len(errors)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=6)
    ap.add_argument("--workers", type=int, default=1, help="compile workers per replica")
    ap.add_argument("--setups", default="one,three-local,three-tier")
    ap.add_argument("--warm-repeat", type=int, default=10, help="times each job asks the mix when warm")
    a = ap.parse_args()
    bodies = []
    for f in sorted(glob.glob(os.path.join(ROOT, "examples", "*.json"))):
        prog = json.load(open(f))
        for t in TARGETS:
            bodies.append(json.dumps({"program": prog, "targets": [t]}).encode())
    results = []
    for setup in a.setups.split(","):
        replicas = 1 if setup == "one" else 3
        d = tempfile.mkdtemp(prefix="tlbench-")
        # the jobs all come from 127.0.0.1 (through haproxy too): no per-address share
        flags = ["--workers", str(a.workers), "--log-format", "off", "--max-compiles-per-client", "0"]
        try:
            subprocess.run([os.path.join(ROOT, "deploy", "cluster.sh"), "start", d, "--replicas",
                            str(replicas)] + ([] if setup == "three-tier" else ["--no-tier"]) +
                           ["--"] + flags, check=True, stdout=subprocess.DEVNULL)
            e = env_of(d)
            ports = [e[f"R{k}_PORT"] for k in range(1, replicas + 1)]
            for rnd, seed, repeat in (("cold", 1, 1), ("warm", 2, a.warm_repeat)):
                r = run_round(ports, bodies, a.jobs, seed, repeat)
                r.update(setup=setup, round=rnd, replicas=replicas)
                results.append(r)
                print(json.dumps(r), flush=True)
        finally:
            subprocess.run([os.path.join(ROOT, "deploy", "cluster.sh"), "stop", d])
            shutil.rmtree(d, ignore_errors=True)
    print("| set-up | round | requests | wall s | builds/s | compiles | hit rate | errors |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['setup']} | {r['round']} | {r['requests']} | {r['wall_s']} | {r['builds_per_s']} "
              f"| {r['compiles']} | {r['hit_rate']} | {r['errors']} |")


if __name__ == "__main__":
    sys.exit(main())
