import * as assert from 'node:assert/strict';
import { JobStatus, JobTracker, chooseJobToCancel, parseJobStatus } from '../../src/core/jobTracker';

const URI = 'file:///w/model.py';

function status(jobId: string, state: JobStatus['state'], extra: Partial<JobStatus> = {}): JobStatus {
  return { jobId, uri: URI, module: 'Model', stage: 'plan', message: 'planning', state, ...extra };
}

describe('parseJobStatus', () => {
  it('reads the notification, extras included', () => {
    const params = { jobId: 'j1', uri: URI, module: 'Model', kind: 'generate', stage: 'code',
      message: 'writing CUDA', state: 'running', step: 2, total: 4 };
    assert.deepEqual(parseJobStatus(params), params);
  });

  it('rejects params without a job ID or with an unknown state', () => {
    assert.equal(parseJobStatus(null), undefined);
    assert.equal(parseJobStatus({ state: 'running' }), undefined);
    assert.equal(parseJobStatus({ jobId: 'j', state: 'exploded' }), undefined);
  });

  it('fills missing text fields and drops non-numeric progress', () => {
    assert.deepEqual(parseJobStatus({ jobId: 'j', state: 'queued', step: 'x' }),
      { jobId: 'j', uri: '', module: '', stage: '', message: '', state: 'queued', kind: undefined,
        step: undefined, total: undefined });
  });
});

describe('JobTracker', () => {
  it('is hidden when idle', () => {
    assert.equal(new JobTracker().view(), undefined);
  });

  it('shows a running job with its stage and progress, and cancels that job on click', () => {
    const tracker = new JobTracker();
    assert.equal(tracker.update(status('j1', 'running', { kind: 'generate', stage: 'verify', step: 3, total: 4 })), true);
    const view = tracker.view();
    assert.equal(view?.text, '$(sync~spin) Model: verify (3/4)');
    assert.equal(view?.jobId, 'j1');
    assert.match(view?.tooltip ?? '', /KernelStitch generate Model: planning/);
    assert.match(view?.tooltip ?? '', /Click to cancel/);
  });

  it('goes queued -> running -> done and hides at the end', () => {
    const tracker = new JobTracker();
    tracker.update(status('j1', 'queued', { stage: '' }));
    assert.equal(tracker.view()?.text, '$(clock) Model: queued');
    tracker.update(status('j1', 'running', { stage: 'code' }));
    assert.equal(tracker.view()?.text, '$(sync~spin) Model: code');
    assert.equal(tracker.update(status('j1', 'done')), true);
    assert.equal(tracker.view(), undefined);
    assert.equal(tracker.activeCount, 0);
  });

  for (const final of ['failed', 'cancelled'] as const) {
    it(`hides a job that ${final}`, () => {
      const tracker = new JobTracker();
      tracker.update(status('j1', 'running'));
      tracker.update(status('j1', final));
      assert.equal(tracker.view(), undefined);
    });
  }

  it('shows the job with the latest news and counts the others', () => {
    const tracker = new JobTracker();
    tracker.update(status('a', 'running', { module: 'A', stage: 'plan' }));
    tracker.update(status('b', 'running', { module: 'B', stage: 'code' }));
    assert.equal(tracker.view()?.text, '$(sync~spin) B: code +1');
    tracker.update(status('a', 'running', { module: 'A', stage: 'verify' }));
    assert.deepEqual([tracker.view()?.text, tracker.view()?.jobId], ['$(sync~spin) A: verify +1', 'a']);
    tracker.update(status('a', 'done', { module: 'A' }));
    assert.deepEqual([tracker.view()?.text, tracker.view()?.jobId], ['$(sync~spin) B: code', 'b']);
  });

  it('ignores a late update for a job that already ended', () => {
    const tracker = new JobTracker();
    tracker.update(status('j1', 'cancelled'));
    assert.equal(tracker.update(status('j1', 'running')), false);
    assert.equal(tracker.started('j1', URI, 'Model', 'queued'), false);
    assert.equal(tracker.view(), undefined);
  });

  it('shows a job from the command reply, without overriding a faster notification', () => {
    const tracker = new JobTracker();
    assert.equal(tracker.started('j1', URI, 'Model', 'queued'), true);
    assert.equal(tracker.view()?.text, '$(clock) Model: queued');
    tracker.update(status('j1', 'running', { stage: 'code' }));
    assert.equal(tracker.started('j1', URI, 'Model', 'queued'), false);
    assert.equal(tracker.view()?.text, '$(sync~spin) Model: code');
  });

  it('forgets every job when the server goes away', () => {
    const tracker = new JobTracker();
    tracker.update(status('j1', 'running'));
    tracker.clear();
    assert.equal(tracker.view(), undefined);
  });
});

describe('chooseJobToCancel', () => {
  const a = status('a', 'running', { module: 'A' });
  const b = status('b', 'queued', { module: 'B' });

  it('cancels the job of the module at the cursor', () => {
    assert.deepEqual(chooseJobToCancel([a, b], { uri: URI, module: 'A' }), { kind: 'job', jobId: 'a' });
  });

  it('cancels the only job, asks among several, and has nothing to do when idle', () => {
    assert.deepEqual(chooseJobToCancel([b], { uri: URI, module: 'Other' }), { kind: 'job', jobId: 'b' });
    assert.deepEqual(chooseJobToCancel([a, b]), { kind: 'choose', jobs: [a, b] });
    assert.deepEqual(chooseJobToCancel([]), { kind: 'none' });
  });
});
