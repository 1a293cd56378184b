/** Quoting for POSIX sh. Secrets never go through here: they travel on stdin. */

/** `value` as one sh word, single-quoted (`'` becomes `'\''`). */
export function shQuote(value: string): string {
  if (value.includes('\0')) throw new RangeError('a shell word cannot hold a NUL byte');
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

/** SHA-256 of `abc`: the self-test a faster hasher must pass before it is trusted. */
const ABC_SHA256 = 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad';

/**
 * OpenSSL's SHA-256 of its stdin (or of its file arguments), printed `<hex> <name>` as sha256sum
 * does; it uses the CPU's SHA extensions: several times coreutils' speed.
 */
export const OPENSSL_SHA256 = 'openssl dgst -sha256 -r';

/** POSIX sh that succeeds when the target's OpenSSL hashes SHA-256 correctly. */
export const OPENSSL_SHA256_WORKS = `d=$(printf abc | ${OPENSSL_SHA256} 2>/dev/null) && [ "\${d%% *}" = ${ABC_SHA256} ]`;

/**
 * POSIX sh setting `$h` to the fastest SHA-256 of stdin the target can be trusted with: OpenSSL's
 * when it passes the self-test, sha256sum otherwise. `$($h < file)` starts with the hex digest.
 */
export const PICK_SHA256 = `if ${OPENSSL_SHA256_WORKS}; then h='${OPENSSL_SHA256}'; else h=sha256sum; fi`;
