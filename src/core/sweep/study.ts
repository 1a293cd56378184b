/**
 * A sweep's study: Optuna in a Python child process (python/overbrainer_study.py) the product
 * starts with the user's interpreter and speaks to one JSON line at a time (./studyMessages.ts).
 * The study itself is in Optuna's storage (SQLite under runs/sweeps/<name>/), so a process that
 * dies loses nothing: a new one opens the same study and goes on.
 *
 * Requests are answered in order; the process's death or a line that is not a well-formed answer
 * fails every pending and later request with a {@link StudyError} saying what to do.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import type { z } from 'zod';
import { HintedError } from '../errors';
import {
  askAnswer,
  answerSchema,
  emptyAnswer,
  openAnswer,
  readySchema,
  reportAnswer,
  tellAnswer,
  trialsAnswer,
  type ParamValue,
  type StudyRequest,
  type StudySpec,
  type StudyTrial,
  type TrialEnd,
  type TrialState,
} from './studyMessages';

export type StudyErrorKind =
  | 'python_missing'
  | 'optuna_missing'
  | 'optuna_old'
  | 'process_died'
  | 'malformed'
  | 'study_mismatch'
  | 'no_trial'
  | 'request_failed'
  | 'install_broken';

export class StudyError extends HintedError<StudyErrorKind> {}

/** The interpreter used when no setting names one. */
export const DEFAULT_PYTHON = 'python3';

export interface StudyStartOptions {
  /** The interpreter the user set for sweeps; null or empty: `python3` on PATH. */
  python: string | null;
  /** How the user names another interpreter, for hints ("set overbrainer.sweepPython"). */
  choosePython?: string;
  /** The study script; by default the one shipped with the product. */
  scriptPath?: string;
}

/** Lines of the process's stderr kept for an error's message. */
const STDERR_LINES = 20;

/** The shipped study script: next to the bundle (dist/python) or in the source tree. */
export function studyScript(): string {
  const candidates = [
    path.join(__dirname, 'python', 'overbrainer_study.py'),
    path.join(__dirname, '..', '..', '..', 'python', 'overbrainer_study.py'),
  ];
  const found = candidates.find((file) => fs.existsSync(file));
  if (!found)
    throw new StudyError(
      'install_broken',
      "the sweep's study script is missing from this installation",
      'Reinstall the extension.',
    );
  return found;
}

/** The child's environment: the user's, without anything that looks like a secret. */
function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (/KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL/i.test(name) || name.startsWith('OVERBRAINER_'))
      continue;
    env[name] = value;
  }
  return { ...env, PYTHONDONTWRITEBYTECODE: '1', PYTHONUNBUFFERED: '1', PYTHONIOENCODING: 'utf-8' };
}

interface Pending {
  schema: z.ZodType;
  op: string;
  resolve: (value: unknown) => void;
  reject: (error: StudyError) => void;
}

export class StudyClient {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private failure: StudyError | null = null;

  private constructor(
    private readonly child: ChildProcessWithoutNullStreams,
    /** The interpreter that runs the study. */
    readonly python: string,
    readonly optunaVersion: string,
    readonly pythonVersion: string,
    private readonly stderr: string[],
    private readonly exited: Promise<number | null>,
    private readonly choosePython: string,
  ) {
    void exited.then((code) => {
      this.fail(
        new StudyError(
          'process_died',
          `the study process (${python}) ended${code === null ? ' on a signal' : ` with code ${code}`}${this.stderrTail()}`,
          'Start the sweep again: the study is kept in its storage and goes on where it was.',
        ),
      );
    });
  }

