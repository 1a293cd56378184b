import * as assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import {
  DEFAULT_ARTIFACTS,
  DEFAULT_BOOT_GRACE_MINUTES,
  DEFAULT_RETRIEVE_GRACE_MINUTES,
  DEFAULT_RUNPOD_BASE_URL,
  DEFAULT_RUNPOD_IMAGE,
  DEFAULT_RUNPOD_VENV,
  ENV_API_KEY,
  ENV_BASE_URL,
  ENV_SSH_CLIENT,
  KNOWN_KEYS,
} from '../../src/core/config';
import { usageText } from '../../src/cli/help';
import { quote, quoteLines } from '../../src/core/pod/quote';
import {
  WATCHDOG_CALL_LIMIT_S,
  WATCHDOG_DELETE_CALLS,
  watchdogSpans,
} from '../../src/core/pod/worstCase';
import { PRODUCTION_TIMING } from '../../src/core/timing';
import { ENV_HF_TOKEN } from '../../src/core/config/training';
import { ENV_HF_ENDPOINT } from '../../src/core/config/hubEndpoint';

/**
 * The README's configuration reference and safety model cannot drift from the code: every key
 * the parser knows has a row (and no row names a key it does not know), the defaults it quotes
 * are the code's, and the bounds on spend quote the production timing.
 */
const ROOT = path.resolve(__dirname, '..', '..');
const README = readFileSync(path.join(ROOT, 'README.md'), 'utf8');

/** The markdown section under `heading` (up to the next heading of the same or a higher level). */
function section(heading: string): string {
  const start = README.indexOf(`\n${heading}\n`);
  assert.ok(start >= 0, `README has "${heading}"`);
  const level = /^#+/.exec(heading)?.[0] ?? '##';
  const rest = README.slice(start + heading.length + 2);
  const end = rest.search(new RegExp(`\\n#{1,${level.length}} `));
  return end < 0 ? rest : rest.slice(0, end);
}

