/**
 * A checkpoint a run resumes from, placed in its run directory (`resume/<name>/`, uploaded with
 * it) and named to the job: a resumed run's (`--resume-from`) and a recovered run's on its new pod.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { RunRecord } from '../runs/runRecord';
import { RESUME_DIR, RESUME_ENV, type TrainerJob } from './job';

/**
 * Copies the checkpoint `fromDir` into the run directory `runDir` as `resume/<name>/` (uploaded
 * with it) and returns the job's env naming it on the pod. An Axolotl config gets
 * `resume_from_checkpoint` too, under a comment saying `why`.
 */
export async function placeResumeCopy(
  runDir: string,
  run: RunRecord,
  job: TrainerJob,
  fromDir: string,
  name: string,
  why: string,
): Promise<Record<string, string>> {
  await fs.promises.cp(fromDir, path.join(runDir, RESUME_DIR, name), {
    recursive: true,
    dereference: false,
    verbatimSymlinks: true,
  });
  const remote = `${run.remoteDir}/${RESUME_DIR}/${name}`;
  if (job.trainer === 'axolotl') {
    fs.appendFileSync(
      path.join(runDir, job.config),
      `\n# Added by Overbrainer: ${why}.\nresume_from_checkpoint: ${JSON.stringify(remote)}\n`,
    );
  }
  return { [RESUME_ENV]: remote };
}
