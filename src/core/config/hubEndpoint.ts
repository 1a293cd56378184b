/**
 * The Hugging Face Hub's base URL a job pushes to (`hub_model_id`): `HF_ENDPOINT` from the
 * environment (or `.env`), as the Hugging Face libraries read it, else https://huggingface.co.
 * The token is sent there, so it must be https, or plain http only to this machine (loopback: a
 * local stand-in or mirror).
 */
import type { Env } from './env';

export const ENV_HF_ENDPOINT = 'HF_ENDPOINT';
export const DEFAULT_HUB_ENDPOINT = 'https://huggingface.co';

export type HubEndpoint = { ok: true; url: string } | { ok: false; message: string; hint: string };

export function hubEndpointOf(env: Env): HubEndpoint {
  const raw = env[ENV_HF_ENDPOINT]?.trim() ?? '';
  if (raw === '') return { ok: true, url: DEFAULT_HUB_ENDPOINT };
  const hint = `Unset ${ENV_HF_ENDPOINT} to push to ${DEFAULT_HUB_ENDPOINT}, or give an https:// URL (http:// only for 127.0.0.1 or localhost).`;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, message: `${ENV_HF_ENDPOINT} is not a URL`, hint };
  }
  if (url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '') {
    return {
      ok: false,
      message: `${ENV_HF_ENDPOINT} must not hold a user name, a password, a query or a fragment`,
      hint,
    };
  }
  const loopback =
    ['localhost', '[::1]'].includes(url.hostname) ||
    /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(url.hostname);
  if (url.protocol === 'https:' || (url.protocol === 'http:' && loopback)) {
    return { ok: true, url: url.href.replace(/\/+$/, '') };
  }
  return {
    ok: false,
    message:
      url.protocol === 'http:'
        ? `${ENV_HF_ENDPOINT} uses plain http to a host that is not this machine, which would send the Hugging Face token unencrypted`
        : `${ENV_HF_ENDPOINT} must be an https:// URL`,
    hint,
  };
}
