import assert from 'node:assert/strict';
import {
  LineFramer,
  MAX_METRIC_LINE_BYTES,
  parseFramedLine,
  parseMetricLine,
  READ_LIMIT_BYTES,
  SkipWarnings,
  type FramedLine,
  type ParsedLine,
} from '../../src/core/train/metrics';

const parse = (text: string): ParsedLine => parseMetricLine(Buffer.from(text, 'utf8'));

function skipReason(parsed: ParsedLine): string {
  assert.equal(parsed.kind, 'skip', JSON.stringify(parsed));
  return parsed.kind === 'skip' ? parsed.reason : '';
}

describe('parseMetricLine', () => {
  it('reads a log line of the protocol into a camelCase TrainMetric', () => {
    const parsed = parse(
      '{"event":"log","time":1759150000.5,"step":12,"epoch":0.5,"max_steps":40,"loss":1.23456,"learning_rate":0.0002,"grad_norm":0.7}',
    );
    assert.deepEqual(parsed, {
      kind: 'metric',
      metric: {
        time: 1759150000.5,
        step: 12,
        epoch: 0.5,
        maxSteps: 40,
        loss: 1.23456,
        evalLoss: null,
        learningRate: 0.0002,
        gradNorm: 0.7,
      },
    });
  });

  it('reads after_s, the work after the last step, when a log line has it', () => {
    const parsed = parse('{"event":"log","time":5,"step":1,"max_steps":4,"loss":1,"after_s":320}');
    assert.ok(parsed.kind === 'metric');
    assert.equal(parsed.metric.afterS, 320);
    const bad = parse('{"event":"log","time":5,"step":1,"loss":1,"after_s":-3}');
    assert.ok(bad.kind === 'metric');
    assert.equal(bad.metric.afterS, undefined);
  });

  it('reads begin, end, stage and eval progress lines', () => {
    assert.deepEqual(parse('{"event":"begin","time":1,"max_steps":7300}'), {
      kind: 'begin',
      time: 1,
      maxSteps: 7300,
    });
    assert.deepEqual(parse('{"event":"end","time":2}'), { kind: 'end', time: 2 });
    assert.deepEqual(parse('{"event":"stage","time":3,"stage":"merge"}'), {
      kind: 'stage',
      time: 3,
      stage: 'merge',
    });
    assert.deepEqual(parse('{"event":"eval","time":4,"step":10,"done":3,"total":12}'), {
      kind: 'eval',
      time: 4,
      step: 10,
      done: 3,
      total: 12,
    });
  });

  it('nulls non-finite values, including the NaN/Infinity tokens Python writes by default', () => {
    const parsed = parse(
      '{"event":"log","time":5,"step":3,"epoch":NaN,"loss":NaN,"eval_loss":Infinity,"grad_norm":-Infinity,"learning_rate":1e999,"note":"NaN stays text"}',
    );
    assert.equal(parsed.kind, 'metric');
    if (parsed.kind !== 'metric') return;
    assert.equal(parsed.metric.step, 3);
    assert.equal(parsed.metric.loss, null);
    assert.equal(parsed.metric.evalLoss, null);
    assert.equal(parsed.metric.gradNorm, null);
    assert.equal(parsed.metric.learningRate, null);
    assert.equal(parsed.metric.epoch, null);
  });

  it('keeps a negative loss but nulls a negative rate, norm, epoch or max_steps', () => {
    const parsed = parse(
      '{"event":"log","time":5,"step":3,"loss":-0.5,"eval_loss":-1,"learning_rate":-1,"grad_norm":-2,"epoch":-1,"max_steps":-4}',
    );
    assert.equal(parsed.kind, 'metric');
    if (parsed.kind !== 'metric') return;
    assert.equal(parsed.metric.loss, -0.5);
    assert.equal(parsed.metric.evalLoss, -1);
    assert.equal(parsed.metric.learningRate, null);
    assert.equal(parsed.metric.gradNorm, null);
    assert.equal(parsed.metric.epoch, null);
    assert.equal(parsed.metric.maxSteps, null);
  });

  it('nulls values of the wrong type instead of dropping the line', () => {
    const parsed = parse('{"event":"log","time":5,"step":3,"loss":"1.2","max_steps":2.5}');
    assert.equal(parsed.kind, 'metric');
    if (parsed.kind !== 'metric') return;
    assert.equal(parsed.metric.loss, null);
    assert.equal(parsed.metric.maxSteps, null);
  });

  it('skips a log line without a usable step or time', () => {
    assert.equal(skipReason(parse('{"event":"log","time":5,"step":-1,"loss":1}')), 'invalid');
    assert.equal(skipReason(parse('{"event":"log","time":5,"step":1.5,"loss":1}')), 'invalid');
    assert.equal(skipReason(parse('{"event":"log","time":5,"loss":1}')), 'invalid');
    assert.equal(skipReason(parse('{"event":"log","time":5,"step":"3"}')), 'invalid');
    assert.equal(skipReason(parse('{"event":"log","step":3,"loss":1}')), 'invalid');
    assert.equal(skipReason(parse('{"event":"log","time":NaN,"step":3}')), 'invalid');
    assert.equal(skipReason(parse('{"event":"log","time":5,"step":1e300}')), 'invalid');
  });

  it('skips truncated JSON, non-objects, non-UTF-8, blank and unknown lines without throwing', () => {
    assert.equal(skipReason(parse('{"event":"log","time":5,"st')), 'not_json');
    assert.equal(skipReason(parse('[1,2]')), 'not_object');
    assert.equal(skipReason(parse('null')), 'not_object');
    assert.equal(skipReason(parse('42')), 'not_object');
    assert.equal(skipReason(parse('')), 'blank');
    assert.equal(skipReason(parse('   ')), 'blank');
    assert.equal(skipReason(parse('{"event":"checkpoint","time":1}')), 'unknown_event');
    assert.equal(skipReason(parse('{"time":1}')), 'unknown_event');
    const invalid = Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]);
    assert.equal(skipReason(parseMetricLine(invalid)), 'not_utf8');
    // An overlong UTF-8 encoding of '/' is not UTF-8 either.
    assert.equal(skipReason(parseMetricLine(Buffer.from([0xc0, 0xaf]))), 'not_utf8');
  });

  it('accepts a UTF-8 BOM and multi-byte text', () => {
    const parsed = parse('\ufeff{"event":"stage","time":1,"stage":"évaluation 🚀"}');
    assert.deepEqual(parsed, { kind: 'stage', time: 1, stage: 'évaluation 🚀' });
  });

  it('skips a line over 64 KiB before decoding it', () => {
    const padding = 'x'.repeat(MAX_METRIC_LINE_BYTES);
    const line = `{"event":"log","time":1,"step":1,"loss":1,"pad":"${padding}"}`;
    assert.equal(skipReason(parse(line)), 'too_long');
    const fits = `{"event":"log","time":1,"step":1,"loss":1,"pad":"${'x'.repeat(1000)}"}`;
    assert.equal(parse(fits).kind, 'metric');
  });

  it('never throws on random bytes', () => {
    let seed = 42;
    const random = (): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const alphabet = Buffer.from('{}[]":,0123456789.eE+-NaInfitylogventsp \\u\u00e9', 'utf8');
    for (let i = 0; i < 2000; i++) {
      const length = Math.floor(random() * 80);
      const bytes = Buffer.alloc(length);
      for (let j = 0; j < length; j++) {
        bytes[j] =
          random() < 0.1
            ? Math.floor(random() * 256)
            : (alphabet[Math.floor(random() * alphabet.length)] ?? 0);
      }
      const parsed = parseMetricLine(bytes);
      assert.ok(['metric', 'begin', 'end', 'stage', 'eval', 'skip'].includes(parsed.kind));
    }
  });
});

