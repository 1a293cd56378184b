/**
 * A client process running `sweep()` of the flow on a lab's workspace (test/helpers/lifecycle.ts
 * `coreFor`), for the sweep test that SIGKILLs it mid-sweep. Input only through the environment
 * (never argv: the API key must not show in process arguments): SWEEP_CHILD = JSON of
 * {workspace, baseUrl, timing, python}, SWEEP_API_KEY = the account key.
 *
 *   node --import tsx test/helpers/sweepChild.ts
 */
import { systemClock } from '../../src/core/clock';
import { sweep } from '../../src/core/flow/sweep';
import { CLIENT_VERSION } from '../../src/core/runpod/client';
import type { Timing } from '../../src/core/timing';
import { coreFor } from './lifecycle';

async function main(): Promise<number> {
  const setup = JSON.parse(process.env.SWEEP_CHILD ?? '') as {
    workspace: string;
    baseUrl: string;
    timing: Timing;
    python: string;
  };
  const apiKey = process.env.SWEEP_API_KEY ?? '';
  delete process.env.SWEEP_API_KEY;
  const { config, store, bus, client } = coreFor(
    setup.workspace,
    setup.baseUrl,
    apiKey,
    setup.timing,
  );
  bus.on((event) => process.stdout.write(`${JSON.stringify(event)}\n`));
  try {
    await sweep(
      {
        store,
        client,
        bus,
        clock: systemClock,
        timing: setup.timing,
        version: CLIENT_VERSION,
        owner: 'sweep child',
      },
      config,
      setup.workspace,
      { python: setup.python },
    );
    return 0;
  } catch (error) {
    process.stderr.write(`${String(error)}\n`);
    return 1;
  } finally {
    client.dispose();
  }
}

main().then(
  (code) => process.exit(code),
  () => process.exit(1),
);
