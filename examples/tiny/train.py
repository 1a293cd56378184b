#!/usr/bin/env python3
"""A tiny, honest trainer for trying Overbrainer: standard library only.

It fits a linear regression (3 features) to data/train.csv by mini-batch
gradient descent, so its loss really falls, and reports through Overbrainer's
trainer protocol: JSON lines appended to $OVERBRAINER_METRICS (see
python/overbrainer_metrics.py for the protocol; this file writes the lines
itself, as any training loop can). It evaluates on data/eval.csv every few
steps, writes output/model.json and output/README.txt, and exits 0.

    python3 train.py --steps 40 --step-seconds 0.5

--step-seconds slows each step down (0 for tests), so a demo run lasts long
enough to watch. On SIGTERM (Overbrainer's cancel) it stops after the current
step, saves output/checkpoint-<step>/ and exits with 143.

Snapshots: when the file named by $OVERBRAINER_SNAPSHOT exists at a step end
(its one line is the reason: requested, deadline, cost or disk), it saves
output/checkpoint-<step>/, writes snapshot.json next to that file, appends a
"snapshot" metrics line and exits 0. A checkpoint holds model.json and
trainer_state.json (the random generator's state and the shuffle order left),
so a run started with $OVERBRAINER_RESUME_FROM (or --resume-from) set to it
continues at the next step and ends with the same model, float for float, as
a run never stopped.

--save-every N also saves output/checkpoint-<step>/ every N steps while
training (built in a hidden temp directory, then renamed into place, so a
checkpoint-* directory is always whole); Overbrainer copies each one home
while the job runs.
"""

import argparse
import csv
import json
import math
import os
import random
import shutil
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

SNAPSHOT_REASONS = ("requested", "deadline", "cost", "disk")
# What a checkpoint holds beyond model.json: what a resume needs to continue exactly.
STATE_FILE = "trainer_state.json"
STATE_VERSION = 1


class ResumeError(Exception):
    """A checkpoint this script cannot continue from."""


class Metrics(object):
    """Appends protocol lines; nothing is written when $OVERBRAINER_METRICS is unset."""

    def __init__(self, path):
        self.path = path

    def write(self, record):
        if not self.path:
            return
        record = dict(record, time=time.time())
        # One write of a whole line, flushed: a reader never sees half of it.
        line = json.dumps(record, allow_nan=False, separators=(",", ":")) + "\n"
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(line)
            out.flush()


def finite(value):
    return value if value is not None and math.isfinite(value) else None


def load(path):
    with open(path, newline="", encoding="utf-8") as source:
        reader = csv.reader(source)
        next(reader)  # header
        return [([float(v) for v in row[:-1]], float(row[-1])) for row in reader if row]


def predict(weights, bias, x):
    return sum(w * v for w, v in zip(weights, x)) + bias


def mse(weights, bias, rows):
    return sum((predict(weights, bias, x) - y) ** 2 for x, y in rows) / len(rows)


def gradient(weights, bias, batch):
    grad_w = [0.0] * len(weights)
    grad_b = 0.0
    for x, y in batch:
        error = predict(weights, bias, x) - y
        for i, v in enumerate(x):
            grad_w[i] += 2.0 * error * v / len(batch)
        grad_b += 2.0 * error / len(batch)
    return grad_w, grad_b


def write_json(path, value):
    """Writes a JSON file whole: a temp file renamed over the name."""
    temp = "%s.%d.tmp" % (path, os.getpid())
    with open(temp, "w", encoding="utf-8") as out:
        json.dump(value, out, indent=2)
        out.write("\n")
        out.flush()
        os.fsync(out.fileno())
    os.replace(temp, path)


def save(directory, weights, bias, step, train_loss, eval_loss, state=None):
    """Writes model.json (and, for a checkpoint, trainer_state.json) in ``directory``."""
    os.makedirs(directory, exist_ok=True)
    if state is not None:
        write_json(os.path.join(directory, STATE_FILE), state)
    model = {
        "kind": "linear_regression",
        "weights": weights,
        "bias": bias,
        "step": step,
        "train_loss": finite(train_loss),
        "eval_loss": finite(eval_loss),
    }
    path = os.path.join(directory, "model.json")
    write_json(path, model)
    return path


