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
step, saves output/checkpoint-<step>/model.json and exits with 143.
"""

import argparse
import csv
import json
import math
import os
import random
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


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


def save(directory, weights, bias, step, train_loss, eval_loss):
    os.makedirs(directory, exist_ok=True)
    model = {
        "kind": "linear_regression",
        "weights": weights,
        "bias": bias,
        "step": step,
        "train_loss": finite(train_loss),
        "eval_loss": finite(eval_loss),
    }
    path = os.path.join(directory, "model.json")
    with open(path + ".tmp", "w", encoding="utf-8") as out:
        json.dump(model, out, indent=2)
        out.write("\n")
    os.replace(path + ".tmp", path)
    return path


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
    parser.add_argument("--exit-code", type=int, default=0, help="exit with this code (tests)")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.batch_size < 1 or args.eval_every < 1 or args.step_seconds < 0:
        parser.error("--steps, --batch-size and --eval-every must be >= 1, --step-seconds >= 0")

    stop = {"requested": False}

    def on_term(signum, frame):
        stop["requested"] = True

    signal.signal(signal.SIGTERM, on_term)

    train = load(os.path.join(args.data, "train.csv"))
    evaluation = load(os.path.join(args.data, "eval.csv"))
    metrics = Metrics(os.environ.get("OVERBRAINER_METRICS"))
    rng = random.Random(args.seed)
    weights = [0.0] * len(train[0][0])
    bias = 0.0
    order = []
    train_loss = eval_loss = None

    metrics.write({"event": "begin", "max_steps": args.steps})
    print("training %d steps on %d rows" % (args.steps, len(train)), flush=True)
    step = 0
    for step in range(1, args.steps + 1):
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
        if stop["requested"]:
            break
        # Sleep in slices so SIGTERM is acted on within 50 ms.
        deadline = time.monotonic() + args.step_seconds
        while not stop["requested"] and step < args.steps:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(left, 0.05))
        if stop["requested"]:
            break

    if stop["requested"]:
        path = save(
            os.path.join(args.output, "checkpoint-%d" % step), weights, bias, step, train_loss, eval_loss
        )
        print("terminated at step %d; checkpoint saved to %s" % (step, path), file=sys.stderr, flush=True)
        return 143

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


if __name__ == "__main__":
    sys.exit(main())
