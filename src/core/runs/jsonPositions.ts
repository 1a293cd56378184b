/**
 * Where things are in a JSON text, without ever quoting it: the position of
 * the first syntax error, or of each value by path. V8's JSON.parse messages
 * quote the text around an error and give no line, so a damaged record is
 * located here instead.
 */

export type JsonScan = { ok: true; valueAt: Map<string, number> } | { ok: false; errorAt: number };

/** The path key of {@link JsonScan.valueAt}: `JSON.stringify(path)` with indexes as numbers. */
export function jsonPathKey(path: readonly (string | number)[]): string {
  return JSON.stringify(path);
}

class Fail {
  constructor(readonly at: number) {}
}

/** Scans `text` as JSON (RFC 8259). */
export function scanJson(text: string): JsonScan {
  const valueAt = new Map<string, number>();
  let i = 0;
  const ws = (): void => {
    while (i < text.length && ' \t\n\r'.includes(text[i] ?? '')) i++;
  };
  const fail: () => never = () => {
    throw new Fail(Math.min(i, text.length));
  };
  const string = (): string => {
    if (text[i] !== '"') fail();
    i++;
    let out = '';
    for (;;) {
      const c = text[i];
      if (c === undefined) fail();
      if (c === '"') {
        i++;
        return out;
      }
      if (c === '\\') {
        const e = text[i + 1];
        if (e === 'u') {
          if (!/^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) {
            i += 2;
            fail();
          }
          out += String.fromCharCode(parseInt(text.slice(i + 2, i + 6), 16));
          i += 6;
        } else if (e !== undefined && '"\\/bfnrt'.includes(e)) {
          out += e;
          i += 2;
        } else {
          i++;
          fail();
        }
      } else if ((c.codePointAt(0) ?? 0) < 0x20) {
        fail();
      } else {
        out += c;
        i++;
      }
    }
  };
  const value = (path: (string | number)[]): void => {
    ws();
    valueAt.set(jsonPathKey(path), i);
    const c = text[i];
    if (c === '{') {
      i++;
      ws();
      if (text[i] === '}') {
        i++;
        return;
      }
      for (;;) {
        ws();
        const key = string();
        ws();
        if (text[i] !== ':') fail();
        i++;
        value([...path, key]);
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === '}') {
          i++;
          return;
        }
        fail();
      }
    } else if (c === '[') {
      i++;
      ws();
      if (text[i] === ']') {
        i++;
        return;
      }
      for (let index = 0; ; index++) {
        value([...path, index]);
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === ']') {
          i++;
          return;
        }
        fail();
      }
    } else if (c === '"') {
      string();
    } else {
      for (const word of ['true', 'false', 'null']) {
        if (text.startsWith(word, i)) {
          i += word.length;
          return;
        }
      }
      const match = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i, i + 400));
      if (!match || match[0] === '' || match[0] === '-') fail();
      i += match?.[0].length ?? 0;
    }
  };
  try {
    value([]);
    ws();
    if (i < text.length) fail();
    return { ok: true, valueAt };
  } catch (error) {
    if (error instanceof Fail) return { ok: false, errorAt: error.at };
    // Nesting deep enough to exhaust the stack: no record is shaped like that.
    if (error instanceof RangeError) return { ok: false, errorAt: Math.min(i, text.length) };
    throw error;
  }
}

/** 1-based line and column of `offset` in `text`. */
export function lineColumn(text: string, offset: number): { line: number; column: number } {
  let line = 1;
  let lineStart = 0;
  for (let i = 0; i < offset && i < text.length; i++) {
    if (text[i] === '\n') {
      line++;
      lineStart = i + 1;
    }
  }
  return { line, column: offset - lineStart + 1 };
}
