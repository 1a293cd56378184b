"""A sweep's Optuna study, driven by Overbrainer over stdin/stdout.

Overbrainer starts this script with the user's Python (the one that has Optuna) and speaks to it
one JSON object per line: each request {"id": N, "op": ...} gets one answer {"id": N, "ok": true,
...} or {"id": N, "ok": false, "error": {"kind": ..., "message": ...}}, in order. The first line
the script writes, before reading anything, says whether Optuna is there:
{"ready": true, "optuna": "3.1.0", "python": "3.11.2"}, or {"ready": false, "error": {...}}.

The study lives in Optuna's own storage (RDBStorage on SQLite), so it can be opened with
optuna-dashboard or optuna.load_study; this process holds nothing the storage does not, and a
new one started after it was killed goes on with the same study.

A report is the hot path (every evaluation of every trial): the storage keeps one SQLite
connection open (SQLAlchemy 1.4 opens and closes one per session on a file, reading the schema
each time), in WAL mode with synchronous=NORMAL (a commit appends to study.db-wal instead of
writing and deleting a rollback journal; a crash loses nothing committed, a power cut at most the
last reports), and the running trials asked here are kept as Optuna Trial objects, so a report is
Trial.report and Trial.should_prune with no lookup of the trial first. The storage URL, and what
optuna-dashboard and optuna.load_study open, stay the same. Only what Optuna 3.1 and 5.x
share is used: ask/tell, RDBStorage, Trial.report/should_prune, the samplers TPE, random, grid
and CMA-ES, the pruners Hyperband, successive halving and median.

Requests:
  open    {storage, study, direction, sampler, sampler_seed, pruner, params}: creates or loads the study
  ask     {attrs?}: a new trial (its number and params), with user attributes set on it
  attrs   {number, attrs}: user attributes set on a trial (the trial <-> run link)
  report  {number, step, value}: an intermediate value; answers {"should_prune": bool}
  tell    {number, state: "complete"|"pruned"|"fail", value?}: the trial's end (a second tell of
          a finished trial changes nothing)
  trials  {}: every trial of the study
  close   {}: answers, then exits
The script exits when stdin ends (its client is gone); the storage keeps everything.
"""

import json
import math
import sys

PROTOCOL_OUT = sys.stdout
# Nothing but answers may reach stdout: anything a library prints goes to stderr.
sys.stdout = sys.stderr

MIN_OPTUNA = (3, 1)


def write(message):
    PROTOCOL_OUT.write(json.dumps(message, allow_nan=False, separators=(",", ":")) + "\n")
    PROTOCOL_OUT.flush()


class StudyError(Exception):
    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


def finite(value):
    """A float for JSON, or None for NaN and infinities (JSON holds neither)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def plain(value):
    if isinstance(value, float):
        return finite(value)
    return value


def grid_values(spec):
    kind = spec["kind"]
    if kind == "choice":
        return list(spec["choices"])
    if kind == "int":
        return list(range(int(spec["low"]), int(spec["high"]) + 1, int(spec["step"])))
    step = spec.get("step")
    if step is None:
        raise StudyError("bad_request", "a grid needs a step on every float range")
    low, high = float(spec["low"]), float(spec["high"])
    count = int(math.floor((high - low) / step + 1e-9)) + 1
    digits = max(0, -int(math.floor(math.log10(step))) + 6)
    return [round(low + k * step, digits) for k in range(count)]


def sqlite_pragmas(dbapi_connection, _record):
    """Each SQLite connection of the storage: WAL, and a commit synced at checkpoints only."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


def rdb_storage(optuna, url):
    """Optuna's RDBStorage on `url`; on SQLite, one pooled connection with sqlite_pragmas."""
    if not url.startswith("sqlite:"):
        return optuna.storages.RDBStorage(url)
    import sqlalchemy.event
    import sqlalchemy.pool

    if not sqlalchemy.event.contains(sqlalchemy.pool.Pool, "connect", sqlite_pragmas):
        sqlalchemy.event.listen(sqlalchemy.pool.Pool, "connect", sqlite_pragmas)
    return optuna.storages.RDBStorage(url, engine_kwargs={"poolclass": sqlalchemy.pool.QueuePool})


