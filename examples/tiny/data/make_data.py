"""Regenerates train.csv and eval.csv (deterministic: same files on every run).

    python3 make_data.py

A linear target y = 2.0*x1 - 3.0*x2 + 0.5*x3 + 1.0 plus Gaussian noise
(sigma 0.1), features uniform in [-1, 1]: a regression a few hundred steps of
gradient descent learn well, so the loss visibly falls.
"""

import os
import random

WEIGHTS = (2.0, -3.0, 0.5)
BIAS = 1.0
NOISE = 0.1


def rows(count, rng):
    for _ in range(count):
        x = [rng.uniform(-1.0, 1.0) for _ in WEIGHTS]
        y = sum(w * v for w, v in zip(WEIGHTS, x)) + BIAS + rng.gauss(0.0, NOISE)
        yield x + [y]


def write(path, count, rng):
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        out.write("x1,x2,x3,y\n")
        for row in rows(count, rng):
            out.write(",".join("%.6f" % v for v in row) + "\n")


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    rng = random.Random(20260929)
    write(os.path.join(here, "train.csv"), 320, rng)
    write(os.path.join(here, "eval.csv"), 80, rng)
