/**
 * A client process for lifecycle tests that kill it: runs `train()` of src/core/runs/flow.ts on
 * a lab's workspace with the same dependencies the lab builds (test/helpers/lifecycle.ts
 * `coreFor`), and prints every core event as one JSON line on stdout, so the test knows where
 * the run stands before it sends SIGKILL.
 *
 *   node <its bundle> (test/helpers/lifecycleChildProcess.ts builds it; or node --import tsx test/helpers/lifecycleChild.ts)
 *
 * Input only through the environment (never argv: the API key must not show in process
 * arguments): LIFECYCLE_CHILD = JSON of ChildSetup, LIFECYCLE_API_KEY = the account key.
 * Ends with a line {"type":"done",...} or {"type":"error",...}; exit 0 or 1.
 */
import { CLIENT_VERSION } from '../../src/core/runpod/client';
import { systemClock } from '../../src/core/clock';
import { train } from '../../src/core/flow';
import { coreFor, type ChildSetup } from './lifecycle';

async function main(): Promise<number> {
  const setup = JSON.parse(process.env.LIFECYCLE_CHILD ?? '') as ChildSetup;
  const apiKey = process.env.LIFECYCLE_API_KEY ?? '';
  delete process.env.LIFECYCLE_API_KEY;
  const { config, store, bus, client } = coreFor(
    setup.workspace,
    setup.baseUrl,
    apiKey,
    setup.timing,
  );
  bus.on((event) => process.stdout.write(`${JSON.stringify(event)}\n`));
  try {
    const result = await train(
      {
        store,
        client,
        bus,
        clock: systemClock,
        timing: setup.timing,
        version: CLIENT_VERSION,
        owner: 'lifecycle child',
      },
      config,
      setup.workspace,
    );
    process.stdout.write(`${JSON.stringify({ type: 'done', summary: result.summary })}\n`);
    return 0;
  } catch (error) {
    process.stdout.write(`${JSON.stringify({ type: 'error', message: String(error) })}\n`);
    return 1;
  } finally {
    client.dispose();
  }
}

main().then(
  (code) => process.exit(code),
  () => process.exit(1),
);
