import * as assert from 'node:assert/strict';
import { CrashRestartPolicy } from '../../src/core/restartPolicy';

const MINUTE = 60_000;

describe('CrashRestartPolicy', () => {
  it('restarts a crashed server a bounded number of times, then gives up with a message', () => {
    const policy = new CrashRestartPolicy(3, 3 * MINUTE);
    const decisions = [0, 1, 2, 3].map((i) => policy.onUnexpectedExit(true, i * 1000));
    assert.deepEqual(decisions.map((d) => d.restart), [true, true, true, false]);
    assert.match(decisions[0].message, /restarting it \(1\/3\)/);
    assert.match(decisions[3].message, /crashed 4 times in 3 minutes/);
  });

  it('forgets crashes older than the window', () => {
    const policy = new CrashRestartPolicy(2, MINUTE);
    policy.onUnexpectedExit(true, 0);
    policy.onUnexpectedExit(true, 1000);
    assert.equal(policy.onUnexpectedExit(true, MINUTE + 2000).restart, true);
  });

  it('never restarts a server that failed to start', () => {
    const decision = new CrashRestartPolicy().onUnexpectedExit(false, 0);
    assert.equal(decision.restart, false);
    assert.match(decision.message, /could not start/);
  });

  it('starts counting afresh after a restart the user asked for', () => {
    const policy = new CrashRestartPolicy(1, MINUTE);
    policy.onUnexpectedExit(true, 0);
    assert.equal(policy.onUnexpectedExit(true, 1).restart, false);
    policy.reset();
    assert.equal(policy.onUnexpectedExit(true, 2).restart, true);
  });
});
