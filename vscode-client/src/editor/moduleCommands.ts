/**
 * The editor commands: run a server command on the nn.Module at the cursor, and cancel a job.
 * The decisions (which module, which job, what to say) live in src/core; this is the wiring.
 */
import * as path from 'path';
import * as vscode from 'vscode';
import {
  CLIENT_COMMANDS,
  CancelTarget,
  MODULE_COMMANDS,
  ModuleCommand,
  SERVER_COMMANDS,
  cancelArguments,
  explicitCancelTarget,
  explicitModuleTarget,
  moduleCommandArguments,
} from '../core/commandTable';
import { CommandOutcome, describeCancelResult, describeModuleCommandResult } from '../core/commandResults';
import { NOTEBOOK_CELL_SCHEME } from '../core/folders';
import { chooseJobToCancel } from '../core/jobTracker';
import { moduleAtLine, resolveModuleTarget } from '../core/moduleAtCursor';
import { JobStatusBar } from './jobStatusBar';
import { ServerController } from './serverController';

interface ModuleTarget {
  uri: string;
  module: string;
}

export function registerModuleCommands(server: ServerController, jobs: JobStatusBar,
                                       log: vscode.LogOutputChannel): vscode.Disposable[] {
  const run = async (what: string, task: () => Promise<void>): Promise<void> => {
    try {
      await task();
    } catch (error) {
      const text = error instanceof Error ? error.message : String(error);
      log.error(`${what}: ${text}`);
      void vscode.window.showErrorMessage(`KernelStitch: ${what} failed: ${text}`);
    }
  };
  return [
    ...MODULE_COMMANDS.map((command) => vscode.commands.registerCommand(command.id, (...args: unknown[]) =>
      run(command.title, () => runModuleCommand(command, args, server, jobs, log)))),
    vscode.commands.registerCommand(CLIENT_COMMANDS.cancelJob, (...args: unknown[]) =>
      run('Cancel job', () => cancelJob(args, server, jobs, log))),
  ];
}

async function runModuleCommand(command: ModuleCommand, args: unknown[], server: ServerController,
                                jobs: JobStatusBar, log: vscode.LogOutputChannel): Promise<void> {
  const target = explicitModuleTarget(args)
    ?? await pickModuleAtCursor(command.title, command.server !== SERVER_COMMANDS.addExampleInputs);
  if (target === undefined) {
    return;
  }
  const result = await server.executeCommand(command.server, moduleCommandArguments(target.uri, target.module));
  const outcome = describeModuleCommandResult(command, target.module, result);
  if (outcome.job) {
    jobs.started(outcome.job.jobId, target.uri, target.module, outcome.job.state);
  }
  show(outcome, log);
}

async function cancelJob(args: unknown[], server: ServerController, jobs: JobStatusBar,
                         log: vscode.LogOutputChannel): Promise<void> {
  let target: CancelTarget | undefined = explicitCancelTarget(args);
  if (target === undefined) {
    const cursor = moduleAtCursor();
    const choice = chooseJobToCancel(jobs.tracker.activeJobs(), cursor);
    if (choice.kind === 'job') {
      target = { jobId: choice.jobId };
    } else if (choice.kind === 'choose') {
      const picked = await vscode.window.showQuickPick(choice.jobs.map((job) => ({
        label: job.module,
        description: `${job.kind ?? 'job'}: ${job.stage || job.state}`,
        detail: job.message || undefined,
        jobId: job.jobId,
      })), { placeHolder: 'Cancel which KernelStitch job?' });
      target = picked && { jobId: picked.jobId };
    } else if (cursor) {
      target = cursor; // the server may know a job this window has not heard of
    } else {
      void vscode.window.showInformationMessage('KernelStitch: no job is running.');
    }
  }
  if (target !== undefined) {
    show(describeCancelResult(await server.executeCommand(SERVER_COMMANDS.cancel, cancelArguments(target))), log);
  }
}

/** The module at the cursor of the active Python editor, asking the user when it is unclear. */
async function pickModuleAtCursor(title: string, needsFile: boolean): Promise<ModuleTarget | undefined> {
  const editor = vscode.window.activeTextEditor;
  if (editor?.document.languageId !== 'python') {
    void vscode.window.showInformationMessage(`KernelStitch: ${title} needs a Python file open in the editor.`);
    return undefined;
  }
  const document = editor.document;
  if (needsFile && document.uri.scheme === NOTEBOOK_CELL_SCHEME) {
    void vscode.window.showInformationMessage(`KernelStitch: ${title} runs on a saved .py file; jobs cannot read a `
      + 'notebook cell. Move the module (and its get_inputs) into a .py file.');
    return undefined;
  }
  if (needsFile && document.isUntitled) {
    void vscode.window.showInformationMessage(`KernelStitch: save ${document.fileName} first: jobs read the saved file.`);
    return undefined;
  }
  const target = resolveModuleTarget(document.getText(), editor.selection.active.line);
  let module: string | undefined;
  if (target.kind === 'found') {
    module = target.name;
  } else if (target.kind === 'choose') {
    module = await vscode.window.showQuickPick(target.names, { placeHolder: `${title}: which module?` });
  } else {
    void vscode.window.showInformationMessage(
      `KernelStitch: no nn.Module class in ${path.basename(document.fileName)}.`);
  }
  return module === undefined ? undefined : { uri: document.uri.toString(), module };
}

/** The module class around the cursor, without asking. */
function moduleAtCursor(): ModuleTarget | undefined {
  const editor = vscode.window.activeTextEditor;
  if (editor?.document.languageId !== 'python') {
    return undefined;
  }
  const module = moduleAtLine(editor.document.getText(), editor.selection.active.line);
  return module === undefined ? undefined : { uri: editor.document.uri.toString(), module };
}

function show(outcome: CommandOutcome, log: vscode.LogOutputChannel): void {
  if (outcome.log) {
    log.info(outcome.log);
  }
  if (outcome.message?.level === 'error') {
    void vscode.window.showErrorMessage(outcome.message.text);
  } else if (outcome.message) {
    void vscode.window.showInformationMessage(outcome.message.text);
  }
}
