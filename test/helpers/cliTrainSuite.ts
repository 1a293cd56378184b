/**
 * The fixture of the CLI's train files (cli, cli.runControl): cliSuite's emulator and a fresh
 * examples/tiny workspace per test whose job trains 20 steps of 0.05 s, with what their cases
 * share: a wait on a state while a CLI runs (failing at once when the CLI exits with an error),
 * the host-key secret's presence, the API key never printed, and the gated and long jobs a case
 * acts on while they run. Call it in a describe's body.
 */
import assert from 'node:assert/strict';
import { type Running } from './cli';
import { cliSuite } from './cliSuite';
import { gatedCommand } from './gatedJob';
import { tinyToml } from './tinyWorkspace';

export function trainToml(extra = ''): string {
  return tinyToml('python3 train.py --steps 20 --step-seconds 0.05', extra);
}

export function cliTrainSuite() {
  const suite = cliSuite('cli-it-', () => trainToml());

  async function waitFor(
    what: string,
    running: Running,
    probe: () => boolean,
    timeoutMs = 90_000,
  ): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (!probe()) {
      if (Date.now() > until || (running.child.exitCode !== null && !running.exitOk)) {
        throw new Error(`timed out waiting for ${what}; the CLI said:\n${running.out.stderr}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** Whether the account still holds the run's host-key secret. */
  const hostKeySecret = async (id: string): Promise<boolean> => {
    const listed = await suite.api.get<{ secrets: { name: string }[] }>('/account/secrets');
    return listed.body.secrets.some((s) => s.name === `overbrainer_host_key_${id}`);
  };
  const noSecretIn = (ran: { stdout: string; stderr: string }): void => {
    assert.ok(
      !ran.stdout.includes(suite.emulator.apiKey) && !ran.stderr.includes(suite.emulator.apiKey),
      'the API key was printed',
    );
  };
  /**
   * A run whose job ends only when the test lets it (helpers/gatedJob.ts) or a command ends it
   * (cancel, pod rm): the test acts while it surely runs, however slow the machine (a 40 s job
   * once ended under a load of 20 before two CLI calls had refused and forced a pod rm).
   */
  const GATED_JOB = { OVERBRAINER_TRAINING__COMMAND: gatedCommand() };
  /** A job long enough to be stopped: a snapshot request is honoured between train.py's steps. */
  const LONG_JOB = {
    OVERBRAINER_TRAINING__COMMAND: 'python3 train.py --steps 400 --step-seconds 0.1',
  };

  return { suite, waitFor, hostKeySecret, noSecretIn, GATED_JOB, LONG_JOB };
}
