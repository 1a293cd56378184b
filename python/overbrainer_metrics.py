"""Overbrainer's trainer protocol, in one file.

Metrics. A training job tells Overbrainer how it is doing by appending JSON
lines to the file named by ``$OVERBRAINER_METRICS``::

    {"event": "begin", "time": T, "max_steps": N}
    {"event": "log", "time": T, "step": S, "epoch": E, "max_steps": N,
     "loss": L, "eval_loss": V, "learning_rate": R, "grad_norm": G}
    {"event": "end", "time": T}

``time`` is Unix seconds; ``loss``, ``eval_loss``, ``learning_rate`` and
``grad_norm`` appear when known; a value that is not a finite number is written
as ``null``. Evaluation progress is ``{"event": "eval", "time", "step", "done",
"total"}`` (at most every 2 s). Each line is written whole and flushed at once,
so the client charts it within a fraction of a second.

Snapshots (stop and save). ``$OVERBRAINER_SNAPSHOT`` names
``<run dir>/snapshot.request``. When that file exists, Overbrainer (``train
stop``, the cost cap, the deadline, a disk about to fill) asks the job to stop
with its training saved. The file holds one line, the reason: ``requested``,
``deadline``, ``cost`` or ``disk`` (anything else reads as ``requested``). A
trainer looks for it at each step end and, when it is there:

1. saves a checkpoint inside the run directory (the Trainer's
   ``<output_dir>/checkpoint-<step>``);
2. writes ``<run dir>/snapshot.json`` atomically (a temp file renamed over the
   name)::

       {"checkpoint": "output/checkpoint-12", "step": 12, "time": T, "reason": "cost"}

   ``checkpoint`` is relative to the run directory (the directory of
   ``$OVERBRAINER_SNAPSHOT``, which is also the job's working directory);
3. appends ``{"event": "snapshot", "time", "step", "checkpoint", "reason"}`` to
   the metrics (instead of ``end``), stops training and exits 0.

The run then ends ``stopped``, and Overbrainer brings that checkpoint home
(other ``checkpoint-*`` directories stay on the pod). A request seen at the
last step changes nothing: the training is complete and ends as usual. Under
DDP rank 0 reads the request and broadcasts its decision, so every rank stops
at the same step; only rank 0 writes.

Resume. A run resumed from a stopped one finds that checkpoint in
``<run dir>/resume/checkpoint-<step>/``, named (absolute) by
``$OVERBRAINER_RESUME_FROM``. The trainer loads it and continues at the next
step with the same ``max_steps``: ``Trainer.train(resume_from_checkpoint=
resume_checkpoint())``.

This file is, at the same time:

* an Axolotl plugin -- list ``overbrainer_metrics.OverbrainerMetricsPlugin``
  under ``plugins:`` in the Axolotl config (with this file on ``PYTHONPATH``);
* a Hugging Face ``transformers.TrainerCallback`` --
  ``Trainer(..., callbacks=[OverbrainerMetricsCallback()])`` -- that writes the
  metrics and honours snapshot requests;
* helpers for any other loop -- ``MetricsWriter().log(step=..., loss=...)``;
  ``snapshot_requested()`` (the reason, or None) at each step end, then
  ``write_snapshot(checkpoint_dir, step, reason)`` once the checkpoint is
  saved; ``resume_checkpoint()`` (the checkpoint to start from, or None).

It imports neither transformers nor axolotl (nor torch) unless they are
installed, so it can be imported (and tested) with the standard library alone.
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
    "SNAPSHOT_ENV",
    "RESUME_ENV",
    "SNAPSHOT_REASONS",
    "snapshot_requested",
    "write_snapshot",
    "checkpoint_in_run_dir",
    "resume_checkpoint",
]

METRICS_ENV = "OVERBRAINER_METRICS"
# The snapshot request's path: <run dir>/snapshot.request.
SNAPSHOT_ENV = "OVERBRAINER_SNAPSHOT"
# A resumed run's starting checkpoint: <run dir>/resume/checkpoint-<step> (absolute).
RESUME_ENV = "OVERBRAINER_RESUME_FROM"
# Written next to the request once the snapshot's checkpoint is saved.
SNAPSHOT_JSON = "snapshot.json"
SNAPSHOT_REASONS = ("requested", "deadline", "cost", "disk")
# Seconds of work the job does after its last step (a LoRA merge), added to the ETA.
AFTER_ENV = "OVERBRAINER_AFTER_S"

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


def parse_reason(text):
    """The reason of a snapshot request's text; anything unknown reads as ``requested``."""
    word = (text or "").strip()
    return word if word in SNAPSHOT_REASONS else "requested"


