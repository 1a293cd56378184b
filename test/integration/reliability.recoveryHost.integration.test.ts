/**
 * Automatic recovery on a new pod when a run's host stops answering mid-job (issue 19, second
 * part), against the emulator's real pods: SSH silent while Runpod lists the pod RUNNING, then
 * EXITED; listed RUNNING all along (the client deletes the pod, which its watchdog on that host
 * cannot); deleted while the client asks the host again. Each run goes on by itself on a new pod
 * from the newest checkpoint home (the asserts of ../helpers/recovery.ts). The other deaths:
 * reliability.recovery. Timings: production / 60.
 */
import { recoverySuite } from '../helpers/recovery';

describe('automatic recovery on a new pod when the host stops answering mid-job', function () {
  this.timeout(300_000);
  const { recovers } = recoverySuite();

  it('the host stops answering (SSH silent while listed RUNNING, then EXITED): the run goes on on a new pod', async function () {
    await recovers(
      this,
      (l, pod) => l.emulator.faults.hostLost(pod, 1_000),
      'recovery.host-lost',
      'pod_exited',
      { timing: { requestTimeoutMs: 1_500, connectTimeoutMs: 1_500 } },
    );
  });

  it('the host stops answering and Runpod goes on listing it RUNNING: the client deletes the pod (its watchdog, on that host, cannot) and the run goes on on a new pod', async function () {
    await recovers(
      this,
      (l, pod) => l.emulator.faults.hostLost(pod),
      'recovery.host-silent',
      'host_lost',
      { timing: { requestTimeoutMs: 1_500, connectTimeoutMs: 1_500 } },
    );
  });

  it('the host stops answering, then its pod is deleted while the client asks the host again: the run goes on on a new pod, not left "lost"', async function () {
    await recovers(
      this,
      async (l, pod) => {
        await l.emulator.faults.hostLost(pod);
        await l.waitFor(
          'the client asking the silent host again',
          () =>
            l.events.some(
              ({ event }) =>
                event.type === 'log' && /gave no SSH answer again \(1 of/.test(event.message),
            ),
          120_000,
        );
        await l.emulator.faults.podVanishes(pod);
      },
      'recovery.host-silent-then-gone',
      'pod_deleted',
      { timing: { requestTimeoutMs: 1_500, connectTimeoutMs: 1_500 } },
    );
  });
});
