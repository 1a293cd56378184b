/**
 * Reads a tar stream (ustar, GNU long names, pax path records) as it arrives, for downloads that
 * fetch many small files in one flow: each regular file's bytes are handed to a writer with
 * backpressure; every other kind of entry is skipped. Nothing here touches the file system: the
 * caller decides what an entry's name may be (only names it asked for) and where bytes go.
 * A header whose checksum is wrong, or a stream that ends inside an entry, is an error.
 */

import { HintedError } from '../errors';

const BLOCK = 512;
/** Longest name taken from a GNU long-name entry or a pax record. */
const MAX_NAME_BYTES = 4096;
/** Largest pax header read (its records are kept in memory). */
const MAX_PAX_BYTES = 64 * 1024;

export class TarFormatError extends HintedError<'malformed'> {
  constructor(message: string) {
    super(
      'malformed',
      message,
      'Run the command again: a transfer cut short is sent afresh; if it fails the same way, check the free space on both sides.',
    );
    this.name = 'TarFormatError';
  }
}

/** Where one regular file's bytes go. */
export interface TarEntryWriter {
  /**
   * The next bytes: a slice of the stream's own buffer, never changed afterwards (the writer may
   * keep it until its end rather than copy it).
   */
  write(chunk: Buffer): Promise<void>;
  /** All `size` bytes were written. */
  end(): Promise<void>;
}

/**
 * Called at each regular file: its writer, or null to skip its bytes. Other entries (links,
 * directories, devices) are reported to `other` and skipped.
 */
export interface TarHandler {
  file(name: string, size: number): Promise<TarEntryWriter | null>;
  other?(name: string, type: string): void;
}

function field(header: Buffer, start: number, length: number): Buffer {
  const raw = header.subarray(start, start + length);
  const nul = raw.indexOf(0);
  return nul >= 0 ? raw.subarray(0, nul) : raw;
}

function octal(header: Buffer, start: number, length: number, what: string): number {
  const first = header[start] ?? 0;
  if (first & 0x80) {
    // Base-256 (GNU, for sizes of 8 GiB and more).
    let value = first & 0x7f;
    for (let i = 1; i < length; i++) value = value * 256 + (header[start + i] ?? 0);
    if (!Number.isSafeInteger(value)) throw new TarFormatError(`the ${what} is too large`);
    return value;
  }
  const text = field(header, start, length).toString('latin1').trim();
  if (text === '') return 0;
  if (!/^[0-7]+$/.test(text))
    throw new TarFormatError(`the ${what} is not octal: ${JSON.stringify(text)}`);
  return parseInt(text, 8);
}

function checksumOk(header: Buffer): boolean {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 32 : (header[i] ?? 0);
  return sum === octal(header, 148, 8, 'header checksum');
}

/** The `path` record of a pax extended header, if any. */
function paxPath(data: Buffer): string | null {
  let at = 0;
  let path: string | null = null;
  while (at < data.length) {
    const space = data.indexOf(0x20, at);
    if (space < 0) break;
    const length = Number(data.subarray(at, space).toString('latin1'));
    if (!Number.isSafeInteger(length) || length <= 0 || at + length > data.length) {
      throw new TarFormatError('a pax header record is malformed');
    }
    const record = data.subarray(space + 1, at + length - 1).toString('utf8');
    const eq = record.indexOf('=');
    if (eq > 0 && record.slice(0, eq) === 'path') path = record.slice(eq + 1);
    at += length;
  }
  return path;
}

type State =
  | { kind: 'header' }
  | { kind: 'data'; left: number; pad: number; writer: TarEntryWriter | null }
  | { kind: 'meta'; left: number; pad: number; type: string; parts: Buffer[] }
  | { kind: 'pad'; left: number }
  | { kind: 'end' };

export class TarReader {
  private state: State = { kind: 'header' };
  private pending: Buffer = Buffer.alloc(0);
  /** The name a GNU long-name or pax entry gave the next entry. */
  private nextName: string | null = null;

  constructor(private readonly handler: TarHandler) {}

  /** Whether the end-of-archive marker was read. */
  get ended(): boolean {
    return this.state.kind === 'end';
  }

  /** Whether the stream stopped between entries (not inside one). */
  get atBoundary(): boolean {
    return this.state.kind === 'header' || this.state.kind === 'end';
  }

  async push(chunk: Buffer): Promise<void> {
    let data = this.pending.length > 0 ? Buffer.concat([this.pending, chunk]) : chunk;
    this.pending = Buffer.alloc(0);
    while (data.length > 0) {
      const state = this.state;
      switch (state.kind) {
        case 'end':
          return;
        case 'header': {
          if (data.length < BLOCK) {
            this.pending = Buffer.from(data);
            return;
          }
          const header = data.subarray(0, BLOCK);
          data = data.subarray(BLOCK);
          await this.header(header);
          break;
        }
        case 'data': {
          if (state.left > 0) {
            const piece = data.subarray(0, Math.min(state.left, data.length));
            data = data.subarray(piece.length);
            state.left -= piece.length;
            if (state.writer) await state.writer.write(piece);
            if (state.left === 0 && state.writer) await state.writer.end();
          }
          if (state.left === 0) this.state = { kind: 'pad', left: state.pad };
          break;
        }
        case 'meta': {
          const piece = data.subarray(0, Math.min(state.left, data.length));
          data = data.subarray(piece.length);
          state.left -= piece.length;
          state.parts.push(Buffer.from(piece));
          if (state.left === 0) {
            const body = Buffer.concat(state.parts);
            if (state.type === 'L') {
              const nul = body.indexOf(0);
              this.nextName = (nul >= 0 ? body.subarray(0, nul) : body).toString('utf8');
            } else if (state.type === 'x') {
              this.nextName = paxPath(body) ?? this.nextName;
            }
            this.state = { kind: 'pad', left: state.pad };
          }
          break;
        }
        case 'pad': {
          const skip = Math.min(state.left, data.length);
          data = data.subarray(skip);
          state.left -= skip;
          if (state.left === 0) this.state = { kind: 'header' };
          break;
        }
      }
    }
  }

  private async header(header: Buffer): Promise<void> {
    if (header.every((byte) => byte === 0)) {
      this.state = { kind: 'end' };
      return;
    }
    if (!checksumOk(header)) throw new TarFormatError('a tar header checksum is wrong');
    const size = octal(header, 124, 12, 'entry size');
    const type = String.fromCharCode(header[156] ?? 0);
    const pad = (BLOCK - (size % BLOCK)) % BLOCK;
    if (type === 'L' || type === 'x' || type === 'g') {
      const limit = type === 'L' ? MAX_NAME_BYTES : MAX_PAX_BYTES;
      if (size > limit)
        throw new TarFormatError(`a tar metadata entry is too large (${size} bytes)`);
      this.state = { kind: 'meta', left: size, pad, type, parts: [] };
      if (size === 0) this.state = { kind: 'pad', left: pad };
      return;
    }
    const magic = header.subarray(257, 263).toString('latin1');
    const short = field(header, 0, 100).toString('utf8');
    const prefix = magic.startsWith('ustar') ? field(header, 345, 155).toString('utf8') : '';
    const name = this.nextName ?? (prefix ? `${prefix}/${short}` : short);
    this.nextName = null;
    let writer: TarEntryWriter | null = null;
    if (type === '0' || type === '\0' || type === '7') {
      writer = await this.handler.file(name, size);
    } else {
      this.handler.other?.(name, type);
    }
    this.state = { kind: 'data', left: size, pad, writer };
    if (size === 0 && writer) await writer.end();
    if (size === 0) this.state = { kind: 'pad', left: pad };
  }
}
