/**
 * KernelStitch for VS Code: starts the KernelStitch language server (`python -m
 * kernelstitch.server`) and adds the commands and the job status bar item around it.
 */
import * as vscode from 'vscode';
import { CLIENT_COMMANDS } from './core/commandTable';
import { usesInterpreterSelection } from './core/launch';
import { SETTINGS_SECTION, needsRestart } from './core/serverSettings';
import { JobStatusBar } from './editor/jobStatusBar';
import { registerModuleCommands } from './editor/moduleCommands';
import { pythonEnvironments } from './editor/pythonExtension';
import { ServerController } from './editor/serverController';

let server: ServerController | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const log = vscode.window.createOutputChannel('KernelStitch', { log: true });
  const jobs = new JobStatusBar(log);
  const controller = new ServerController(log, jobs, () => pythonEnvironments(log));
  server = controller;

  context.subscriptions.push(
    log,
    jobs,
    controller,
    ...registerModuleCommands(controller, jobs, log),
    vscode.commands.registerCommand(CLIENT_COMMANDS.restartServer, () => controller.restart('requested by the user')),
    vscode.commands.registerCommand(CLIENT_COMMANDS.showLogs, () => log.show()),
    vscode.workspace.onDidOpenTextDocument((document) => controller.documentOpened(document)),
    vscode.workspace.onDidChangeWorkspaceFolders(() => controller.foldersChanged()),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (needsRestart((setting) => event.affectsConfiguration(setting))) {
        void controller.restart('the interpreter or server command setting changed');
      } else if (event.affectsConfiguration(SETTINGS_SECTION)) {
        void controller.sendSettings();
      }
    }),
  );

  const envs = await pythonEnvironments(log);
  const onInterpreterChange = envs?.onDidChangeActiveEnvironmentPath?.(() => {
    if (usesInterpreterSelection(vscode.workspace.getConfiguration(SETTINGS_SECTION).get('server.command'))) {
      void controller.restartIfLaunchChanged('the Python extension\'s interpreter changed');
    }
  });
  if (onInterpreterChange) {
    context.subscriptions.push(onInterpreterChange);
  }

  // Activation does not wait for the servers; commands do.  One server per folder of the open
  // Python documents in a multi-root workspace, else one.
  const open = vscode.workspace.textDocuments.filter((document) => document.languageId === 'python');
  if (open.length === 0) {
    void controller.start();
  }
  open.forEach((document) => controller.documentOpened(document));
}

export async function deactivate(): Promise<void> {
  await server?.stop();
  server = undefined;
}
