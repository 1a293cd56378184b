/**
 * The `overbrainer` CLI's commands as a terminal user meets them, spawned from the built bundle
 * (dist/cli.js, package.json's `bin`) with a cleared environment: --version, the command list,
 * every command's --help, usage errors (exit 2), init, the catalog listings against the Runpod
 * emulator (tables, one line when empty, --json parsed with the fields README documents), and
 * runs ls / runs show of a real local run. Exit codes are asserted on every call.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { COMMAND_SPECS } from '../../src/cli/commandSpecs';
import { configTemplate } from '../../src/core/config';
import { CLIENT_VERSION } from '../../src/core/runpod/client';
import { defaultCatalog } from '../emulator/catalog';
import { startEmulator, type Emulator } from '../emulator/emulator';
import { runCliProcess, type Ran } from '../helpers/cli';
import { localToml, tempWorkspace, writeTinyWorkspace } from '../helpers/tinyWorkspace';

describe('overbrainer CLI commands (the built bundle)', function () {
  // Up to a dozen CLI processes a case, one after another: on a loaded machine each can take 10 s.
  this.timeout(240_000);
  let emulator: Emulator;
  let empty: Emulator;
  let tmp: string;
  let ws: string;

  before(async () => {
    emulator = await startEmulator({});
    empty = await startEmulator({
      catalog: { ...defaultCatalog(), networkVolumes: [], templates: [] },
    });
  });

  after(async () => {
    await emulator?.close();
    await empty?.close();
    if (emulator) assert.deepEqual(emulator.contractViolations(), []);
    if (empty) assert.deepEqual(empty.contractViolations(), []);
  });

  beforeEach(() => {
    ({ tmp, ws } = tempWorkspace('cli-cmd-'));
  });

  afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

  const cli = (args: string[], api: Emulator | null = emulator): Promise<Ran> =>
    runCliProcess(['-C', ws, ...args], {
      env:
        api === null
          ? {}
          : {
              OVERBRAINER_RUNPOD__API_KEY: api.apiKey,
              OVERBRAINER_RUNPOD__BASE_URL: api.baseUrl,
            },
    });

  /**
   * Runs independent CLI calls four at a time (each its own process, as a user would start them
   * one after another): their answers in the order asked. A CLI mostly waits on its start and the
   * emulator, so the calls of a case overlap instead of queueing (on a loaded machine each start
   * can take seconds).
   */
  const cliAll = async (calls: [string[], (Emulator | null)?][]): Promise<Ran[]> => {
    const answers: Ran[] = new Array<Ran>(calls.length);
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(4, calls.length) }, async () => {
        for (let i = next++; i < calls.length; i = next++) {
          const [argv, api] = calls[i]!;
          answers[i] = await cli(argv, api === undefined ? emulator : api);
        }
      }),
    );
    return answers;
  };

  const json = (ran: Ran): Record<string, unknown> => {
    assert.equal(ran.code, 0, ran.stderr);
    return JSON.parse(ran.stdout) as Record<string, unknown>;
  };

  it("prints its version, the command list, and each command's help with a usage line, flags and an example (exit 0)", async () => {
    // Two spellings a command besides the list and the version: 50-odd processes, four at a time
    // (one after another, a loaded CI machine took over two minutes to start them all).
    const asked = COMMAND_SPECS.flatMap((spec) =>
      [
        [...spec.name.split(' '), '--help'],
        ['help', ...spec.name.split(' ')],
      ].map((argv) => ({ spec, argv })),
    );
    const [version, list, none, ...helps] = await cliAll([
      [['--version'], null],
      [['--help'], null],
      [[], null],
      ...asked.map(({ argv }): [string[], null] => [argv, null]),
    ]);
    assert.equal(version!.code, 0);
    assert.equal(version!.stdout, `overbrainer ${CLIENT_VERSION}\n`);

    assert.equal(list!.code, 0);
    for (const spec of COMMAND_SPECS) assert.ok(list!.stdout.includes(`  ${spec.name}`), spec.name);
    assert.match(list!.stdout, /exit codes: 0 success/);

    asked.forEach(({ spec, argv }, i) => {
      const help = helps[i]!;
      assert.equal(help.code, 0, argv.join(' '));
      assert.ok(
        help.stdout.startsWith(`usage: overbrainer [-C DIR] ${spec.name}`),
        `${argv.join(' ')}: ${help.stdout}`,
      );
      for (const option of Object.keys(spec.options)) assert.ok(help.stdout.includes(option));
      assert.ok(help.stdout.includes(`example:\n  overbrainer ${spec.name}`), argv.join(' '));
    });

    // No command: the command list on stderr, exit 2.
    assert.equal(none!.code, 2);
    assert.equal(none!.stdout, '');
    assert.match(none!.stderr, /^overbrainer: no command given\n/);
    assert.ok(none!.stderr.includes('  pod datacenters'));
  });

  it('refuses unknown flags, missing values, values twice and extra arguments with exit 2, naming the problem and the usage, before any call', async () => {
    const before = emulator.requests().length;
    const cases: [string[], string, string][] = [
      [['pod', 'gpus', '--min-ram', '24'], 'pod gpus has no option --min-ram', 'pod gpus'],
      [['pod', 'gpus', '--data-center'], '--data-center needs a value', 'pod gpus'],
      [['pod', 'gpus', '--data-center='], '--data-center needs a value', 'pod gpus'],
      [['pod', 'volumes', 'extra'], 'pod volumes takes no argument extra', 'pod volumes'],
      [['runs', 'show'], 'runs show needs a RUN_ID', 'runs show'],
      [['runs', 'show', 'a', 'b'], 'runs show takes one a RUN_ID, not a b', 'runs show'],
      [['runs', 'ls', '--json', '--json'], '--json is given twice', 'runs ls'],
      [['init', '--force=yes'], '--force takes no value', 'init'],
      [['train', '--target', '--dry-run'], '--target needs a value', 'train'],
    ];
    const [unknown, ...ranAll] = await cliAll([
      [['deploy']],
      ...cases.map(([argv]): [string[]] => [argv]),
    ]);
    cases.forEach(([argv, message, command], i) => {
      const ran = ranAll[i]!;
      assert.equal(ran.code, 2, argv.join(' '));
      assert.equal(ran.stdout, '');
      assert.ok(
        ran.stderr.startsWith(`overbrainer: ${message}\n`),
        `${argv.join(' ')}: ${ran.stderr}`,
      );
      assert.ok(ran.stderr.includes(`usage: overbrainer [-C DIR] ${command}`), ran.stderr);
      assert.ok(ran.stderr.includes('example:'), ran.stderr);
    });
    assert.equal(unknown!.code, 2);
    assert.match(
      unknown!.stderr,
      /^overbrainer: unknown command deploy\n\nusage: overbrainer \[-C DIR\] <command>/,
    );
    assert.equal(emulator.requests().length, before, 'a usage error called Runpod');
  });

  it('names CLI commands in its hints: train without overbrainer.toml points at overbrainer init (exit 2)', async () => {
    const [missing, dry] = await cliAll([
      [['train'], null],
      [['train', '--dry-run'], null],
    ]);
    assert.equal(missing!.code, 2);
    assert.match(missing!.stderr, /`overbrainer init`/);
    assert.equal(dry!.code, 2);
    assert.match(dry!.stderr, /`overbrainer init`/);
  });

  it('init writes the template VS Code writes, refuses to overwrite it without --force, and says how to set the key', async () => {
    const file = path.join(ws, 'overbrainer.toml');
    const first = await cli(['init'], null);
    assert.equal(first.code, 0, first.stderr);
    assert.equal(fs.readFileSync(file, 'utf8'), configTemplate());
    assert.match(first.stdout, /OVERBRAINER_RUNPOD__API_KEY/);
    assert.match(first.stdout, /overbrainer train --dry-run/);

    fs.writeFileSync(file, '# mine\n');
    const again = await cli(['init'], null);
    assert.equal(again.code, 1);
    assert.equal(fs.readFileSync(file, 'utf8'), '# mine\n', 'init overwrote a config');
    assert.ok(again.stderr.includes(`error: ${file} exists`), again.stderr);
    assert.match(again.stderr, /hint: .*overbrainer init --force/);

    const forced = await cli(['init', '--force'], null);
    assert.equal(forced.code, 0);
    assert.equal(fs.readFileSync(file, 'utf8'), configTemplate());
  });

  it('lists data centers, volumes, templates and the GPU types of one data center from the API; --json has the documented fields', async () => {
    const catalog = emulator.catalog;
    const [dcsRan, dcTable, volumesRan, templatesRan, volumeTable, inKsRan, stockedRan, nowhere] =
      (await cliAll([
        [['pod', 'datacenters', '--json']],
        [['pod', 'datacenters']],
        [['pod', 'volumes', '--json']],
        [['pod', 'templates', '--json']],
        [['pod', 'volumes']],
        [['pod', 'gpus', '--data-center', 'US-KS-2', '--json']],
        [['pod', 'gpus', '--data-center', 'US-KS-2', '--in-stock', '--json']],
        [['pod', 'gpus', '--data-center', 'XX-NONE-1']],
      ])) as [Ran, Ran, Ran, Ran, Ran, Ran, Ran, Ran];
    const dcs = json(dcsRan) as {
      data_centers: { id: string; region: string; gpu_types_in_stock: { id: string }[] }[];
    };
    assert.deepEqual(
      dcs.data_centers.map((d) => d.id).sort(),
      catalog.dataCenters.map((d) => d.id).sort(),
    );
    const ro = dcs.data_centers.find((d) => d.id === 'EU-RO-1');
    assert.equal(ro?.region, 'EUROPE');
    assert.deepEqual(
      ro?.gpu_types_in_stock.map((g) => g.id),
      ['NVIDIA GeForce RTX 4090'],
    );
    assert.equal(dcTable.code, 0);
    assert.match(dcTable.stdout, /^ID +NAME +REGION/);
    assert.match(dcTable.stdout, /\nEU-RO-1 .*NVIDIA GeForce RTX 4090/);

    const volumes = json(volumesRan) as {
      volumes: { id: string; size_gb: number; data_center_id: string }[];
    };
    assert.deepEqual(
      volumes.volumes.map((v) => [v.id, v.size_gb, v.data_center_id]),
      catalog.networkVolumes.map((v) => [v.id, v.sizeGb, v.dataCenterId]),
    );
    const templates = json(templatesRan) as {
      templates: { id: string; image: string }[];
    };
    assert.deepEqual(
      templates.templates.map((t) => t.id),
      // Serverless templates are no pod templates: dropped.
      catalog.templates.filter((t) => !t.serverless).map((t) => t.id),
    );
    assert.ok(volumeTable.stdout.includes(catalog.networkVolumes[0]?.id ?? '?'));

    const inKs = json(inKsRan) as {
      gpus: { id: string; availability: string; data_centers_in_stock: string[] }[];
    };
    // The A100 is stocked only in US-KS-2, the RTX 4090 never there.
    const ids = inKs.gpus.map((g) => g.id);
    assert.ok(ids.includes('NVIDIA A100 80GB PCIe'), ids.join('|'));
    assert.ok(!ids.includes('NVIDIA GeForce RTX 4090'), ids.join('|'));
    for (const id of ids)
      assert.ok('US-KS-2' in (catalog.gpuTypes.find((g) => g.id === id)?.stock ?? {}));
    const stocked = json(stockedRan) as { gpus: { id: string; data_centers_in_stock: string[] }[] };
    for (const gpu of stocked.gpus) assert.deepEqual(gpu.data_centers_in_stock, ['US-KS-2']);
    assert.ok(!stocked.gpus.some((g) => g.id === 'NVIDIA H100 80GB HBM3'), 'out of stock listed');
    assert.equal(nowhere.code, 0);
    assert.match(nowhere.stdout, /^pod: no GPU type matches in data center XX-NONE-1/);
  });

  it('prints one line for an account with no volume or template (exit 0), and needs an API key (exit 2)', async () => {
    const [volumes, templates, volumesJson, noKey] = (await cliAll([
      [['pod', 'volumes'], empty],
      [['pod', 'templates'], empty],
      [['pod', 'volumes', '--json'], empty],
      [['pod', 'datacenters'], null],
    ])) as [Ran, Ran, Ran, Ran];
    assert.equal(volumes.code, 0, volumes.stderr);
    assert.equal(volumes.stdout, 'pod: no network volume on this Runpod account\n');
    assert.equal(templates.code, 0);
    assert.equal(templates.stdout, 'pod: no pod template on this Runpod account\n');
    assert.deepEqual(json(volumesJson), { volumes: [] });
    assert.equal(noKey.code, 2);
    assert.match(noKey.stderr, /OVERBRAINER_RUNPOD__API_KEY/);
  });

  it('runs ls and runs show describe a finished local run: state, steps, last loss, output, next commands; --json parses', async () => {
    writeTinyWorkspace(ws, localToml('python3 train.py --steps 12 --step-seconds 0.01'));
    const empty = json(await cli(['runs', 'ls', '--json'], null));
    assert.deepEqual(empty, { runs: [] });

    const train = await cli(['train'], null);
    assert.equal(train.code, 0, train.stderr);
    const listed = json(await cli(['runs', 'ls', '--json'], null)) as {
      runs: { run_id: string; state: string; target: string; pod_id: string | null }[];
    };
    assert.equal(listed.runs.length, 1);
    const run = listed.runs[0]!;
    assert.equal(run.state, 'succeeded');
    assert.equal(run.target, 'here');
    assert.equal(run.pod_id, null);

    const [shownRan, text, missing] = (await cliAll([
      [['runs', 'show', run.run_id, '--json'], null],
      [['runs', 'show', run.run_id], null],
      [['runs', 'show', 'tiny_20000101-000000'], null],
    ])) as [Ran, Ran, Ran];
    const shown = json(shownRan) as {
      run_id: string;
      state: string;
      step: number;
      max_steps: number | null;
      last_loss: number | null;
      output_path: string | null;
      eta_seconds: number | null;
      next: string[];
    };
    assert.equal(shown.run_id, run.run_id);
    assert.equal(shown.state, 'succeeded');
    assert.equal(shown.step, 12);
    assert.equal(typeof shown.last_loss, 'number');
    assert.equal(shown.eta_seconds, null);
    assert.equal(shown.output_path, path.join('runs', run.run_id, 'output'));
    assert.ok(shown.next.includes(`overbrainer runs logs ${run.run_id}`), shown.next.join('|'));

    assert.equal(text.code, 0);
    assert.match(text.stdout, new RegExp(`^run ${run.run_id}\n  state: +succeeded`));
    assert.match(text.stdout, /\n {2}steps: +12/);
    assert.match(text.stdout, /\nnext:\n {2}overbrainer runs logs /);
    assert.ok(!/Overbrainer: /.test(text.stdout), 'a VS Code command title in CLI output');

    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /overbrainer runs ls lists them/);
  });

  it('exits 1 for a failed run and says so on its final line', async () => {
    fs.writeFileSync(path.join(ws, 'overbrainer.toml'), localToml('exit 3', false));
    const failed = await cli(['train'], null);
    assert.equal(failed.code, 1, failed.stderr);
    assert.match(failed.stdout, /^train: run tiny_\S+ failed/m);
  });
});
