/**
 * When an answer says the API saw what it answered (Answer.seenByMs): a pod an answer showed gone
 * billed no later than that, which is where its spend estimate ends.
 */
import assert from 'node:assert/strict';
import { seenByMs } from '../../src/core/runpod/answers';

describe('seenByMs: when, at the latest, the API saw what it answered', () => {
  const sentMs = Date.parse('2026-12-07T04:00:10.400Z');
  const dated = (iso: string): string => new Date(Date.parse(iso)).toUTCString();

  it('an answer read seconds after it was made: its Date plus the second it rounds off', () => {
    // Sent at 10.4 s, made in the second 11, read at 13.9 s (a busy client).
    const arrivedMs = Date.parse('2026-12-07T04:00:13.900Z');
    assert.equal(
      seenByMs(dated('2026-12-07T04:00:11Z'), sentMs, arrivedMs),
      Date.parse('2026-12-07T04:00:12Z'),
    );
  });

  it('an answer read at once: its arrival, which comes before its Date plus a second', () => {
    const arrivedMs = Date.parse('2026-12-07T04:00:10.600Z');
    assert.equal(seenByMs(dated('2026-12-07T04:00:10Z'), sentMs, arrivedMs), arrivedMs);
  });

  it('a Date this clock cannot hold (before the second the call was sent in, after its answer, absent or unreadable): the arrival', () => {
    const arrivedMs = Date.parse('2026-12-07T04:00:13.900Z');
    for (const date of [
      dated('2026-12-07T04:00:09Z'),
      dated('2026-12-07T04:00:14Z'),
      undefined,
      'yesterday',
    ]) {
      assert.equal(seenByMs(date, sentMs, arrivedMs), arrivedMs, String(date));
    }
  });

  it('reads the first of repeated Date headers', () => {
    const arrivedMs = Date.parse('2026-12-07T04:00:13.900Z');
    const first = dated('2026-12-07T04:00:11Z');
    assert.equal(
      seenByMs([first, dated('2026-12-07T04:00:13Z')], sentMs, arrivedMs),
      Date.parse('2026-12-07T04:00:12Z'),
    );
  });
});
