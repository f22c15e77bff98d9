#!/usr/bin/env python3
"""Per-decision script cost measured inside Redis: the script text is wrapped in a function and
called N times in one EVAL (each call runs the whole script body, as EVALSHA does: every
top-level function statement, table and closure is created again), KEYS[1] set per iteration.
Time per decision = main-thread CPU delta (INFO cpu) / N, and the wall usec of the one EVAL / N.

usage: PORT=7391 python3 loop.py OLD_DIR NEW_DIR [rounds] [N] [workload,...]
(a scratch redis-server on PORT: every run FLUSHALLs it; e.g. OLD_DIR lua/testdata/main, NEW_DIR lua)
"""
import os, subprocess, sys, statistics, re

PORT = int(os.environ.get("PORT", "7391"))
CLI = ["redis-cli", "-p", str(PORT)]
NOW = "1767225600000000"


def cli(*args, inp=None):
    r = subprocess.run(CLI + list(args), capture_output=True, text=True, input=inp, check=True)
    return r.stdout.strip()


# name: (script, keys (first one gets the iteration appended when vary), vary, args)
WORKLOADS = {
    "tb_allow": ("gcra", ["b:"], True, [NOW, "1", "1000", "1000000", "1000", "1000", "0"]),
    "tb_deny": ("gcra", ["hot"], False, [NOW, "1", "1000000", "5000000", "5", "1000", "0"]),
    "tb_time": ("gcra", ["b:"], True, ["", "1", "1000", "1000000", "1000", "1000", "0"]),
    "lb_allow": ("gcra", ["b:"], True, [NOW, "1", "1000", "1000000", "1000", "1000", "1"]),
    "sl_allow": ("sliding_log", ["s:"], True, [NOW, "1", "1000000", "1000", "1000"]),
    "sl_deny": ("sliding_log", ["hot"], False, [NOW, "1", "1000000", "5", "1000"]),
    "sc_allow": ("sliding_counter", ["c:"], True, [NOW, "1", "1000000", "1000", "1000"]),
    "sc_deny": ("sliding_counter", ["hot"], False, [NOW, "1", "1000000", "5", "1000"]),
    "fw_allow": ("fixed_window", ["f:"], True, [NOW, "1", "1000000", "1000", "1000"]),
    "fw_deny": ("fixed_window", ["hot"], False, [NOW, "1", "1000000", "5", "1000"]),
    "multi_allow": ("multi", ["{m}a:", "{m}b"], True, [NOW, "1", "1000", "tb", "1000", "1000000", "1000", "fw", "1000000", "1000000", "0"]),
    "multi_deny": ("multi", ["{m}a", "{m}b"], False, [NOW, "1", "1000", "tb", "1000000", "5000000", "5", "fw", "1000000", "1000", "0"]),
    "peek": ("peek", ["b:"], True, [NOW, "1", "tb", "1000", "1000000", "1000"]),
    "dw": ("dedup_window", ["{d}z", "{d}m"], False, [NOW, "1000000", "e"]),
    "dwc": ("dedup_window_check", ["{d}z", "{d}m"], False, [NOW, "1000000", "e"]),
    "ds": ("dedup_set", ["{s}set"], False, ["0", "e"]),
    "floor": (None, ["x"], False, []),
}


def cpu():
    st = cli("INFO", "cpu")
    u = float(re.search(r"used_cpu_user_main_thread:([\d.]+)", st).group(1))
    s = float(re.search(r"used_cpu_sys_main_thread:([\d.]+)", st).group(1))
    return u + s


def wrap(src, vary, n):
    head = "local prefix = KEYS[1]\nlocal function body()\n"
    loop = "\nend\nfor i = 1, %d do\n" % n
    if vary:
        loop += "  KEYS[1] = prefix .. i\n"
    loop += "  body()\nend\nreturn 1\n"
    return head + src + loop


def run(sha, keys, args, n):
    cli("FLUSHALL")
    cli("CONFIG", "RESETSTAT")
    c0 = cpu()
    out = cli("EVALSHA", sha, str(len(keys)), *keys, *args)
    c1 = cpu()
    if out != "1":
        raise SystemExit("reply " + out)
    st = cli("INFO", "commandstats")
    m = re.search(r"cmdstat_evalsha:calls=(\d+),usec=(\d+)", st)
    return (c1 - c0) * 1e6 / n, int(m.group(2)) / n


def main():
    old, new = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 20000
    names = sys.argv[5].split(",") if len(sys.argv) > 5 else list(WORKLOADS)
    print("workload     cpu µs/decision old  new  median(new/old) [min max] | wall µs old new ratio")
    for name in names:
        script, keys, vary, args = WORKLOADS[name]
        shas = {}
        for w, d in (("old", old), ("new", new)):
            src = "" if script is None else open(os.path.join(d, script + ".lua")).read()
            shas[w] = cli("-x", "SCRIPT", "LOAD", inp=wrap(src, vary, n))
        res = {"old": [], "new": []}
        ratios, wratios = [], []
        for r in range(rounds):
            order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
            got = {}
            for w in order:
                got[w] = run(shas[w], keys, args, n)
                res[w].append(got[w])
            ratios.append(got["new"][0] / got["old"][0])
            wratios.append(got["new"][1] / got["old"][1])
        oc = statistics.median(x[0] for x in res["old"])
        nc = statistics.median(x[0] for x in res["new"])
        ow = statistics.median(x[1] for x in res["old"])
        nw = statistics.median(x[1] for x in res["new"])
        print(f"{name:12} {oc:6.2f} {nc:6.2f} {statistics.median(ratios):6.3f} [{min(ratios):.2f} {max(ratios):.2f}] | {ow:6.2f} {nw:6.2f} {statistics.median(wratios):6.3f}", flush=True)


main()