describe('SkipWarnings', () => {
  it('warns once per reason, once per unknown event name, never for blank lines', () => {
    const warnings = new SkipWarnings();
    const where = 'runs/r/metrics.jsonl';
    assert.match(
      warnings.note(parse('{"event":"log","time":1,"st'), where) ?? '',
      /not valid JSON/,
    );
    assert.equal(warnings.note(parse('{oops'), where), null);
    assert.match(warnings.note(parse('{"event":"a"}'), where) ?? '', /event "a"/);
    assert.match(warnings.note(parse('{"event":"b"}'), where) ?? '', /event "b"/);
    assert.equal(warnings.note(parse('{"event":"a"}'), where), null);
    assert.equal(warnings.note(parse(''), where), null);
    assert.equal(warnings.note(parse('{"event":"end","time":1}'), where), null);
  });
});

function texts(lines: FramedLine[]): string[] {
  return lines.map((line) => line.bytes.toString('utf8'));
}

describe('LineFramer', () => {
  it('keeps an incomplete tail until its terminator and tracks offsets', () => {
    const framer = new LineFramer();
    assert.deepEqual(texts(framer.push(Buffer.from('ab'))), []);
    assert.equal(framer.offset, 0);
    assert.equal(framer.pendingBytes, 2);
    const lines = framer.push(Buffer.from('c\nde\nf'));
    assert.deepEqual(texts(lines), ['abc', 'de']);
    assert.deepEqual(
      lines.map((line) => [line.startOffset, line.endOffset]),
      [
        [0, 4],
        [4, 7],
      ],
    );
    assert.equal(framer.offset, 7);
    assert.equal(framer.pendingBytes, 1);
  });

  it('treats \\r as a terminator too (\\r\\n gives an empty line the parser skips)', () => {
    const framer = new LineFramer();
    const lines = framer.push(Buffer.from('a\rb\r\nc\n'));
    assert.deepEqual(texts(lines), ['a', 'b', '', 'c']);
    assert.equal(framer.offset, 7);
    assert.equal(parseFramedLine(lines[2] as FramedLine).kind, 'skip');
  });

  it('splits identically whatever the chunk boundaries, multi-byte characters included', () => {
    const text = 'é1\n{"a":"ü🚀"}\r\n\nlast\n';
    const whole = texts(new LineFramer().push(Buffer.from(text)));
    const bytes = Buffer.from(text);
    for (let size = 1; size <= 5; size++) {
      const framer = new LineFramer();
      const lines: FramedLine[] = [];
      for (let i = 0; i < bytes.length; i += size)
        lines.push(...framer.push(bytes.subarray(i, i + size)));
      assert.deepEqual(texts(lines), whole, `chunks of ${size}`);
      assert.equal(framer.offset, bytes.length);
    }
  });

  it('resumes exactly after dropping the pending tail (a stream that reconnects)', () => {
    const file = Buffer.from('one\ntwo\nthree\nfour\n');
    const framer = new LineFramer();
    const seen = texts(framer.push(file.subarray(0, 10))); // "one\ntwo\nth"
    framer.dropPending();
    assert.equal(framer.offset, 8);
    seen.push(...texts(framer.push(file.subarray(framer.offset))));
    assert.deepEqual(seen, ['one', 'two', 'three', 'four']);
  });

  it('starts at a given offset', () => {
    const framer = new LineFramer(100);
    const [line] = framer.push(Buffer.from('x\n'));
    assert.equal(line?.startOffset, 100);
    assert.equal(framer.offset, 102);
    assert.throws(() => new LineFramer(-1), RangeError);
  });

  it('cuts a full buffer without a terminator at a UTF-8 boundary and drops the rest of that line', () => {
    const framer = new LineFramer(0, 16);
    // 14 ASCII bytes, then a 4-byte character crossing the 16-byte limit.
    const head = 'a'.repeat(14);
    const lines = framer.push(Buffer.from(`${head}🚀${'b'.repeat(30)}`));
    assert.equal(lines.length, 1);
    const cut = lines[0] as FramedLine;
    assert.equal(cut.cut, true);
    assert.equal(cut.bytes.toString('utf8'), head);
    assert.equal(parseFramedLine(cut).kind, 'skip');
    assert.ok(framer.pendingBytes < 16);
    // The rest of the overlong line is dropped; the next line is whole.
    const next = framer.push(Buffer.from('bbb\nok\n'));
    assert.deepEqual(texts(next), ['ok']);
    assert.equal(framer.offset, 14 + 4 + 30 + 4 + 3);
  });

  it('bounds memory for a 3 MiB line fed in pieces, then reads on', () => {
    const framer = new LineFramer();
    const lines: FramedLine[] = [];
    const piece = Buffer.alloc(256 * 1024, 0x61);
    for (let i = 0; i < 12; i++) {
      lines.push(...framer.push(piece));
      assert.ok(framer.pendingBytes < READ_LIMIT_BYTES);
    }
    lines.push(...framer.push(Buffer.from('\n{"event":"end","time":1}\n')));
    assert.equal(lines.filter((line) => line.cut).length, 1);
    const last = lines[lines.length - 1] as FramedLine;
    assert.deepEqual(parseFramedLine(last), { kind: 'end', time: 1 });
    assert.equal(framer.offset, 12 * piece.length + 1 + 25);
  });

  it('cuts a bounded read of exactly the limit with no terminator, so a reader never stalls', () => {
    const framer = new LineFramer(0, 8);
    const lines = framer.push(Buffer.from('abcdefgh'));
    assert.equal(lines.length, 1);
    assert.equal(framer.offset, 8);
  });

  it('hands over the unterminated last line of a finished file', () => {
    const framer = new LineFramer();
    framer.push(Buffer.from('a\n{"event":"end","time":1}'));
    const [last] = framer.finish();
    assert.equal(last?.unterminated, true);
    assert.deepEqual(parseFramedLine(last as FramedLine), { kind: 'end', time: 1 });
    assert.equal(framer.offset, 2 + 24);
    assert.deepEqual(framer.finish(), []);
  });
});

describe('parseMetricLine: any numeric key of a log line (a sweep objective)', () => {
  it('keeps every other finite number under values, by its key, and drops the rest', () => {
    const parsed = parse(
      '{"event":"log","time":1,"step":3,"loss":0.5,"accuracy":0.91,"bleu":-2,"name":"x","nan":NaN,"__proto__":4}',
    );
    assert.equal(parsed.kind, 'metric');
    if (parsed.kind !== 'metric') return;
    assert.deepEqual(parsed.metric.values, { accuracy: 0.91, bleu: -2 });
    assert.equal(parsed.metric.loss, 0.5);
  });

  it('adds no values to a line holding only the protocol keys', () => {
    const parsed = parse('{"event":"log","time":1,"step":3,"loss":0.5}');
    assert.ok(parsed.kind === 'metric' && !('values' in parsed.metric));
  });
});
