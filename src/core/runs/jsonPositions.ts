/**
 * Where things are in a JSON text, without ever quoting it: the position of
 * the first syntax error, or of each value by path. V8's JSON.parse messages
 * quote the text around an error and give no line, so a damaged record or a
 * garbled API answer is located here instead. The one scanner for both.
 *
 * An error is placed where the user should look: a word that is not JSON
 * (`tru`, `NaN`, `Infinity`, `'a'`) at its first character; inside a string,
 * at the character that cannot be there (a raw tab, the `x` of `\x`, the `G`
 * of `\u12G4`); a text cut short (`nul`, `{"a":`, an unclosed string) at its
 * end, with `eof` set.
 */

export type JsonScan =
  { ok: true; valueAt: Map<string, number> } | { ok: false; errorAt: number; eof: boolean };

/** The path key of {@link JsonScan.valueAt}: `JSON.stringify(path)` with indexes as numbers. */
export function jsonPathKey(path: readonly (string | number)[]): string {
  return JSON.stringify(path);
}

class Fail {
  constructor(readonly at: number) {}
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

/** Scans `text` as JSON (RFC 8259). */
export function scanJson(text: string): JsonScan {
  const n = text.length;
  const valueAt = new Map<string, number>();
  let i = 0;
  const ws = (): void => {
    while (i < n) {
      const c = text.charCodeAt(i);
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) i++;
      else break;
    }
  };
  const failAt = (at: number): never => {
    throw new Fail(Math.min(at, n));
  };
  const string = (): string => {
    if (text[i] !== '"') failAt(i);
    i++;
    let out = '';
    for (;;) {
      if (i >= n) failAt(n);
      const c = text.charCodeAt(i);
      if (c === 0x22) {
        i++;
        return out;
      }
      if (c === 0x5c) {
        const e = text[i + 1];
        if (e === undefined) failAt(n);
        if (e === 'u') {
          for (let k = 0; k < 4; k++) {
            const at = i + 2 + k;
            if (at >= n) failAt(n);
            if (!/[0-9a-fA-F]/.test(text[at] ?? '')) failAt(at);
          }
          out += String.fromCharCode(parseInt(text.slice(i + 2, i + 6), 16));
          i += 6;
        } else if ('"\\/bfnrt'.includes(e ?? '')) {
          out += e;
          i += 2;
        } else {
          failAt(i + 1);
        }
      } else if (c < 0x20) {
        failAt(i);
      } else {
        out += text[i];
        i++;
      }
    }
  };
  const word = (): void => {
    for (const w of ['true', 'false', 'null']) {
      if (text.startsWith(w, i)) {
        i += w.length;
        return;
      }
      // Cut short inside the word: the text ended, not a wrong word.
      if (n - i < w.length && w.startsWith(text.slice(i))) failAt(n);
    }
    NUMBER.lastIndex = i;
    const match = NUMBER.exec(text);
    if (!match || match[0] === '') failAt(text[i] === '-' && i + 1 >= n ? n : i);
    i = NUMBER.lastIndex;
  };
  const value = (path: (string | number)[]): void => {
    ws();
    if (i >= n) failAt(n);
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
        if (i >= n) failAt(n);
        const key = string();
        ws();
        if (i >= n) failAt(n);
        if (text[i] !== ':') failAt(i);
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
        failAt(i);
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
        failAt(i);
      }
    } else if (c === '"') {
      string();
    } else {
      word();
    }
  };
  try {
    value([]);
    ws();
    if (i < n) failAt(i);
    return { ok: true, valueAt };
  } catch (error) {
    if (error instanceof Fail) return { ok: false, errorAt: error.at, eof: error.at >= n };
    // Nesting deep enough to exhaust the stack: no record or answer is shaped like that.
    if (error instanceof RangeError) return { ok: false, errorAt: Math.min(i, n), eof: false };
    throw error;
  }
}

/** 1-based line and column of `offset` in `text` (an offset past the end is the end). */
export function lineColumn(text: string, offset: number): { line: number; column: number } {
  let line = 1;
  let lineStart = 0;
  const end = Math.min(offset, text.length);
  for (let i = 0; i < end; i++) {
    if (text.charCodeAt(i) === 10) {
      line++;
      lineStart = i + 1;
    }
  }
  return { line, column: end - lineStart + 1 };
}
