/**
 * What the flow's child processes share (./lifecycleChild.ts, ./sweepChild.ts): their setup and
 * the account key read from the environment (never argv: the key must not show in process
 * arguments; the key's variable is removed once read), the core built as the lab builds it
 * (./lifecycle.ts `coreFor`), every core event printed as one JSON line on stdout, the flow run,
 * the client disposed, and the process ended with the flow's exit code (1 when it threw).
 */
import { systemClock } from '../../src/core/clock';
import type { OverbrainerConfig } from '../../src/core/config';
import type { FlowDeps } from '../../src/core/flow';
import { CLIENT_VERSION } from '../../src/core/runpod/client';
import { coreFor, type ChildSetup } from './lifecycle';

export interface FlowChild<S extends ChildSetup> {
  /** The variable holding the JSON of the setup, and the one holding the API key. */
  setupVar: string;
  keyVar: string;
  /** Lock owner name in the FlowDeps. */
  owner: string;
  /** The flow, with the core's parts; resolves to the exit code. */
  run(deps: FlowDeps, config: OverbrainerConfig, setup: S): Promise<number>;
  /** Reports a flow that threw (its exit code is 1). */
  failed(error: unknown): void;
}

export function runFlowChild<S extends ChildSetup>(child: FlowChild<S>): void {
  const main = async (): Promise<number> => {
    const setup = JSON.parse(process.env[child.setupVar] ?? '') as S;
    const apiKey = process.env[child.keyVar] ?? '';
    delete process.env[child.keyVar];
    const { config, store, bus, client } = coreFor(
      setup.workspace,
      setup.baseUrl,
      apiKey,
      setup.timing,
    );
    bus.on((event) => process.stdout.write(`${JSON.stringify(event)}\n`));
    const deps: FlowDeps = {
      store,
      client,
      bus,
      clock: systemClock,
      timing: setup.timing,
      version: CLIENT_VERSION,
      owner: child.owner,
    };
    try {
      return await child.run(deps, config, setup);
    } catch (error) {
      child.failed(error);
      return 1;
    } finally {
      client.dispose();
    }
  };
  main().then(
    (code) => process.exit(code),
    () => process.exit(1),
  );
}