class Study:
    def __init__(self, optuna):
        self.optuna = optuna
        self.study = None
        self.storage = None
        self.study_id = None
        self.distributions = {}
        # number -> (Trial, the steps reported): the running trials this process knows.
        self.live = {}

    def distribution(self, spec):
        d = self.optuna.distributions
        kind = spec["kind"]
        if kind == "float":
            return d.FloatDistribution(
                float(spec["low"]), float(spec["high"]), log=bool(spec["log"]), step=spec.get("step")
            )
        if kind == "int":
            return d.IntDistribution(
                int(spec["low"]), int(spec["high"]), log=bool(spec["log"]), step=int(spec["step"])
            )
        if kind == "choice":
            return d.CategoricalDistribution(list(spec["choices"]))
        raise StudyError("bad_request", "unknown parameter kind %r" % (kind,))

    def sampler(self, name, seed, params):
        s = self.optuna.samplers
        if name == "tpe":
            return s.TPESampler(seed=seed)
        if name == "random":
            return s.RandomSampler(seed=seed)
        if name == "cmaes":
            return s.CmaEsSampler(seed=seed)
        if name == "grid":
            return s.GridSampler({k: grid_values(v) for k, v in params.items()}, seed=seed)
        raise StudyError("bad_request", "unknown sampler %r" % (name,))

    def pruner(self, name, min_resource=None, max_resource=None):
        p = self.optuna.pruners
        if name == "hyperband":
            return p.HyperbandPruner(min_resource=min_resource or 1, max_resource=max_resource or "auto")
        if name == "successive_halving":
            return p.SuccessiveHalvingPruner(min_resource=min_resource or "auto")
        if name == "median":
            return p.MedianPruner()
        if name == "none":
            return p.NopPruner()
        raise StudyError("bad_request", "unknown pruner %r" % (name,))

    def open(self, request):
        optuna = self.optuna
        params = request["params"]
        self.distributions = {name: self.distribution(spec) for name, spec in params.items()}
        self.live = {}
        self.storage = rdb_storage(optuna, request["storage"])
        self.study = optuna.create_study(
            storage=self.storage,
            study_name=request["study"],
            direction=request["direction"],
            sampler=self.sampler(request["sampler"], request.get("sampler_seed"), params),
            pruner=self.pruner(request["pruner"], request.get("min_resource"), request.get("max_resource")),
            load_if_exists=True,
        )
        wanted = optuna.study.StudyDirection.MINIMIZE if request["direction"] == "minimize" else optuna.study.StudyDirection.MAXIMIZE
        if self.study.direction != wanted:
            raise StudyError(
                "study_mismatch",
                "the stored study %r %ss its metric, and the sweep says %s"
                % (request["study"], self.study.direction.name.lower(), request["direction"]),
            )
        self.study_id = self.storage.get_study_id_from_name(request["study"])
        return {"trials": len(self.study.get_trials(deepcopy=False))}

    def trial(self, number):
        if self.study is None:
            raise StudyError("bad_request", "no study is open")
        try:
            trial_id = self.storage.get_trial_id_from_study_id_trial_number(self.study_id, int(number))
        except KeyError:
            raise StudyError("no_trial", "the study has no trial %d" % (int(number),))
        return self.optuna.trial.Trial(self.study, trial_id), trial_id

    def ask(self, request):
        if self.study is None:
            raise StudyError("bad_request", "no study is open")
        trial = self.study.ask(self.distributions)
        for key, value in (request.get("attrs") or {}).items():
            trial.set_user_attr(key, value)
        self.live[trial.number] = (trial, set())
        return {"number": trial.number, "params": {k: plain(v) for k, v in trial.params.items()}}

    def running(self, number):
        """(Trial, steps reported) of running trial `number`; None once it finished."""
        number = int(number)
        entry = self.live.get(number)
        if entry is None:
            # Asked by an earlier process (a client that restarts): looked up once.
            trial, trial_id = self.trial(number)
            frozen = self.storage.get_trial(trial_id)
            if frozen.state.is_finished():
                return None
            entry = self.live[number] = (trial, set(frozen.intermediate_values))
        return entry

    def attrs(self, request):
        entry = self.running(request["number"])
        trial = entry[0] if entry is not None else self.trial(request["number"])[0]
        for key, value in request["attrs"].items():
            trial.set_user_attr(key, value)
        return {}

    def report(self, request):
        entry = self.running(request["number"])
        if entry is None:
            return {"should_prune": False, "finished": True}
        trial, steps = entry
        step = int(request["step"])
        if step not in steps:
            trial.report(float(request["value"]), step)
            steps.add(step)
        return {"should_prune": bool(trial.should_prune())}

    def tell(self, request):
        state_name = request["state"]
        states = self.optuna.trial.TrialState
        state = {"complete": states.COMPLETE, "pruned": states.PRUNED, "fail": states.FAIL}.get(state_name)
        if state is None:
            raise StudyError("bad_request", "unknown state %r" % (state_name,))
        number = int(request["number"])
        entry = self.live.pop(number, None)
        # An unknown number is an error, not a new trial.
        trial = entry[0] if entry is not None else self.trial(number)[0]
        value = request.get("value")
        values = float(value) if state == states.COMPLETE and value is not None else None
        frozen = self.study.tell(trial, values, state=state, skip_if_finished=True)
        return {"state": frozen.state.name}

    def trials(self, request):
        if self.study is None:
            raise StudyError("bad_request", "no study is open")
        out = []
        for t in self.study.get_trials(deepcopy=False):
            out.append(
                {
                    "number": t.number,
                    "state": t.state.name,
                    "params": {k: plain(v) for k, v in t.params.items()},
                    "value": finite(t.value) if t.state.name == "COMPLETE" else None,
                    "intermediate": {str(k): finite(v) for k, v in sorted(t.intermediate_values.items())},
                    "attrs": t.user_attrs,
                }
            )
        best = None
        try:
            best = self.study.best_trial.number
        except ValueError:
            pass
        return {"trials": out, "best": best}


