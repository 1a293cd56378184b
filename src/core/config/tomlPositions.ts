/**
 * Where each key, value and table of a TOML document is, so a config error can
 * point at the offending key or value (smol-toml only gives positions for syntax
 * errors) and so `setGpuTypes` can rewrite one value in place.
 *
 * This is a locator, not a parser: it only runs on text smol-toml already
 * accepted, so it skips values leniently and never reports errors of its own.
 * Paths are the key segments as TOML defines them (`[targets.pod]` +
 * `max_hours` = `targets/pod/max_hours`); array elements add their index.
 */

/** A position in the text: 0-based offset, 1-based line and column (UTF-16 units, as VS Code counts). */
export interface TextPos {
  offset: number;
  line: number;
  column: number;
}

/** A `key = value` pair, wherever it is written (under a header, dotted, or in an inline table). */
export interface KeyEntry {
  path: readonly string[];
  key: TextPos;
  value: TextPos;
  /** Offset just after the value (before any trailing comment). */
  valueEnd: number;
}

/** A table as the document defines it. */
export interface TableEntry {
  path: readonly string[];
  /**
   * `header`: `[a.b]`; `array`: `[[a.b]]`; `dotted`: implied by a dotted key
   * (`pod.kind = …`); `inline`: `pod = { … }`.
   */
  kind: 'header' | 'array' | 'dotted' | 'inline';
  /** The header, the first dotted key that implied it, or the `{` of an inline table. */
  at: TextPos;
  /** For `dotted`: the path of the header table the dotted keys are written under. */
  headerPath: readonly string[];
  /** Offset of the end of the line of its last entry (or of its header): where a new line goes. */
  lastLineEnd: number;
  /** For `inline`: offset of its closing `}`, and how many keys it holds. */
  inlineClose?: number;
  entries: number;
}

const pathKey = (path: readonly string[]): string => JSON.stringify(path);

export class TomlPositions {
  private readonly lineStarts: number[] = [0];
  private readonly keys = new Map<string, KeyEntry>();
  private readonly tables = new Map<string, TableEntry>();

  constructor(readonly text: string) {
    for (let i = 0; i < text.length; i++) if (text[i] === '\n') this.lineStarts.push(i + 1);
    new Scanner(text, this).scan();
  }

  /** The line and column of `offset`. */
  pos(offset: number): TextPos {
    let low = 0;
    let high = this.lineStarts.length - 1;
    while (low < high) {
      const mid = (low + high + 1) >> 1;
      if ((this.lineStarts[mid] ?? 0) <= offset) low = mid;
      else high = mid - 1;
    }
    return { offset, line: low + 1, column: offset - (this.lineStarts[low] ?? 0) + 1 };
  }

  key(path: readonly string[]): KeyEntry | undefined {
    return this.keys.get(pathKey(path));
  }

  table(path: readonly string[]): TableEntry | undefined {
    return this.tables.get(pathKey(path));
  }

  /**
   * The best place to point at for `path`: the value when `value` is asked
   * and the key exists, else the key, else the nearest enclosing table or key
   * that exists, else line 1, column 1.
   */
  locate(path: readonly string[], want: 'key' | 'value' = 'key'): TextPos {
    for (let n = path.length; n > 0; n--) {
      const prefix = path.slice(0, n);
      const entry = this.key(prefix);
      if (entry) return n === path.length && want === 'value' ? entry.value : entry.key;
      const table = this.table(prefix);
      if (table) return table.at;
    }
    return this.pos(0);
  }

  /** @internal */
  addKey(entry: KeyEntry): void {
    const id = pathKey(entry.path);
    if (!this.keys.has(id)) this.keys.set(id, entry);
  }

  /** @internal */
  addTable(entry: TableEntry): TableEntry {
    const id = pathKey(entry.path);
    const existing = this.tables.get(id);
    // A header after dotted keys or a super-table reference keeps the first
    // definition's place unless the header is more precise.
    if (existing && !(existing.kind === 'dotted' && entry.kind === 'header')) return existing;
    this.tables.set(id, entry);
    return entry;
  }
}

