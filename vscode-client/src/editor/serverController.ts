/**
 * The language client's life cycle: start with the resolved interpreter, restart on request or
 * when the launch settings change, bounded restarts after crashes, and the settings the server
 * pulls.  Starts and stops run one at a time, in order.
 */
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
  TransportKind,
} from 'vscode-languageclient/node';
import { CLIENT_COMMANDS } from '../core/commandTable';
import { JOB_STATUS_NOTIFICATION } from '../core/jobTracker';
import { ServerLaunch } from '../core/launch';
import { PythonEnvironments } from '../core/pythonApi';
import { CrashRestartPolicy } from '../core/restartPolicy';
import { SETTINGS_SECTION } from '../core/serverSettings';
import { JobStatusBar } from './jobStatusBar';
import { resolveServerLaunch } from './serverLaunch';
import { readServerSettings } from './settings';

const CLIENT_ID = 'kernelstitch'; // also the prefix of the `kernelstitch.trace.server` setting
const CLIENT_NAME = 'KernelStitch';
const SELECT_INTERPRETER_COMMAND = 'python.setInterpreter';

export class ServerController implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private launch: ServerLaunch | undefined;
  private queue: Promise<void> = Promise.resolve();
  private readonly crashes = new CrashRestartPolicy();

  constructor(
    private readonly log: vscode.LogOutputChannel,
    private readonly jobs: JobStatusBar,
    private readonly pythonEnvironments: () => Promise<PythonEnvironments | undefined>,
  ) {}

  start(): Promise<void> {
    return this.enqueue(() => this.startClient());
  }

  restart(reason: string): Promise<void> {
    return this.enqueue(async () => {
      this.log.info(`Restarting the server: ${reason}.`);
      this.crashes.reset();
      await this.stopClient();
      await this.startClient();
    });
  }

  /** Restarts only if the command that would start the server is not the running one's. */
  restartIfLaunchChanged(reason: string): Promise<void> {
    return this.enqueue(async () => {
      const launch = await resolveServerLaunch(this.log, await this.pythonEnvironments());
      if (this.client && sameLaunch(launch, this.launch)) {
        return;
      }
      this.log.info(`Restarting the server: ${reason}.`);
      await this.stopClient();
      await this.startClient(launch);
    });
  }

  stop(): Promise<void> {
    return this.enqueue(() => this.stopClient());
  }

  /** Runs a server command (workspace/executeCommand), starting the server if needed. */
  async executeCommand(command: string, args: unknown[]): Promise<unknown> {
    await this.queue;
    if (this.client?.state === State.Starting) {
      // Coming back after a crash: vscode-languageclient's start() returns the pending start.
      await this.client.start().catch(() => undefined);
    }
    if (!this.client?.isRunning()) {
      await this.start();
    }
    const client = this.client;
    if (!client?.isRunning()) {
      throw new Error('the server is not running (see "KernelStitch: Show Logs")');
    }
    return client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args });
  }

  /** Pushes the current settings to the server (didChangeConfiguration). */
  async sendSettings(): Promise<void> {
    if (this.client?.isRunning()) {
      await this.client.sendNotification(DidChangeConfigurationNotification.type,
        { settings: { [SETTINGS_SECTION]: readServerSettings(this.log) } });
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

  private async startClient(known?: ServerLaunch): Promise<void> {
    await this.stopClient(); // a client that gave up after crashes is replaced, not leaked
    const launch = known ?? await resolveServerLaunch(this.log, await this.pythonEnvironments());
    const commandLine = [launch.command, ...launch.args].join(' ');
    this.log.info(`Starting the server: ${commandLine} (from ${launch.source}).`);
    const folder = vscode.workspace.workspaceFolders?.[0];
    const serverOptions: ServerOptions = {
      command: launch.command,
      args: launch.args,
      transport: TransportKind.stdio,
      options: { cwd: folder?.uri.fsPath, env: { ...process.env, PYTHONUNBUFFERED: '1' } },
    };
    const client: LanguageClient = new LanguageClient(CLIENT_ID, CLIENT_NAME, serverOptions,
      this.clientOptions((): LanguageClient => client));
    client.onNotification(JOB_STATUS_NOTIFICATION, (params: unknown) => this.jobs.onJobStatus(params));
    client.onDidChangeState(({ newState }) => {
      if (newState !== State.Running) {
        this.jobs.clear(); // a stopped or restarting server has no jobs any more
      }
    });
    this.client = client;
    this.launch = launch;
    try {
      await client.start();
      this.log.info('The server is running.');
    } catch (error) {
      this.log.error(`The server did not start with ${commandLine}: ${errorText(error)}`);
      void this.offerHelp(vscode.window.showErrorMessage(
        `KernelStitch: the server did not start with "${commandLine}". Is kernelstitch[server] `
        + 'installed for that interpreter?', 'Show Logs', 'Select Interpreter'));
    }
  }

  private async stopClient(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.launch = undefined;
    if (client === undefined) {
      return;
    }
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

  private clientOptions(client: () => LanguageClient): LanguageClientOptions {
    return {
      documentSelector: [
        { scheme: 'file', language: 'python' },
        { scheme: 'untitled', language: 'python' },
      ],
      outputChannel: this.log,
      traceOutputChannel: this.log,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      errorHandler: this.errorHandler(client),
      middleware: {
        workspace: {
          // The server reads its section through workspace/configuration: answer with the
          // validated server view, not the raw section with the extension-only keys.
          configuration: async (params, token, next) => {
            const answers = await next(params, token);
            if (answers instanceof ResponseError || !Array.isArray(answers)) {
              return answers;
            }
            return params.items.map((item, index) => (item.section === SETTINGS_SECTION
              ? readServerSettings(this.log, item.scopeUri ? vscode.Uri.parse(item.scopeUri) : undefined)
              : answers[index] as unknown));
          },
        },
      },
    };
  }

  private errorHandler(client: () => LanguageClient): ErrorHandler {
    return {
      error: (error: Error, _message: Message | undefined, count: number | undefined): ErrorHandlerResult => {
        this.log.error(`Connection to the server: ${error.message}`);
        return { action: count !== undefined && count <= 3 ? ErrorAction.Continue : ErrorAction.Shutdown, handled: true };
      },
      closed: (): CloseHandlerResult => {
        const decision = this.crashes.onUnexpectedExit(client().state === State.Running, Date.now());
        if (decision.restart) {
          this.log.warn(decision.message);
          void this.offerHelp(vscode.window.showWarningMessage(`KernelStitch: ${decision.message}`, 'Show Logs'));
          return { action: CloseAction.Restart, message: decision.message, handled: true };
        }
        this.log.error(decision.message);
        if (client().state === State.Running) { // a failed start is reported by startClient
          void this.offerHelp(vscode.window.showErrorMessage(`KernelStitch: ${decision.message}`,
            'Show Logs', 'Restart Server'));
        }
        return { action: CloseAction.DoNotRestart, message: decision.message, handled: true };
      },
    };
  }

  private async offerHelp(choice: Thenable<string | undefined>): Promise<void> {
    switch (await choice) {
      case 'Show Logs':
        this.log.show();
        break;
      case 'Restart Server':
        await vscode.commands.executeCommand(CLIENT_COMMANDS.restartServer);
        break;
      case 'Select Interpreter':
        await vscode.commands.executeCommand(SELECT_INTERPRETER_COMMAND).then(undefined, () =>
          vscode.commands.executeCommand('workbench.action.openSettings', 'kernelstitch.python'));
        break;
      default:
        break;
    }
  }
}

function sameLaunch(a: ServerLaunch, b: ServerLaunch | undefined): boolean {
  return b !== undefined && a.command === b.command && a.args.join('\0') === b.args.join('\0');
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
