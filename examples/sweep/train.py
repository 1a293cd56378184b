#!/usr/bin/env python3
"""A sweep's test bed: a job whose loss over steps is a known function of its parameters.

Standard library only, seconds per trial. Its parameters are a learning rate and a LoRA rank,
read the three ways a sweep hands them to a job, the later winning: params.json beside the job,
the environment (OVERBRAINER_PARAM_LEARNING_RATE, OVERBRAINER_PARAM_LORA_R), and the command
line (--learning-rate, --lora-r: the placeholders {learning_rate} and {lora_r} of a command).

The loss it reports is, at step s of N,

    final + (START - final) * exp(-s / tau)  (+ noise, standard deviation NOISE * the curve's height)
    final = FLOOR + 0.3 * (log10(learning_rate) + 3.5)^2 + 0.02 * (log2(lora_r) - 4)^2
    tau   = N / 12

so the best region is known: learning_rate near 10^-3.5 (3.2e-4) and lora_r 16, where the final
loss is FLOOR (0.1); every curve falls at the same pace, so a trial away from the best is behind
it from its first evaluation on, by the same order as at its end (what lets a pruner stop it early:
curves that cross, a faster learner ahead early and behind at the end, would have a pruner cut the
best trial at its first rung). The noise is seeded by --seed and the parameters, so a trial is
repeatable.

It writes the metrics protocol to $OVERBRAINER_METRICS as any job does (a begin line, a "loss"
line each step, an "eval_loss" line every --eval-every steps and at the last, an end line), and
output/result.json with its parameters and final eval_loss. On SIGTERM (Overbrainer stopping a
pruned trial) it stops after the current step, writes what it has and exits 143.

    python3 train.py --steps 60 --step-seconds 0.05 --learning-rate 3e-4 --lora-r 16
"""

import argparse
import hashlib
import json
import math
import os
import random
import signal
import sys
import time

START = 2.5
FLOOR = 0.1
NOISE = 0.01
DEFAULTS = {"learning_rate": 1e-3, "lora_r": 8}


def final_loss(learning_rate, lora_r):
    return FLOOR + 0.3 * (math.log10(learning_rate) + 3.5) ** 2 + 0.02 * (math.log2(lora_r) - 4) ** 2


def tau(steps):
    return steps / 12.0


def curve(learning_rate, lora_r, step, steps):
    final = final_loss(learning_rate, lora_r)
    return final + (START - final) * math.exp(-step / tau(steps))


class Metrics(object):
    """Appends protocol lines, each whole in one write; nothing when $OVERBRAINER_METRICS is unset."""

    def __init__(self, path):
        self.path = path

    def write(self, record):
        if not self.path:
            return
        line = json.dumps(dict(record, time=time.time()), allow_nan=False, separators=(",", ":")) + "\n"
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(line)
            out.flush()


def read_params(args):
    """params.json, then OVERBRAINER_PARAM_*, then the command line: the later wins."""
    params = dict(DEFAULTS)
    path = args.params
    if os.path.exists(path):
        with open(path, encoding="utf-8") as source:
            given = json.load(source)
        for name in DEFAULTS:
            if name in given:
                params[name] = given[name]
    for name in DEFAULTS:
        value = os.environ.get("OVERBRAINER_PARAM_" + name.upper())
        if value not in (None, ""):
            params[name] = value
    if args.learning_rate is not None:
        params["learning_rate"] = args.learning_rate
    if args.lora_r is not None:
        params["lora_r"] = args.lora_r
    learning_rate = float(params["learning_rate"])
    lora_r = int(float(params["lora_r"]))
    if not (learning_rate > 0 and math.isfinite(learning_rate)) or lora_r < 1:
        raise SystemExit("train.py: learning_rate must be > 0 and lora_r >= 1 (got %r, %r)" % (learning_rate, lora_r))
    return learning_rate, lora_r


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60, help="steps (default 60)")
    parser.add_argument("--step-seconds", type=float, default=0.05, help="sleep per step (default 0.05)")
    parser.add_argument("--eval-every", type=int, default=5, help="an eval_loss every N steps (default 5)")
    parser.add_argument("--learning-rate", type=float, default=None)
    parser.add_argument("--lora-r", type=int, default=None)
    parser.add_argument("--params", default="params.json", help="the sweep's params.json (default ./params.json)")
    parser.add_argument("--output", default="output", help="output directory (default ./output)")
    parser.add_argument("--seed", type=int, default=0, help="the noise's seed, with the parameters")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.eval_every < 1 or args.step_seconds < 0:
        parser.error("--steps and --eval-every must be >= 1, --step-seconds >= 0")
    learning_rate, lora_r = read_params(args)

    stop = {"requested": False}

    def on_term(signum, frame):
        stop["requested"] = True

    signal.signal(signal.SIGTERM, on_term)

    key = "%d:%r:%d" % (args.seed, learning_rate, lora_r)
    rng = random.Random(int(hashlib.sha256(key.encode()).hexdigest()[:16], 16))
    metrics = Metrics(os.environ.get("OVERBRAINER_METRICS"))
    metrics.write({"event": "begin", "max_steps": args.steps})
    eval_loss = None
    step = 0
    for step in range(1, args.steps + 1):
        loss = curve(learning_rate, lora_r, step, args.steps)
        noisy = loss * (1 + rng.gauss(0, NOISE))
        metrics.write({"event": "log", "step": step, "max_steps": args.steps, "loss": round(noisy, 6),
                       "learning_rate": learning_rate})
        if step % args.eval_every == 0 or step == args.steps:
            eval_loss = round(loss * (1 + rng.gauss(0, NOISE)), 6)
            metrics.write({"event": "log", "step": step, "max_steps": args.steps, "eval_loss": eval_loss})
        if args.step_seconds > 0:
            time.sleep(args.step_seconds)
        if stop["requested"]:
            break

    os.makedirs(args.output, exist_ok=True)
    with open(os.path.join(args.output, "result.json"), "w", encoding="utf-8") as out:
        json.dump({"learning_rate": learning_rate, "lora_r": lora_r, "steps": step, "eval_loss": eval_loss,
                   "stopped": stop["requested"]}, out, indent=2)
        out.write("\n")
    metrics.write({"event": "end"})
    return 143 if stop["requested"] else 0


if __name__ == "__main__":
    sys.exit(main())