  /** Starts the study process and waits for its first line (Optuna there, and its version). */
  static async start(options: StudyStartOptions): Promise<StudyClient> {
    const python = options.python?.trim() || DEFAULT_PYTHON;
    const choose = options.choosePython ?? 'or choose a Python that has it for sweeps';
    const script = options.scriptPath ?? studyScript();
    const child = spawn(python, ['-u', script], {
      env: childEnv(),
      stdio: ['pipe', 'pipe', 'pipe'],
      windowsHide: true,
    });
    const stderr: string[] = [];
    child.stderr.setEncoding('utf8');
    createInterface({ input: child.stderr }).on('line', (line) => {
      stderr.push(line);
      if (stderr.length > STDERR_LINES) stderr.shift();
    });
    // The child's stdin may break when it dies: its death is said by 'close', not by a throw.
    child.stdin.on('error', () => undefined);
    const exited = new Promise<number | null>((resolve) => {
      child.once('close', (code) => resolve(code));
    });
    const lines = createInterface({ input: child.stdout });
    let client: StudyClient | null = null;
    const early: string[] = [];
    const first = new Promise<{ line: string } | { error: Error } | { ended: true }>((resolve) => {
      lines.on('line', (line) => {
        if (client !== null) client.onLine(line);
        else if (early.length === 0) {
          early.push(line);
          resolve({ line });
        } else early.push(line);
      });
      child.once('error', (error) => resolve({ error }));
      void exited.then(() => resolve({ ended: true }));
    });
    const got = await first;
    const tail = (): string => (stderr.length > 0 ? `: ${stderr.slice(-3).join(' | ')}` : '');
    if ('error' in got) {
      const code = (got.error as NodeJS.ErrnoException).code;
      throw new StudyError(
        'python_missing',
        code === 'ENOENT'
          ? `the Python for sweeps, ${python}, was not found`
          : `the Python for sweeps, ${python}, could not be started (${got.error.message})`,
        `Install Python 3 with Optuna (${DEFAULT_PYTHON} -m pip install optuna), ${choose}.`,
      );
    }
    if ('ended' in got) {
      throw new StudyError(
        'process_died',
        `${python} ended before the study started${tail()}`,
        `Check that ${python} is Python 3 with Optuna (${python} -c "import optuna"), ${choose}.`,
      );
    }
    const ready = parseLine(got.line, readySchema);
    if (ready === null) {
      child.kill('SIGKILL');
      throw new StudyError(
        'malformed',
        `${python} did not answer as the study process does (it wrote ${JSON.stringify(got.line.slice(0, 80))})`,
        `Check that ${python} runs Python 3 scripts, ${choose}.`,
      );
    }
    if (!ready.ready) {
      const old = ready.error.kind === 'optuna_old';
      throw new StudyError(
        old ? 'optuna_old' : 'optuna_missing',
        old
          ? `${python} has ${ready.error.message}`
          : `${python} has no Optuna (${ready.error.message})`,
        `Install it: ${python} -m pip install ${old ? '--upgrade ' : ''}optuna (in a virtual environment if pip refuses), ${choose}.`,
      );
    }
    client = new StudyClient(child, python, ready.optuna, ready.python, stderr, exited, choose);
    for (const line of early.slice(1)) client.onLine(line);
    return client;
  }

  /** Creates the study in its storage, or loads it; answers how many trials it holds. */
  async open(spec: StudySpec): Promise<{ trials: number }> {
    fs.mkdirSync(path.dirname(spec.storagePath), { recursive: true });
    return this.request(
      {
        op: 'open',
        storage: `sqlite:///${spec.storagePath}`,
        study: spec.study,
        direction: spec.direction,
        sampler: spec.sampler,
        sampler_seed: spec.samplerSeed,
        pruner: spec.pruner,
        min_resource: spec.minResource,
        max_resource: spec.maxResource,
        params: spec.params,
      },
      openAnswer,
    );
  }

  /** A new trial (RUNNING in the study) and the params Optuna's sampler chose for it. */
  async ask(
    attrs: Readonly<Record<string, string | number>> = {},
  ): Promise<{ number: number; params: Record<string, ParamValue> }> {
    return this.request({ op: 'ask', attrs }, askAnswer);
  }

  /** Sets user attributes on a trial (the trial ↔ run link), in the storage before it answers. */
  async setAttrs(number: number, attrs: Readonly<Record<string, string | number>>): Promise<void> {
    await this.request({ op: 'attrs', number, attrs }, emptyAnswer);
  }

  /**
   * Reports a trial's intermediate value at `step` (a step already reported is not reported
   * again) and answers whether Optuna's pruner says to stop it.
   */
  async report(number: number, step: number, value: number): Promise<{ shouldPrune: boolean }> {
    const answer = await this.request({ op: 'report', number, step, value }, reportAnswer);
    return { shouldPrune: answer.should_prune };
  }