def snapshot_requested(path=None):
    """The reason of the pending snapshot request (``requested``, ``deadline``, ``cost`` or
    ``disk``), or None when there is none. ``path`` defaults to ``$OVERBRAINER_SNAPSHOT``;
    without either there is never a request. Call it at each step end (on rank 0 only)."""
    if path is None:
        path = os.environ.get(SNAPSHOT_ENV)
    if not path:
        return None
    try:
        with open(path, "rb") as source:
            text = source.read(256).decode("utf-8", "replace")
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, ValueError):
        # There, but unreadable: still a request.
        return "requested" if os.path.lexists(path) else None
    return parse_reason(text)


def resume_checkpoint():
    """The checkpoint a resumed run starts from (``$OVERBRAINER_RESUME_FROM``), or None."""
    return os.environ.get(RESUME_ENV) or None


def _run_dir(snapshot_path):
    path = snapshot_path if snapshot_path is not None else os.environ.get(SNAPSHOT_ENV)
    if not path:
        raise RuntimeError(
            "%s is not set, so there is no run directory to write %s into: "
            "run the job with Overbrainer (or pass snapshot_path)" % (SNAPSHOT_ENV, SNAPSHOT_JSON)
        )
    return os.path.dirname(os.path.abspath(path))


def checkpoint_in_run_dir(checkpoint, snapshot_path=None):
    """The checkpoint directory ``checkpoint`` (absolute, or relative to the working directory,
    which in a job is the run directory) as snapshot.json names it: relative to the run
    directory, with ``/``. Raises ValueError when it is not inside the run directory: Overbrainer
    could not bring it home, so the job must fail rather than end as if it had finished."""
    run_dir = _run_dir(snapshot_path)
    relative = os.path.relpath(os.path.realpath(checkpoint), os.path.realpath(run_dir))
    if relative in (os.curdir, os.pardir) or relative.startswith(os.pardir + os.sep):
        raise ValueError(
            "the checkpoint %s is not inside the run directory %s, so Overbrainer cannot bring it "
            "home: save checkpoints under the run directory (a relative output_dir)" % (checkpoint, run_dir)
        )
    return relative.replace(os.sep, "/")