const BARE_KEY = /[A-Za-z0-9_-]/;

/** Walks the text once, recording keys and tables in `out`. */
class Scanner {
  private i = 0;
  private arrayTableCounts = new Map<string, number>();

  constructor(
    private readonly t: string,
    private readonly out: TomlPositions,
  ) {}

  scan(): void {
    let table: TableEntry | null = null;
    let tablePath: string[] = [];
    const t = this.t;
    while (this.i < t.length) {
      const before = this.i;
      this.skipSpaces();
      const c = t[this.i];
      if (c === undefined) break;
      if (c === '\n' || c === '\r') {
        this.i++;
      } else if (c === '#') {
        this.skipToLineEnd();
      } else if (c === '[') {
        const start = this.i;
        const isArray = t[this.i + 1] === '[';
        this.i += isArray ? 2 : 1;
        this.skipSpaces();
        let path = this.readKey();
        if (isArray) {
          // Each `[[a]]` is a new element: index it like an array value.
          const id = pathKey(path);
          const index = this.arrayTableCounts.get(id) ?? 0;
          this.arrayTableCounts.set(id, index + 1);
          path = [...path, String(index)];
        }
        this.skipToLineEnd();
        tablePath = path;
        table = this.out.addTable({
          path,
          kind: isArray ? 'array' : 'header',
          at: this.out.pos(start),
          headerPath: path,
          lastLineEnd: this.endOfLineFrom(this.i),
          entries: 0,
        });
      } else {
        this.keyValue(tablePath, table, false);
        this.skipSpaces();
        if (this.t[this.i] === '#') this.skipToLineEnd();
        const lineEnd = this.endOfLineFrom(this.i);
        if (table) table.lastLineEnd = lineEnd;
        this.skipToLineEnd();
      }
      if (this.i === before) this.i++; // never loop on text the locator does not understand
    }
  }

  private skipSpaces(): void {
    while (this.t[this.i] === ' ' || this.t[this.i] === '\t') this.i++;
  }

  private skipToLineEnd(): void {
    while (this.i < this.t.length && this.t[this.i] !== '\n') this.i++;
  }

  /** Skips spaces, line breaks and comments (inside arrays and inline tables). */
  private skipBlank(): void {
    for (;;) {
      const c = this.t[this.i];
      if (c === ' ' || c === '\t' || c === '\n' || c === '\r') this.i++;
      else if (c === '#') this.skipToLineEnd();
      else return;
    }
  }

  /** A dotted key: bare, "basic" or 'literal' segments. */
  private readKey(): string[] {
    const segments: string[] = [];
    for (;;) {
      this.skipSpaces();
      const c = this.t[this.i];
      if (c === '"') segments.push(this.readBasicString());
      else if (c === "'") segments.push(this.readLiteralString());
      else {
        const start = this.i;
        while (this.i < this.t.length && BARE_KEY.test(this.t[this.i] ?? '')) this.i++;
        segments.push(this.t.slice(start, this.i));
        if (this.i === start) return segments;
      }
      this.skipSpaces();
      if (this.t[this.i] !== '.') return segments;
      this.i++;
    }
  }

  private readBasicString(): string {
    this.i++; // opening quote
    let raw = '';
    while (this.i < this.t.length && this.t[this.i] !== '"') {
      if (this.t[this.i] === '\\') {
        raw += this.t.slice(this.i, this.i + 2);
        this.i += 2;
      } else {
        raw += this.t[this.i];
        this.i++;
      }
    }
    this.i++; // closing quote
    try {
      return JSON.parse(`"${raw}"`) as string;
    } catch {
      // TOML escapes JSON lacks (\e, \U0001F600, \xHH): keep the raw text, good enough to locate.
      return raw;
    }
  }

