/**
 * `hub_push` in run.json: what the job's push to the Hugging Face Hub (`[training] hub_model_id`)
 * did, as the pod's push script wrote it (`hub_push.json` in the run directory, read back at the
 * run's end). A typed value: front ends decide on `state`, never on the run's words.
 */
import { z } from 'zod';

/** Where a failed push stopped. */
export type HubPushStage =
  /** No HF_TOKEN in the job's environment. */
  | 'token'
  /** Nothing to push (the folder is empty or missing). */
  | 'files'
  | 'create_repo'
  | 'preupload'
  | 'lfs'
  | 'commit'
  /** Anything else inside the push script (a local I/O error). */
  | 'push'
  /** The push script did not run, or wrote nothing (no Python, killed). */
  | 'not_run';

export const HUB_PUSH_STAGES: readonly HubPushStage[] = [
  'token',
  'files',
  'create_repo',
  'preupload',
  'lfs',
  'commit',
  'push',
  'not_run',
];

export type HubPush =
  | {
      /** The Hub repository (`me/model`). */
      repoId: string;
      state: 'pushed';
      /** The commit the Hub answered (`commitOid`): the revision pushed. */
      revision: string;
      /** The folder pushed, relative to the run directory (`output`, `output/merged`). */
      folder: string;
      files: number;
      bytes: number;
    }
  | {
      repoId: string;
      state: 'failed';
      folder: string;
      stage: HubPushStage;
      /** The Hub's HTTP status; null when it did not answer (or was never asked). */
      status: number | null;
      /** What failed, in the push script's words (never the token). */
      error: string;
    };

const common = { repo_id: z.string().min(1), folder: z.string() };

export const hubPushSchema = z.discriminatedUnion('state', [
  z.object({
    ...common,
    state: z.literal('pushed'),
    revision: z.string().min(1),
    files: z.number().int().min(0),
    bytes: z.number().int().min(0),
  }),
  z.object({
    ...common,
    state: z.literal('failed'),
    stage: z.string().transform((stage) => stageRead(stage)),
    status: z.number().int().nullable(),
    error: z.string(),
  }),
]);

function stageRead(stage: string): HubPushStage {
  return (HUB_PUSH_STAGES as readonly string[]).includes(stage) ? (stage as HubPushStage) : 'push';
}

/** The push as its snake_case JSON (hub_push.json and run.json alike) reads. */
export function hubPushFromJson(raw: z.infer<typeof hubPushSchema>): HubPush {
  if (raw.state === 'pushed') {
    return {
      repoId: raw.repo_id,
      state: 'pushed',
      revision: raw.revision,
      folder: raw.folder,
      files: raw.files,
      bytes: raw.bytes,
    };
  }
  return {
    repoId: raw.repo_id,
    state: 'failed',
    folder: raw.folder,
    stage: raw.stage,
    status: raw.status,
    error: raw.error,
  };
}

/** The push as run.json holds it. */
export function hubPushToJson(push: HubPush): Record<string, unknown> {
  if (push.state === 'pushed') {
    const { repoId, ...rest } = push;
    return { repo_id: repoId, ...rest };
  }
  const { repoId, ...rest } = push;
  return { repo_id: repoId, ...rest };
}
