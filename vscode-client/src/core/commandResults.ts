/**
 * What to tell the user about a server command's reply.  The server already shows a message
 * for some outcomes (a job that is already running, a job's end); those stay silent here.
 */

export interface CommandOutcome {
  /** A message to show, or none. */
  message?: { level: 'error' | 'info'; text: string };
  /** A line for the log when the server already showed the message. */
  log?: string;
  /** The job the command queued, for the status bar until the server reports on it. */
  job?: { jobId: string; state: string };
}

type Reply = Record<string, unknown>;

export function describeModuleCommandResult(
  command: { title: string; serverShowsErrors: boolean }, module: string, result: unknown,
): CommandOutcome {
  const { title } = command;
  const reply: Reply = isRecord(result) ? result : {};
  if (typeof reply.jobId === 'string' && typeof reply.error !== 'string') {
    return { job: { jobId: reply.jobId, state: typeof reply.state === 'string' ? reply.state : 'queued' } };
  }
  if (reply.alreadyRunning === true) {
    return {}; // the server said so itself
  }
  if (typeof reply.error === 'string') {
    const text = `KernelStitch: ${title} (${module}): ${reply.error}`;
    return command.serverShowsErrors ? { log: text } : { message: { level: 'error', text } };
  }
  if (reply.applied === false) {
    return { message: { level: 'info', text: `KernelStitch: ${title} (${module}): the edit was not applied.` } };
  }
  return {};
}

export function describeCancelResult(result: unknown): CommandOutcome {
  const reply: Reply = isRecord(result) ? result : {};
  if (reply.cancelled === false) {
    const why = typeof reply.error === 'string' ? reply.error : 'nothing to cancel';
    return { message: { level: 'info', text: `KernelStitch: ${why}.` } };
  }
  return {}; // the server reports "cancelled" when the job ends
}

function isRecord(value: unknown): value is Reply {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
