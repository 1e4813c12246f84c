/** Reads the "kernelstitch" settings the way the server receives them. */
import * as vscode from 'vscode';
import { SETTINGS_SECTION, ServerSettings, toServerSettings } from '../core/serverSettings';

export function readServerSettings(log: vscode.LogOutputChannel, scope?: vscode.Uri): ServerSettings {
  const config = vscode.workspace.getConfiguration(SETTINGS_SECTION, scope);
  const { settings, problems } = toServerSettings((key) => config.get(key));
  problems.forEach((problem) => log.warn(problem));
  return settings;
}
