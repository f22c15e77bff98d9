#!/usr/bin/env python3
"""Alternating old/new script benchmark on a scratch redis-server.

usage: PORT=7391 python3 evalsha.py OLD_DIR NEW_DIR [rounds] [n] [workload,...]
(a scratch redis-server on PORT: every run FLUSHALLs it; redis-benchmark from redis-tools)
Per run: FLUSHALL, CONFIG RESETSTAT, redis-benchmark EVALSHA, then commandstats usec_per_call.
"""
import os, subprocess, sys, statistics, time, re

PORT = int(os.environ.get("PORT", "7391"))
CLI = ["redis-cli", "-p", str(PORT)]
NOW = "1767225600000000"


def cli(*args, inp=None):
    return subprocess.run(CLI + list(args), capture_output=True, text=True, input=inp, check=True).stdout.strip()


def load(path):
    with open(path) as f:
        src = f.read()
    return subprocess.run(CLI + ["-x", "SCRIPT", "LOAD"], input=src, capture_output=True, text=True, check=True).stdout.strip()


R = "__rand_int__"
# name: (script, keys, args)
WORKLOADS = {
    "tb_allow": ("gcra", ["b:" + R], [NOW, "1", "1000", "1000000", "1000", "1000", "0"]),
    "tb_deny": ("gcra", ["hot"], [NOW, "1", "1000000", "5000000", "5", "1000", "0"]),
    "tb_time": ("gcra", ["b:" + R], ["", "1", "1000", "1000000", "1000", "1000", "0"]),
    "lb_allow": ("gcra", ["b:" + R], [NOW, "1", "1000", "1000000", "1000", "1000", "1"]),
    "sl_allow": ("sliding_log", ["s:" + R], [NOW, "1", "1000000", "1000", "1000"]),
    "sl_deny": ("sliding_log", ["hot"], [NOW, "1", "1000000", "5", "1000"]),
    "sc_allow": ("sliding_counter", ["c:" + R], [NOW, "1", "1000000", "1000", "1000"]),
    "sc_deny": ("sliding_counter", ["hot"], [NOW, "1", "1000000", "5", "1000"]),
    "fw_allow": ("fixed_window", ["f:" + R], [NOW, "1", "1000000", "1000", "1000"]),
    "fw_deny": ("fixed_window", ["hot"], [NOW, "1", "1000000", "5", "1000"]),
    "multi_allow": ("multi", ["{m}a:" + R, "{m}b:" + R], [NOW, "1", "1000", "tb", "1000", "1000000", "1000", "fw", "1000000", "1000", "0"]),
    "multi_deny": ("multi", ["{m}a", "{m}b"], [NOW, "1", "1000", "tb", "1000000", "5000000", "5", "fw", "1000000", "1000", "0"]),
    "peek": ("peek", ["b:" + R], [NOW, "1", "tb", "1000", "1000000", "1000"]),
    "dw": ("dedup_window", ["{d}z", "{d}m"], [NOW, "1000000", "e" + R]),
    "dwc": ("dedup_window_check", ["{d}z", "{d}m"], [NOW, "1000000", "e" + R]),
    "ds": ("dedup_set", ["{s}set"], ["0", "e" + R]),
    "floor": (None, [], []),
}


def cpu():
    st = cli("INFO", "cpu")
    u = float(re.search(r"used_cpu_user_main_thread:([\d.]+)", st).group(1))
    s = float(re.search(r"used_cpu_sys_main_thread:([\d.]+)", st).group(1))
    return u + s


def run(sha, keys, args, n):
    cli("FLUSHALL")
    cli("CONFIG", "RESETSTAT")
    cmd = ["redis-benchmark", "-p", str(PORT), "-n", str(n), "-c", "4", "-P", "4", "-r", "1000000", "-q",
           "EVALSHA", sha, str(len(keys))] + keys + args
    c0 = cpu()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    c1 = cpu()
    m = re.search(r"([\d.]+) requests per second", out)
    rps = float(m.group(1)) if m else 0.0
    st = cli("INFO", "commandstats")
    m = re.search(r"cmdstat_evalsha:calls=(\d+),usec=(\d+),usec_per_call=([\d.]+),rejected_calls=(\d+),failed_calls=(\d+)", st)
    if not m or int(m.group(5)) > 0:
        raise SystemExit("bad stats: " + st + out)
    return float(m.group(3)), rps, (c1 - c0) * 1e6 / n


def main():
    old, new = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 40000
    names = sys.argv[5].split(",") if len(sys.argv) > 5 else list(WORKLOADS)
    floor = cli("SCRIPT", "LOAD", "return 1")
    print("workload: script usec_per_call old new median(new/old) | server main-thread CPU µs/call old new median ratio | rps ratio | per-round script ratios")
    for name in names:
        script, keys, args = WORKLOADS[name]
        if script is None:
            shas = {"old": floor, "new": floor}
        else:
            shas = {"old": load(os.path.join(old, script + ".lua")), "new": load(os.path.join(new, script + ".lua"))}
        res = {"old": [], "new": []}
        ratios, cratios = [], []
        for r in range(rounds):
            order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
            got = {}
            for w in order:
                got[w] = run(shas[w], keys, args, n)
                res[w].append(got[w])
            ratios.append(got["new"][0] / got["old"][0])
            cratios.append(got["new"][2] / got["old"][2])
        ou = statistics.median(x[0] for x in res["old"])
        nu = statistics.median(x[0] for x in res["new"])
        orps = statistics.median(x[1] for x in res["old"])
        nrps = statistics.median(x[1] for x in res["new"])
        oc = statistics.median(x[2] for x in res["old"])
        nc = statistics.median(x[2] for x in res["new"])
        print(f"{name:12} {ou:7.2f} {nu:7.2f} {statistics.median(ratios):7.3f}   cpu {oc:6.2f} {nc:6.2f} {statistics.median(cratios):6.3f}  rps {nrps/orps:6.3f}  "
              + " ".join(f"{x:.2f}" for x in ratios), flush=True)


main()
