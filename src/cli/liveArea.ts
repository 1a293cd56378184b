/**
 * The CLI's stderr on a terminal: ordinary lines scroll as usual, and below them a block of
 * status lines (the boot log's last lines while a pod provisions) is redrawn in place. Each
 * status line is cut to the terminal's width, so the block's height is its line count and the
 * redraw erases exactly it. Colour (the block dimmed) only when `color`: never with `NO_COLOR`
 * set, nor when stderr is not a terminal (there is no live area then: plain lines only).
 */

/** ESC: the start of every control sequence. */
const ESC = '\u001b';
const DIM = `${ESC}[2m`;
const RESET = `${ESC}[0m`;

export interface LiveAreaOptions {
  /** Colour allowed (see `colorAllowed`). */
  color: boolean;
  /** The terminal's width in columns (read at each redraw: a resize takes effect). */
  columns: () => number;
}

/**
 * Whether the CLI may colour its output: stderr is a terminal and `NO_COLOR` is unset or empty
 * (https://no-color.org), and `TERM` is not `dumb`.
 */
export function colorAllowed(env: Record<string, string | undefined>, isTty: boolean): boolean {
  if (!isTty) return false;
  if ((env.NO_COLOR ?? '') !== '') return false;
  return env.TERM !== 'dumb';
}

/**
 * Whether stderr gets a live area at all: a terminal that can move its cursor (`TERM=dumb`, as
 * Emacs' shell sets it, cannot: it gets plain lines, as a pipe does).
 */
export function liveAllowed(env: Record<string, string | undefined>, isTty: boolean): boolean {
  return isTty && env.TERM !== 'dumb';
}

/** `text` cut to `width` columns (an ellipsis marks the cut); control characters shown as `?`. */
export function fitLine(text: string, width: number): string {
  // eslint-disable-next-line no-control-regex
  const clean = text.replace(/[\u0000-\u001f\u007f]/g, '?');
  const chars = [...clean];
  if (width < 2 || chars.length <= width) return width < 2 ? '' : clean;
  return `${chars.slice(0, width - 1).join('')}…`;
}

export class LiveArea {
  private block: string[] = [];

  constructor(
    private readonly write: (chunk: string) => void,
    private readonly options: LiveAreaOptions,
  ) {}

  /**
   * Writes `text` as an ordinary line above the block (the block is redrawn below it); through
   * `out` when given (stdout on the same terminal), the block's erase and redraw around it.
   */
  line(text: string, out?: (chunk: string) => void): void {
    if (out === undefined) {
      this.write(`${this.erase()}${text}\n${this.draw()}`);
      return;
    }
    const erase = this.erase();
    if (erase !== '') this.write(erase);
    out(`${text}\n`);
    const draw = this.draw();
    if (draw !== '') this.write(draw);
  }

  /** Replaces the block with `lines` (none: the block goes, the cursor where it began). */
  set(lines: readonly string[]): void {
    const erase = this.erase();
    const width = Math.max(2, this.options.columns() - 1);
    this.block = lines.map((l) => fitLine(l, width));
    const out = `${erase}${this.draw()}`;
    if (out !== '') this.write(out);
  }

  /** The control sequence that erases the block: up to its first line, then clear below. */
  private erase(): string {
    const n = this.block.length;
    return n === 0 ? '' : `${ESC}[${n}F${ESC}[J`;
  }

  private draw(): string {
    if (this.block.length === 0) return '';
    const body = this.block.map((l) => `${l}\n`).join('');
    return this.options.color ? `${DIM}${body}${RESET}` : body;
  }
}
