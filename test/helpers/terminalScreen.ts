/**
 * A minimal terminal for the CLI's live area: interprets the few control sequences it writes
 * (ESC[nF cursor up n lines to their start, ESC[J clear to the end of the screen, SGR colours
 * ignored) and returns the screen's lines, so a test sees what a user would.
 */
export function screenOf(output: string): string[] {
  const lines: string[] = [''];
  let row = 0;
  let col = 0;
  // eslint-disable-next-line no-control-regex
  const tokens = output.match(/\u001b\[[0-9;]*[A-Za-z]|\r|\n|[^\u001b\r\n]+/g) ?? [];
  for (const t of tokens) {
    if (t === '\n') {
      row++;
      col = 0;
      if (lines.length <= row) lines.push('');
    } else if (t === '\r') col = 0;
    else if (t.startsWith('\u001b[')) {
      const n = Number(t.slice(2, -1) || '1');
      const op = t.slice(-1);
      if (op === 'F') {
        row = Math.max(0, row - n);
        col = 0;
      } else if (op === 'J') {
        lines.length = row + 1;
        lines[row] = lines[row]!.slice(0, col);
      } else if (op === 'K') lines[row] = lines[row]!.slice(0, col);
    } else {
      const cur = lines[row]!;
      lines[row] = cur.slice(0, col) + t + cur.slice(col + t.length);
      col += t.length;
    }
  }
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/** Whether `output` holds any control sequence (colour or cursor movement). */
export function hasEscapes(output: string): boolean {
  return output.includes('\u001b');
}
