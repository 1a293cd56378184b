/**
 * A client process for bench/sweepFigures.ts's third figure: it follows one run (`train`) or a
 * sweep (`sweep`) of a lab's workspace to its end and prints, as its last stdout line, the CPU
 * time (user + sys) its own process spent from the flow's start to its end, in ms. Its events
 * are not printed (printing them would be CPU the client does not spend). Input only through the
 * environment, as test/helpers/flowChild.ts's: FIGURES_CHILD = JSON of {workspace, baseUrl,
 * timing, python, mode}, FIGURES_API_KEY = the account key.
 *
 *   node --import tsx bench/sweepFiguresChild.ts
 */
import { systemClock } from '../src/core/clock';
import { sweep, train, type FlowDeps } from '../src/core/flow';
import { CLIENT_VERSION } from '../src/core/runpod/client';
import { coreFor, type ChildSetup } from '../test/helpers/lifecycle';

interface Setup extends ChildSetup {
  python: string;
  mode: 'train' | 'sweep';
}

async function main(): Promise<number> {
  const setup = JSON.parse(process.env.FIGURES_CHILD ?? '') as Setup;
  const apiKey = process.env.FIGURES_API_KEY ?? '';
  delete process.env.FIGURES_API_KEY;
  const { config, store, bus, client } = coreFor(
    setup.workspace,
    setup.baseUrl,
    apiKey,
    setup.timing,
  );
  const deps: FlowDeps = {
    store,
    client,
    bus,
    clock: systemClock,
    timing: setup.timing,
    version: CLIENT_VERSION,
    owner: `figures ${setup.mode}`,
  };
  const before = process.cpuUsage();
  try {
    if (setup.mode === 'train') await train(deps, config, setup.workspace);
    else await sweep(deps, config, setup.workspace, { python: setup.python });
  } finally {
    client.dispose();
  }
  const used = process.cpuUsage(before);
  process.stdout.write(`${JSON.stringify({ cpuMs: (used.user + used.system) / 1000 })}\n`);
  return 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`${String(error)}\n`);
    process.exit(1);
  },
);
