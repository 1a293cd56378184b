"""The study process's CPU per reported value: python/overbrainer_study.py driven as a sweep drives
it (open, then per trial: ask, one report per evaluation, tell), the process's own user + sys CPU
read from /proc before and after the trials.

  /usr/bin/python3 bench/sweepFiguresStudy.py [SCRIPT ...] [--rounds N] [--trials N] [--reports N]

Each SCRIPT (default: the repository's python/overbrainer_study.py) is measured in turn, round
after round, on a storage of its own, so that two versions (`git show main:python/...` into a
file) are compared side by side on the same machine load.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def one(script, trials, reports):
    d = tempfile.mkdtemp(prefix="studycpu-")
    p = subprocess.Popen(
        [sys.executable, script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    ready = json.loads(p.stdout.readline())
    assert ready.get("ready"), ready
    n = [0]

    def req(op, **kw):
        n[0] += 1
        p.stdin.write(json.dumps(dict(id=n[0], op=op, **kw)) + "\n")
        p.stdin.flush()
        answer = json.loads(p.stdout.readline())
        assert answer.get("ok"), answer
        return answer

    req(
        "open",
        storage="sqlite:///" + os.path.join(d, "study.db"),
        study="s",
        direction="minimize",
        sampler="random",
        sampler_seed=1,
        pruner="hyperband",
        min_resource=5,
        max_resource=reports * 5,
        params={"lr": {"kind": "float", "low": 1e-4, "high": 1e-1, "log": True, "step": None}},
    )
    before = cpu_s(p.pid)
    t0 = time.time()
    pruned = 0
    for t in range(trials):
        number = req("ask")["number"]
        said = False
        for s in range(1, reports + 1):
            # A curve per trial: some are pruned at their rungs (the pruner's work is counted).
            value = (1.0 + 0.1 * ((t * 7) % 5)) / s
            if req("report", number=number, step=s * 5, value=value)["should_prune"]:
                said = True
        pruned += said
        req("tell", number=number, state="complete", value=0.1)
    after = cpu_s(p.pid)
    wall = time.time() - t0
    req("close")
    p.wait()
    return {"cpu_s": after - before, "wall_s": wall, "pruned": pruned, "files": sorted(os.listdir(d))}


def main():
    args = sys.argv[1:]

    def opt(name, default):
        if name in args:
            i = args.index(name)
            value = int(args[i + 1])
            del args[i : i + 2]
            return value
        return default

    rounds = opt("--rounds", 3)
    trials = opt("--trials", 12)
    reports = opt("--reports", 60)
    scripts = args or [os.path.join(HERE, "..", "python", "overbrainer_study.py")]
    got = {s: [] for s in scripts}
    for r in range(rounds):
        for s in scripts:
            m = one(s, trials, reports)
            got[s].append(m)
            print(
                "round %d %s: %.2f CPU-s for %d reports (%.2f ms each), wall %.2f s, %d trials said pruned, files %s"
                % (r + 1, s, m["cpu_s"], trials * reports, 1000 * m["cpu_s"] / (trials * reports), m["wall_s"], m["pruned"], m["files"]),
                flush=True,
            )
    for s, ms in got.items():
        cpu = sorted(m["cpu_s"] for m in ms)
        print(
            "%s: median %.2f CPU-s per %d reports (%.2f ms each; rounds %s)"
            % (s, cpu[len(cpu) // 2], trials * reports, 1000 * cpu[len(cpu) // 2] / (trials * reports), ", ".join("%.2f" % c for c in cpu))
        )


if __name__ == "__main__":
    main()
