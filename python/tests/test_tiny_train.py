"""The example trainer (examples/tiny/train.py) run for real, as a job would run it."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = os.path.join(ROOT, "examples", "tiny", "train.py")


def read_lines(path):
    with open(path, encoding="utf-8") as source:
        return [json.loads(line) for line in source.read().splitlines()]


class TinyTrainTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.metrics = os.path.join(self.tmp.name, "metrics.jsonl")
        self.env = dict(os.environ, OVERBRAINER_METRICS=self.metrics)
        # Not a snapshot or a resume unless a test says so, even when the suite runs inside a job.
        self.env.pop("OVERBRAINER_SNAPSHOT", None)
        self.env.pop("OVERBRAINER_RESUME_FROM", None)

    def tearDown(self):
        self.tmp.cleanup()

    def run_train(self, *args):
        return subprocess.run(
            [sys.executable, TRAIN, "--step-seconds", "0"] + list(args),
            cwd=self.tmp.name,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def test_a_run_writes_the_protocol_with_a_falling_loss_and_its_output(self):
        done = self.run_train("--steps", "30", "--eval-every", "5")
        self.assertEqual(done.returncode, 0, done.stderr)
        lines = read_lines(self.metrics)
        self.assertEqual(lines[0]["event"], "begin")
        self.assertEqual(lines[0]["max_steps"], 30)
        self.assertEqual(lines[-1]["event"], "end")
        train = [line for line in lines if line["event"] == "log" and "loss" in line]
        evals = [line for line in lines if line["event"] == "log" and "eval_loss" in line]
        self.assertEqual([line["step"] for line in train], list(range(1, 31)))
        self.assertEqual([line["step"] for line in evals], [5, 10, 15, 20, 25, 30])
        for line in train:
            for key in ("time", "epoch", "max_steps", "learning_rate", "grad_norm"):
                self.assertIn(key, line)
        # A real, falling loss: the last steps are far below the first.
        first = sum(line["loss"] for line in train[:3]) / 3
        last = sum(line["loss"] for line in train[-3:]) / 3
        self.assertLess(last, first / 10)
        self.assertLess(evals[-1]["eval_loss"], evals[0]["eval_loss"])
        times = [line["time"] for line in lines]
        self.assertEqual(times, sorted(times))
        with open(os.path.join(self.tmp.name, "output", "model.json"), encoding="utf-8") as source:
            model = json.load(source)
        self.assertEqual(model["step"], 30)
        for learned, true in zip(model["weights"], [2.0, -3.0, 0.5]):
            self.assertAlmostEqual(learned, true, delta=0.3)
        self.assertTrue(os.path.exists(os.path.join(self.tmp.name, "output", "README.txt")))

    def test_without_the_environment_it_trains_and_writes_no_metrics(self):
        del self.env["OVERBRAINER_METRICS"]
        done = self.run_train("--steps", "3")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertFalse(os.path.exists(self.metrics))
        self.assertTrue(os.path.exists(os.path.join(self.tmp.name, "output", "model.json")))

    def test_exit_code_option_fails_the_job(self):
        done = self.run_train("--steps", "2", "--exit-code", "3")
        self.assertEqual(done.returncode, 3)

    def test_sigterm_stops_it_cleanly_with_a_checkpoint(self):
        process = subprocess.Popen(
            [sys.executable, TRAIN, "--steps", "1000", "--step-seconds", "0.2"],
            cwd=self.tmp.name,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                if os.path.exists(self.metrics) and any(
                    line.get("step", 0) >= 2 for line in read_lines(self.metrics)
                ):
                    break
                time.sleep(0.05)
            sent = time.monotonic()
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=10)
            self.assertLess(time.monotonic() - sent, 2.0)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        self.assertEqual(process.returncode, 143, stderr)
        self.assertIn("terminated at step", stderr)
        lines = read_lines(self.metrics)
        self.assertNotEqual(lines[-1]["event"], "end")
        step = max(line.get("step", 0) for line in lines)
        checkpoint = os.path.join(self.tmp.name, "output", "checkpoint-%d" % step, "model.json")
        self.assertTrue(os.path.exists(checkpoint))
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "output", "model.json")))



def request_snapshot(run_dir, reason):
    """Writes snapshot.request as the client does: a temp file linked to the name, never replacing one."""
    temp = os.path.join(run_dir, ".snapshot.request.test.tmp")
    with open(temp, "w", encoding="utf-8") as out:
        out.write(reason + "\n")
    os.link(temp, os.path.join(run_dir, "snapshot.request"))
    os.remove(temp)


def train_lines(lines):
    """step -> what the chart shows of a step (the time aside)."""
    return [
        dict((key, value) for key, value in line.items() if key != "time")
        for line in lines
        if line["event"] == "log"
    ]


class TinySnapshotTest(unittest.TestCase):
    """Stop with a snapshot, then resume: the same final model as a run never stopped."""

    STEPS = 2000  # at --step-seconds 0.01, a 20 s window for the request to arrive before the end

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def run_dir(self, name):
        path = os.path.join(self.tmp.name, name)
        os.makedirs(path)
        return path

    def env(self, run_dir, **extra):
        env = dict(os.environ, OVERBRAINER_METRICS=os.path.join(run_dir, "metrics.jsonl"))
        env["OVERBRAINER_SNAPSHOT"] = os.path.join(run_dir, "snapshot.request")
        env.pop("OVERBRAINER_RESUME_FROM", None)
        env.update(extra)
        return env

    def run_train(self, run_dir, args, **extra):
        return subprocess.run(
            [sys.executable, TRAIN] + args,
            cwd=run_dir,
            env=self.env(run_dir, **extra),
            capture_output=True,
            text=True,
            timeout=120,
        )

    def model(self, run_dir, *parts):
        with open(os.path.join(run_dir, "output", *(parts + ("model.json",))), encoding="utf-8") as source:
            return json.load(source)

    def uninterrupted(self, steps):
        run_dir = self.run_dir("whole")
        done = self.run_train(run_dir, ["--steps", str(steps), "--step-seconds", "0"])
        self.assertEqual(done.returncode, 0, done.stderr)
        return run_dir

    def resume(self, stopped_dir, step, steps, option=False):
        """A new run with the stopped run's checkpoint uploaded to resume/checkpoint-<step>/."""
        run_dir = self.run_dir("resumed")
        checkpoint = os.path.join(run_dir, "resume", "checkpoint-%d" % step)
        shutil.copytree(os.path.join(stopped_dir, "output", "checkpoint-%d" % step), checkpoint)
        args = ["--steps", str(steps), "--step-seconds", "0"]
        if option:
            done = self.run_train(run_dir, args + ["--resume-from", checkpoint])
        else:
            done = self.run_train(run_dir, args, OVERBRAINER_RESUME_FROM=checkpoint)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("resuming from %s at step %d" % (checkpoint, step + 1), done.stdout)
        return run_dir

    def assert_stopped(self, run_dir, reason, done):
        """The stopped run's snapshot.json, checkpoint and metrics; returns its step."""
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(os.path.join(run_dir, "snapshot.json"), encoding="utf-8") as source:
            snapshot = json.load(source)
        step = snapshot["step"]
        checkpoint = "output/checkpoint-%d" % step
        self.assertEqual(
            snapshot, {"checkpoint": checkpoint, "step": step, "time": snapshot["time"], "reason": reason}
        )
        self.assertTrue(os.path.isdir(os.path.join(run_dir, "output", "checkpoint-%d" % step)))
        self.assertEqual(self.model(run_dir, "checkpoint-%d" % step)["step"], step)
        self.assertFalse(os.path.exists(os.path.join(run_dir, "output", "model.json")))
        # Nothing but the checkpoint (no temp file) next to it.
        self.assertEqual(
            sorted(os.listdir(run_dir)), ["metrics.jsonl", "output", "snapshot.json", "snapshot.request"]
        )
        self.assertIn("snapshot (%s) at step %d" % (reason, step), done.stdout)
        lines = read_lines(os.path.join(run_dir, "metrics.jsonl"))
        self.assertEqual(
            lines[-1],
            {"event": "snapshot", "time": lines[-1]["time"], "step": step, "checkpoint": checkpoint, "reason": reason},
        )
        self.assertNotIn("end", [line["event"] for line in lines])
        self.assertEqual(sorted(set(line["step"] for line in train_lines(lines))), list(range(1, step + 1)))
        return step

    def assert_continues(self, whole_dir, stopped_dir, resumed_dir, step, steps):
        # The same final model, float for float, as the run that never stopped.
        self.assertEqual(self.model(resumed_dir), self.model(whole_dir))
        self.assertEqual(self.model(resumed_dir)["step"], steps)
        with open(os.path.join(resumed_dir, "output", "README.txt"), encoding="utf-8") as one, open(
            os.path.join(whole_dir, "output", "README.txt"), encoding="utf-8"
        ) as other:
            self.assertEqual(one.read(), other.read())
        # The resumed run's metrics continue the curve: begin with the same max_steps, then
        # step + 1 onwards; both runs' lines together are the uninterrupted run's.
        resumed = read_lines(os.path.join(resumed_dir, "metrics.jsonl"))
        self.assertEqual(resumed[0]["event"], "begin")
        self.assertEqual(resumed[0]["max_steps"], steps)
        self.assertEqual(resumed[-1]["event"], "end")
        self.assertEqual(train_lines(resumed)[0]["step"], step + 1)
        stopped = read_lines(os.path.join(stopped_dir, "metrics.jsonl"))
        whole = read_lines(os.path.join(whole_dir, "metrics.jsonl"))
        self.assertEqual(train_lines(stopped) + train_lines(resumed), train_lines(whole))

    def test_save_every_writes_whole_checkpoints_while_training_and_one_resumes_as_if_never_stopped(self):
        whole = self.uninterrupted(30)
        saving = self.run_dir("saving")
        done = self.run_train(saving, ["--steps", "30", "--step-seconds", "0", "--save-every", "10"])
        self.assertEqual(done.returncode, 0, done.stderr)
        # Every 10 steps but not at the end (the final model is output/model.json); no temp left.
        self.assertEqual(
            sorted(os.listdir(os.path.join(saving, "output"))),
            ["README.txt", "checkpoint-10", "checkpoint-20", "model.json"],
        )
        for step in (10, 20):
            self.assertEqual(
                sorted(os.listdir(os.path.join(saving, "output", "checkpoint-%d" % step))),
                ["model.json", "trainer_state.json"],
            )
            self.assertEqual(self.model(saving, "checkpoint-%d" % step)["step"], step)
        # Saving does not change the training: the same final model as a run that saves nothing.
        self.assertEqual(self.model(saving), self.model(whole))
        resumed = self.resume(saving, 20, 30)
        self.assertEqual(self.model(resumed), self.model(whole))

    def test_a_request_stops_it_at_a_step_end_and_a_resumed_run_ends_as_if_never_stopped(self):
        steps, k = self.STEPS, 5
        stopped_dir = self.run_dir("stopped")
        metrics = os.path.join(stopped_dir, "metrics.jsonl")
        process = subprocess.Popen(
            [sys.executable, TRAIN, "--steps", str(steps), "--step-seconds", "0.01"],
            cwd=stopped_dir,
            env=self.env(stopped_dir),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            # Waits for k steps' lines (the file's state), then asks, as `train stop` does.
            while process.poll() is None:
                if os.path.exists(metrics) and sum(1 for line in read_lines(metrics) if "loss" in line) >= k:
                    break
                time.sleep(0.01)
            request_snapshot(stopped_dir, "requested")
            stdout, stderr = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        done = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
        step = self.assert_stopped(stopped_dir, "requested", done)
        self.assertGreaterEqual(step, k)
        self.assertLess(step, steps)
        resumed_dir = self.resume(stopped_dir, step, steps)
        self.assert_continues(self.uninterrupted(steps), stopped_dir, resumed_dir, step, steps)

    def test_a_request_before_the_first_step_ends_stops_at_step_one_and_resume_from_works_too(self):
        steps = 30
        stopped_dir = self.run_dir("stopped")
        request_snapshot(stopped_dir, "cost")
        done = self.run_train(stopped_dir, ["--steps", str(steps), "--step-seconds", "0"])
        self.assertEqual(self.assert_stopped(stopped_dir, "cost", done), 1)
        resumed_dir = self.resume(stopped_dir, 1, steps, option=True)
        self.assert_continues(self.uninterrupted(steps), stopped_dir, resumed_dir, 1, steps)

    def test_an_unknown_reason_reads_as_requested(self):
        stopped_dir = self.run_dir("stopped")
        request_snapshot(stopped_dir, "because")
        done = self.run_train(stopped_dir, ["--steps", "10", "--step-seconds", "0"])
        self.assert_stopped(stopped_dir, "requested", done)

    def test_a_request_at_the_last_step_lets_it_finish(self):
        run_dir = self.run_dir("last")
        request_snapshot(run_dir, "deadline")
        done = self.run_train(run_dir, ["--steps", "1", "--step-seconds", "0"])
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertFalse(os.path.exists(os.path.join(run_dir, "snapshot.json")))
        self.assertEqual(self.model(run_dir)["step"], 1)
        self.assertEqual(read_lines(os.path.join(run_dir, "metrics.jsonl"))[-1]["event"], "end")

    def test_a_cancelled_run_s_checkpoint_resumes_too(self):
        # SIGTERM's checkpoint (exit 143, as before) holds the same state as a snapshot's.
        steps = 2000
        stopped_dir = self.run_dir("stopped")
        metrics = os.path.join(stopped_dir, "metrics.jsonl")
        process = subprocess.Popen(
            [sys.executable, TRAIN, "--steps", str(steps), "--step-seconds", "0.01"],
            cwd=stopped_dir,
            env=self.env(stopped_dir),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            while process.poll() is None:
                if os.path.exists(metrics) and any(line.get("step", 0) >= 3 for line in read_lines(metrics)):
                    break
                time.sleep(0.01)
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        self.assertEqual(process.returncode, 143, stderr)
        (name,) = os.listdir(os.path.join(stopped_dir, "output"))
        step = int(name[len("checkpoint-"):])
        resumed_dir = self.resume(stopped_dir, step, steps)
        whole_dir = self.uninterrupted(steps)
        self.assertEqual(self.model(resumed_dir), self.model(whole_dir))

    def test_a_checkpoint_it_cannot_resume_from_fails_the_job_with_the_reason(self):
        run_dir = self.run_dir("broken")
        missing = os.path.join(run_dir, "resume", "checkpoint-9")
        done = self.run_train(run_dir, ["--steps", "10"], OVERBRAINER_RESUME_FROM=missing)
        self.assertEqual(done.returncode, 2)
        self.assertIn("cannot resume from %s" % missing, done.stderr)
        os.makedirs(missing)
        with open(os.path.join(missing, "model.json"), "w", encoding="utf-8") as out:
            out.write('{"kind": "linear_regression", "weights": [0, 0, 0], "bias": 0, "step": 9}\n')
        done = self.run_train(run_dir, ["--steps", "10"], OVERBRAINER_RESUME_FROM=missing)
        self.assertEqual(done.returncode, 2)
        self.assertIn("trainer_state.json", done.stderr)
        # Nothing trained from scratch instead.
        self.assertFalse(os.path.exists(os.path.join(run_dir, "output")))
        self.assertFalse(os.path.exists(os.path.join(run_dir, "metrics.jsonl")))


if __name__ == "__main__":
    unittest.main()
