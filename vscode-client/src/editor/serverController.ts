/**
 * The language clients' life cycle: one server per workspace folder in a multi-root workspace
 * (its interpreter setting and working directory), one for everything otherwise.  Each is
 * checked before it starts (the interpreter has kernelstitch[server]), restarted on request or
 * when the launch settings change, restarted a bounded number of times after crashes, and
 * answers the settings its server pulls with its folder's.  Starts and stops run one at a time.
 */
import { ChildProcess, spawn } from 'child_process';
import * as vscode from 'vscode';
import {
  CloseAction,
  CloseHandlerResult,
  DidChangeConfigurationNotification,
  ErrorAction,
  ErrorHandler,
  ErrorHandlerResult,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  Message,
  ResponseError,
  RevealOutputChannelOn,
  ServerOptions,
  State,
} from 'vscode-languageclient/node';
import { CLIENT_COMMANDS } from '../core/commandTable';
import { Folder, SHARED_KEY, documentSelector, serverKeyFor } from '../core/folders';
import { JOB_STATUS_NOTIFICATION } from '../core/jobTracker';
import { SERVER_MODULE_ARGS, ServerLaunch } from '../core/launch';
import { PythonEnvironments } from '../core/pythonApi';
import { CrashRestartPolicy } from '../core/restartPolicy';
import { failedStartMessage, notStartableMessage, shellLine } from '../core/serverProbe';
import { SETTINGS_SECTION } from '../core/serverSettings';
import { JobStatusBar } from './jobStatusBar';
import { installServer, pipInstallCommand, probeInterpreter } from './serverInstall';
import { resolveServerLaunch } from './serverLaunch';
import { readServerSettings } from './settings';

const CLIENT_ID = 'kernelstitch'; // also the prefix of the `kernelstitch.trace.server` setting
const CLIENT_NAME = 'KernelStitch';
const SELECT_INTERPRETER_COMMAND = 'python.setInterpreter';
const STDERR_TAIL_CHARS = 4000;

export const INSTALL_BUTTON = 'Install kernelstitch[server]';
export const SELECT_INTERPRETER_BUTTON = 'Select Interpreter';

/**
 * A failed start is explained by the controller (the command, its exit status, its last stderr
 * line, the buttons): vscode-languageclient's own pop-ups for it ("couldn't create connection
 * to server", the rejected initialize) only go to the log.
 */
class KernelStitchClient extends LanguageClient {
  override error(message: string, data?: unknown, showNotification: boolean | 'force' = 'force'): void {
    super.error(message, data, this.initializeResult === undefined ? false : showNotification);
  }
}

/** One server: the client, what started it, its crash count and its process's last words. */
interface Server {
  key: string;
  folder: vscode.WorkspaceFolder | undefined;
  client: LanguageClient;
  launch: ServerLaunch;
  crashes: CrashRestartPolicy;
  exit?: { code: number | null; stderr: string };
  /** A failed start has been reported: the close handler stays quiet. */
  reported: boolean;
}

