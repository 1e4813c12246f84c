/**
 * The part of the Python extension's API (`ms-python.python` exports.environments) used to find
 * the user's interpreter, typed here so that the lookup runs without VS Code in tests.
 */

export const PYTHON_EXTENSION_ID = 'ms-python.python';
/** requires-python of the kernelstitch package. */
export const MIN_PYTHON: readonly [number, number] = [3, 10];

export interface EnvironmentPath {
  id: string;
  path: string;
}

export interface ResolvedEnvironment {
  executable: { uri?: { fsPath: string } };
  version?: { major: number; minor: number; micro?: number };
}

export interface PythonEnvironments {
  getActiveEnvironmentPath(resource?: unknown): EnvironmentPath | undefined;
  resolveEnvironment(environment: EnvironmentPath | string): Promise<ResolvedEnvironment | undefined>;
  onDidChangeActiveEnvironmentPath?: (listener: (event: unknown) => unknown) => { dispose(): unknown };
}

export interface PythonExtensionExports {
  environments?: PythonEnvironments;
}

export type InterpreterLookup = { path: string } | { problem: string };

/** The active interpreter for `resource`, if it is usable for the server. */
export async function activeInterpreter(envs: PythonEnvironments, resource?: unknown): Promise<InterpreterLookup> {
  const active = envs.getActiveEnvironmentPath(resource);
  if (!active?.path) {
    return { problem: 'the Python extension has no active interpreter' };
  }
  let resolved: ResolvedEnvironment | undefined;
  try {
    resolved = await envs.resolveEnvironment(active);
  } catch (error) {
    return { problem: `the Python extension could not resolve ${active.path}: ${String(error)}` };
  }
  const executable = resolved?.executable.uri?.fsPath;
  if (!executable) {
    return { problem: `the Python extension's environment ${active.path} has no Python executable` };
  }
  const version = resolved?.version;
  if (version && !isSupported(version)) {
    const [major, minor] = MIN_PYTHON;
    return {
      problem: `${executable} is Python ${version.major}.${version.minor}; `
        + `KernelStitch needs Python ${major}.${minor} or newer`,
    };
  }
  return { path: executable };
}

function isSupported(version: { major: number; minor: number }): boolean {
  const [major, minor] = MIN_PYTHON;
  return version.major > major || (version.major === major && version.minor >= minor);
}
