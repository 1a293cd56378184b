/**
 * A client process running `sweep()` of the flow on a lab's workspace (test/helpers/lifecycle.ts
 * `coreFor`), for the sweep test that SIGKILLs it mid-sweep. Input only through the environment
 * (never argv: the API key must not show in process arguments): SWEEP_CHILD = JSON of
 * {workspace, baseUrl, timing, python}, SWEEP_API_KEY = the account key.
 *
 *   node <its bundle> (./childBundle.ts builds it; or node --import tsx test/helpers/sweepChild.ts)
 */
import { sweep } from '../../src/core/flow/sweep';
import { runFlowChild } from './flowChild';
import type { ChildSetup } from './lifecycle';

runFlowChild<ChildSetup & { python: string }>({
  setupVar: 'SWEEP_CHILD',
  keyVar: 'SWEEP_API_KEY',
  owner: 'sweep child',
  async run(deps, config, setup) {
    await sweep(deps, config, setup.workspace, { python: setup.python });
    return 0;
  },
  failed: (error) => process.stderr.write(`${String(error)}\n`),
});
