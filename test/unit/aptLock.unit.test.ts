/**
 * scripts/lib/apt.sh (what `npm start`, `npm test` and CI install with) against a package manager
 * lock another process holds: it says once what it waits for, waits, and goes on once the lock is
 * free; or gives up at its bound, naming the lock and the next action.
 *
 * apt-get runs for real, on a private copy of this machine's package state (APT_CONFIG: dpkg's
 * status file copied, no sources, lists, caches and logs in a temp dir): the package asked for is
 * already installed, nothing is downloaded, and the machine's own locks are never touched. The
 * locks are held as apt holds them (fcntl), by a python3 process the test tells when to let go.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..');

/** Locks each path (fcntl, as apt does), says "held", then lets go of `release N` on stdin. */
const HOLDER = `
import fcntl, os, sys
fds = []
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o640)
    fcntl.lockf(fd, fcntl.LOCK_EX)
    fds.append(fd)
print("held", flush=True)
for line in sys.stdin:
    os.close(fds[int(line.split()[1])])
    print("released", line.split()[1], flush=True)
`;

interface Ran {
  child: ChildProcess;
  out: () => string;
  err: () => string;
  exited: Promise<number | null>;
}

function run(command: string, args: string[], env: NodeJS.ProcessEnv): Ran {
  const child = spawn(command, args, { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  return { child, out: () => out, err: () => err, exited };
}

async function until(what: string, ok: () => boolean, describe: () => string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!ok()) {
    if (Date.now() > deadline) assert.fail(`no ${what} within 30 s:\n${describe()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('scripts/lib/apt.sh: installs wait for the package manager lock', function () {
  this.timeout(60_000);
  let dir: string;
  let env: NodeJS.ProcessEnv;
  const started: ChildProcess[] = [];

  before(function () {
    const apt = spawnSync('apt-get', ['--version'], { encoding: 'utf8' });
    const python = spawnSync('python3', ['--version']);
    // The scripts install as root on Debian (CI, `npm start`); elsewhere there is nothing to test.
    if (apt.status !== 0 || python.status !== 0 || process.getuid?.() !== 0) this.skip();
    dir = mkdtempSync(path.join(tmpdir(), 'apt-lock-'));
    for (const sub of ['dpkg', 'state/lists/partial', 'cache/archives/partial', 'log', 'parts'])
      mkdirSync(path.join(dir, sub), { recursive: true });
    copyFileSync('/var/lib/dpkg/status', path.join(dir, 'dpkg', 'status'));
    writeFileSync(
      path.join(dir, 'apt.conf'),
      [
        `Dir::State "${dir}/state/";`,
        `Dir::State::status "${dir}/dpkg/status";`,
        `Dir::Etc::sourcelist "/dev/null";`,
        `Dir::Etc::sourceparts "${dir}/parts";`,
        `Dir::Cache "${dir}/cache/";`,
        `Dir::Cache::pkgcache "";`,
        `Dir::Cache::srcpkgcache "";`,
        `Dir::Log "${dir}/log";`,
        '',
      ].join('\n'),
    );
    env = { ...process.env, APT_CONFIG: path.join(dir, 'apt.conf') };
  });

  after(function () {
    for (const child of started) child.kill('SIGKILL');
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** A python3 process holding `locks` (paths under the private state) until told. */
  async function hold(...locks: string[]): Promise<Ran & { release: (i: number) => void }> {
    const holder = run('python3', ['-c', HOLDER, ...locks.map((l) => path.join(dir, l))], env);
    started.push(holder.child);
    await until('lock held', () => holder.out().includes('held'), holder.err);
    return { ...holder, release: (i) => holder.child.stdin!.write(`release ${i}\n`) };
  }

  function script(body: string, extra: NodeJS.ProcessEnv = {}): Ran {
    const ran = run('bash', ['-c', `set -euo pipefail; source scripts/lib/apt.sh; ${body}`], {
      ...env,
      ...extra,
    });
    started.push(ran.child);
    return ran;
  }

  it('waits for the lists lock (update) and the dpkg frontend lock (install), saying so once each, then installs', async () => {
    const holder = await hold('state/lists/lock', 'dpkg/lock-frontend');
    const pid = holder.child.pid!;
    // A package whose test fails (the path) and that is installed already: a no-op install.
    const install = script('ensure_debian /nonexistent-overbrainer-test:bash; echo installed');
    const said = (lock: string): string =>
      `waiting up to 600 s for the package manager's lock ${path.join(dir, lock)}, held by process ${pid} (python3)`;
    const describe = (): string => `${install.out()}\n${install.err()}`;
    await until(
      'line about the lists lock',
      () => install.err().includes(said('state/lists/lock')),
      describe,
    );
    assert.equal(install.child.exitCode, null, `it failed instead of waiting:\n${describe()}`);
    holder.release(0);
    await until(
      'line about the frontend lock',
      () => install.err().includes(said('dpkg/lock-frontend')),
      describe,
    );
    assert.equal(install.child.exitCode, null, `it failed instead of waiting:\n${describe()}`);
    holder.release(1);
    assert.equal(await install.exited, 0, describe());
    assert.match(install.out(), /^installing Debian packages: bash\n(.*\n)*installed\n$/);
    // One line per lock, however long apt waited and however often the lists lock was tried.
    assert.deepEqual(
      install
        .err()
        .split('\n')
        .filter((line) => line.startsWith('waiting')),
      [said('state/lists/lock'), said('dpkg/lock-frontend')],
    );
  });

  it('gives up at its bound, naming the lock and what to do', async () => {
    const holder = await hold('dpkg/lock-frontend');
    const install = script('apt_updated=1; apt_install bash; echo installed', {
      OVERBRAINER_APT_LOCK_WAIT_S: '1',
    });
    const code = await install.exited;
    holder.release(0);
    const err = install.err();
    assert.notEqual(code, 0, err);
    assert.ok(!install.out().includes('installed'), install.out());
    assert.ok(
      err.includes(
        `gave up after 1 s waiting for the package manager's lock ${path.join(dir, 'dpkg/lock-frontend')}`,
      ),
      err,
    );
    assert.match(err, /^hint: let the other install finish \(or stop it\) and re-run/m);
  });
});
