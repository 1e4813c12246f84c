/**
 * The status bar's state: which jobs are active, from the server's `kernelstitch/jobStatus`
 * notifications, and what to show for them.
 */

export const JOB_STATUS_NOTIFICATION = 'kernelstitch/jobStatus';

export type JobState = 'queued' | 'running' | 'done' | 'failed' | 'cancelled';
const ACTIVE_STATES: readonly string[] = ['queued', 'running'];
const FINAL_STATES: readonly string[] = ['done', 'failed', 'cancelled'];

export interface JobStatus {
  jobId: string;
  uri: string;
  module: string;
  stage: string;
  message: string;
  state: JobState;
  /** Sent by the server as extras: the job's kind ("generate"...) and its progress. */
  kind?: string;
  step?: number;
  total?: number;
}

export interface StatusView {
  text: string;
  tooltip: string;
  /** The job a click cancels. */
  jobId: string;
}

/** A notification's params as a JobStatus, or undefined when they are malformed. */
export function parseJobStatus(params: unknown): JobStatus | undefined {
  if (typeof params !== 'object' || params === null) {
    return undefined;
  }
  const p = params as Record<string, unknown>;
  const state = p.state;
  if (typeof p.jobId !== 'string' || typeof state !== 'string'
      || (!ACTIVE_STATES.includes(state) && !FINAL_STATES.includes(state))) {
    return undefined;
  }
  const text = (value: unknown): string => (typeof value === 'string' ? value : '');
  const count = (value: unknown): number | undefined =>
    (typeof value === 'number' && Number.isFinite(value) ? value : undefined);
  return {
    jobId: p.jobId,
    uri: text(p.uri),
    module: text(p.module),
    stage: text(p.stage),
    message: text(p.message),
    state: state as JobState,
    kind: typeof p.kind === 'string' ? p.kind : undefined,
    step: count(p.step),
    total: count(p.total),
  };
}

export class JobTracker {
  /** Active jobs; re-inserted on every update, so the last entry is the latest news. */
  private readonly active = new Map<string, JobStatus>();
  /** Jobs that ended: a late or reordered notification must not bring them back. */
  private readonly ended = new Set<string>();

  /** Applies one status update; returns whether the view may have changed. */
  update(status: JobStatus): boolean {
    if (this.ended.has(status.jobId)) {
      return false;
    }
    if (FINAL_STATES.includes(status.state)) {
      this.ended.add(status.jobId);
      return this.active.delete(status.jobId);
    }
    this.active.delete(status.jobId);
    this.active.set(status.jobId, status);
    return true;
  }

  /** A job the server accepted, shown until its first notification arrives. */
  started(jobId: string, uri: string, module: string, state: string): boolean {
    if (this.active.has(jobId)) {
      return false; // a notification was faster than the command's reply
    }
    const queued: JobState = state === 'running' ? 'running' : 'queued';
    return this.update({ jobId, uri, module, stage: queued, message: '', state: queued });
  }

  /** The server went away: its jobs went with it. */
  clear(): void {
    this.active.clear();
    this.ended.clear();
  }

  get activeCount(): number {
    return this.active.size;
  }

  /** Active jobs, the latest news last. */
  activeJobs(): JobStatus[] {
    return [...this.active.values()];
  }

  /** What the status bar shows, or undefined to hide it (no active job). */
  view(): StatusView | undefined {
    const jobs = [...this.active.values()];
    const shown = jobs[jobs.length - 1];
    if (shown === undefined) {
      return undefined;
    }
    const icon = shown.state === 'queued' ? '$(clock)' : '$(sync~spin)';
    const stage = shown.stage || shown.state;
    const progress = shown.step !== undefined && shown.total ? ` (${shown.step}/${shown.total})` : '';
    const others = jobs.length > 1 ? ` +${jobs.length - 1}` : '';
    const what = `${shown.kind ?? 'job'} ${shown.module}`.trim();
    const lines = [`KernelStitch ${what}: ${shown.message || stage}`];
    if (jobs.length > 1) {
      lines.push(`${jobs.length - 1} more job(s) active.`);
    }
    lines.push('Click to cancel this job.');
    return {
      text: `${icon} ${shown.module || 'KernelStitch'}: ${stage}${progress}${others}`,
      tooltip: lines.join('\n'),
      jobId: shown.jobId,
    };
  }
}

export type CancelChoice =
  | { kind: 'job'; jobId: string }
  | { kind: 'choose'; jobs: JobStatus[] }
  | { kind: 'none' };

/**
 * Which job "Cancel job" cancels: the one of the module at the cursor, else the only active
 * one, else the user picks.
 */
export function chooseJobToCancel(active: readonly JobStatus[],
                                  cursor?: { uri: string; module: string }): CancelChoice {
  const atCursor = cursor
    ? [...active].reverse().find((job) => job.uri === cursor.uri && job.module === cursor.module)
    : undefined;
  if (atCursor) {
    return { kind: 'job', jobId: atCursor.jobId };
  }
  if (active.length === 0) {
    return { kind: 'none' };
  }
  return active.length === 1 ? { kind: 'job', jobId: active[0].jobId } : { kind: 'choose', jobs: [...active] };
}
