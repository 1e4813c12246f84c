/** Gathers what decides the server command (settings, the Python extension) from VS Code. */
import * as os from 'os';
import * as vscode from 'vscode';
import { ServerLaunch, chooseServerLaunch, usesInterpreterSelection } from '../core/launch';
import { PythonEnvironments, activeInterpreter } from '../core/pythonApi';
import { SETTINGS_SECTION } from '../core/serverSettings';

/** The command for the server of `folder` (its settings and interpreter; none: the window's). */
export async function resolveServerLaunch(log: vscode.LogOutputChannel, envs: PythonEnvironments | undefined,
                                          folder: vscode.WorkspaceFolder | undefined): Promise<ServerLaunch> {
  const config = vscode.workspace.getConfiguration(SETTINGS_SECTION, folder?.uri);
  const serverCommand = config.get<unknown>('server.command');
  let pythonFromExtension: string | undefined;
  if (envs && usesInterpreterSelection(serverCommand)) {
    const lookup = await activeInterpreter(envs, folder?.uri);
    if ('path' in lookup) {
      pythonFromExtension = lookup.path;
    } else {
      log.warn(`Not using the Python extension's interpreter: ${lookup.problem}.`);
    }
  }
  return chooseServerLaunch({
    serverCommand,
    pythonFromExtension,
    pythonSetting: config.get<unknown>('python'),
    variables: { workspaceFolder: folder?.uri.fsPath, userHome: os.homedir(), env: process.env },
  });
}