def save_whole(directory, weights, bias, step, train_loss, eval_loss, state):
    """Saves a checkpoint in a hidden temp directory beside ``directory``, then renames it into
    place: a ``checkpoint-*`` directory is never seen half written."""
    if os.path.isdir(directory):
        return directory
    parent, name = os.path.split(directory)
    temp = os.path.join(parent, ".%s.%d.tmp" % (name, os.getpid()))
    shutil.rmtree(temp, ignore_errors=True)
    save(temp, weights, bias, step, train_loss, eval_loss, state)
    os.rename(temp, directory)
    return directory


def trainer_state(args, step, rng, order, train_loss, eval_loss):
    """All a resume needs besides the weights: the generator's state and the shuffle order left."""
    version, internal, gauss = rng.getstate()
    return {
        "version": STATE_VERSION,
        "step": step,
        "max_steps": args.steps,
        "seed": args.seed,
        "batch_size": args.batch_size,
        "lr": args.lr,
        "rng": [version, list(internal), gauss],
        "order": list(order),
        "train_loss": train_loss,
        "eval_loss": eval_loss,
    }


def load_checkpoint(directory, rows):
    """weights, bias, step, rng state, order, train_loss, eval_loss and the saved state, or ResumeError."""
    if not os.path.isdir(directory):
        raise ResumeError("it is not a directory")
    try:
        with open(os.path.join(directory, "model.json"), encoding="utf-8") as source:
            model = json.load(source)
        with open(os.path.join(directory, STATE_FILE), encoding="utf-8") as source:
            state = json.load(source)
    except (OSError, ValueError) as error:
        raise ResumeError("%s (a checkpoint holds model.json and %s)" % (error, STATE_FILE))
    try:
        weights = [float(w) for w in model["weights"]]
        bias = float(model["bias"])
        step = int(state["step"])
        version, internal, gauss = state["rng"]
        rng_state = (int(version), tuple(int(v) for v in internal), gauss)
        order = [int(i) for i in state["order"]]
    except (KeyError, TypeError, ValueError) as error:
        raise ResumeError("%s in it is malformed (%s)" % (STATE_FILE, error))
    if state.get("version") != STATE_VERSION or int(model.get("step", -1)) != step or step < 0:
        raise ResumeError("its model.json and %s do not belong together" % STATE_FILE)
    if any(i < 0 or i >= rows for i in order):
        raise ResumeError("its shuffle order does not fit this data (%d rows)" % rows)
    return weights, bias, step, rng_state, order, state.get("train_loss"), state.get("eval_loss"), state