  private readLiteralString(): string {
    this.i++;
    const start = this.i;
    while (this.i < this.t.length && this.t[this.i] !== "'") this.i++;
    const value = this.t.slice(start, this.i);
    this.i++;
    return value;
  }

  /** `key = value` at the cursor, relative to `base` (the current header table). */
  private keyValue(base: readonly string[], header: TableEntry | null, inline: boolean): void {
    const keyAt = this.out.pos(this.i);
    const segments = this.readKey();
    const path = [...base, ...segments];
    // Dotted keys imply tables: `pod.kind = …` under [targets] defines targets.pod.
    const implied: TableEntry[] = [];
    for (let n = 1; n < segments.length; n++) {
      const table = this.out.addTable({
        path: [...base, ...segments.slice(0, n)],
        kind: 'dotted',
        at: keyAt,
        headerPath: header ? header.headerPath : [],
        lastLineEnd: 0,
        entries: 0,
      });
      table.entries++;
      implied.push(table);
    }
    if (header) header.entries++;
    this.skipSpaces();
    if (this.t[this.i] === '=') this.i++;
    this.skipSpaces();
    const valueAt = this.out.pos(this.i);
    this.value(path);
    this.out.addKey({ path, key: keyAt, value: valueAt, valueEnd: this.i });
    if (!inline) {
      const lineEnd = this.endOfLineFrom(this.i);
      for (const table of implied) if (table.kind === 'dotted') table.lastLineEnd = lineEnd;
    }
  }

  private endOfLineFrom(from: number): number {
    let j = from;
    while (j < this.t.length && this.t[j] !== '\n') j++;
    if (j > 0 && this.t[j - 1] === '\r') j--;
    return j;
  }

  private value(path: readonly string[]): void {
    const t = this.t;
    const c = t[this.i];
    if (t.startsWith('"""', this.i)) {
      this.i += 3;
      while (this.i < t.length && !t.startsWith('"""', this.i))
        this.i += t[this.i] === '\\' ? 2 : 1;
      this.i += 3;
      while (t[this.i] === '"') this.i++; // up to two quotes may end the content
    } else if (t.startsWith("'''", this.i)) {
      this.i += 3;
      while (this.i < t.length && !t.startsWith("'''", this.i)) this.i++;
      this.i += 3;
      while (t[this.i] === "'") this.i++;
    } else if (c === '"') {
      this.readBasicString();
    } else if (c === "'") {
      this.readLiteralString();
    } else if (c === '[') {
      this.i++;
      for (let index = 0; ; index++) {
        this.skipBlank();
        if (this.i >= t.length) return;
        if (t[this.i] === ']') {
          this.i++;
          return;
        }
        const at = this.out.pos(this.i);
        const itemPath = [...path, String(index)];
        const before = this.i;
        this.value(itemPath);
        this.out.addKey({ path: itemPath, key: at, value: at, valueEnd: this.i });
        this.skipBlank();
        if (t[this.i] === ',') this.i++;
        else if (this.i === before) this.i++;
      }
    } else if (c === '{') {
      const table = this.out.addTable({
        path,
        kind: 'inline',
        at: this.out.pos(this.i),
        headerPath: path,
        lastLineEnd: 0,
        entries: 0,
      });
      this.i++;
      for (;;) {
        this.skipBlank();
        if (this.i >= t.length) return;
        if (t[this.i] === '}') {
          table.inlineClose = this.i;
          this.i++;
          return;
        }
        const before = this.i;
        this.keyValue(path, table, true);
        this.skipBlank();
        if (t[this.i] === ',') this.i++;
        else if (this.i === before) this.i++;
      }
    } else {
      // Numbers, booleans, dates (which may hold one space): up to a delimiter.
      const start = this.i;
      while (this.i < t.length && !',]}#\n\r'.includes(t[this.i] ?? '')) this.i++;
      let end = this.i;
      while (end > start && (t[end - 1] === ' ' || t[end - 1] === '\t')) end--;
      this.i = end;
    }
  }
}
