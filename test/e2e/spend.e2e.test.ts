import * as assert from 'node:assert/strict';
import { confirmTrain, tinyToml, useWindow } from './window';

/**
 * Issue #16 in the real VS Code against the Runpod emulator: Train's confirmation quotes the run
 * (the hourly rate, the expected range, the worst case), and a `[budget]` smaller than the run's
 * worst case makes Train refuse with the figures, before any pod exists.
 */
const DAILY_BUDGET_USD = 0.01;

describe('Spend in the real VS Code: the quote in the Train confirmation, the budget refusal', function () {
  this.timeout(300_000);
  const window = useWindow({
    name: 'spend',
    toml: `${tinyToml('python3 train.py --steps 5 --step-seconds 0.05')}
[budget]
max_usd_per_day = ${DAILY_BUDGET_USD}
`,
    timingScale: '8',
    apiKeyInEnv: true,
  });

  it('the confirmation shows the quote; a budget below the worst case refuses with its figures and creates no pod', async function () {
    const { emulator, workbench } = window;
    await workbench.untilOverbrainerShown();
    await workbench.openViewContainer('Overbrainer');
    await confirmTrain(workbench, 'Train', async (words) => {
      assert.match(words, /Hourly rate: \$\d+\.\d\d\/h on NVIDIA GeForce RTX 4090/);
      assert.match(words, /Expected: .*\$\d+\.\d\d/);
      assert.match(words, /Worst case: .*\$\d+\.\d\d/);
      await workbench.screenshot('the quote in the confirmation');
    });

    const toast = await workbench.waitForNotification('would pass what is left of the budget');
    const refusal = await toast.innerText();
    assert.match(refusal, /worst case \$\d+\.\d\d would pass what is left of the budget, \$0\.01/);
    await workbench.screenshot('the budget refusal');
    assert.deepEqual(
      emulator.requests().filter((r) => r.route === 'createPod'),
      [],
      'no pod was asked for',
    );
    assert.deepEqual(emulator.ledger().pods, [], 'the emulator holds no pod');
  });
});