def snapshot_request(path):
    """The reason of the snapshot request at ``path``, or None when there is none."""
    if not path:
        return None
    try:
        with open(path, "rb") as source:
            word = source.read(256).decode("utf-8", "replace").strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        return "requested" if os.path.lexists(path) else None  # there, but unreadable
    return word if word in SNAPSHOT_REASONS else "requested"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40, help="optimizer steps (default 40)")
    parser.add_argument("--step-seconds", type=float, default=0.5, help="sleep per step (default 0.5)")
    parser.add_argument("--lr", type=float, default=0.3, help="initial learning rate (linear decay)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--eval-every", type=int, default=5, help="evaluate every N steps")
    parser.add_argument("--data", default=os.path.join(HERE, "data"))
    parser.add_argument("--output", default="output", help="output directory (default ./output)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--save-every", type=int, default=0, help="save output/checkpoint-<step>/ every N steps (0: never)"
    )
    parser.add_argument("--exit-code", type=int, default=0, help="exit with this code (tests)")
    parser.add_argument(
        "--hold-at",
        type=int,
        default=0,
        metavar="STEP",
        help="after this step, wait until --hold-file exists, still honouring a snapshot request and SIGTERM (tests)",
    )
    parser.add_argument("--hold-file", default="go", help="the file that ends --hold-at's wait (default ./go)")
    parser.add_argument(
        "--resume-from",
        default=os.environ.get("OVERBRAINER_RESUME_FROM") or None,
        metavar="DIR",
        help="continue from this checkpoint (default $OVERBRAINER_RESUME_FROM)",
    )
    args = parser.parse_args(argv)
    if args.steps < 1 or args.batch_size < 1 or args.eval_every < 1 or args.step_seconds < 0 or args.save_every < 0:
        parser.error("--steps, --batch-size and --eval-every must be >= 1, --step-seconds and --save-every >= 0")

    stop = {"requested": False}

    def on_term(signum, frame):
        stop["requested"] = True

    signal.signal(signal.SIGTERM, on_term)

    train = load(os.path.join(args.data, "train.csv"))
    evaluation = load(os.path.join(args.data, "eval.csv"))
    metrics = Metrics(os.environ.get("OVERBRAINER_METRICS"))
    request_path = os.environ.get("OVERBRAINER_SNAPSHOT") or None
    rng = random.Random(args.seed)
    weights = [0.0] * len(train[0][0])
    bias = 0.0
    order = []
    train_loss = eval_loss = None
    start = 0
    if args.resume_from:
        try:
            weights, bias, start, rng_state, order, train_loss, eval_loss, saved = load_checkpoint(
                args.resume_from, len(train)
            )
        except ResumeError as error:
            print(
                "train.py: cannot resume from %s: %s; run it from a checkpoint this script saved, or "
                "without --resume-from / $OVERBRAINER_RESUME_FROM to start over" % (args.resume_from, error),
                file=sys.stderr,
                flush=True,
            )
            return 2
        rng.setstate(rng_state)
        for name in ("max_steps", "seed", "batch_size", "lr"):
            now = args.steps if name == "max_steps" else getattr(args, name)
            if saved.get(name) != now:
                print(
                    "train.py: the checkpoint was trained with %s %s, this run has %s: "
                    "it continues, but not as the first run would have" % (name, saved.get(name), now),
                    file=sys.stderr,
                    flush=True,
                )

    def snapshot_due(step):
        # At the last step the training is complete: it ends as usual, whatever is asked.
        return snapshot_request(request_path) if step < args.steps else None

    metrics.write({"event": "begin", "max_steps": args.steps})
    if args.resume_from:
        print("resuming from %s at step %d" % (args.resume_from, start + 1), flush=True)
    print("training %d steps on %d rows" % (args.steps, len(train)), flush=True)
    step = start
    reason = None
    for step in range(start + 1, args.steps + 1):
        if len(order) < args.batch_size:
            order = list(range(len(train)))
            rng.shuffle(order)
        batch = [train[order.pop()] for _ in range(args.batch_size)]
        lr = args.lr * (1.0 - 0.9 * (step - 1) / max(1, args.steps - 1))
        grad_w, grad_b = gradient(weights, bias, batch)
        grad_norm = math.sqrt(sum(g * g for g in grad_w) + grad_b * grad_b)
        weights = [w - lr * g for w, g in zip(weights, grad_w)]
        bias -= lr * grad_b
        train_loss = mse(weights, bias, batch)
        epoch = step * args.batch_size / len(train)
        metrics.write(
            {
                "event": "log",
                "step": step,
                "epoch": round(epoch, 4),
                "max_steps": args.steps,
                "loss": finite(train_loss),
                "learning_rate": lr,
                "grad_norm": finite(grad_norm),
            }
        )
        print("step %d/%d loss %.4f lr %.3g" % (step, args.steps, train_loss, lr), flush=True)
        if step % args.eval_every == 0 or step == args.steps:
            eval_loss = mse(weights, bias, evaluation)
            metrics.write(
                {
                    "event": "log",
                    "step": step,
                    "epoch": round(epoch, 4),
                    "max_steps": args.steps,
                    "eval_loss": finite(eval_loss),
                }
            )
            print("step %d eval_loss %.4f" % (step, eval_loss), flush=True)
        if args.save_every and step % args.save_every == 0 and step < args.steps:
            state = trainer_state(args, step, rng, order, train_loss, eval_loss)
            save_whole(os.path.join(args.output, "checkpoint-%d" % step), weights, bias, step, train_loss, eval_loss, state)
        if stop["requested"]:
            break
        # The step has ended: a snapshot request is honoured now, or while waiting for the
        # next step. Sleep in slices so SIGTERM and a request are acted on within 50 ms.
        reason = snapshot_due(step)
        deadline = time.monotonic() + args.step_seconds
        held = step == args.hold_at
        while reason is None and not stop["requested"] and step < args.steps:
            left = deadline - time.monotonic()
            if held and not os.path.exists(args.hold_file):
                left = 0.05
            elif left <= 0:
                break
            time.sleep(min(left, 0.05))
            reason = snapshot_due(step)
        if stop["requested"] or reason is not None:
            break

    if stop["requested"]:
        path = save(
            os.path.join(args.output, "checkpoint-%d" % step),
            weights,
            bias,
            step,
            train_loss,
            eval_loss,
            trainer_state(args, step, rng, order, train_loss, eval_loss),
        )
        print("terminated at step %d; checkpoint saved to %s" % (step, path), file=sys.stderr, flush=True)
        return 143

    if reason is not None:
        state = trainer_state(args, step, rng, order, train_loss, eval_loss)
        return snapshot(args, metrics, request_path, reason, step, weights, bias, train_loss, eval_loss, state)

    if eval_loss is None:  # resumed from a checkpoint already at the last step
        eval_loss = mse(weights, bias, evaluation)
    if train_loss is None:
        train_loss = mse(weights, bias, train)
    path = save(args.output, weights, bias, step, train_loss, eval_loss)
    with open(os.path.join(args.output, "README.txt"), "w", encoding="utf-8") as out:
        out.write(
            "A linear regression trained by Overbrainer's tiny example.\n"
            "model.json: weights %s, bias %.4f after %d steps; train loss %.4f, eval loss %.4f.\n"
            "The data was generated with weights [2.0, -3.0, 0.5] and bias 1.0.\n"
            % ([round(w, 4) for w in weights], bias, step, train_loss, eval_loss)
        )
    metrics.write({"event": "end"})
    print("done: eval_loss %.4f; model in %s" % (eval_loss, path), flush=True)
    return args.exit_code


