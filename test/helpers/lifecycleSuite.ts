/**
 * What the lifecycle integration files share inside their `describe`: a lab per scenario (closed
 * after each test, failing a passed test that left a pod billing) and the asserts they repeat.
 * Call `lifecycleSuite()` inside the `describe` (it registers the `afterEach`).
 */
import assert from 'node:assert/strict';
import { Lab, type LabOptions } from './lifecycle';

export type Attempt = { result: string; gpu_type: string; detail?: string; pod_id?: string };

export interface LifecycleSuite {
  /** A lab (emulator + workspace) of its own, closed after the test. */
  lab(options?: LabOptions): Promise<Lab>;
  attemptsOf(l: Lab, id: string): Attempt[];
  /** Every billing pod of the lab must be gone; its ledger says so. */
  assertNothingBills(l: Lab): void;
  /**
   * Runs independent scenarios side by side and waits for every one to end (a failing one must
   * not leave the others writing into a lab that afterEach removes), then throws the first failure.
   */
  together(scenarios: Promise<void>[]): Promise<void>;
  /** No pod of the run may exist: its private client key and its host-key secret are gone. */
  assertKeysForgotten(l: Lab, id: string): Promise<void>;
  requestsFor(l: Lab, podId: string, route: string): ReturnType<Lab['emulator']['requests']>;
}

export function lifecycleSuite(): LifecycleSuite {
  const labs: Lab[] = [];

  afterEach(async function () {
    const failures: string[] = [];
    for (const done of labs.splice(0)) {
      try {
        const billing = await done.close();
        if (billing.length > 0)
          failures.push(`pods left billing: ${billing.map((p) => p.id).join(', ')}`);
      } catch (error) {
        failures.push(String(error));
      }
    }
    if (this.currentTest?.state === 'passed') assert.deepEqual(failures, []);
  });

  return {
    async lab(options: LabOptions = {}): Promise<Lab> {
      const started = await Lab.start(options);
      labs.push(started);
      return started;
    },
    attemptsOf: (l, id) => l.podJson(id).attempts as Attempt[],
    assertNothingBills: (l) => {
      assert.deepEqual(
        l.billing().map((p) => p.id),
        [],
        'a pod was left billing',
      );
    },
    together: async (scenarios) => {
      const settled = await Promise.allSettled(scenarios);
      for (const outcome of settled) if (outcome.status === 'rejected') throw outcome.reason;
    },
    assertKeysForgotten: async (l, id) => {
      assert.equal(l.clientKeyExists(id), false, 'the client key is forgotten');
      assert.equal(await l.hostKeySecretExists(id), false, 'the host-key secret is deleted');
    },
    requestsFor: (l, podId, route) =>
      l.emulator.requests().filter((r) => r.route === route && r.path.includes(podId)),
  };
}
