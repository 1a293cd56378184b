import * as assert from 'node:assert/strict';
import {
  MAX_COMPARE_RUNS,
  parseHostMessage,
  parsePageMessage,
  parsePanelState,
  RUN_ACTIONS,
  type HostMessage,
  type RunStatusView,
  type SeriesColumns,
} from '../../src/ui/panel/webviewProtocol';

function columns(n: number): SeriesColumns {
  const step = Array.from({ length: n }, (_, i) => i + 1);
  return {
    step,
    loss: step.map((s) => 1 / s),
    evalLoss: step.map((s) => (s % 5 === 0 ? 0.5 : null)),
    learningRate: step.map(() => 1e-4),
  };
}

function status(overrides: Partial<RunStatusView> = {}): RunStatusView {
  return {
    runId: 'tiny_20261202-171500',
    state: 'running',
    summary: 'running · target pod',
    message: null,
    stepText: 'step 3 / 60',
    progress: 0.05,
    epochText: 'epoch 0.1',
    etaText: 'ETA 1m',
    deadlineText: '59m until the deadline',
    spendText: '$0.01 so far at $0.69/h',
    overrun: null,
    actions: ['cancel', 'keep', 'remove'],
    ...overrides,
  };
}

function snapshot(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    type: 'snapshot',
    mode: 'run',
    title: 'Run tiny_20261202-171500',
    runs: [{ runId: 'tiny_20261202-171500', columns: columns(3) }],
    status: status(),
    panel: { mode: 'run', dirs: ['/ws/runs/tiny_20261202-171500'] },
    ...overrides,
  };
}

describe('webview contract (host ↔ page)', function () {
  describe('host → page: the page trusts nothing it is posted', function () {
    it('accepts a run snapshot, an append and a status, returning the same content', function () {
      const messages: HostMessage[] = [
        snapshot() as unknown as HostMessage,
        { type: 'append', runId: 'tiny_1', columns: columns(2) },
        { type: 'status', status: status({ overrun: 'at this pace …', progress: 1 }) },
      ];
      for (const message of messages) assert.deepEqual(parseHostMessage(message), message);
    });

    it('accepts a compare snapshot of several runs without a status', function () {
      const message = snapshot({
        mode: 'compare',
        title: 'Compare a, b',
        runs: [
          { runId: 'a_1', columns: columns(4) },
          { runId: 'b_1', columns: columns(2) },
        ],
        status: null,
        panel: { mode: 'compare', dirs: ['/ws/runs/a_1', '/ws/runs/b_1'] },
      });
      assert.notEqual(parseHostMessage(message), null);
    });

    const bad: [string, unknown][] = [
      ['not an object', 'snapshot'],
      ['null', null],
      ['an unknown type', { type: 'eval', runId: 'a' }],
      ['a run snapshot without a status', snapshot({ status: null })],
      [
        'a compare snapshot with a status',
        snapshot({ mode: 'compare', panel: { mode: 'compare', dirs: ['/x'] } }),
      ],
      [
        'a run snapshot of two runs',
        snapshot({
          runs: [
            { runId: 'a', columns: columns(1) },
            { runId: 'b', columns: columns(1) },
          ],
        }),
      ],
      ['a panel state of another mode', snapshot({ panel: { mode: 'compare', dirs: ['/x'] } })],
      [
        'columns of different lengths',
        { type: 'append', runId: 'a', columns: { ...columns(3), loss: [1, 2] } },
      ],
      [
        'a step that is not a number',
        { type: 'append', runId: 'a', columns: { ...columns(2), step: [1, '2'] } },
      ],
      ['a NaN loss', { type: 'append', runId: 'a', columns: { ...columns(2), loss: [1, NaN] } }],
      [
        'an infinite learning rate',
        { type: 'append', runId: 'a', columns: { ...columns(1), learningRate: [Infinity] } },
      ],
      [
        'steps going backwards',
        { type: 'append', runId: 'a', columns: { ...columns(2), step: [2, 1] } },
      ],
      ['a run id with a path', { type: 'append', runId: '../etc', columns: columns(1) }],
      ['a run id with markup', { type: 'append', runId: '<img src=x>', columns: columns(1) }],
      [
        'a status with an unknown action',
        { type: 'status', status: status({ actions: ['rm -rf'] as never }) },
      ],
      ['a progress above 1', { type: 'status', status: status({ progress: 1.5 }) }],
      ['a huge text', { type: 'status', status: status({ summary: 'x'.repeat(5000) }) }],
      ['a status missing a field', { type: 'status', status: { ...status(), etaText: undefined } }],
      [
        'a boot log that is not a list of texts',
        { type: 'status', status: { ...status(), bootLog: ['ok', 3] } },
      ],
      [
        'a boot log line too long',
        { type: 'status', status: status({ bootLog: ['x'.repeat(5000)] }) },
      ],
      [
        'more boot log lines than a status carries',
        { type: 'status', status: status({ bootLog: Array.from({ length: 41 }, () => 'l') }) },
      ],
    ];
    for (const [what, value] of bad) {
      it(`refuses ${what}`, function () {
        assert.equal(parseHostMessage(value), null);
      });
    }

    it('accepts a status with the boot log, or with none (null)', function () {
      for (const bootLog of [['system: pulling image', 'container: sshd up'], null]) {
        const message = { type: 'status', status: status({ bootLog }) };
        assert.deepEqual(parseHostMessage(message), message);
      }
    });

    it('refuses more runs than a compare chart holds', function () {
      const runs = Array.from({ length: MAX_COMPARE_RUNS + 1 }, (_, i) => ({
        runId: `r_${i}`,
        columns: columns(1),
      }));
      const dirs = runs.map((r) => `/ws/runs/${r.runId}`);
      assert.equal(
        parseHostMessage(
          snapshot({ mode: 'compare', runs, status: null, panel: { mode: 'compare', dirs } }),
        ),
        null,
      );
    });
  });

  describe('page → host: the host trusts the page no more than a file', function () {
    it('accepts ready and every action on a run id', function () {
      assert.deepEqual(parsePageMessage({ type: 'ready' }), { type: 'ready' });
      for (const action of RUN_ACTIONS) {
        assert.deepEqual(parsePageMessage({ type: 'action', action, runId: 'tiny_1', extra: 1 }), {
          type: 'action',
          action,
          runId: 'tiny_1',
        });
      }
    });

    it('refuses unknown types, unknown actions and run ids that are not ids', function () {
      for (const value of [
        undefined,
        [],
        { type: 'command', command: 'workbench.action.terminal.new' },
        { type: 'action', action: 'delete', runId: 'tiny_1' },
        { type: 'action', action: 'cancel' },
        { type: 'action', action: 'cancel', runId: '/etc/passwd' },
        { type: 'action', action: 'cancel', runId: 'a b' },
        { type: 'action', action: 'toString', runId: 'tiny_1' },
      ]) {
        assert.equal(parsePageMessage(value), null, JSON.stringify(value));
      }
    });

    it('validates the state the serializer restores a panel from', function () {
      assert.deepEqual(parsePanelState({ mode: 'run', dirs: ['/ws/runs/a'] }), {
        mode: 'run',
        dirs: ['/ws/runs/a'],
      });
      assert.equal(parsePanelState({ mode: 'run', dirs: ['/a', '/b'] }), null);
      assert.equal(parsePanelState({ mode: 'run', dirs: [] }), null);
      assert.equal(parsePanelState({ mode: 'compare', dirs: [3] }), null);
      assert.equal(parsePanelState({ mode: 'x', dirs: ['/a'] }), null);
      assert.equal(parsePanelState(undefined), null);
    });
  });
});
