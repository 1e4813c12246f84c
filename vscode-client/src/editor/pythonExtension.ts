/** Access to the Python extension's environments API, when that extension is installed. */
import * as vscode from 'vscode';
import { PYTHON_EXTENSION_ID, PythonEnvironments, PythonExtensionExports } from '../core/pythonApi';

export async function pythonEnvironments(log: vscode.LogOutputChannel): Promise<PythonEnvironments | undefined> {
  const extension = vscode.extensions.getExtension<PythonExtensionExports>(PYTHON_EXTENSION_ID);
  if (!extension) {
    return undefined;
  }
  try {
    const exports = extension.isActive ? extension.exports : await extension.activate();
    return exports?.environments;
  } catch (error) {
    log.warn(`The Python extension did not activate: ${String(error)}`);
    return undefined;
  }
}