  /** Ends a trial; a trial already ended stays as it was (nothing is counted twice). */
  async tell(number: number, end: TrialEnd, value: number | null = null): Promise<TrialState> {
    return (await this.request({ op: 'tell', number, state: end, value }, tellAnswer)).state;
  }

  /** Every trial of the study, and the best one's number. */
  async trials(): Promise<{ trials: StudyTrial[]; best: number | null }> {
    return this.request({ op: 'trials' }, trialsAnswer);
  }

  /** Asks the process to end, and waits until it has. */
  async close(): Promise<void> {
    if (this.failure === null) {
      try {
        await this.request({ op: 'close' }, emptyAnswer);
      } catch {
        // It is ending either way.
      }
    }
    this.child.stdin.end();
    await this.exited;
  }

  /** Kills the process at once (SIGKILL), as a crash would. */
  kill(): Promise<number | null> {
    this.child.kill('SIGKILL');
    return this.exited;
  }

  private request<S extends z.ZodType>(request: StudyRequest, schema: S): Promise<z.output<S>> {
    if (this.failure !== null) return Promise.reject(this.failure);
    const id = this.nextId++;
    return new Promise<z.output<S>>((resolve, reject) => {
      this.pending.set(id, {
        schema,
        op: request.op,
        resolve: resolve as (value: unknown) => void,
        reject,
      });
      this.child.stdin.write(`${JSON.stringify({ id, ...request })}\n`);
    });
  }

  /** One line of the process's stdout, once it is ready: the answer to the oldest request. */
  private onLine(line: string): void {
    if (this.failure !== null || line.trim() === '') return;
    const envelope = parseLine(line, answerSchema);
    const id = envelope?.id;
    const pending = typeof id === 'number' ? this.pending.get(id) : undefined;
    if (envelope === null || pending === undefined || typeof envelope.id !== 'number') {
      this.malformed(`an answer that is not one (${JSON.stringify(line.slice(0, 120))})`);
      return;
    }
    if (!envelope.ok) {
      this.pending.delete(envelope.id);
      const { kind, message } = envelope.error;
      pending.reject(errorOf(kind, message, pending.op, this.choosePython));
      return;
    }
    const body = pending.schema.safeParse(envelope);
    if (!body.success) {
      this.malformed(
        `a ${pending.op} answer without its fields (${JSON.stringify(line.slice(0, 120))})`,
      );
      return;
    }
    this.pending.delete(envelope.id);
    pending.resolve(body.data);
  }

  private malformed(what: string): void {
    this.fail(
      new StudyError(
        'malformed',
        `the study process (${this.python}) wrote ${what}${this.stderrTail()}`,
        `Make sure nothing else writes to the study's output (a sitecustomize or .pth of ${this.python}), ${this.choosePython}; then start the sweep again.`,
      ),
    );
    this.child.kill('SIGKILL');
  }

  private fail(error: StudyError): void {
    this.failure ??= error;
    for (const [id, pending] of this.pending) {
      this.pending.delete(id);
      pending.reject(this.failure);
    }
  }

  private stderrTail(): string {
    return this.stderr.length > 0 ? `: ${this.stderr.slice(-3).join(' | ')}` : '';
  }
}

function parseLine<S extends z.ZodType>(line: string, schema: S): z.output<S> | null {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return null;
  }
  const result = schema.safeParse(value);
  return result.success ? (result.data as z.output<S>) : null;
}

function errorOf(kind: string, message: string, op: string, choose: string): StudyError {
  if (kind === 'study_mismatch')
    return new StudyError(
      'study_mismatch',
      message,
      'Give the sweep a new name, or set direction back to what the stored study has.',
    );
  if (kind === 'no_trial')
    return new StudyError('no_trial', message, 'Look at the study with `overbrainer sweep show`.');
  return new StudyError(
    'request_failed',
    `the study could not ${op}: ${message}`,
    `Check the study's Optuna (${choose}) and its storage; then start the sweep again.`,
  );
}
