import * as vscode from 'vscode';
import type { CoreEvent } from '../core/events';
import type { Redactor } from '../core/redact';

/** The "Overbrainer" log channel: every line passes the redactor first. */
export class Log implements vscode.Disposable {
  readonly channel: vscode.LogOutputChannel;

  constructor(private readonly redactor: Redactor) {
    this.channel = vscode.window.createOutputChannel('Overbrainer', { log: true });
  }

  /** For texts shown to the user (notifications), which must not carry secrets either. */
  redact(text: string): string {
    return this.redactor.redact(text);
  }

  trace(message: string): void {
    this.channel.trace(this.redactor.redact(message));
  }
  debug(message: string): void {
    this.channel.debug(this.redactor.redact(message));
  }
  info(message: string): void {
    this.channel.info(this.redactor.redact(message));
  }
  warn(message: string): void {
    this.channel.warn(this.redactor.redact(message));
  }
  error(message: string): void {
    this.channel.error(this.redactor.redact(message));
  }

  /** The core's own `log` events, at their level. Other events are rendered by their views. */
  coreEvent(event: CoreEvent): void {
    if (event.type === 'log') this[event.level](event.message);
  }

  show(): void {
    this.channel.show(true);
  }

  dispose(): void {
    this.channel.dispose();
  }
}
