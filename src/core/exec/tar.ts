/**
 * A small POSIX ustar writer, so an upload is one `tar -x` on the target fed
 * by this process: no local `tar` binary, no temp archive, constant memory.
 * Regular files and directories only; symlinks are never followed (skipped
 * with a warning), sockets, FIFOs and devices are skipped too. Names that do
 * not fit ustar's name/prefix fields, and sizes of 8 GiB and more, get a PAX
 * extended header (understood by GNU tar and busybox tar).
 */
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { lstat, open, readdir } from 'node:fs/promises';
import { join } from 'node:path';

export const BLOCK_BYTES = 512;
const READ_BYTES = 256 * 1024;
/** Largest size the 11 octal digits of a ustar size field hold. */
const USTAR_MAX_SIZE = 0o77777777777;

export interface TarHeaderFields {
  /** Relative POSIX path; directories without the trailing slash. */
  path: string;
  type: 'file' | 'dir';
  mode: number;
  size: number;
  mtimeS: number;
}

function writeString(block: Buffer, offset: number, length: number, value: Buffer): void {
  value.copy(block, offset, 0, Math.min(length, value.length));
}

function writeOctal(block: Buffer, offset: number, length: number, value: number): void {
  // length - 1 digits, then NUL.
  const digits = Math.max(0, Math.floor(value))
    .toString(8)
    .padStart(length - 1, '0');
  block.write(digits.slice(-(length - 1)), offset, 'ascii');
  block[offset + length - 1] = 0;
}

/** ustar's name/prefix split of `name`, or undefined when it does not fit. */
function splitUstarName(name: Buffer): { name: Buffer; prefix: Buffer } | undefined {
  if (name.length <= 100) return { name, prefix: Buffer.alloc(0) };
  // The prefix ends at a '/', holds at most 155 bytes; the rest at most 100.
  for (let i = Math.min(155, name.length - 1); i > 0; i--) {
    if (name[i] !== 0x2f) continue;
    const rest = name.subarray(i + 1);
    if (rest.length === 0 || rest.length > 100) return undefined;
    return { name: rest, prefix: name.subarray(0, i) };
  }
  return undefined;
}

/** One PAX record: `<len> <key>=<value>\n`, len counting itself. */
function paxRecord(key: string, value: Buffer): Buffer {
  const body = Buffer.concat([Buffer.from(` ${key}=`, 'utf8'), value, Buffer.from('\n')]);
  let length = body.length + 1;
  while (String(length).length + body.length !== length)
    length = String(length).length + body.length;
  return Buffer.concat([Buffer.from(String(length), 'ascii'), body]);
}

function ustarBlock(
  name: Buffer,
  prefix: Buffer,
  typeflag: string,
  mode: number,
  size: number,
  mtimeS: number,
): Buffer {
  const block = Buffer.alloc(BLOCK_BYTES);
  writeString(block, 0, 100, name);
  writeOctal(block, 100, 8, mode & 0o777);
  writeOctal(block, 108, 8, 0); // uid: root where tar may chown, ignored elsewhere
  writeOctal(block, 116, 8, 0); // gid
  writeOctal(block, 124, 12, size);
  writeOctal(block, 136, 12, Math.min(Math.max(0, mtimeS), USTAR_MAX_SIZE));
  block.fill(0x20, 148, 156); // checksum counted as spaces
  block.write(typeflag, 156, 'ascii');
  block.write('ustar\0', 257, 'ascii');
  block.write('00', 263, 'ascii');
  writeOctal(block, 329, 8, 0);
  writeOctal(block, 337, 8, 0);
  writeString(block, 345, 155, prefix);
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(sum.toString(8).padStart(6, '0'), 148, 'ascii');
  block[154] = 0;
  block[155] = 0x20;
  return block;
}

/** Zero bytes that round `size` up to whole blocks. */
export function padding(size: number): Buffer {
  const rest = size % BLOCK_BYTES;
  return Buffer.alloc(rest === 0 ? 0 : BLOCK_BYTES - rest);
}

/** The header block(s) of one entry: a PAX header first when ustar cannot hold it. */
export function tarHeader(fields: TarHeaderFields): Buffer {
  const fullName = Buffer.from(fields.type === 'dir' ? `${fields.path}/` : fields.path, 'utf8');
  const split = splitUstarName(fullName);
  const size = fields.type === 'dir' ? 0 : fields.size;
  const records: Buffer[] = [];
  if (!split) records.push(paxRecord('path', fullName));
  if (size > USTAR_MAX_SIZE) records.push(paxRecord('size', Buffer.from(String(size), 'ascii')));
  const typeflag = fields.type === 'dir' ? '5' : '0';
  // Without a fit, the ustar name is a readable stand-in the PAX path overrides.
  const fallback = Buffer.from(
    (
      fields.path
        .replace(/[^\x20-\x7e]/g, '_')
        .split('/')
        .pop() ?? 'file'
    ).slice(0, 90),
    'ascii',
  );
  const main = ustarBlock(
    split?.name ?? fallback,
    split?.prefix ?? Buffer.alloc(0),
    typeflag,
    fields.mode,
    Math.min(size, USTAR_MAX_SIZE),
    fields.mtimeS,
  );
  if (records.length === 0) return main;
  const data = Buffer.concat(records);
  const paxName = Buffer.from(`PaxHeaders/${fallback.toString('ascii')}`.slice(0, 100), 'ascii');
  const pax = ustarBlock(paxName, Buffer.alloc(0), 'x', 0o644, data.length, fields.mtimeS);
  return Buffer.concat([pax, data, padding(data.length), main]);
}

