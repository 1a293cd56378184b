/** Something holding a resource (timer, watcher, connection, process) that must be released once. */
export interface Disposable {
  dispose(): void;
}
