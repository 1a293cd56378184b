/**
 * The CLI's command table against its parser, its help and the README: every command parses,
 * has a help with a usage line and an example, and is documented in the README's command table.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseArgs, UsageError } from '../../src/cli/args';
import { COMMAND_SPECS } from '../../src/cli/commandSpecs';
import { commandHelp, usageText } from '../../src/cli/help';

const README = fs.readFileSync(path.join(__dirname, '..', '..', 'README.md'), 'utf8');

describe('cli: the command table', () => {
  it('parses the new commands and their flags', () => {
    assert.deepEqual(parseArgs(['--version']).command, { kind: 'version' });
    assert.deepEqual(parseArgs(['init', '--force']).command, { kind: 'init', force: true });
    assert.deepEqual(parseArgs(['runs', 'show', 'r1', '--json']).command, {
      kind: 'runs_show',
      runId: 'r1',
      json: true,
    });
    assert.deepEqual(parseArgs(['runs', 'ls', '--json']).command, { kind: 'runs_ls', json: true });
    assert.deepEqual(parseArgs(['pod', 'gpus', '--data-center=EU-RO-1']).command, {
      kind: 'pod_gpus',
      minVramGb: null,
      maxPricePerHourUsd: null,
      inStock: false,
      dataCenter: 'EU-RO-1',
    });
    for (const sub of ['datacenters', 'volumes', 'templates'])
      assert.deepEqual(parseArgs(['pod', sub]).command, { kind: `pod_${sub}` });
    assert.deepEqual(parseArgs(['help', 'runs', 'show']).command, {
      kind: 'help',
      topic: 'runs show',
    });
    assert.deepEqual(parseArgs(['runs', 'show', '--help']).command, {
      kind: 'help',
      topic: 'runs show',
    });
  });

  it('refuses an unknown flag, a missing value and an extra argument, naming the command', () => {
    const cases: [string[], string, string][] = [
      [['pod', 'volumes', '--all'], 'pod volumes has no option --all', 'pod volumes'],
      [['runs', 'show', 'r', '--json=yes'], '--json takes no value', 'runs show'],
      [['pod', 'templates', 'x'], 'pod templates takes no argument x', 'pod templates'],
      [['pod', 'gpus', '--data-center'], '--data-center needs a value', 'pod gpus'],
      [['init', 'here'], 'init takes no argument here', 'init'],
    ];
    for (const [argv, message, command] of cases) {
      assert.throws(
        () => parseArgs(argv),
        (e: unknown) => e instanceof UsageError && e.message === message && e.command === command,
        argv.join(' '),
      );
    }
  });

  it('gives every command a help with its usage, flags and an example, and lists it', () => {
    const list = usageText();
    for (const spec of COMMAND_SPECS) {
      const help = commandHelp(spec);
      assert.ok(help.startsWith(`usage: overbrainer [-C DIR] ${spec.name}`), spec.name);
      for (const option of Object.keys(spec.options)) assert.ok(help.includes(option), option);
      assert.ok(spec.example.startsWith(`overbrainer ${spec.name}`), spec.example);
      assert.ok(help.includes(`example:\n  ${spec.example}`));
      assert.ok(list.includes(`  ${spec.name}`), spec.name);
      // Parsing the example gives the command, not a usage error.
      parseArgs(spec.example.split(' ').slice(1));
    }
  });

  it('documents every command, its --json fields and the exit codes in the README', () => {
    for (const spec of COMMAND_SPECS) {
      assert.ok(README.includes(`| \`${spec.name}`), `README has no row for ${spec.name}`);
      if ('--json' in spec.options && spec.name !== 'spend')
        assert.ok(
          README.includes(`- \`${spec.name}\`: `),
          `README has no --json fields of ${spec.name}`,
        );
    }
    assert.match(README, /### Exit codes/);
  });
});