export class ServerController implements vscode.Disposable {
  private readonly servers = new Map<string, Server>();
  /** Servers whose start failed: opening another document does not try again (a restart does). */
  private readonly failed = new Set<string>();
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly log: vscode.LogOutputChannel,
    private readonly jobs: JobStatusBar,
    private readonly pythonEnvironments: () => Promise<PythonEnvironments | undefined>,
  ) {}

  /** Starts the server of the document (the shared one without a document). */
  start(documentUri?: string): Promise<void> {
    return this.enqueue(() => this.ensureStarted(this.keyFor(documentUri)));
  }

  /** Restarts every running server (and the shared or only one in any case). */
  restart(reason: string): Promise<void> {
    return this.enqueue(async () => {
      this.log.info(`Restarting the server: ${reason}.`);
      const keys = new Set([...this.servers.keys(), ...this.openDocumentKeys()]);
      for (const key of keys) {
        await this.stopServer(key);
        await this.startServer(key);
      }
    });
  }

  /** Restarts the servers whose start command would now differ from the running one's. */
  restartIfLaunchChanged(reason: string): Promise<void> {
    return this.enqueue(async () => {
      for (const [key, server] of [...this.servers]) {
        const launch = await resolveServerLaunch(this.log, await this.pythonEnvironments(), server.folder);
        if (server.client.isRunning() && sameLaunch(launch, server.launch)) {
          continue;
        }
        this.log.info(`Restarting the server${server.folder ? ` of ${server.folder.name}` : ''}: ${reason}.`);
        await this.stopServer(key);
        await this.startServer(key, launch);
      }
    });
  }

  /** A document was opened: its folder's server starts if it is not running yet. */
  documentOpened(document: vscode.TextDocument): void {
    if (document.languageId === 'python' && ['file', 'untitled', 'vscode-notebook-cell'].includes(document.uri.scheme)) {
      const key = this.keyFor(document.uri.toString());
      const unserved = key === SHARED_KEY && document.uri.scheme !== 'untitled' && this.folders().length > 1;
      if (!unserved && !this.servers.has(key) && !this.failed.has(key)) {
        void this.start(document.uri.toString());
      }
    }
  }

  /** The workspace folders changed: servers are keyed by folder, so all start anew. */
  foldersChanged(): Promise<void> {
    return this.enqueue(async () => {
      for (const key of [...this.servers.keys()]) {
        await this.stopServer(key);
      }
      for (const key of new Set(this.openDocumentKeys())) {
        await this.startServer(key);
      }
    });
  }

  stop(): Promise<void> {
    return this.enqueue(async () => {
      for (const key of [...this.servers.keys()]) {
        await this.stopServer(key);
      }
    });
  }

  /**
   * Runs a server command (workspace/executeCommand) on the server of the document the first
   * argument names, starting it if needed.  A command without a document (cancel by job id)
   * goes to every running server; the first reply that did something wins.
   */
  async executeCommand(command: string, args: unknown[]): Promise<unknown> {
    const uri = typeof args[0] === 'string' && args[0].includes(':') && args.length >= 2 ? args[0] : undefined;
    await this.queue;
    if (uri === undefined && this.servers.size > 0) {
      const replies: unknown[] = [];
      for (const server of this.servers.values()) {
        if (server.client.isRunning()) {
          replies.push(await server.client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args }));
        }
      }
      return replies.find((reply) => isRecord(reply) && reply.cancelled !== false) ?? replies[0];
    }
    const key = this.keyFor(uri);
    let server = this.servers.get(key);
    if (server?.client.state === State.Starting) {
      // Coming back after a crash: vscode-languageclient's start() returns the pending start.
      await server.client.start().catch(() => undefined);
    }
    if (!server?.client.isRunning()) {
      await this.start(uri);
      server = this.servers.get(key);
    }
    if (!server?.client.isRunning()) {
      throw new Error('the server is not running (see "KernelStitch: Show Logs")');
    }
    return server.client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args });
  }

  /** Pushes the current settings to every server (didChangeConfiguration), each its folder's. */
  async sendSettings(): Promise<void> {
    for (const server of this.servers.values()) {
      if (server.client.isRunning()) {
        await server.client.sendNotification(DidChangeConfigurationNotification.type,
          { settings: { [SETTINGS_SECTION]: readServerSettings(this.log, server.folder?.uri) } });
      }
    }
  }

  dispose(): void {
    void this.stop();
  }

  private enqueue(task: () => Promise<void>): Promise<void> {
    const run = this.queue.then(task).catch((error: unknown) => {
      this.log.error(`KernelStitch server: ${errorText(error)}`);
    });
    this.queue = run;
    return run;
  }

  private folders(): Folder[] {
    return (vscode.workspace.workspaceFolders ?? []).map((f) => ({ uri: f.uri.toString(), fsPath: f.uri.fsPath, name: f.name }));
  }

  private keyFor(documentUri: string | undefined): string {
    return documentUri === undefined ? SHARED_KEY : serverKeyFor(documentUri, this.folders());
  }

  /** The servers the open Python documents need (the shared one at least). */
  private openDocumentKeys(): string[] {
    const keys = vscode.workspace.textDocuments.filter((d) => d.languageId === 'python')
      .map((d) => this.keyFor(d.uri.toString()));
    return keys.length > 0 ? keys : [SHARED_KEY];
  }

  private async ensureStarted(key: string): Promise<void> {
    const server = this.servers.get(key);
    if (server && (server.client.isRunning() || server.client.state === State.Starting)) {
      return;
    }
    await this.startServer(key);
  }

  private async startServer(key: string, known?: ServerLaunch): Promise<void> {
    await this.stopServer(key); // a client that gave up after crashes is replaced, not leaked
    this.failed.add(key); // until it runs
    const all = vscode.workspace.workspaceFolders ?? [];
    const folder = key === SHARED_KEY ? (all.length === 1 ? all[0] : undefined)
      : all.find((f) => f.uri.toString() === key);
    const launch = known ?? await resolveServerLaunch(this.log, await this.pythonEnvironments(), folder);
    const serverLine = shellLine(launch.command, launch.args);
    const where = folder && all.length > 1 ? ` for ${folder.name}` : '';
    const cwd = folder?.uri.fsPath ?? all[0]?.uri.fsPath;
    if (!(await this.checkInterpreter(launch, serverLine, folder, cwd))) {
      return;
    }
    this.log.info(`Starting the server${where}: ${serverLine} (from ${launch.source}; in ${cwd ?? 'no folder'}).`);
    const state: { server?: Server } = {};
    const serverOptions: ServerOptions = () => Promise.resolve(this.spawnServer(launch, cwd, () => state.server));
    const client: LanguageClient = new KernelStitchClient(CLIENT_ID, CLIENT_NAME, serverOptions,
      this.clientOptions(folder, all.length, () => state.server));
    const server: Server = { key, folder, client, launch, crashes: new CrashRestartPolicy(), reported: false };
    state.server = server;
    client.onNotification(JOB_STATUS_NOTIFICATION, (params: unknown) => this.jobs.onJobStatus(params));
    client.onDidChangeState(({ newState }) => {
      if (newState !== State.Running) {
        this.jobs.clear(); // a stopped or restarting server has no jobs any more
      }
    });
    this.servers.set(key, server);
    let failure: string | undefined;
    try {
      await client.start();
    } catch (error) {
      failure = errorText(error);
    }
    // vscode-languageclient 9 resolves start() even when the process exits before answering
    // `initialize`: only an initialize result says the server runs.
    if (failure === undefined && client.initializeResult !== undefined && server.exit === undefined) {
      this.log.info(`The server${where} is running.`);
      this.failed.delete(key);
      return;
    }
    server.reported = true;
    await sleep(100); // let the exit status and the last stderr lines arrive
    const text = failedStartMessage(serverLine, server.exit?.code, server.exit?.stderr ?? failure ?? '');
    this.log.error(`${text}${failure ? ` (${failure})` : ''}`);
    await this.stopServer(key);
    void this.offerHelp(vscode.window.showErrorMessage(text, 'Show Logs', SELECT_INTERPRETER_BUTTON), folder);
  }

  /**
   * For `<python> -m kernelstitch.server`: whether that interpreter has kernelstitch[server].
   * When it has not, says so with the command that would fail and the pip command that fixes
   * it, and offers to run that pip command.
   */
  private async checkInterpreter(launch: ServerLaunch, serverLine: string,
                                 folder: vscode.WorkspaceFolder | undefined, cwd: string | undefined): Promise<boolean> {
    if (launch.args.join('\0') !== SERVER_MODULE_ARGS.join('\0')) {
      return true; // kernelstitch.server.command: the user's own command, judged by its start
    }
    const verdict = await probeInterpreter(launch.command, cwd);
    if (verdict.ok) {
      return true;
    }
    const install = verdict.installable ? pipInstallCommand(launch.command, folder) : undefined;
    const text = notStartableMessage(verdict.problem, serverLine, install && shellLine(install.command, install.args));
    this.log.error(text);
    const buttons = [...(install ? [INSTALL_BUTTON] : []), SELECT_INTERPRETER_BUTTON, 'Show Logs'];
    void this.offerHelp(vscode.window.showErrorMessage(text, ...buttons), folder, launch.command);
    return false;
  }

  private spawnServer(launch: ServerLaunch, cwd: string | undefined, server: () => Server | undefined): ChildProcess {
    const child = spawn(launch.command, launch.args, {
      cwd, env: { ...process.env, PYTHONUNBUFFERED: '1' }, stdio: 'pipe',
    });
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString('utf8')).slice(-STDERR_TAIL_CHARS);
      this.log.append(chunk.toString('utf8'));
    });
    child.on('error', (error) => {
      stderr += `\n${error.message}`;
    });
    child.on('exit', (code) => {
      const current = server();
      if (current && current.client.initializeResult === undefined) {
        current.exit = { code, stderr };
      }
    });
    return child;
  }

  private async stopServer(key: string): Promise<void> {
    const server = this.servers.get(key);
    this.servers.delete(key);
    if (server === undefined) {
      return;
    }
    const { client } = server;
    try {
      if (client.needsStop()) {
        await client.stop(5000);
      }
    } catch (error) {
      this.log.warn(`Stopping the server: ${errorText(error)}`);
    } finally {
      await client.dispose().catch(() => undefined);
      this.jobs.clear();
    }
  }

  private clientOptions(folder: vscode.WorkspaceFolder | undefined, folderCount: number,
                        server: () => Server | undefined): LanguageClientOptions {
    return {
      documentSelector: documentSelector(folder && { uri: folder.uri.toString(), fsPath: folder.uri.fsPath, name: folder.name },
        folderCount),
      workspaceFolder: folderCount > 1 ? folder : undefined,
      outputChannel: this.log,
      traceOutputChannel: this.log,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      initializationFailedHandler: (error) => {
        this.log.error(`The server did not answer initialize: ${errorText(error)}`);
        return false; // no retry; startServer reports it
      },
      errorHandler: this.errorHandler(server),
      middleware: {
        workspace: {
          // The server reads its section through workspace/configuration: answer with the
          // validated server view of its folder, not the raw section with extension-only keys.
          configuration: async (params, token, next) => {
            const answers = await next(params, token);
            if (answers instanceof ResponseError || !Array.isArray(answers)) {
              return answers;
            }
            return params.items.map((item, index) => (item.section === SETTINGS_SECTION
              ? readServerSettings(this.log, item.scopeUri ? vscode.Uri.parse(item.scopeUri) : folder?.uri)
              : answers[index] as unknown));
          },
        },
      },
    };
  }

  private errorHandler(server: () => Server | undefined): ErrorHandler {
    return {
      error: (error: Error, _message: Message | undefined, count: number | undefined): ErrorHandlerResult => {
        this.log.error(`Connection to the server: ${error.message}`);
        return { action: count !== undefined && count <= 3 ? ErrorAction.Continue : ErrorAction.Shutdown, handled: true };
      },
      closed: (): CloseHandlerResult => {
        const current = server();
        const started = current?.client.initializeResult !== undefined && current.exit === undefined;
        const decision = (current?.crashes ?? new CrashRestartPolicy()).onUnexpectedExit(started, Date.now());
        if (decision.restart) {
          this.log.warn(decision.message);
          void this.offerHelp(vscode.window.showWarningMessage(`KernelStitch: ${decision.message}`, 'Show Logs'),
            current?.folder);
          return { action: CloseAction.Restart, message: decision.message, handled: true };
        }
        this.log.error(decision.message);
        if (started && !current?.reported) { // a failed start is reported by startServer
          void this.offerHelp(vscode.window.showErrorMessage(`KernelStitch: ${decision.message}`,
            'Show Logs', 'Restart Server'), current?.folder);
        }
        return { action: CloseAction.DoNotRestart, message: decision.message, handled: true };
      },
    };
  }

  private async offerHelp(choice: Thenable<string | undefined>, folder: vscode.WorkspaceFolder | undefined,
                          python?: string): Promise<void> {
    switch (await choice) {
      case 'Show Logs':
        this.log.show();
        break;
      case 'Restart Server':
        await vscode.commands.executeCommand(CLIENT_COMMANDS.restartServer);
        break;
      case SELECT_INTERPRETER_BUTTON:
        await vscode.commands.executeCommand(SELECT_INTERPRETER_COMMAND).then(undefined, () =>
          vscode.commands.executeCommand('workbench.action.openSettings', 'kernelstitch.python'));
        break;
      case INSTALL_BUTTON:
        if (python !== undefined && await installServer(this.log, python, folder)) {
          await this.restart(`kernelstitch[server] was installed into ${python}`);
        }
        break;
      default:
        break;
    }
  }
}

function sameLaunch(a: ServerLaunch, b: ServerLaunch | undefined): boolean {
  return b !== undefined && a.command === b.command && a.args.join('\0') === b.args.join('\0');
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