def snapshot(args, metrics, request_path, reason, step, weights, bias, train_loss, eval_loss, state):
    """Saves the checkpoint, then snapshot.json naming it (relative to the run directory, the
    request's directory), then the metrics line; the run ends `stopped` with it."""
    run_dir = os.path.dirname(os.path.abspath(request_path))
    directory = os.path.join(args.output, "checkpoint-%d" % step)
    checkpoint = os.path.relpath(os.path.realpath(directory), os.path.realpath(run_dir)).replace(os.sep, "/")
    if checkpoint == os.curdir or checkpoint.split("/")[0] == os.pardir:
        print(
            "train.py: --output %s is outside the run directory %s, so Overbrainer cannot bring the "
            "snapshot home: use a relative --output" % (args.output, run_dir),
            file=sys.stderr,
            flush=True,
        )
        return 1
    save(directory, weights, bias, step, train_loss, eval_loss, state)
    write_json(
        os.path.join(run_dir, "snapshot.json"),
        {"checkpoint": checkpoint, "step": step, "time": time.time(), "reason": reason},
    )
    metrics.write({"event": "snapshot", "step": step, "checkpoint": checkpoint, "reason": reason})
    print("snapshot (%s) at step %d saved in %s; stopping" % (reason, step, checkpoint), flush=True)
    return 0

if __name__ == "__main__":
    sys.exit(main())
