/**
 * The transport's use of undici: loaded on the first request, and a dispatcher that says when a
 * request's bytes are about to leave.
 */
import type { Dispatcher } from 'undici';

/**
 * undici, loaded on the first request: activating the extension (which makes no API call) does
 * not pay for evaluating it (~60 ms of the extension's load time). A plain require, so esbuild
 * still bundles it.
 */
export function undici(): typeof import('undici') {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require('undici') as typeof import('undici');
}

/**
 * `dispatcher`, whose next request tells `onWrite` once as its bytes are about to be written:
 * undici calls a request's `onConnect` on the connected socket in the same tick as the write
 * (client-h1's writeH1), not when the call is queued or a connection is opened.
 */
export function tellingWrite(dispatcher: Dispatcher, onWrite: () => void): Dispatcher {
  let told = false;
  const dispatch = (options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler) => {
    const onConnect = handler.onConnect?.bind(handler);
    handler.onConnect = (abort) => {
      if (!told) onWrite();
      told = true;
      onConnect?.(abort);
    };
    return dispatcher.dispatch(options, handler);
  };
  return new Proxy(dispatcher, {
    get: (target, key) => (key === 'dispatch' ? dispatch : Reflect.get(target, key)),
  });
}
