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

    def test_log_lines_carry_the_work_after_the_last_step_from_the_environment(self):
        module = load_plugin(fake_frameworks=False)
        old = os.environ.get("OVERBRAINER_AFTER_S")
        try:
            os.environ["OVERBRAINER_AFTER_S"] = "320"
            writer = module.MetricsWriter(self.path, Clock(5.0))
            writer.log(step=1, loss=0.5)
            os.environ["OVERBRAINER_AFTER_S"] = "soon"
            writer.log(step=2, loss=0.4)
            self.assertEqual([line.get("after_s") for line in read_lines(self.path)], [320, None])
        finally:
            if old is None:
                os.environ.pop("OVERBRAINER_AFTER_S", None)
            else:
                os.environ["OVERBRAINER_AFTER_S"] = old

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



class Args(object):
    """The TrainingArguments field the callback reads."""

    def __init__(self, output_dir):
        self.output_dir = output_dir


class Control(object):
    """The TrainerControl flags the callback sets."""

    def __init__(self):
        self.should_save = False
        self.should_training_stop = False


class Distributed(object):
    """Two ranks' view of torch.distributed (torch cannot be installed here): rank 0's broadcast
    is what every rank receives, as broadcast_object_list does. Rank 0 is called first."""

    def __init__(self, group, rank):
        self.group = group
        self.rank = rank
        self.barriers = 0

    def get_rank(self):
        return self.rank

    def broadcast_object_list(self, objects, src=0):
        assert src == 0
        if self.rank == 0:
            self.group["sent"] = list(objects)
        else:
            objects[:] = self.group["sent"]

    def barrier(self):
        self.barriers += 1


def request(path, reason):
    with open(path, "w", encoding="utf-8") as out:
        out.write(reason)


