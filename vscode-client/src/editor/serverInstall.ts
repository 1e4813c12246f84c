/** Asks an interpreter whether it can run the server, and installs kernelstitch[server] into it. */
import { execFile, spawn } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import {
  PROBE_SCRIPT, ProbeRun, ProbeVerdict, interpretProbe, isKernelstitchProject, pipInstallArgs, shellLine,
} from '../core/serverProbe';
import { SETTINGS_SECTION } from '../core/serverSettings';

const PROBE_TIMEOUT_MS = 20_000;

/** Asks `python`, in the server's working directory (which `-m` puts on sys.path), what it has. */
export function probeInterpreter(python: string, cwd: string | undefined): Promise<ProbeVerdict> {
  return new Promise((resolve) => {
    execFile(python, ['-c', PROBE_SCRIPT], { cwd, timeout: PROBE_TIMEOUT_MS, encoding: 'utf8' }, (error, stdout, stderr) => {
      const run: ProbeRun = { exitCode: 0, stdout, stderr };
      if (error) {
        const { code, killed } = error as NodeJS.ErrnoException & { killed?: boolean };
        if (typeof code === 'string') {
          run.spawnError = { code, message: error.message };
        } else {
          run.exitCode = typeof code === 'number' ? code : null;
          run.timedOut = killed === true && run.exitCode === null;
        }
      }
      resolve(interpretProbe(python, run));
    });
  });
}

/** `<python> -m pip install <kernelstitch.server.pipInstallArgs, or this checkout, or kernelstitch[server]>`. */
export function pipInstallCommand(python: string, folder: vscode.WorkspaceFolder | undefined):
    { command: string; args: string[] } {
  const setting = vscode.workspace.getConfiguration(SETTINGS_SECTION, folder?.uri).get<unknown>('server.pipInstallArgs');
  const checkout = (folder ? [folder] : vscode.workspace.workspaceFolders ?? [])
    .map((f) => f.uri.fsPath)
    .find((root) => {
      try {
        return isKernelstitchProject(fs.readFileSync(path.join(root, 'pyproject.toml'), 'utf8'));
      } catch {
        return false;
      }
    });
  return { command: python, args: ['-m', 'pip', 'install', ...pipInstallArgs(setting, checkout)] };
}

/** Runs the pip command with a progress notification; its output goes to the log. */
export async function installServer(log: vscode.LogOutputChannel, python: string,
                                    folder: vscode.WorkspaceFolder | undefined): Promise<boolean> {
  const { command, args } = pipInstallCommand(python, folder);
  const line = shellLine(command, args);
  log.info(`Installing the server: ${line}`);
  const result = await vscode.window.withProgress({
    location: vscode.ProgressLocation.Notification,
    title: `KernelStitch: installing kernelstitch[server] into ${python}`,
    cancellable: true,
  }, (_progress, token) => new Promise<{ code: number | null; tail: string; cancelled: boolean }>((resolve) => {
    const child = spawn(command, args, { env: { ...process.env, PIP_DISABLE_PIP_VERSION_CHECK: '1' }, stdio: 'pipe' });
    let tail = '';
    const take = (chunk: Buffer): void => {
      const text = chunk.toString('utf8');
      log.append(text);
      tail = (tail + text).slice(-2000);
    };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    const cancel = token.onCancellationRequested(() => child.kill('SIGTERM'));
    child.on('error', (error) => {
      cancel.dispose();
      resolve({ code: null, tail: error.message, cancelled: false });
    });
    child.on('close', (code) => {
      cancel.dispose();
      resolve({ code, tail, cancelled: token.isCancellationRequested });
    });
  }));
  if (result.code === 0) {
    log.info('kernelstitch[server] is installed.');
    void vscode.window.showInformationMessage(`KernelStitch: kernelstitch[server] is installed into ${python}; starting the server.`);
    return true;
  }
  const why = result.cancelled ? 'cancelled'
    : `failed (exit status ${String(result.code)}): ${result.tail.trim().split(/\r?\n/).pop() ?? ''}`;
  log.error(`${line}: ${why}`);
  void vscode.window.showErrorMessage(`KernelStitch: "${line}" ${why}`, 'Show Logs').then((choice) => {
    if (choice === 'Show Logs') {
      log.show();
    }
  });
  return false;
}
