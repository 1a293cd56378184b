import * as assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { COMMAND_IDS, COMMAND_TITLES, notAvailableMessage } from '../../src/ui/commands/commandIds';
import { type PodRole } from '../../src/ui/pods/podsModel';
import { presentPod } from '../../src/ui/pods/podsView';
import { RUN_STATES, type RunSummary } from '../../src/ui/runs/runsModel';
import { presentRun } from '../../src/ui/runs/runsView';
import { sweepRow } from '../../src/ui/sweeps/sweepsModel';
import { podSummary } from './uiFakeHost';

const ROOT = path.resolve(__dirname, '..', '..');

interface Command {
  command: string;
  title: string;
  category?: string;
  icon?: string;
}
interface MenuItem {
  command: string;
  when?: string;
  group?: string;
}
interface Manifest {
  main: string;
  activationEvents: string[];
  contributes: {
    commands: Command[];
    viewsContainers: { activitybar: { id: string; title: string; icon: string }[] };
    views: Record<string, { id: string; name: string }[]>;
    viewsWelcome: { view: string; contents: string; when?: string }[];
    menus: Record<string, MenuItem[]>;
    configuration: { properties: Record<string, { type: string; default: unknown }> };
    walkthroughs: { steps: { description: string; media: { markdown?: string } }[] }[];
  };
}

const manifest = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as Manifest;
const contributes = manifest.contributes;

/** Built-in commands the manifest may link to. */
const BUILT_IN = new Set(['workbench.action.files.openFolder']);

/** The context values the tree providers can produce, from the models themselves. */
function producedContextValues(): Set<string> {
  const values = new Set<string>();
  const base: RunSummary = {
    id: 'r',
    dir: '/r',
    workspaceName: 'w',
    target: null,
    createdUnixS: null,
    state: 'running',
    message: null,
    pod: null,
    problem: null,
  };
  const snapshot = { checkpoint: 'output/checkpoint-3', step: 3, reason: 'requested' as const };
  for (const state of RUN_STATES) {
    values.add(presentRun({ ...base, state }, 0).contextValue);
    values.add(presentRun({ ...base, state, snapshot }, 0).contextValue);
  }
  values.add(presentRun({ ...base, state: null }, 0).contextValue);
  const pod = podSummary('p');
  values.add(presentRun({ ...base, pod: { ...pod, state: 'kept' } }, 0).contextValue);
  values.add(presentRun({ ...base, pod: { ...pod, state: 'awaiting_retrieval' } }, 0).contextValue);
  const roles: PodRole[] = ['running', 'kept', 'awaiting', 'deleting', 'stray', 'orphan'];
  for (const role of roles) {
    values.add(
      presentPod(
        {
          podId: 'p',
          role,
          runId: null,
          runDir: null,
          gpuType: null,
          costPerHourUsd: null,
          deadlineUnixS: null,
        },
        0,
      ).contextValue,
    );
  }
  for (const state of ['running', 'ended'] as const) {
    values.add(
      sweepRow({
        version: 1,
        name: 's',
        metric: 'loss',
        direction: 'minimize',
        trials_max: 1,
        parallel: 1,
        budget_usd: 1,
        created: '',
        state,
        end: null,
        message: null,
        trials: [],
      }).contextValue,
    );
  }
  return values;
}

/** The context values a `viewItem =~ /^run\.(a|b)$/` or `/^pod\./` clause can match. */
function matchedContextValues(when: string, produced: Set<string>): string[] {
  const match = /viewItem =~ \/(.+?)\/(\s|$)/.exec(when);
  assert.ok(match?.[1], `a view/item/context entry without a viewItem clause: ${when}`);
  const pattern = new RegExp(match[1]);
  return [...produced].filter((value) => pattern.test(value));
}

