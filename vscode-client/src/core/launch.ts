/**
 * The command that starts the server: the `kernelstitch.server.command` setting when set;
 * otherwise `<python> -m kernelstitch.server` with the Python extension's interpreter, else the
 * `kernelstitch.python` setting, else `python3`.
 */

export const SERVER_MODULE_ARGS: readonly string[] = ['-m', 'kernelstitch.server'];
export const DEFAULT_PYTHON = 'python3';

export interface LaunchInputs {
  /** `kernelstitch.server.command`. */
  serverCommand: unknown;
  /** The active interpreter of the Python extension, when it has one. */
  pythonFromExtension?: string;
  /** `kernelstitch.python`. */
  pythonSetting: unknown;
  variables: VariableValues;
}

export interface VariableValues {
  workspaceFolder?: string;
  userHome: string;
  env: Readonly<Record<string, string | undefined>>;
}

export interface ServerLaunch {
  command: string;
  args: string[];
  /** Where the command came from, for the log. */
  source: string;
}

export function chooseServerLaunch(inputs: LaunchInputs): ServerLaunch {
  const override = commandOverride(inputs.serverCommand);
  if (override) {
    const [command, ...args] = override.map((part) => expandVariables(part, inputs.variables));
    return { command, args, source: 'setting kernelstitch.server.command' };
  }
  const python = (command: string, source: string): ServerLaunch =>
    ({ command, args: [...SERVER_MODULE_ARGS], source });
  if (inputs.pythonFromExtension) {
    return python(inputs.pythonFromExtension, 'the Python extension\'s selected interpreter');
  }
  if (typeof inputs.pythonSetting === 'string' && inputs.pythonSetting.trim() !== '') {
    return python(expandVariables(inputs.pythonSetting.trim(), inputs.variables), 'setting kernelstitch.python');
  }
  return python(DEFAULT_PYTHON, 'the default interpreter');
}

/** A usable `kernelstitch.server.command`: a non-empty list of strings, the first non-empty. */
export function commandOverride(setting: unknown): string[] | undefined {
  if (!Array.isArray(setting) || setting.length === 0) {
    return undefined;
  }
  if (!setting.every((part): part is string => typeof part === 'string') || setting[0].trim() === '') {
    return undefined;
  }
  return setting;
}

/** Whether the Python extension's interpreter matters (it does not when a command is set). */
export function usesInterpreterSelection(serverCommand: unknown): boolean {
  return commandOverride(serverCommand) === undefined;
}

/** Expands `${workspaceFolder}`, `${userHome}`, `${env:NAME}` and a leading `~`, as VS Code does. */
export function expandVariables(value: string, vars: VariableValues): string {
  const expanded = value.replace(/\$\{(workspaceFolder|userHome|env:([A-Za-z_][A-Za-z0-9_]*))\}/g,
    (match: string, name: string, envName: string | undefined) => {
      if (envName !== undefined) {
        return vars.env[envName] ?? '';
      }
      if (name === 'userHome') {
        return vars.userHome;
      }
      return vars.workspaceFolder ?? match; // no folder open: leave it visible in the error
    });
  if (expanded === '~' || expanded.startsWith('~/') || expanded.startsWith('~\\')) {
    return vars.userHome + expanded.slice(1);
  }
  return expanded;
}
