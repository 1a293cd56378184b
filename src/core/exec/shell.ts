/** Quoting for POSIX sh. Secrets never go through here: they travel on stdin. */

/** `value` as one sh word, single-quoted (`'` becomes `'\''`). */
export function shQuote(value: string): string {
  if (value.includes('\0')) throw new TypeError('a shell word cannot hold a NUL byte');
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

/** SHA-256 of `abc`: the self-test a faster hasher must pass before it is trusted. */
export const ABC_SHA256 = 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad';

/**
 * POSIX sh that succeeds when the target's OpenSSL hashes SHA-256 correctly (`openssl dgst
 * -sha256 -r`, which uses the CPU's SHA extensions: several times coreutils' speed, and prints
 * `<hex> <name>` as sha256sum does).
 */
export const OPENSSL_SHA256_WORKS = `d=$(printf abc | openssl dgst -sha256 -r 2>/dev/null) && [ "\${d%% *}" = ${ABC_SHA256} ]`;