class SnapshotTest(unittest.TestCase):
    """The snapshot callback: a request seen at a step end saves a checkpoint and stops;
    on_save then writes snapshot.json in the run directory."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.run_dir = os.path.join(self.tmp.name, "run")
        os.makedirs(self.run_dir)
        self.request = os.path.join(self.run_dir, "snapshot.request")
        self.snapshot = os.path.join(self.run_dir, "snapshot.json")
        self.metrics = os.path.join(self.run_dir, "metrics.jsonl")
        self.module = load_plugin(fake_frameworks=False)
        self.args = Args(os.path.join(self.run_dir, "output", "checkpoints"))

    def tearDown(self):
        self.tmp.cleanup()

    def callback(self, clock=None, **kwargs):
        module = self.module
        clock = clock or Clock(1234.5)
        return module.OverbrainerMetricsCallback(
            writer=module.MetricsWriter(self.metrics, clock), snapshot_path=self.request, clock=clock, **kwargs
        )

    def read_snapshot(self):
        with open(self.snapshot, encoding="utf-8") as source:
            return json.load(source)

    def test_without_a_request_nothing_changes(self):
        callback = self.callback()
        control = Control()
        for step in range(1, 4):
            self.assertIs(callback.on_step_end(self.args, State(global_step=step, max_steps=10), control), control)
        self.assertFalse(control.should_save)
        self.assertFalse(control.should_training_stop)
        callback.on_save(self.args, State(global_step=3, max_steps=10), control)
        self.assertFalse(os.path.exists(self.snapshot))
        self.assertFalse(os.path.exists(self.metrics))

    def test_a_request_saves_stops_and_on_save_writes_snapshot_json(self):
        callback = self.callback()
        control = Control()
        state = State(global_step=11, max_steps=40)
        callback.on_step_end(self.args, state, control)
        self.assertFalse(control.should_training_stop)
        request(self.request, "cost\n")
        state.global_step = 12
        callback.on_step_end(self.args, state, control)
        self.assertTrue(control.should_save)
        self.assertTrue(control.should_training_stop)
        # The Trainer saves <output_dir>/checkpoint-12, then calls on_save.
        os.makedirs(os.path.join(self.args.output_dir, "checkpoint-12"))
        callback.on_save(self.args, state, control)
        self.assertEqual(
            self.read_snapshot(),
            {"checkpoint": "output/checkpoints/checkpoint-12", "step": 12, "time": 1234.5, "reason": "cost"},
        )
        # Nothing else is left in the run directory (no temp file), and the request stays.
        self.assertEqual(
            sorted(os.listdir(self.run_dir)), ["metrics.jsonl", "output", "snapshot.json", "snapshot.request"]
        )
        callback.on_train_end(self.args, state, control)
        lines = read_lines(self.metrics)
        # The snapshot line ends the metrics: the training stopped, it did not end.
        self.assertEqual(
            lines,
            [
                {
                    "event": "snapshot",
                    "time": 1234.5,
                    "step": 12,
                    "checkpoint": "output/checkpoints/checkpoint-12",
                    "reason": "cost",
                }
            ],
        )

    def test_the_checkpoint_is_relative_to_the_run_directory_from_a_relative_output_dir(self):
        # The job's working directory is the run directory; output_dir is usually relative to it.
        old = os.getcwd()
        os.chdir(self.run_dir)
        try:
            callback = self.callback()
            control = Control()
            request(self.request, "requested\n")
            state = State(global_step=3, max_steps=10)
            callback.on_step_end(Args("output"), state, control)
            callback.on_save(Args("output"), state, control)
        finally:
            os.chdir(old)
        self.assertEqual(self.read_snapshot()["checkpoint"], "output/checkpoint-3")

    def test_snapshot_json_is_replaced_whole_never_written_in_place(self):
        # A hard link to an earlier snapshot.json keeps its old content: the new one was written
        # to a temp file and renamed over the name, so a reader sees the old file or the new one.
        with open(self.snapshot, "w", encoding="utf-8") as out:
            out.write('{"checkpoint": "output/checkpoint-1", "step": 1}\n')
        os.link(self.snapshot, os.path.join(self.tmp.name, "old.json"))
        checkpoint = os.path.join(self.run_dir, "output", "checkpoint-7")
        self.module.write_snapshot(checkpoint, 7, "disk", snapshot_path=self.request, clock=Clock(9.0))
        with open(os.path.join(self.tmp.name, "old.json"), encoding="utf-8") as source:
            self.assertEqual(json.load(source)["step"], 1)
        self.assertEqual(
            self.read_snapshot(), {"checkpoint": "output/checkpoint-7", "step": 7, "time": 9.0, "reason": "disk"}
        )
        self.assertEqual(sorted(os.listdir(self.run_dir)), ["snapshot.json"])

    def test_the_reason_is_read_from_the_request_and_an_unknown_one_reads_as_requested(self):
        module = self.module
        self.assertIsNone(module.snapshot_requested(self.request))
        cases = [
            ("requested\n", "requested"),
            ("deadline\n", "deadline"),
            ("cost", "cost"),
            ("  disk \n", "disk"),
            ("", "requested"),
            ("COST\n", "requested"),
            ("because\n", "requested"),
            ("\xff\xfe binary", "requested"),
        ]
        for text, reason in cases:
            request(self.request, text)
            self.assertEqual(module.snapshot_requested(self.request), reason, repr(text))
        # A request that cannot be read is still a request.
        os.remove(self.request)
        os.mkdir(self.request)
        self.assertEqual(module.snapshot_requested(self.request), "requested")

    def test_the_environment_names_the_request_and_the_resume_checkpoint(self):
        module = self.module
        saved = {name: os.environ.get(name) for name in ("OVERBRAINER_SNAPSHOT", "OVERBRAINER_RESUME_FROM")}
        try:
            os.environ.pop("OVERBRAINER_SNAPSHOT", None)
            os.environ.pop("OVERBRAINER_RESUME_FROM", None)
            self.assertIsNone(module.snapshot_requested())
            self.assertIsNone(module.resume_checkpoint())
            os.environ["OVERBRAINER_SNAPSHOT"] = self.request
            self.assertIsNone(module.snapshot_requested())
            request(self.request, "deadline\n")
            self.assertEqual(module.snapshot_requested(), "deadline")
            # The default callback and write_snapshot follow $OVERBRAINER_SNAPSHOT too.
            callback = module.OverbrainerMetricsCallback(writer=module.MetricsWriter(self.metrics))
            control = Control()
            state = State(global_step=5, max_steps=9)
            callback.on_step_end(self.args, state, control)
            self.assertTrue(control.should_training_stop)
            callback.on_save(self.args, state, control)
            self.assertEqual(self.read_snapshot()["reason"], "deadline")
            self.assertEqual(self.read_snapshot()["checkpoint"], "output/checkpoints/checkpoint-5")
            os.environ["OVERBRAINER_RESUME_FROM"] = ""
            self.assertIsNone(module.resume_checkpoint())
            os.environ["OVERBRAINER_RESUME_FROM"] = "/w/run/resume/checkpoint-12"
            self.assertEqual(module.resume_checkpoint(), "/w/run/resume/checkpoint-12")
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

    def test_a_request_at_the_last_step_changes_nothing(self):
        # The training is complete there: it ends as usual, and the run succeeds.
        callback = self.callback()
        control = Control()
        request(self.request, "requested\n")
        callback.on_step_end(self.args, State(global_step=10, max_steps=10), control)
        self.assertFalse(control.should_save)
        self.assertFalse(control.should_training_stop)
        callback.on_save(self.args, State(global_step=10, max_steps=10), control)
        self.assertFalse(os.path.exists(self.snapshot))

    def test_only_world_process_zero_writes_snapshot_json(self):
        callback = self.callback()
        control = Control()
        request(self.request, "requested\n")
        other = State(global_step=4, max_steps=10, is_world_process_zero=False)
        callback.on_step_end(self.args, other, control)
        self.assertTrue(control.should_training_stop)
        callback.on_save(self.args, other, control)
        self.assertFalse(os.path.exists(self.snapshot))
        self.assertFalse(os.path.exists(self.metrics))

    def test_under_ddp_rank_zero_decides_and_every_rank_stops_at_the_same_step(self):
        # Rank 1 runs on another machine: it never sees rank 0's request file itself.
        elsewhere = os.path.join(self.tmp.name, "elsewhere", "snapshot.request")
        group = {}
        rank0 = self.callback(distributed=Distributed(group, 0))
        rank1 = self.module.OverbrainerMetricsCallback(
            writer=self.module.MetricsWriter(self.metrics), snapshot_path=elsewhere, distributed=Distributed(group, 1)
        )
        controls = [Control(), Control()]

        def step_end(step, is_zero=(True, False)):
            for callback, control, zero in zip((rank0, rank1), controls, is_zero):
                state = State(global_step=step, max_steps=50, is_world_process_zero=zero)
                callback.on_step_end(self.args, state, control)

        step_end(1)
        self.assertEqual([c.should_training_stop for c in controls], [False, False])
        # A request only rank 1 could see stops nobody: rank 0 decides.
        os.makedirs(os.path.dirname(elsewhere))
        request(elsewhere, "cost\n")
        step_end(2)
        self.assertEqual([c.should_training_stop for c in controls], [False, False])
        request(self.request, "disk\n")
        step_end(3)
        self.assertEqual([c.should_training_stop for c in controls], [True, True])
        self.assertEqual([c.should_save for c in controls], [True, True])
        for callback, control, zero in zip((rank0, rank1), controls, (True, False)):
            callback.on_save(self.args, State(global_step=3, max_steps=50, is_world_process_zero=zero), control)
        # Every rank waits for the others' saves before snapshot.json names the checkpoint.
        self.assertEqual([rank0._distributed.barriers, rank1._distributed.barriers], [1, 1])
        self.assertEqual(self.read_snapshot()["reason"], "disk")
        self.assertEqual(self.read_snapshot()["step"], 3)

    def test_a_stop_without_the_checkpoint_saved_fails_rather_than_ending_as_finished(self):
        callback = self.callback()
        control = Control()
        request(self.request, "cost\n")
        callback.on_step_end(self.args, State(global_step=4, max_steps=10), control)
        with self.assertRaises(RuntimeError) as raised:
            callback.on_train_end(self.args, State(global_step=4, max_steps=10), control)
        self.assertIn("saved no checkpoint", str(raised.exception))
        self.assertFalse(os.path.exists(self.snapshot))
        self.assertFalse(os.path.exists(self.metrics))

    def test_a_checkpoint_outside_the_run_directory_is_refused_with_the_fix(self):
        elsewhere = os.path.join(self.tmp.name, "elsewhere", "checkpoint-3")
        with self.assertRaises(ValueError) as raised:
            self.module.write_snapshot(elsewhere, 3, "requested", snapshot_path=self.request)
        self.assertIn("inside the run directory", str(raised.exception))
        self.assertFalse(os.path.exists(self.snapshot))

    def test_a_custom_loop_uses_the_helpers(self):
        module = self.module
        self.assertIsNone(module.snapshot_requested(self.request))
        request(self.request, "requested\n")
        reason = module.snapshot_requested(self.request)
        checkpoint = os.path.join(self.run_dir, "output", "checkpoint-8")
        path = module.write_snapshot(checkpoint, 8, reason, snapshot_path=self.request, clock=Clock(2.0))
        self.assertEqual(path, self.snapshot)
        self.assertEqual(
            self.read_snapshot(), {"checkpoint": "output/checkpoint-8", "step": 8, "time": 2.0, "reason": "requested"}
        )


if __name__ == "__main__":
    unittest.main()
