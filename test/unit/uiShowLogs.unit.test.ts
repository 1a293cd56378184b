import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { Redactor } from '../../src/core/redact';
import { POD_LOG_FILE } from '../../src/core/pod/podLogCapture';
import { runLogText, showLogs } from '../../src/ui/runs/runLogs';
import { fakeContext, folder, runSummary } from './uiFakeHost';

const KEY = 'rpa_SHOWLOGSSECRETKEY0123456789';

function podLine(ts: string, source: string, line: string): string {
  return `${JSON.stringify({ ts, source, line })}\n`;
}

describe('Show Logs on a run (against a fake of the vscode window)', function () {
  let dir: string;
  let runDir: string;
  beforeEach(function () {
    dir = fs.mkdtempSync(path.join(tmpdir(), 'ob-showlogs-'));
    runDir = path.join(dir, 'runs', 'r1');
    fs.mkdirSync(path.join(runDir, '.pod'), { recursive: true });
  });
  afterEach(function () {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a run with only its pod log opens it as a read-only overbrainer-log document, no pick', async function () {
    fs.writeFileSync(path.join(runDir, POD_LOG_FILE), podLine('t1', 'system', 'booting'));
    const r = runSummary(runDir);
    const { ctx, fake } = fakeContext([r]);
    fake.folders = [folder(dir)];
    await showLogs(ctx, r);
    assert.deepEqual(
      fake.shown.map((s) =>
        s.kind === 'document' ? `${s.scheme}:${s.fsPath}?${s.query}` : s.kind,
      ),
      [`overbrainer-log:/r1/pod.log?${runDir}`],
    );
  });

  it('a run with a job log and a pod log asks which, and Both opens the two', async function () {
    fs.writeFileSync(path.join(runDir, 'job.log'), 'step 1\n');
    fs.writeFileSync(path.join(runDir, POD_LOG_FILE), podLine('t1', 'container', 'up'));
    const r = runSummary(runDir);
    const { ctx, fake } = fakeContext([r]);
    fake.answer = (s) =>
      s.kind === 'quickPick'
        ? (s.items as { label: string }[]).find((i) => i.label === 'Both')
        : undefined;
    await showLogs(ctx, r);
    const pick = fake.shown[0];
    assert.ok(pick?.kind === 'quickPick');
    assert.deepEqual(
      (pick.items as { label: string }[]).map((i) => i.label),
      ['Job log', 'Pod log', 'Both'],
    );
    assert.deepEqual(
      fake.shown.flatMap((s) => (s.kind === 'document' ? [s.fsPath] : [])),
      ['/r1/job.log', '/r1/pod.log'],
    );
  });

  it('a run with no log yet says where its logs will be and offers the output', async function () {
    const r = runSummary(runDir);
    const { ctx, fake, log } = fakeContext([r]);
    fake.answer = (s) => (s.kind === 'info' ? 'Show Output' : undefined);
    await showLogs(ctx, r);
    assert.match(
      fake.messages()[0] ?? '',
      /^info: Overbrainer: run r1 has no log yet\. .*pod\.log.*job\.log/,
    );
    assert.equal(log.shown, 1);
  });

  it('from the palette with no run log: the extension output at once, no pick', async function () {
    const { ctx, fake, log } = fakeContext([runSummary(runDir)]);
    await showLogs(ctx, undefined);
    assert.deepEqual(fake.shown, []);
    assert.equal(log.shown, 1);
  });

  it('from the palette: a pick of the runs with a log, the extension output first', async function () {
    fs.writeFileSync(path.join(runDir, 'job.log'), 'step 1\n');
    const other = runSummary(path.join(dir, 'runs', 'r2'));
    const r = runSummary(runDir);
    const { ctx, fake, log } = fakeContext([r, other]);
    fake.answer = (s) => (s.kind === 'quickPick' ? (s.items as unknown[])[0] : undefined);
    await showLogs(ctx, undefined);
    const pick = fake.shown[0];
    assert.ok(pick?.kind === 'quickPick');
    assert.deepEqual(
      (pick.items as { label: string }[]).map((i) => i.label),
      ['Overbrainer output', 'r1'],
    );
    assert.equal(log.shown, 1);
    fake.answer = (s) => (s.kind === 'quickPick' ? (s.items as unknown[])[1] : undefined);
    await showLogs(ctx, undefined);
    assert.deepEqual(
      fake.shown.flatMap((s) => (s.kind === 'document' ? [s.fsPath] : [])),
      ['/r1/job.log'],
    );
  });

  it('the text is redacted line by line: the API key, and every line of a private key block', function () {
    fs.writeFileSync(
      path.join(runDir, 'job.log'),
      `using ${KEY}\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----\ndone\n`,
    );
    fs.writeFileSync(
      path.join(runDir, POD_LOG_FILE),
      podLine('t1', 'system', `env RUNPOD_API_KEY=${KEY}`) +
        'not json\n' +
        podLine('t2', 'container', 'sshd up'),
    );
    const redactor = new Redactor([KEY]);
    const redact = (t: string): string => redactor.redact(t);
    const job = runLogText(runDir, 'job', redact);
    assert.ok(!job.includes(KEY) && !job.includes('b3BlbnNzaC1rZXk'), job);
    assert.match(job, /^using \[redacted\]\n/);
    assert.match(job, /done\n$/);
    assert.equal(
      runLogText(runDir, 'pod', redact),
      't1 system: env RUNPOD_API_KEY=[redacted]\nt2 container: sshd up\n',
    );
    assert.equal(runLogText(path.join(dir, 'gone'), 'pod', redact), '');
  });
});
