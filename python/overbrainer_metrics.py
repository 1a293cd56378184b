"""Overbrainer's trainer protocol, in one file.

A training job tells Overbrainer how it is doing by appending JSON lines to the
file named by ``$OVERBRAINER_METRICS``::

    {"event": "begin", "time": T, "max_steps": N}
    {"event": "log", "time": T, "step": S, "epoch": E, "max_steps": N,
     "loss": L, "eval_loss": V, "learning_rate": R, "grad_norm": G}
    {"event": "end", "time": T}

``time`` is Unix seconds; ``loss``, ``eval_loss``, ``learning_rate`` and
``grad_norm`` appear when known; a value that is not a finite number is written
as ``null``. Evaluation progress is ``{"event": "eval", "time", "step", "done",
"total"}`` (at most every 2 s). Each line is written whole and flushed at once,
so the client charts it within a fraction of a second.

This file is, at the same time:

* an Axolotl plugin -- list ``overbrainer_metrics.OverbrainerMetricsPlugin``
  under ``plugins:`` in the Axolotl config (with this file on ``PYTHONPATH``);
* a Hugging Face ``transformers.TrainerCallback`` --
  ``Trainer(..., callbacks=[OverbrainerMetricsCallback()])``;
* a helper for any other loop -- ``MetricsWriter().log(step=..., loss=...)``.

It imports neither transformers nor axolotl unless they are installed, so it
can be imported (and tested) with the standard library alone.
"""

import json
import math
import os
import sys
import time

__all__ = [
    "MetricsWriter",
    "OverbrainerMetricsCallback",
    "OverbrainerMetricsPlugin",
    "METRICS_ENV",
]

METRICS_ENV = "OVERBRAINER_METRICS"

# The log keys of the protocol, as the Trainer names them.
LOG_KEYS = ("loss", "eval_loss", "learning_rate", "grad_norm")

# Evaluation progress lines are written at most this often (seconds).
EVAL_PROGRESS_INTERVAL_S = 2.0

try:  # pragma: no cover - depends on the environment
    from transformers import TrainerCallback as _CallbackBase
except Exception:  # transformers missing (or broken): a plain base class

    class _CallbackBase(object):
        """Stands in for transformers.TrainerCallback when it is not installed."""


try:  # pragma: no cover - depends on the environment
    from axolotl.integrations.base import BasePlugin as _PluginBase
except Exception:  # axolotl missing: a plain base class

    class _PluginBase(object):
        """Stands in for axolotl.integrations.base.BasePlugin when it is not installed."""

        def __init__(self, *args, **kwargs):
            pass


def _number(value):
    """A finite float, or None (NaN, infinities, tensors that are not scalars, text)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        if hasattr(value, "item"):  # a 0-d tensor or numpy scalar
            value = value.item()
        number = float(value)
    except (TypeError, ValueError, RuntimeError):
        return None
    return number if math.isfinite(number) else None


def _int(value):
    number = _number(value)
    if number is None or number < 0 or number != int(number):
        return None
    return int(number)


class MetricsWriter(object):
    """Appends protocol lines to ``path`` (default: ``$OVERBRAINER_METRICS``).

    Without a path it writes nothing (and says so once on stderr), so a script
    run outside Overbrainer still trains.
    """

    def __init__(self, path=None, clock=time.time):
        self.path = path if path is not None else os.environ.get(METRICS_ENV)
        self.clock = clock
        self._warned = False

    def write(self, record):
        """Writes one line: one write call, flushed, so a reader sees it whole or not at all."""
        if not self.path:
            if not self._warned:
                self._warned = True
                sys.stderr.write(
                    "overbrainer_metrics: %s is not set; no metrics are written\n" % METRICS_ENV
                )
            return
        line = json.dumps(record, allow_nan=False, separators=(",", ":")) + "\n"
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(line)
            out.flush()

    def begin(self, max_steps=None):
        self.write({"event": "begin", "time": self.clock(), "max_steps": _int(max_steps)})

    def log(self, step, epoch=None, max_steps=None, **values):
        """A ``log`` line; ``values`` among loss, eval_loss, learning_rate, grad_norm."""
        record = {
            "event": "log",
            "time": self.clock(),
            "step": _int(step) or 0,
            "epoch": _number(epoch),
            "max_steps": _int(max_steps),
        }
        for key in LOG_KEYS:
            if key in values:
                record[key] = _number(values[key])
        self.write(record)

    def eval_progress(self, step, done, total=None):
        self.write(
            {
                "event": "eval",
                "time": self.clock(),
                "step": _int(step),
                "done": _int(done),
                "total": _int(total),
            }
        )

    def end(self):
        self.write({"event": "end", "time": self.clock()})


class OverbrainerMetricsCallback(_CallbackBase):
    """A Hugging Face TrainerCallback writing the protocol (world process zero only)."""

    def __init__(self, path=None, writer=None):
        super(OverbrainerMetricsCallback, self).__init__()
        self.writer = writer if writer is not None else MetricsWriter(path)
        self._eval_batches = 0
        self._eval_written_at = None

    @staticmethod
    def _is_writer(state):
        # Under DDP every rank runs the callback; only rank zero writes.
        return bool(getattr(state, "is_world_process_zero", True))

    def on_train_begin(self, args, state, control, **kwargs):
        if self._is_writer(state):
            self.writer.begin(getattr(state, "max_steps", None))
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not self._is_writer(state):
            return control
        logs = logs or {}
        values = dict((key, logs[key]) for key in LOG_KEYS if key in logs)
        epoch = getattr(state, "epoch", None)
        if epoch is None:
            epoch = logs.get("epoch")
        self.writer.log(
            step=getattr(state, "global_step", 0),
            epoch=epoch,
            max_steps=getattr(state, "max_steps", None),
            **values
        )
        return control

    def on_prediction_step(self, args, state, control, **kwargs):
        if not self._is_writer(state):
            return control
        self._eval_batches += 1
        now = self.writer.clock()
        if self._eval_written_at is not None and now - self._eval_written_at < EVAL_PROGRESS_INTERVAL_S:
            return control
        self._eval_written_at = now
        total = None
        loader = kwargs.get("eval_dataloader")
        try:
            total = len(loader) if loader is not None else None
        except TypeError:
            total = None
        self.writer.eval_progress(getattr(state, "global_step", 0), self._eval_batches, total)
        return control

    def on_evaluate(self, args, state, control, **kwargs):
        # The next evaluation counts its batches from zero again.
        self._eval_batches = 0
        self._eval_written_at = None
        return control

    def on_train_end(self, args, state, control, **kwargs):
        if self._is_writer(state):
            self.writer.end()
        return control


class OverbrainerMetricsPlugin(_PluginBase):
    """The Axolotl plugin: adds :class:`OverbrainerMetricsCallback` to Axolotl's trainer."""

    def get_input_args(self):
        # No config keys of its own.
        return None

    def add_callbacks_post_trainer(self, cfg, trainer):
        return [OverbrainerMetricsCallback()]
