"""The example trainer (examples/tiny/train.py) run for real, as a job would run it."""

import json
import os
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


if __name__ == "__main__":
    unittest.main()
