import assert from 'node:assert/strict';
import { configTemplate } from '../../src/core/config';
import { BASE as TRAINING_AND_POD, ok, one } from '../helpers/configFixture';

/** Lines 1-3 training, 5-8 a runpod target, 10 [budget]; budget keys start at line 11. */
const BASE = `${TRAINING_AND_POD}
[budget]
`;

describe('config: [budget]', () => {
  it('is absent without a [budget] section, and defaults its keys when empty', () => {
    const without = ok(BASE.replace('[budget]\n', ''));
    assert.equal(without.budget, null);
    assert.deepEqual(ok(BASE).budget, {
      maxUsdPerDay: null,
      maxUsdPerMonth: null,
      fitRunsToBudget: false,
      keptPodReminderHours: 12,
    });
  });

  it('reads every key, and the environment overrides them', () => {
    const config = ok(
      `${BASE}max_usd_per_day = 50\nmax_usd_per_month = 400.5\nfit_runs_to_budget = true\nkept_pod_reminder_hours = 3\n`,
    );
    assert.deepEqual(config.budget, {
      maxUsdPerDay: 50,
      maxUsdPerMonth: 400.5,
      fitRunsToBudget: true,
      keptPodReminderHours: 3,
    });
    const env = ok(BASE, {
      OVERBRAINER_BUDGET__MAX_USD_PER_DAY: '7.5',
      OVERBRAINER_BUDGET__FIT_RUNS_TO_BUDGET: 'true',
    });
    assert.equal(env.budget?.maxUsdPerDay, 7.5);
    assert.equal(env.budget?.fitRunsToBudget, true);
  });

  it('refuses a wrong value at its place, with a hint', () => {
    const e = one(`${BASE}max_usd_per_day = -5\n`);
    assert.equal(e.line, 11);
    assert.equal(e.key, 'budget.max_usd_per_day');
    assert.match(e.message, /greater than 0/);
    assert.match(e.hint, /max_usd_per_day = 50/);
    const b = one(`${BASE}fit_runs_to_budget = "yes"\n`);
    assert.match(b.message, /true or false/);
  });

  it('refuses a daily budget above the monthly one, and an unknown key with a guess', () => {
    const e = one(`${BASE}max_usd_per_day = 100\nmax_usd_per_month = 50\n`);
    assert.equal(e.line, 11);
    assert.match(e.message, /more than max_usd_per_month/);
    assert.match(e.hint, /Lower max_usd_per_day/);
    const typo = one(`${BASE}max_usd_per_dya = 5\n`);
    assert.match(typo.hint, /Did you mean max_usd_per_day\?/);
  });

  it('the template has a [budget] section that parses, its keys valid when uncommented', () => {
    const text = configTemplate();
    const start = text.indexOf('\n[budget]');
    // Up to the next (commented) section, such as # [sweep].
    const end = text.indexOf('\n\n# [', start);
    const part = text.slice(start, end < 0 ? undefined : end);
    const uncommented = part
      .split('\n')
      .map((line) => (/^# [a-z_]+ = /.test(line) ? line.slice(2) : line))
      .join('\n');
    const config = ok(`${BASE.replace('[budget]\n', '')}${uncommented}`);
    assert.deepEqual(config.budget, {
      maxUsdPerDay: 50,
      maxUsdPerMonth: 500,
      fitRunsToBudget: false,
      keptPodReminderHours: 12,
    });
  });
});