def write_snapshot(checkpoint, step, reason, snapshot_path=None, clock=time.time):
    """Writes ``snapshot.json`` next to the request (``snapshot_path``, default
    ``$OVERBRAINER_SNAPSHOT``) once the checkpoint directory ``checkpoint`` is saved:
    atomically, a temp file renamed over the name, so a reader sees all of it or nothing.
    Returns the file's path. Raises ValueError for a checkpoint outside the run directory
    (see :func:`checkpoint_in_run_dir`)."""
    run_dir = _run_dir(snapshot_path)
    relative = checkpoint_in_run_dir(checkpoint, snapshot_path)
    record = {
        "checkpoint": relative,
        "step": _int(step) or 0,
        "time": clock(),
        "reason": parse_reason(reason),
    }
    path = os.path.join(run_dir, SNAPSHOT_JSON)
    temp = os.path.join(run_dir, ".%s.%d.tmp" % (SNAPSHOT_JSON, os.getpid()))
    try:
        with open(temp, "w", encoding="utf-8") as out:
            out.write(json.dumps(record, allow_nan=False, separators=(",", ":")) + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    finally:
        if os.path.exists(temp):
            os.remove(temp)
    return path


def _torch_distributed():
    """torch.distributed when it is available and initialised (a DDP, FSDP or DeepSpeed run), else None."""
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        if "torch" not in sys.modules:
            # Never import torch just to find out: a run without it is not distributed.
            return None
        try:
            import torch.distributed as dist
        except Exception:
            return None
    try:
        return dist if dist.is_available() and dist.is_initialized() else None
    except Exception:
        return None


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
        after = _int(os.environ.get(AFTER_ENV))
        if after:
            record["after_s"] = after
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

    def snapshot(self, step, checkpoint, reason):
        """The line that ends a stopped run's metrics (instead of ``end``)."""
        self.write(
            {
                "event": "snapshot",
                "time": self.clock(),
                "step": _int(step),
                "checkpoint": checkpoint,
                "reason": parse_reason(reason),
            }
        )

    def end(self):
        self.write({"event": "end", "time": self.clock()})


class OverbrainerMetricsCallback(_CallbackBase):
    """A Hugging Face TrainerCallback writing the protocol (world process zero only) and
    honouring snapshot requests (see the module's docstring).

    ``path`` is the metrics file (default ``$OVERBRAINER_METRICS``), ``snapshot_path`` the
    request (default ``$OVERBRAINER_SNAPSHOT``), ``distributed`` torch.distributed (default:
    found when initialised).
    """

    def __init__(self, path=None, writer=None, snapshot_path=None, clock=time.time, distributed=None):
        super(OverbrainerMetricsCallback, self).__init__()
        self.writer = writer if writer is not None else MetricsWriter(path)
        self.snapshot_path = snapshot_path
        self.clock = clock
        self._distributed = distributed
        self._eval_batches = 0
        self._eval_written_at = None
        # The reason of the request acted on, once one is seen at a step end.
        self.snapshot_reason = None
        # The snapshot's checkpoint directory, once saved (snapshot.json names it).
        self.snapshot = None

    def _dist(self):
        return self._distributed if self._distributed is not None else _torch_distributed()

    def _request_path(self):
        return self.snapshot_path if self.snapshot_path is not None else os.environ.get(SNAPSHOT_ENV)

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

    def on_step_end(self, args, state, control, **kwargs):
        if self.snapshot_reason is not None:
            return control
        max_steps = _int(getattr(state, "max_steps", None))
        if max_steps and (_int(getattr(state, "global_step", 0)) or 0) >= max_steps:
            # The last step: the training is complete, and ends as usual (every rank agrees).
            return control
        dist = self._dist()
        if dist is None:
            # One process (or ranks that cannot talk): each reads the request itself.
            reason = snapshot_requested(self._request_path())
        else:
            # Rank 0 decides, every rank follows: they all stop (and save) at this same step.
            decision = [snapshot_requested(self._request_path()) if dist.get_rank() == 0 else None]
            dist.broadcast_object_list(decision, src=0)
            reason = decision[0]
        if reason is not None:
            self.snapshot_reason = parse_reason(reason)
            control.should_save = True
            control.should_training_stop = True
        return control

    def on_save(self, args, state, control, **kwargs):
        if self.snapshot_reason is None or self.snapshot is not None:
            return control
        dist = self._dist()
        if dist is not None:
            # snapshot.json names a checkpoint every rank has finished writing its part of.
            dist.barrier()
        step = _int(getattr(state, "global_step", 0)) or 0
        checkpoint = os.path.join(getattr(args, "output_dir", None) or os.curdir, "checkpoint-%d" % step)
        self.snapshot = checkpoint
        if self._is_writer(state):
            write_snapshot(checkpoint, step, self.snapshot_reason, self._request_path(), self.clock)
            relative = checkpoint_in_run_dir(checkpoint, self._request_path())
            self.writer.snapshot(step, relative, self.snapshot_reason)
            sys.stderr.write(
                "overbrainer_metrics: snapshot (%s) at step %d saved in %s; training stops\n"
                % (self.snapshot_reason, step, relative)
            )
        return control

    def on_train_end(self, args, state, control, **kwargs):
        if self.snapshot_reason is not None and self.snapshot is None:
            # Stopped early without the checkpoint: exiting 0 would read as a finished run.
            raise RuntimeError(
                "overbrainer_metrics: training stopped for a snapshot (%s) but the trainer saved no "
                "checkpoint (on_save never came): use a Trainer that saves when control.should_save "
                "is set" % self.snapshot_reason
            )
        # A stopped run's metrics end with its snapshot line, not with `end`.
        if self._is_writer(state) and self.snapshot_reason is None:
            self.writer.end()
        return control


class OverbrainerMetricsPlugin(_PluginBase):
    """The Axolotl plugin: adds :class:`OverbrainerMetricsCallback` to Axolotl's trainer."""

    def get_input_args(self):
        # No config keys of its own.
        return None

    def add_callbacks_post_trainer(self, cfg, trainer):
        return [OverbrainerMetricsCallback()]