def main():
    try:
        import optuna
    except Exception as error:  # ImportError, or a broken install
        write({"ready": False, "error": {"kind": "optuna_missing", "message": "%s: %s" % (type(error).__name__, error)}})
        return 3
    version = tuple(int(p) for p in optuna.__version__.split(".")[:2] if p.isdigit())
    if version < MIN_OPTUNA:
        write({"ready": False, "error": {"kind": "optuna_old", "message": "Optuna %s is older than 3.1" % optuna.__version__}})
        return 3
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    write({"ready": True, "optuna": optuna.__version__, "python": "%d.%d.%d" % sys.version_info[:3]})
    study = Study(optuna)
    ops = {
        "open": study.open,
        "ask": study.ask,
        "attrs": study.attrs,
        "report": study.report,
        "tell": study.tell,
        "trials": study.trials,
    }
    for line in sys.stdin:
        if not line.strip():
            continue
        request_id = None
        try:
            request = json.loads(line)
            request_id = request.get("id")
            op = request.get("op")
            if op == "close":
                write({"id": request_id, "ok": True})
                return 0
            handler = ops.get(op)
            if handler is None:
                raise StudyError("bad_request", "unknown op %r" % (op,))
            answer = handler(request)
            answer.update({"id": request_id, "ok": True})
            write(answer)
        except StudyError as error:
            write({"id": request_id, "ok": False, "error": {"kind": error.kind, "message": str(error)}})
        except Exception as error:
            write({"id": request_id, "ok": False, "error": {"kind": "optuna", "message": "%s: %s" % (type(error).__name__, error)}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