describe('ui manifest (package.json contributes)', function () {
  it('declares exactly the commands the extension registers, in the Overbrainer category', function () {
    const declared = contributes.commands.map((c) => c.command).sort();
    assert.deepEqual(declared, [...COMMAND_IDS].sort());
    for (const command of contributes.commands) {
      assert.equal(command.title, COMMAND_TITLES[command.command as keyof typeof COMMAND_TITLES]);
      assert.equal(command.category, 'Overbrainer');
      assert.match(command.icon ?? '', /^\$\([a-z-]+\)$/, `${command.command} has a codicon`);
    }
    assert.equal(
      notAvailableMessage('overbrainer.train'),
      'Overbrainer: Train is not available yet.',
    );
  });

  it('links only to commands that exist', function () {
    const known = new Set<string>([...COMMAND_IDS, ...BUILT_IN]);
    const linked: string[] = [];
    for (const items of Object.values(contributes.menus)) {
      for (const item of items) linked.push(item.command);
    }
    const markdownLinks = [
      ...contributes.viewsWelcome.map((w) => w.contents),
      ...contributes.walkthroughs.flatMap((w) => w.steps.map((s) => s.description)),
    ].join('\n');
    for (const match of markdownLinks.matchAll(/\(command:([\w.]+)\)/g)) {
      linked.push(match[1] ?? '');
    }
    assert.deepEqual(
      linked.filter((command) => !known.has(command)),
      [],
    );
  });

  it('keys item menus on context values the trees really produce, and every run has Show Run', function () {
    const produced = producedContextValues();
    for (const item of contributes.menus['view/item/context'] ?? []) {
      const matched = matchedContextValues(item.when ?? '', produced);
      assert.ok(matched.length > 0, `${item.command} when "${item.when}" matches no tree item`);
    }
    const runValues = [...produced].filter((v) => v.startsWith('run.') && v !== 'run.unreadable');
    const showRunCovers = new Set(
      (contributes.menus['view/item/context'] ?? [])
        .filter(
          (item) =>
            item.command === 'overbrainer.showRun' && item.when?.includes('overbrainer.runs'),
        )
        .flatMap((item) => matchedContextValues(item.when ?? '', produced)),
    );
    assert.deepEqual(
      runValues.filter((v) => !showRunCovers.has(v)),
      [],
    );
  });

  it('has the Overbrainer container with the Runs and Pods views and a welcome for empty Runs', function () {
    const [container] = contributes.viewsContainers.activitybar;
    assert.equal(container?.id, 'overbrainer');
    assert.deepEqual(
      contributes.views.overbrainer?.map((v) => [v.id, v.name]),
      [
        ['overbrainer.runs', 'Runs'],
        ['overbrainer.pods', 'Pods'],
        ['overbrainer.spend', 'Spend'],
        ['overbrainer.sweeps', 'Sweeps'],
      ],
    );
    const welcome = contributes.viewsWelcome
      .filter((w) => w.view === 'overbrainer.runs')
      .map((w) => w.contents)
      .join('\n');
    for (const command of [
      'overbrainer.createConfig',
      'overbrainer.setApiKey',
      'overbrainer.train',
    ]) {
      assert.ok(welcome.includes(`(command:${command})`), command);
    }
  });

  it('refers only to media files that exist', function () {
    const text = readFileSync(path.join(ROOT, 'package.json'), 'utf8');
    const media = [...text.matchAll(/"(media\/[^"]+)"/g)].map((m) => m[1] ?? '');
    assert.ok(media.length >= 5);
    assert.deepEqual(
      media.filter((file) => !existsSync(path.join(ROOT, file))),
      [],
    );
  });

  it('activates on overbrainer.toml and offers the settings the UI reads', function () {
    assert.ok(manifest.activationEvents.includes('workspaceContains:overbrainer.toml'));
    assert.equal(manifest.main, './dist/extension.js');
    const properties = contributes.configuration.properties;
    assert.equal(properties['overbrainer.runpod.baseUrl']?.default, 'https://api.runpod.io/v2');
    assert.equal(properties['overbrainer.runsFolder']?.default, 'runs');
    assert.equal(properties['overbrainer.statusBar.enabled']?.default, true);
    assert.ok(
      !Object.keys(properties).some((key) => /key|token|secret/i.test(key)),
      'the API key is never a setting',
    );
  });
});
