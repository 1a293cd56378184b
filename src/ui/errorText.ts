/** An error's message (or the value as text): what a notification or log line shows of it. */
export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
