/**
 * When to restart a server that exited on its own: after a crash, a bounded number of times in
 * a time window (a server that dies on every start must not loop); never after a failed start,
 * which is a setup problem (wrong interpreter, kernelstitch not installed) a restart cannot fix.
 */

export type ExitDecision =
  | { restart: true; message: string }
  | { restart: false; message: string };

export class CrashRestartPolicy {
  private crashes: number[] = [];

  constructor(
    readonly maxRestarts = 4,
    readonly windowMs = 3 * 60 * 1000,
  ) {}

  /** The server process exited unexpectedly; `wasRunning` is false when it never initialised. */
  onUnexpectedExit(wasRunning: boolean, nowMs: number): ExitDecision {
    if (!wasRunning) {
      return {
        restart: false,
        message: 'The KernelStitch server could not start. Check the interpreter (it needs '
          + '`kernelstitch[server]`) in the KernelStitch output, then run "KernelStitch: Restart Server".',
      };
    }
    this.crashes = this.crashes.filter((at) => nowMs - at < this.windowMs);
    this.crashes.push(nowMs);
    if (this.crashes.length > this.maxRestarts) {
      const minutes = Math.round(this.windowMs / 60000);
      return {
        restart: false,
        message: `The KernelStitch server crashed ${this.crashes.length} times in ${minutes} minutes `
          + 'and will not be restarted. See the KernelStitch output, then run "KernelStitch: Restart Server".',
      };
    }
    return {
      restart: true,
      message: `The KernelStitch server stopped unexpectedly; restarting it `
        + `(${this.crashes.length}/${this.maxRestarts}).`,
    };
  }

  /** A restart the user asked for starts a fresh count. */
  reset(): void {
    this.crashes = [];
  }
}
