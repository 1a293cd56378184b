/**
 * The push to the Hugging Face Hub of `[training] hub_model_id`: the job's last step, on the pod
 * (over the pod's bandwidth), after training and after the LoRA merge. The job runs the standard-
 * library push script (python/overbrainer_hub.py, uploaded into `plugin/` with the metrics plugin)
 * with the token the job already has as `HF_TOKEN`; the script writes `hub_push.json` into the run
 * directory, which the client reads at the run's end into run.json's `hub_push`.
 *
 * What is pushed: `output/merged/` with `merge = true` (the merged model), else `output/`, its
 * `checkpoint-*` directories left out. A run stopped for a snapshot pushes nothing (its training
 * is not final), and neither does a failed one. A failed push never fails the run: the job exits
 * with the training's status, the results come home as usual, and the run says what failed.
 */
import type { Executor } from '../exec/executor';
import { shQuote } from '../exec/shell';
import { hubPushFromJson, hubPushSchema, type HubPush } from '../runs/hubPushRecord';

export type { HubPush };

/** What the push script writes into the run directory. */
export const HUB_PUSH_FILE = 'hub_push.json';
/** The push script, in the run directory's `plugin/` beside the metrics plugin. */
export const HUB_SCRIPT = 'overbrainer_hub.py';

/** The push a job makes after its training. */
export interface HubJob {
  /** `me/model`. */
  repoId: string;
  /** The Hub's base URL (`HF_ENDPOINT`, else https://huggingface.co). */
  endpoint: string;
  /** The folder pushed, relative to the run directory. */
  folder: string;
}

/**
 * sh that pushes `hub` with `python` from the run directory (the job's working directory), unless
 * `skipIf` exists (the snapshot a stopped training wrote), and on the primary node only of a
 * cluster (`NODE_RANK` 0, or unset off a cluster); its status is always 0. A script that wrote no outcome (no
 * Python, killed) leaves one saying so, so the run never reads a push that did not happen as none.
 */
export function hubPushSh(hub: HubJob, python: string, skipIf: string): string {
  const out = shQuote(HUB_PUSH_FILE);
  const args = [
    `--repo ${shQuote(hub.repoId)}`,
    `--folder ${shQuote(hub.folder)}`,
    `--endpoint ${shQuote(hub.endpoint)}`,
    `--out ${out}`,
  ].join(' ');
  const notRun = JSON.stringify({
    repo_id: hub.repoId,
    folder: hub.folder,
    state: 'failed',
    stage: 'not_run',
    status: null,
  }).slice(0, -1);
  return [
    `{ [ -e ${shQuote(skipIf)} ] || [ "\${NODE_RANK:-0}" != 0 ] || {`,
    `rm -f ${out}; ${python} plugin/${HUB_SCRIPT} ${args}; pushed=$?;`,
    `[ -s ${out} ] || printf '%s,"error":"the push script ended with status %s and wrote no outcome"}\\n' ${shQuote(notRun)} "$pushed" > ${out};`,
    '}; true; }',
  ].join(' ');
}

/**
 * The push's outcome in `runDir` on the target: null when there is none (no push was made), a
 * failed push when the file cannot be read or parsed (the run then says so, never that it pushed).
 */
export async function readHubPush(
  executor: Executor,
  runDir: string,
  hub: { repoId: string; folder: string } | null,
  options: { signal?: AbortSignal } = {},
): Promise<HubPush | null> {
  const result = await executor.exec(
    `cd ${shQuote(runDir)} 2>/dev/null || exit 3\n[ -f ${HUB_PUSH_FILE} ] || exit 4\ncat ${HUB_PUSH_FILE}`,
    { signal: options.signal, timeoutMs: 30_000, maxOutputBytes: 64 * 1024 },
  );
  if (result.code === 3 || result.code === 4) return null;
  const unreadable = (why: string): HubPush | null =>
    hub === null ? null : { ...hub, state: 'failed', stage: 'not_run', status: null, error: why };
  if (result.code !== 0 || result.truncated) {
    return unreadable(
      `${HUB_PUSH_FILE} could not be read (${result.truncated ? 'larger than 64 KiB' : `exit ${result.code ?? result.signal}`})`,
    );
  }
  return (
    parseHubPush(result.stdout.toString('utf8')) ?? unreadable(`${HUB_PUSH_FILE} is malformed`)
  );
}

/** hub_push.json's text as a push, or null when it is not one. */
export function parseHubPush(text: string): HubPush | null {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return null;
  }
  const parsed = hubPushSchema.safeParse(raw);
  return parsed.success ? hubPushFromJson(parsed.data) : null;
}

/** What the run says of its push: where it went, or what failed and the next action. */
export function hubPushWords(push: HubPush, runId: string): string {
  if (push.state === 'pushed') {
    return `pushed ${push.folder}/ to the Hub as ${push.repoId} (revision ${push.revision})`;
  }
  return `Hub push failed (${push.stage}): ${push.error}. ${hubPushNextAction(push, runId)}`;
}

/** What to do after a failed push: the results are home either way. */
export function hubPushNextAction(
  push: Extract<HubPush, { state: 'failed' }>,
  runId: string,
): string {
  const local = `runs/${runId}/${push.folder}`;
  const yourself = `push ${local}/ yourself (\`huggingface-cli upload ${push.repoId} ${local}\`)`;
  if (push.stage === 'token' || push.status === 401 || push.status === 403) {
    return `Set OVERBRAINER_HF_TOKEN to a write token that may write to ${push.repoId} (huggingface.co/settings/tokens), then ${yourself}.`;
  }
  if (push.status === 429) return `The Hub limits how fast you may push: wait, then ${yourself}.`;
  if (push.stage === 'files')
    return `The job wrote nothing into ${push.folder}/: nothing was pushed.`;
  if (push.stage === 'not_run') {
    return `Check that python3 runs on the target (see runs/${runId}/job.log), then ${yourself}.`;
  }
  return `The results are home: ${yourself}.`;
}

/**
 * Records `push` in `run` (run.json's `hub_push`); a run that succeeded says it in its message
 * (and its end's): `pushed …`, or `Hub push failed (stage): … Next action.` — its state stays
 * `succeeded`, its results came home.
 */
export function recordHubPush(
  run: {
    id: string;
    state: string;
    message: string | null;
    hubPush?: HubPush;
    end?: { message: string | null };
  },
  push: HubPush | null,
): void {
  if (push === null) return;
  run.hubPush = push;
  if (run.state !== 'succeeded') return;
  const words = hubPushWords(push, run.id);
  run.message = run.message === null ? words : `${run.message}; ${words}`;
  if (run.end !== undefined) run.end.message = run.message;
}
