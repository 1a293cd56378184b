/**
 * The secrets a run's job gets in its environment: the Hugging Face token (`OVERBRAINER_HF_TOKEN`,
 * from the environment or the workspace's `.env`; VS Code's secret storage puts it there) as
 * `HF_TOKEN`, and each name of `[training] secrets` from the environment under its own name.
 * They travel on the launcher's stdin over the SSH channel into the job's environment, and
 * nowhere else: no file, no process argument, no event. The job's log is redacted of their
 * values on the pod, before anyone reads or copies it.
 */
import type { Env } from '../config/env';
import { ENV_HF_TOKEN, JOB_HF_TOKEN } from '../config/training';
import type { OverbrainerConfig } from '../config/types';
import { FlowError } from './deps';

export { ENV_HF_TOKEN, JOB_HF_TOKEN };

/**
 * The job's secrets by variable name. `strict` (a new run): a name of `[training] secrets` that
 * is not set, or `hub_model_id` without a token, is a FlowError naming the next action, before
 * anything is created. Not strict (a run going on after a restart): what is set.
 */
export function jobSecretsOf(
  config: OverbrainerConfig,
  env: Env,
  strict = true,
): Record<string, string> {
  const training = config.training;
  const secrets: Record<string, string> = {};
  if (!training) return secrets;
  const take = (value: string | undefined): string | null => {
    const trimmed = value?.trim() ?? '';
    return trimmed === '' ? null : trimmed;
  };
  const token = take(env[ENV_HF_TOKEN]);
  if (token !== null) secrets[JOB_HF_TOKEN] = token;
  else if (strict && training.hubModelId !== null) {
    throw new FlowError(
      'bad_config',
      `hub_model_id = "${training.hubModelId}" pushes to the Hugging Face Hub, which needs a token, but ${ENV_HF_TOKEN} is not set`,
      `Set ${ENV_HF_TOKEN} (a write token from huggingface.co/settings/tokens) in your environment or the workspace's .env; in VS Code run "Overbrainer: Set Hugging Face Token".`,
    );
  }
  for (const name of training.secrets) {
    const value = take(env[name]);
    if (value !== null) secrets[name] = value;
    else if (strict) {
      throw new FlowError(
        'bad_config',
        `[training] secrets names ${name}, which is not set`,
        `Set ${name} in the environment the run starts from (VS Code: "Overbrainer: Set Job Secret"), or remove it from secrets.`,
      );
    }
  }
  for (const [name, value] of Object.entries(secrets)) {
    if (/[\r\n\0]/.test(value)) {
      throw new FlowError(
        'bad_config',
        `the value of ${name} holds a line break: it cannot reach the job`,
        `Set ${name} again as one line.`,
      );
    }
  }
  return secrets;
}
