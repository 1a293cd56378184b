/**
 * A client process for lifecycle tests that kill it: runs `train()` of src/core/runs/flow.ts on
 * a lab's workspace with the same dependencies the lab builds (test/helpers/lifecycle.ts
 * `coreFor`), and prints every core event as one JSON line on stdout, so the test knows where
 * the run stands before it sends SIGKILL.
 *
 *   node <its bundle> (test/helpers/childBundle.ts builds it; or node --import tsx test/helpers/lifecycleChild.ts)
 *
 * Input only through the environment (never argv: the API key must not show in process
 * arguments): LIFECYCLE_CHILD = JSON of ChildSetup, LIFECYCLE_API_KEY = the account key.
 * Ends with a line {"type":"done",...} or {"type":"error",...}; exit 0 or 1.
 */
import { train } from '../../src/core/flow';
import { runFlowChild } from './flowChild';

runFlowChild({
  setupVar: 'LIFECYCLE_CHILD',
  keyVar: 'LIFECYCLE_API_KEY',
  owner: 'lifecycle child',
  async run(deps, config, setup) {
    const result = await train(deps, config, setup.workspace);
    process.stdout.write(`${JSON.stringify({ type: 'done', summary: result.summary })}\n`);
    return 0;
  },
  failed: (error) =>
    process.stdout.write(`${JSON.stringify({ type: 'error', message: String(error) })}\n`),
});
