/**
 * Before starting `<python> -m kernelstitch.server`, ask that interpreter whether it can: a
 * missing `kernelstitch` (or its `[server]` extra) is then explained with the command that
 * would fail and the pip command that fixes it, instead of vscode-languageclient's
 * "couldn't create connection to server".  Also: the pip command the extension offers to run.
 */
import { MIN_PYTHON } from './pythonApi';

/** The Python modules `python -m kernelstitch.server` imports: the package and its [server] extra. */
export const SERVER_MODULES = ['kernelstitch.server', 'pygls', 'lsprotocol', 'watchdog'] as const;

/** Run as `<python> -c PROBE_SCRIPT`: prints one JSON line, imports nothing it checks. */
export const PROBE_SCRIPT = [
  'import json, sys',
  'import importlib.util as u',
  'def has(m):',
  '    try:',
  '        return u.find_spec(m) is not None',
  '    except Exception:',
  '        return False',
  `mods = ${JSON.stringify(SERVER_MODULES)}`,
  'print(json.dumps({"version": list(sys.version_info[:3]), "executable": sys.executable,',
  '                  "missing": [m for m in mods if not has(m)], "pip": has("pip")}))',
].join('\n');

export interface ProbeRun {
  /** The process could not be started at all (ENOENT, EACCES...). */
  spawnError?: { code?: string; message: string };
  exitCode: number | null;
  stdout: string;
  stderr: string;
  timedOut?: boolean;
}

export type ProbeVerdict =
  | { ok: true; executable: string }
  | {
    ok: false;
    /** One sentence for the user: what is wrong with which interpreter. */
    problem: string;
    /** Whether `python -m pip install` into this interpreter can fix it. */
    installable: boolean;
  };

export function interpretProbe(python: string, run: ProbeRun): ProbeVerdict {
  if (run.spawnError) {
    const why = run.spawnError.code === 'ENOENT' ? 'does not exist (or is not on PATH)'
      : run.spawnError.code === 'EACCES' ? 'is not executable' : `cannot be run (${run.spawnError.message})`;
    return { ok: false, problem: `the interpreter "${python}" ${why}`, installable: false };
  }
  if (run.timedOut) {
    return { ok: false, problem: `"${python}" did not answer within the time limit`, installable: false };
  }
  const line = run.stdout.trim().split(/\r?\n/).pop() ?? '';
  let reply: { version?: unknown; executable?: unknown; missing?: unknown; pip?: unknown };
  try {
    reply = JSON.parse(line) as typeof reply;
  } catch {
    const detail = lastLine(run.stderr) || `exit status ${String(run.exitCode)}`;
    return { ok: false, problem: `"${python}" does not run as a Python 3 interpreter (${detail})`, installable: false };
  }
  const version = Array.isArray(reply.version) ? reply.version.map(Number) : [];
  const executable = typeof reply.executable === 'string' && reply.executable ? reply.executable : python;
  const [major, minor] = MIN_PYTHON;
  if (version.length >= 2 && (version[0] < major || (version[0] === major && version[1] < minor))) {
    return {
      ok: false,
      problem: `${executable} is Python ${version[0]}.${version[1]}; KernelStitch needs Python ${major}.${minor} or newer`,
      installable: false,
    };
  }
  const missing = Array.isArray(reply.missing) ? reply.missing.filter((m): m is string => typeof m === 'string') : [];
  if (missing.length === 0) {
    return { ok: true, executable };
  }
  const what = missing.includes('kernelstitch.server')
    ? 'has no kernelstitch package'
    : `has kernelstitch but not its [server] extra (missing: ${missing.join(', ')})`;
  return { ok: false, problem: `${executable} ${what}`, installable: reply.pip === true };
}

/** `kernelstitch.server.pipInstallArgs` when usable, else the default requirement. */
export const DEFAULT_PIP_INSTALL_ARGS: readonly string[] = ['kernelstitch[server]'];

/**
 * What `python -m pip install` gets: the setting when it is a non-empty list of non-empty
 * strings; else, for a workspace that is a kernelstitch checkout, that checkout with its extra
 * (editable); else `kernelstitch[server]`.
 */
export function pipInstallArgs(setting: unknown, checkout?: string): string[] {
  if (Array.isArray(setting) && setting.length > 0
      && setting.every((part): part is string => typeof part === 'string' && part.trim() !== '')) {
    return setting;
  }
  return checkout ? ['-e', `${checkout}[server]`] : [...DEFAULT_PIP_INSTALL_ARGS];
}

/** Whether a pyproject.toml's text is kernelstitch's own (`name = "kernelstitch"` in [project]). */
export function isKernelstitchProject(pyproject: string): boolean {
  const project = /^\[project\]\s*$([\s\S]*?)(?=^\[|(?![\s\S]))/m.exec(pyproject);
  return project !== null && /^name\s*=\s*["']kernelstitch["']\s*$/m.test(project[1]);
}

/** A command line as a user would type it in a POSIX shell (for messages and logs). */
export function shellLine(command: string, args: readonly string[]): string {
  return [command, ...args].map(quoteArg).join(' ');
}

function quoteArg(arg: string): string {
  return /^[A-Za-z0-9_./:=@%+-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`;
}

function lastLine(text: string): string {
  return text.trim().split(/\r?\n/).pop()?.trim() ?? '';
}

/** The message of a start that cannot work, with the command that was going to run. */
export function notStartableMessage(problem: string, serverLine: string, installLine: string | undefined): string {
  const fix = installLine ? ` Install it with: ${installLine}` : '';
  return `KernelStitch: the server cannot start: ${problem}, so "${serverLine}" would fail.${fix}`;
}

/** The message of a server that exited before it answered `initialize`. */
export function failedStartMessage(serverLine: string, exitCode: number | null | undefined, stderrTail: string): string {
  const status = exitCode === null || exitCode === undefined ? '' : ` (exit status ${exitCode})`;
  const said = lastLine(stderrTail);
  return `KernelStitch: the server did not start with "${serverLine}"${status}`
    + (said ? `: ${said}` : '') + '. Is kernelstitch[server] installed for that interpreter?';
}