/** The two zero blocks that end an archive. */
export function tarEnd(): Buffer {
  return Buffer.alloc(2 * BLOCK_BYTES);
}

export interface TarOptions {
  /** Top-level names left out. */
  exclude?: readonly string[];
  onWarning?: (message: string) => void;
  signal?: AbortSignal;
  /** Files (relative POSIX paths) left out of the archive, e.g. ones the target already has. */
  skip?: (path: string) => boolean;
  /** Each file's SHA-256 (hex) over the bytes the archive carries, once they are all in it. */
  onFileHash?: (path: string, sha256: string) => void;
  /** Bytes of file content as each piece goes into the archive (a transfer's progress). */
  onContentBytes?: (bytes: number) => void;
}

/**
 * The ustar archive of the contents of `dir`, chunk by chunk, in a stable
 * (byte-sorted) order. A file that shrinks while it is read is padded with
 * zeros and one that grows is cut at the size its header gave (both warned):
 * the archive stays well-formed.
 */
export async function* tarDirectory(dir: string, options: TarOptions = {}): AsyncGenerator<Buffer> {
  const exclude = new Set(options.exclude ?? []);
  const warn = (message: string): void => options.onWarning?.(message);

  async function* walk(relative: string): AsyncGenerator<Buffer> {
    const absolute = relative ? join(dir, relative) : dir;
    const names = (await readdir(absolute)).sort((a, b) =>
      Buffer.compare(Buffer.from(a), Buffer.from(b)),
    );
    for (const name of names) {
      if (options.signal?.aborted) return;
      if (!relative && exclude.has(name)) continue;
      const path = relative ? `${relative}/${name}` : name;
      const full = join(dir, path);
      let stats;
      try {
        stats = await lstat(full);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
        warn(`not uploaded: ${path} disappeared while the upload read the directory`);
        continue;
      }
      if (stats.isSymbolicLink()) {
        warn(`not uploaded: ${path} is a symlink (links are never followed)`);
      } else if (stats.isDirectory()) {
        yield tarHeader({
          path,
          type: 'dir',
          mode: stats.mode,
          size: 0,
          mtimeS: Math.floor(stats.mtimeMs / 1000),
        });
        yield* walk(path);
      } else if (stats.isFile()) {
        if (!options.skip?.(path)) yield* file(path, full);
      } else {
        warn(`not uploaded: ${path} is not a regular file or a directory`);
      }
    }
  }

  async function* file(path: string, full: string): AsyncGenerator<Buffer> {
    let handle;
    try {
      // O_NOFOLLOW: a file swapped for a link after lstat is refused, not followed.
      handle = await open(full, constants.O_RDONLY | constants.O_NOFOLLOW);
    } catch (error) {
      warn(`not uploaded: ${path} could not be opened (${(error as NodeJS.ErrnoException).code})`);
      return;
    }
    try {
      const stats = await handle.stat();
      if (!stats.isFile()) {
        warn(`not uploaded: ${path} is no longer a regular file`);
        return;
      }
      const size = stats.size;
      yield tarHeader({
        path,
        type: 'file',
        mode: stats.mode,
        size,
        mtimeS: Math.floor(stats.mtimeMs / 1000),
      });
      const hash = options.onFileHash ? createHash('sha256') : null;
      let done = 0;
      while (done < size) {
        const buffer = Buffer.allocUnsafe(Math.min(READ_BYTES, size - done));
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, done);
        if (bytesRead === 0) {
          warn(`${path} shrank while it was uploaded: its end was sent as zeros`);
          const zeros = Buffer.alloc(size - done);
          hash?.update(zeros);
          options.onContentBytes?.(zeros.length);
          yield zeros;
          done = size;
          break;
        }
        done += bytesRead;
        const piece = bytesRead === buffer.length ? buffer : buffer.subarray(0, bytesRead);
        hash?.update(piece);
        options.onContentBytes?.(piece.length);
        yield piece;
      }
      if (hash) options.onFileHash?.(path, hash.digest('hex'));
      const more = await handle.read(Buffer.alloc(1), 0, 1, size);
      if (more.bytesRead > 0)
        warn(`${path} grew while it was uploaded: sent its first ${size} bytes`);
      yield padding(size);
    } finally {
      await handle.close();
    }
  }

  yield* walk('');
  yield tarEnd();
}
