"""The plugin file, with stand-ins for transformers and axolotl (stdlib only)."""

import importlib.util
import json
import math
import os
import sys
import tempfile
import types
import unittest

PLUGIN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "overbrainer_metrics.py")


def load_plugin(fake_frameworks):
    """Loads a fresh copy of the plugin file, with or without stand-in frameworks installed."""
    saved = {name: sys.modules.get(name) for name in ("transformers", "axolotl", "axolotl.integrations", "axolotl.integrations.base")}
    try:
        if fake_frameworks:
            transformers = types.ModuleType("transformers")

            class TrainerCallback(object):
                """Stand-in for transformers.TrainerCallback."""

            transformers.TrainerCallback = TrainerCallback
            base = types.ModuleType("axolotl.integrations.base")

            class BasePlugin(object):
                """Stand-in for axolotl.integrations.base.BasePlugin."""

                def __init__(self):
                    self.initialised = True

                def add_callbacks_post_trainer(self, cfg, trainer):
                    return []

            base.BasePlugin = BasePlugin
            sys.modules["transformers"] = transformers
            sys.modules["axolotl"] = types.ModuleType("axolotl")
            sys.modules["axolotl.integrations"] = types.ModuleType("axolotl.integrations")
            sys.modules["axolotl.integrations.base"] = base
        else:
            # A None entry makes `import` raise ImportError, as when not installed.
            for name in saved:
                sys.modules[name] = None
        spec = importlib.util.spec_from_file_location("overbrainer_metrics_under_test", PLUGIN)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        for name, value in saved.items():
            if value is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = value


class State(object):
    """The TrainerState fields the callback reads."""

    def __init__(self, global_step=0, epoch=None, max_steps=100, is_world_process_zero=True):
        self.global_step = global_step
        self.epoch = epoch
        self.max_steps = max_steps
        self.is_world_process_zero = is_world_process_zero


class Clock(object):
    def __init__(self, start=1000.0):
        self.now = start

    def __call__(self):
        return self.now


def read_lines(path):
    with open(path, encoding="utf-8") as source:
        text = source.read()
    assert text.endswith("\n"), "every line ends with a newline"
    return [json.loads(line) for line in text.splitlines()]


class PluginTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.tmp.name, "metrics.jsonl")

    def tearDown(self):
        self.tmp.cleanup()

    def callback(self, module, clock=None):
        return module.OverbrainerMetricsCallback(writer=module.MetricsWriter(self.path, clock or Clock()))

    def test_derives_from_the_frameworks_when_they_are_installed(self):
        module = load_plugin(fake_frameworks=True)
        self.assertEqual(module.OverbrainerMetricsCallback.__mro__[1].__name__, "TrainerCallback")
        self.assertEqual(module.OverbrainerMetricsPlugin.__mro__[1].__name__, "BasePlugin")
        plugin = module.OverbrainerMetricsPlugin()
        self.assertTrue(plugin.initialised)
        callbacks = plugin.add_callbacks_post_trainer(cfg={}, trainer=object())
        self.assertEqual(len(callbacks), 1)
        self.assertIsInstance(callbacks[0], module.OverbrainerMetricsCallback)
        self.assertIsNone(plugin.get_input_args())

    def test_imports_without_transformers_or_axolotl(self):
        module = load_plugin(fake_frameworks=False)
        self.assertIs(module.OverbrainerMetricsCallback.__mro__[1], module._CallbackBase)
        self.assertEqual(module._CallbackBase.__module__, module.__name__)
        plugin = module.OverbrainerMetricsPlugin()
        self.assertEqual(len(plugin.add_callbacks_post_trainer(None, None)), 1)

    def test_writes_begin_log_and_end_lines(self):
        module = load_plugin(fake_frameworks=True)
        clock = Clock(1000.0)
        callback = self.callback(module, clock)
        control = object()
        self.assertIs(callback.on_train_begin(None, State(max_steps=40), control), control)
        clock.now = 1010.5
        callback.on_log(
            None,
            State(global_step=12, epoch=0.5, max_steps=40),
            control,
            logs={"loss": 1.23456, "learning_rate": 2e-4, "grad_norm": 0.7, "epoch": 0.5, "other": 3},
        )
        callback.on_log(None, State(global_step=12, epoch=0.5, max_steps=40), control, logs={"eval_loss": 1.1})
        clock.now = 1020.0
        callback.on_train_end(None, State(global_step=40, max_steps=40), control)
        lines = read_lines(self.path)
        self.assertEqual(
            lines,
            [
                {"event": "begin", "time": 1000.0, "max_steps": 40},
                {
                    "event": "log",
                    "time": 1010.5,
                    "step": 12,
                    "epoch": 0.5,
                    "max_steps": 40,
                    "loss": 1.23456,
                    "learning_rate": 2e-4,
                    "grad_norm": 0.7,
                },
                {"event": "log", "time": 1010.5, "step": 12, "epoch": 0.5, "max_steps": 40, "eval_loss": 1.1},
                {"event": "end", "time": 1020.0},
            ],
        )

    def test_non_finite_values_become_null(self):
        module = load_plugin(fake_frameworks=False)
        callback = self.callback(module)
        callback.on_log(
            None,
            State(global_step=3, epoch=float("nan")),
            None,
            logs={"loss": float("nan"), "eval_loss": float("inf"), "grad_norm": -float("inf"), "learning_rate": "x"},
        )
        with open(self.path, encoding="utf-8") as source:
            raw = source.read()
        self.assertNotIn("NaN", raw)
        self.assertNotIn("Infinity", raw)
        (line,) = read_lines(self.path)
        self.assertEqual(line["step"], 3)
        for key in ("loss", "eval_loss", "grad_norm", "learning_rate", "epoch"):
            self.assertIsNone(line[key], key)

    def test_tensor_like_values_are_read_with_item(self):
        module = load_plugin(fake_frameworks=False)

        class Scalar(object):
            def item(self):
                return 0.25

        callback = self.callback(module)
        callback.on_log(None, State(global_step=1), None, logs={"loss": Scalar()})
        self.assertEqual(read_lines(self.path)[0]["loss"], 0.25)

    def test_only_world_process_zero_writes(self):
        module = load_plugin(fake_frameworks=True)
        callback = self.callback(module)
        other = State(global_step=5, is_world_process_zero=False)
        callback.on_train_begin(None, other, None)
        callback.on_log(None, other, None, logs={"loss": 1.0})
        callback.on_prediction_step(None, other, None)
        callback.on_train_end(None, other, None)
        self.assertFalse(os.path.exists(self.path))

    def test_appends_to_an_existing_file_and_flushes_each_line(self):
        module = load_plugin(fake_frameworks=False)
        with open(self.path, "w", encoding="utf-8") as out:
            out.write('{"event":"begin","time":1,"max_steps":2}\n')
        writer = module.MetricsWriter(self.path, Clock(5.0))
        writer.log(step=1, loss=0.5)
        # Visible to another reader at once, without closing anything.
        self.assertEqual(len(read_lines(self.path)), 2)
        writer.log(step=2, loss=0.4)
        self.assertEqual([line.get("step") for line in read_lines(self.path)], [None, 1, 2])

    def test_eval_progress_is_throttled_to_every_two_seconds(self):
        module = load_plugin(fake_frameworks=False)
        clock = Clock(100.0)
        callback = self.callback(module, clock)
        state = State(global_step=10)
        for tick in range(10):  # ten batches, 0.5 s apart
            clock.now = 100.0 + tick * 0.5
            callback.on_prediction_step(None, state, None, eval_dataloader=[0] * 10)
        lines = read_lines(self.path)
        self.assertEqual([line["done"] for line in lines], [1, 5, 9])
        self.assertTrue(all(line["event"] == "eval" and line["total"] == 10 for line in lines))
        callback.on_evaluate(None, state, None)
        clock.now = 101.0
        callback.on_prediction_step(None, state, None)
        self.assertEqual(read_lines(self.path)[-1]["done"], 1)

    def test_the_environment_names_the_file_and_no_file_means_no_writes(self):
        module = load_plugin(fake_frameworks=False)
        old = os.environ.get("OVERBRAINER_METRICS")
        try:
            os.environ["OVERBRAINER_METRICS"] = self.path
            module.MetricsWriter().end()
            self.assertEqual(read_lines(self.path)[0]["event"], "end")
            del os.environ["OVERBRAINER_METRICS"]
            writer = module.MetricsWriter()
            stderr = sys.stderr
            try:
                sys.stderr = open(os.devnull, "w")
                writer.end()
                writer.end()
            finally:
                sys.stderr.close()
                sys.stderr = stderr
            self.assertTrue(writer._warned)
            self.assertEqual(len(read_lines(self.path)), 1)
        finally:
            if old is None:
                os.environ.pop("OVERBRAINER_METRICS", None)
            else:
                os.environ["OVERBRAINER_METRICS"] = old


if __name__ == "__main__":
    unittest.main()
