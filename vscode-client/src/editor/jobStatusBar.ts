/** The status bar item of the running job: shown while one is active, a click cancels it. */
import * as vscode from 'vscode';
import { CLIENT_COMMANDS, JOB_RUNNING_CONTEXT } from '../core/commandTable';
import { JobTracker, parseJobStatus } from '../core/jobTracker';

export class JobStatusBar implements vscode.Disposable {
  readonly tracker = new JobTracker();
  private readonly item: vscode.StatusBarItem;

  constructor(private readonly log: vscode.LogOutputChannel) {
    this.item = vscode.window.createStatusBarItem('kernelstitch.job', vscode.StatusBarAlignment.Left, 50);
    this.item.name = 'KernelStitch job';
  }

  /** Handles a `kernelstitch/jobStatus` notification. */
  onJobStatus(params: unknown): void {
    const status = parseJobStatus(params);
    if (status === undefined) {
      this.log.warn(`Ignoring a malformed job status: ${JSON.stringify(params)}`);
      return;
    }
    if (this.tracker.update(status)) {
      this.render();
    }
  }

  /** A job the server accepted; shown before its first notification arrives. */
  started(jobId: string, uri: string, module: string, state: string): void {
    if (this.tracker.started(jobId, uri, module, state)) {
      this.render();
    }
  }

  /** The server stopped: none of its jobs is running any more. */
  clear(): void {
    this.tracker.clear();
    this.render();
  }

  dispose(): void {
    this.item.dispose();
  }

  private render(): void {
    const view = this.tracker.view();
    if (view === undefined) {
      this.item.hide();
    } else {
      this.item.text = view.text;
      this.item.tooltip = view.tooltip;
      // A new command object only for another job: VS Code registers each one it is given
      // under a fresh id and drops the old one, so re-assigning it on every progress update made
      // a click that landed just after an update fail ("Actual command not found").
      if (this.item.command === undefined || typeof this.item.command === 'string'
          || this.item.command.arguments?.[0] !== view.jobId) {
        this.item.command = { title: 'Cancel job', command: CLIENT_COMMANDS.cancelJob, arguments: [view.jobId] };
      }
      this.item.show();
    }
    void vscode.commands.executeCommand('setContext', JOB_RUNNING_CONTEXT, view !== undefined);
  }
}
