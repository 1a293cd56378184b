import * as assert from 'node:assert/strict';
import type { DeleteReason, RunEndCause, RunState } from '../../src/core/events';
import { MAX_COST_REACHED, MAX_HOURS_REACHED } from '../../src/core/pod/limitEnd';
import { PodError } from '../../src/core/pod/podError';
import {
  cancelPrompt,
  cancelQuestion,
  endCauseOf,
  followLost,
  notificationFor,
  OnceFilter,
  runEnd,
} from '../../src/ui/runs/notifyModel';

describe('notifications from core events (model)', function () {
  /** The notification of run r's guard deleting its pod p1 for `reason`. */
  const deletingFor = (reason: DeleteReason) =>
    notificationFor({ type: 'pod', runId: 'r', status: { kind: 'deleting', podId: 'p1', reason } });
  /** The notification of run r's state event. */
  const runStateFor = (state: RunState, message: string | null, cause: RunEndCause | null) =>
    notificationFor({ type: 'runState', runId: 'r', state, message, cause });

  it('an overrun offers Keep Pod and Open Run, keyed once per run', function () {
    const a = notificationFor({ type: 'warning', runId: 'r1', code: 'overrun', message: 'slow' });
    const b = notificationFor({ type: 'warning', runId: 'r1', code: 'overrun', message: 'slower' });
    assert.deepEqual(a?.actions, ['Keep Pod', 'Open Run']);
    assert.equal(a?.severity, 'warning');
    assert.equal(a?.key, b?.key, 'a repeated overrun of the same run is the same notification');
    const once = new OnceFilter();
    assert.equal(once.first(a!.key), true);
    assert.equal(once.first(b!.key), false);
    const other = notificationFor({ type: 'warning', runId: 'r2', code: 'overrun', message: 'x' });
    assert.equal(once.first(other!.key), true);
  });

  it('a GPU idle or a card too large: a warning that opens the run, once per run and kind', function () {
    const idle = notificationFor({
      type: 'warning',
      runId: 'r1',
      code: 'gpu_idle',
      message: 'the GPU is idle while the pod bills: is the job waiting on data?',
    });
    assert.equal(idle?.severity, 'warning');
    assert.deepEqual(idle?.actions, ['Open Run']);
    assert.equal(
      idle?.message,
      'Run r1: the GPU is idle while the pod bills: is the job waiting on data?',
    );
    const memory = notificationFor({
      type: 'warning',
      runId: 'r1',
      code: 'gpu_memory',
      message: 'm',
    });
    const again = notificationFor({ type: 'warning', runId: 'r1', code: 'gpu_idle', message: 'x' });
    assert.notEqual(idle?.key, memory?.key);
    assert.equal(idle?.key, again?.key);
  });

  it('strays offer Remove Pod, awaiting retrieval offers Attach', function () {
    assert.deepEqual(
      notificationFor({ type: 'warning', runId: 'r', code: 'strays', message: 'm' })?.actions,
      ['Remove Pod'],
    );
    assert.deepEqual(
      notificationFor({ type: 'warning', runId: null, code: 'strays', message: 'm' })?.actions,
      ['Show Pods'],
    );
    assert.deepEqual(
      notificationFor({ type: 'warning', runId: 'r', code: 'awaiting_retrieval', message: 'm' })
        ?.actions,
      ['Attach'],
    );
  });

  it('the API unreachable: one notification per run however the countdown changes; the log keeps each line', function () {
    const at = (s: number) =>
      notificationFor({
        type: 'warning',
        runId: 'r',
        code: 'api_unreachable',
        message: `the Runpod API at https://x/v2 cannot be reached: trying again in ${s} s`,
      });
    assert.equal(at(60)?.key, at(12)?.key);
    assert.equal(at(60)?.severity, 'warning');
    assert.deepEqual(at(60)?.actions, ['Open Run']);
  });

  it('a finished run: success offers its output, failure is an error, preparing is silent', function () {
    const ok = runStateFor('succeeded', null, 'completed');
    assert.equal(ok?.severity, 'info');
    assert.deepEqual(ok?.actions, ['Open Output']);
    assert.equal(ok?.message, 'Run r succeeded');
    const failed = runStateFor('failed', 'exit 3', 'job_failed');
    assert.equal(failed?.severity, 'error');
    assert.equal(failed?.message, 'Run r failed: exit 3');
    assert.equal(runStateFor('running', null, null), null);
    assert.equal(notificationFor({ type: 'log', level: 'info', message: 'x' }), null);
  });

  it('deadline reached: the guard deleting the pod and the failed run are one notification', function () {
    const deleting = deletingFor('deadline');
    assert.equal(deleting?.severity, 'error');
    assert.match(deleting!.message, /^Run r: deadline reached \(max_hours\)/);
    assert.deepEqual(deleting?.actions, ['Open Run']);
    const failed = runEnd('r', 'failed', MAX_HOURS_REACHED, 'deadline');
    assert.equal(failed?.message, deleting?.message);
    const once = new OnceFilter();
    assert.equal(once.first(deleting!.key), true);
    assert.equal(once.first(failed!.key), false, 'the run end after the delete is not said again');
    // Any other delete reason is not a notification (the run's end says what happened).
    assert.equal(deletingFor('retrieved'), null);
  });

  it('cost cap reached: the guard deleting the pod and the failed run are one notification', function () {
    const deleting = deletingFor('cost_cap');
    assert.equal(deleting?.severity, 'error');
    assert.match(deleting!.message, /^Run r: cost cap reached \(max_cost_usd\)/);
    assert.deepEqual(deleting?.actions, ['Open Run']);
    const failed = runEnd('r', 'failed', MAX_COST_REACHED, 'cost_cap');
    assert.equal(failed?.message, deleting?.message);
    assert.equal(failed?.key, deleting?.key, 'said once');
    assert.equal(endCauseOf(new PodError('cost_cap_reached', MAX_COST_REACHED)), 'cost_cap');
  });

  it('a run stopped with its snapshot home is news, not an error: Resume Run is offered', function () {
    const SAID = 'stopped at step 7 (cost); snapshot output/checkpoint-7';
    const stopped = runEnd('r', 'stopped', SAID, 'snapshotted');
    assert.equal(stopped?.severity, 'info');
    assert.equal(stopped?.message, 'Run r stopped at step 7 (cost); snapshot output/checkpoint-7');
    assert.deepEqual(stopped?.actions, ['Resume Run', 'Open Run']);
    // Stopped without a snapshot said (not retrieved): still an error.
    const unretrieved = runEnd(
      'r',
      'stopped',
      `${SAID}; artifacts not retrieved: x`,
      'not_retrieved',
    );
    assert.equal(unretrieved?.severity, 'error');
  });

  it("pod gone: from the PodError kind or the run's cause, keyed as the run end", function () {
    const byKind = runEnd(
      'r',
      'failed',
      'pod p1 no longer exists',
      endCauseOf(new PodError('pod_gone', 'x')),
    );
    assert.match(byKind!.message, /^Run r: pod gone \(pod p1 no longer exists\)/);
    assert.equal(byKind?.key, 'end:r');
    const byMessage = runStateFor('failed', 'pod p1 no longer exists', 'pod_gone');
    assert.equal(byMessage?.message, byKind?.message);
    assert.equal(endCauseOf(new PodError('exec', 'exit 3')), null);
    assert.equal(endCauseOf(new Error('pod p1 no longer exists')), null, 'words are no cause');
    assert.equal(endCauseOf(new PodError('deadline_reached', 'x')), 'deadline');
    // A host that stopped answering: the client deleted the pod and the run failed (no lost
    // follow to attach to again).
    assert.equal(endCauseOf(new PodError('host_lost', 'x')), 'host_lost');
    const silent = runEnd('r', 'failed', 'the host …', 'host_lost');
    assert.equal(silent?.severity, 'error');
    assert.equal(silent?.message, 'Run r failed: the host …');
    // A succeeded run stays a success whatever its message says.
    assert.deepEqual(runEnd('r', 'succeeded', null, 'completed')?.actions, ['Open Output']);
  });

  it("a run's end is told by its cause, never by its words", function () {
    // Words that read like a limit, from a job that failed on its own: a failed run.
    const jobSaid = runEnd('r', 'failed', MAX_HOURS_REACHED, 'job_failed');
    assert.equal(jobSaid?.message, `Run r failed: ${MAX_HOURS_REACHED}`);
    assert.equal(runEnd('r', 'failed', MAX_COST_REACHED, 'job_failed')?.actions[0], 'Open Run');
    assert.doesNotMatch(runEnd('r', 'failed', MAX_COST_REACHED, 'unknown')!.message, /cost cap/);
    // The cause alone says the limit, whatever the words.
    assert.match(
      runEnd('r', 'failed', 'Runpod answered 500', 'deadline')!.message,
      /^Run r: deadline reached \(max_hours\)/,
    );
    assert.match(
      runEnd('r', 'failed', null, 'cost_cap')!.message,
      /^Run r: cost cap reached \(max_cost_usd\)/,
    );
    assert.match(runEnd('r', 'failed', 'lost', 'pod_gone')!.message, /^Run r: pod gone \(lost\)/);
    // A pod that died and was not recovered says so in its words, not "pod gone".
    const notRecovered = runEnd('r', 'failed', 'pod p1 no longer exists; x', 'recovery_failed');
    assert.equal(notRecovered?.message, 'Run r failed: pod p1 no longer exists; x');
    // Snapshot home (the cause), whatever the words; not retrieved is an error.
    const home = runEnd('r', 'stopped', 'stopped (cost), checkpoint-7 kept', 'snapshotted');
    assert.equal(home?.severity, 'info');
    assert.deepEqual(home?.actions, ['Resume Run', 'Open Run']);
    const notHome = runEnd('r', 'stopped', 'stopped at step 7 (cost); snapshot c', 'not_retrieved');
    assert.equal(notHome?.severity, 'error');
    assert.equal(notHome?.message, 'Run r stopped: stopped at step 7 (cost); snapshot c');
  });

  it('a connection lost while following is no "Run failed": the run goes on, Attach is offered, and what the watchdog does', function () {
    const nowMs = Date.parse('2026-12-04T10:00:00Z');
    const deadlineUnixS = Date.parse('2026-12-04T11:00:00Z') / 1000;
    const lost = followLost(
      'r1',
      'cannot connect to root@127.0.0.1:2222 over SSH',
      deadlineUnixS,
      nowMs,
    );
    assert.equal(lost.severity, 'warning');
    assert.deepEqual(lost.actions, ['Attach']);
    assert.doesNotMatch(lost.message, /failed/i);
    assert.match(lost.message, /^Lost the connection to run r1 \(cannot connect/);
    assert.match(lost.message, /goes on on its pod/);
    assert.match(lost.message, /watchdog deletes it at its deadline, 2026-12-04T11:00:00Z/);
    const past = followLost('r1', 'x', deadlineUnixS, deadlineUnixS * 1000 + 1);
    assert.match(past.message, /deadline has passed/);
    const kept = followLost('r1', 'x', null, nowMs);
    assert.match(kept.message, /kept: nothing deletes it until you remove it/);
  });

  it("Cancel Run's question never says a kept pod is deleted", function () {
    assert.equal(
      cancelPrompt('r1', { keep: true, state: 'running' }),
      'Cancel run r1? Its job is stopped and what it wrote is retrieved. Its pod is kept: it stays, and bills, until you remove it.',
    );
    assert.match(cancelPrompt('r1', { keep: false, state: 'running' }), /Its pod is deleted\.$/);
    assert.doesNotMatch(cancelPrompt('r1', null), /pod/);
  });

  it('a cluster run: Cancel Run says the whole cluster is deleted and nothing more is retrieved (rank 0 retrieves only at the end)', function () {
    const cluster = { id: 'c1', nodes: [{}, {}] };
    const question = cancelQuestion('r1', null, cluster);
    assert.equal(
      question.message,
      'Cancel run r1? Its job is stopped and the whole cluster c1 (2 nodes) is deleted: the checkpoints already home stay, nothing more is retrieved.',
    );
    assert.equal(question.modal, true);
  });

  it("a kept pod's Cancel Run gets no modal dialog (its pod stays: nothing is deleted), only a question it can leave unanswered; a cancel that deletes the pod stays modal", function () {
    const kept = cancelQuestion('r1', { keep: true, state: 'running' });
    assert.equal(kept.modal, false);
    assert.equal(kept.message, cancelPrompt('r1', { keep: true, state: 'running' }));
    assert.equal(kept.action, 'Cancel Run', 'the job is stopped only when asked');
    assert.equal(cancelQuestion('r1', { keep: false, state: 'running' }).modal, true);
    assert.equal(cancelQuestion('r1', null).modal, true);
  });
});