/** The first column of the section's tables: `key` of each row. */
function tableKeys(text: string): string[] {
  return [...text.matchAll(/^\| `([^`]+)` +\|/gm)].map((match) => match[1]!);
}

describe('README', function () {
  it('the configuration reference has exactly the keys the parser knows', function () {
    const tables: [string, readonly string[]][] = [
      ['### `[project]`', KNOWN_KEYS.project],
      ['### `[training]`', KNOWN_KEYS.training],
      ['### `[targets.NAME]` with `kind = "runpod"` (a pod per run)', KNOWN_KEYS.runpod],
      ['### `[targets.NAME]` with `kind = "local"` (this machine, no pod)', KNOWN_KEYS.local],
      ['### `[budget]`', KNOWN_KEYS.budget],
      ['### `[sweep]`', KNOWN_KEYS.sweep],
    ];
    for (const [heading, known] of tables) {
      assert.deepEqual(tableKeys(section(heading)).sort(), [...known].sort(), heading);
    }
  });

  it('names the environment-only settings and every VS Code setting of the manifest', function () {
    const text = section('### Environment only, and VS Code settings');
    const manifest = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
      contributes: { configuration: { properties: Record<string, { default: unknown }> } };
    };
    const settings = manifest.contributes.configuration.properties;
    const expected = [
      ENV_API_KEY,
      ENV_BASE_URL,
      ENV_HF_TOKEN,
      ENV_HF_ENDPOINT,
      ...Object.keys(settings),
    ].sort();
    assert.deepEqual(tableKeys(text).sort(), expected);
    for (const [name, { default: value }] of Object.entries(settings)) {
      const row = text.split('\n').find((line) => line.startsWith(`| \`${name}\``)) ?? '';
      assert.ok(row.includes(`\`${String(value)}\``), `${name}'s default ${String(value)}`);
    }
    assert.ok(README.includes(ENV_SSH_CLIENT));
  });

  it('quotes the code’s defaults', function () {
    const runpod = section('### `[targets.NAME]` with `kind = "runpod"` (a pod per run)');
    assert.ok(runpod.includes(`\`${DEFAULT_RUNPOD_IMAGE.slice(0, 70)}`), 'the default image');
    assert.ok(runpod.includes(`\`${DEFAULT_RUNPOD_VENV}\``), 'the default venv');
    const training = section('### `[training]`');
    assert.ok(
      training.includes(`\`[${DEFAULT_ARTIFACTS.map((a) => `"${a}"`).join(', ')}]\``),
      'the default artifacts',
    );
    assert.ok(README.includes(`\`${DEFAULT_RUNPOD_BASE_URL}\``), 'the default base URL');
  });

  it('states the bounds on spend with the production timing', function () {
    const safety = section('## Safety model: who deletes a pod, and when').replace(/\s+/g, ' ');
    const minutes = (ms: number): string => `${ms / 60_000} min`;
    assert.ok(safety.includes(`deadline + ${minutes(PRODUCTION_TIMING.deadlineMarginMs)}`));
    assert.ok(safety.includes(`last lease renewal + ${minutes(PRODUCTION_TIMING.leaseTtlMs)}`));
    assert.ok(safety.includes(`every ${minutes(PRODUCTION_TIMING.leaseRenewMs)}`));
    assert.ok(safety.includes(`less than ${minutes(PRODUCTION_TIMING.stallMs)} old`));
    assert.ok(safety.includes(`every ${PRODUCTION_TIMING.watchdogIntervalS} s`));
  });

  it('states the worst case the quote computes: max_hours and what the watchdog does past the deadline', function () {
    const safety = section('## Safety model: who deletes a pod, and when').replace(/\s+/g, ' ');
    const t = PRODUCTION_TIMING;
    const min = (s: number): string => `${s / 60}`;
    const deleteS = WATCHDOG_DELETE_CALLS * WATCHDOG_CALL_LIMIT_S;
    // The formula, each term from the timing the watchdog gets.
    const formula = `\`max_hours\` + max(${min(t.leaseTtlMs / 1000)} + ${min(t.watchdogIntervalS)} + ${min(t.snapshotWaitS)} min, \`retrieve_grace_minutes\`) + ${min(t.watchdogIntervalS)} min + ${deleteS} s`;
    assert.ok(safety.includes(formula), `the worst case's formula: ${formula}`);
    // Its figure with the default graces, as the quote computes it.
    const spans = watchdogSpans(t, {
      bootGraceS: DEFAULT_BOOT_GRACE_MINUTES * 60,
      retrieveGraceS: DEFAULT_RETRIEVE_GRACE_MINUTES * 60,
    });
    const figure = `**\`max_hours\` + ${spans.afterDeadlineS / 60} min**`;
    assert.ok(safety.includes(figure), `the worst case with the default graces: ${figure}`);
    // And the quote prices exactly that span: one hour at $1/h is quoted $1 + that span.
    const q = quote({
      candidates: [{ gpuType: 'X', pricePerHourUsd: 1, availability: null }],
      gpuCount: 1,
      maxHours: 1,
      maxCostUsd: null,
      spans,
      historyS: [],
    });
    assert.equal(q.worstUsd, Math.ceil((1 + spans.afterDeadlineS / 3600) * 100) / 100);
    assert.ok(
      quoteLines(q).some((line) => line.startsWith(`Worst case: $${q.worstUsd?.toFixed(2)} `)),
    );
    // With a cap: the cap and the last tick and delete.
    assert.ok(safety.includes(`the cap + ${spans.afterCapS / 60} min of the rate`));
  });

  it('says how many integration files run at a time as scripts/test.sh runs them', function () {
    const script = readFileSync(path.join(ROOT, 'scripts', 'test.sh'), 'utf8');
    const jobs = Number(/^INTEGRATION_JOBS=(\d+)$/m.exec(script)?.[1]);
    const words = [
      '',
      'one',
      'two',
      'three',
      'four',
      'five',
      'six',
      'seven',
      'eight',
      'nine',
      'ten',
    ][jobs];
    assert.ok(words, `INTEGRATION_JOBS=${jobs}`);
    const said = [...README.matchAll(/runs (\w+) files at a time/g)].map((m) => m[1]);
    assert.deepEqual(said, [words]);
  });

  it("the exit-code table says what the CLI's own help says: a failed, stopped or cancelled run exits 1", function () {
    const help = usageText();
    assert.match(help, /1 a failed, stopped or cancelled run, or an error/);
    const row = section('### Exit codes')
      .split('\n')
      .find((line) => line.startsWith('| 1 '));
    assert.ok(row?.includes('a failed, stopped or cancelled run'), row);
    assert.ok(
      section('### Exit codes').includes('`train stop` that ended `stopped`'),
      'train stop itself exits 0',
    );
  });

  it('shows images that exist and links to files that exist', function () {
    const targets = [...README.matchAll(/\]\(((?:docs|examples|python)\/[^)#]+)\)/g)].map(
      (match) => match[1]!,
    );
    assert.ok(targets.some((target) => target.startsWith('docs/images/')));
    // docs/RELIABILITY.md and docs/BENCHMARKS.md are written by their own tasks.
    const missing = targets.filter(
      (target) => !existsSync(path.join(ROOT, target)) && !/^docs\/[A-Z]+\.md$/.test(target),
    );
    assert.deepEqual(missing, []);
  });
});
