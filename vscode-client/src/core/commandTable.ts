/**
 * The extension's commands and the server commands they call.  The client-side IDs differ from
 * the server's: vscode-languageclient registers every server command under its own ID (that is
 * what the server's code actions invoke), so reusing one would fail with "already exists".
 */

/** Commands the server executes (workspace/executeCommand); see server/actions.py. */
export const SERVER_COMMANDS = {
  generate: 'kernelstitch.generate',
  profile: 'kernelstitch.profile',
  verify: 'kernelstitch.verify',
  addExampleInputs: 'kernelstitch.addExampleInputs',
  cancel: 'kernelstitch.cancel',
} as const;

export interface ModuleCommand {
  /** The VS Code command ID contributed in package.json. */
  id: string;
  title: string;
  /** The server command it runs with [uri, moduleName]. */
  server: string;
  /** The server shows its own message when it refuses to start the job (server/app.py submit). */
  serverShowsErrors: boolean;
}

/** Commands that act on the nn.Module at the cursor. */
export const MODULE_COMMANDS: readonly ModuleCommand[] = [
  { id: 'kernelstitch.generateAtCursor', title: 'Generate CUDA implementation', server: SERVER_COMMANDS.generate, serverShowsErrors: true },
  { id: 'kernelstitch.profileAtCursor', title: 'Profile this module', server: SERVER_COMMANDS.profile, serverShowsErrors: true },
  { id: 'kernelstitch.verifyAtCursor', title: 'Verify generated implementation', server: SERVER_COMMANDS.verify, serverShowsErrors: true },
  { id: 'kernelstitch.addExampleInputsAtCursor', title: 'Add example inputs', server: SERVER_COMMANDS.addExampleInputs,
    serverShowsErrors: false },
];

export const CLIENT_COMMANDS = {
  cancelJob: 'kernelstitch.cancelJob',
  restartServer: 'kernelstitch.restartServer',
  showLogs: 'kernelstitch.showLogs',
} as const;

/** Context key for `when` clauses: true while a job is queued or running. */
export const JOB_RUNNING_CONTEXT = 'kernelstitch.jobRunning';

export type CancelTarget = { jobId: string } | { uri: string; module: string };

/** Arguments of the server commands that act on a module. */
export function moduleCommandArguments(uri: string, module: string): [string, string] {
  return [uri, module];
}

/** Arguments of `kernelstitch.cancel`: [jobId] or [uri, moduleName]. */
export function cancelArguments(target: CancelTarget): string[] {
  return 'jobId' in target ? [target.jobId] : [target.uri, target.module];
}

/**
 * Explicit arguments a command may be invoked with (keybindings, other extensions, the status
 * bar): [uri, moduleName] for module commands, [jobId] for cancel.  Anything else: undefined,
 * meaning "use the editor and the cursor".
 */
export function explicitModuleTarget(args: readonly unknown[]): { uri: string; module: string } | undefined {
  const [uri, module] = args;
  return typeof uri === 'string' && typeof module === 'string' && uri !== '' && module !== ''
    ? { uri, module }
    : undefined;
}

export function explicitCancelTarget(args: readonly unknown[]): CancelTarget | undefined {
  const module = explicitModuleTarget(args);
  if (module) {
    return module;
  }
  return args.length === 1 && typeof args[0] === 'string' && args[0] !== '' ? { jobId: args[0] } : undefined;
}
