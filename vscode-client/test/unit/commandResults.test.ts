import * as assert from 'node:assert/strict';
import { describeCancelResult, describeModuleCommandResult } from '../../src/core/commandResults';

const GENERATE = { title: 'Generate', serverShowsErrors: true };
const PROFILE = { title: 'Profile this module', serverShowsErrors: true };
const ADD_INPUTS = { title: 'Add example inputs', serverShowsErrors: false };

describe('describeModuleCommandResult', () => {
  it('returns the queued job so the status bar shows it at once', () => {
    assert.deepEqual(describeModuleCommandResult(GENERATE, 'Model', { jobId: 'j1', state: 'queued' }),
      { job: { jobId: 'j1', state: 'queued' } });
  });

  it('stays silent for a job that is already running: the server tells the user', () => {
    const reply = { error: 'Model: generate is already running', jobId: 'j0', state: 'running', alreadyRunning: true };
    assert.deepEqual(describeModuleCommandResult(GENERATE, 'Model', reply), {});
  });

  it('only logs an error the server has shown itself, and shows the others', () => {
    assert.deepEqual(describeModuleCommandResult(PROFILE, 'Model', { error: 'Model has no example inputs' }),
      { log: 'KernelStitch: Profile this module (Model): Model has no example inputs' });
    assert.deepEqual(describeModuleCommandResult(ADD_INPUTS, 'Model', { applied: false, error: 'cannot read x' }),
      { message: { level: 'error', text: 'KernelStitch: Add example inputs (Model): cannot read x' } });
  });

  it('reports an edit that was not applied, and nothing for one that was', () => {
    assert.equal(describeModuleCommandResult(ADD_INPUTS, 'M', { applied: false }).message?.level, 'info');
    assert.equal(describeModuleCommandResult(ADD_INPUTS, 'M', { applied: false, error: 'M not found' })
      .message?.text, 'KernelStitch: Add example inputs (M): M not found');
    assert.deepEqual(describeModuleCommandResult(ADD_INPUTS, 'M', { applied: true }), {});
  });

  it('tolerates empty and odd replies', () => {
    assert.deepEqual(describeModuleCommandResult(GENERATE, 'M', null), {});
    assert.deepEqual(describeModuleCommandResult(GENERATE, 'M', ['x']), {});
    assert.deepEqual(describeModuleCommandResult(GENERATE, 'M', { jobId: 'j2' }), { job: { jobId: 'j2', state: 'queued' } });
  });
});

describe('describeCancelResult', () => {
  it('says when there was nothing to cancel', () => {
    assert.deepEqual(describeCancelResult({ cancelled: false, error: 'no such job running' }),
      { message: { level: 'info', text: 'KernelStitch: no such job running.' } });
  });

  it('stays silent on success: the job\'s end is reported by the server', () => {
    assert.deepEqual(describeCancelResult({ cancelled: true, jobId: 'j1' }), {});
  });
});
