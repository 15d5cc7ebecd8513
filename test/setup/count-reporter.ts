/**
 * A vitest reporter beside the default one: at the end of a run it prints one plain line,
 * `N passed, N failed, N skipped`, that a script can read; and under CI (`CI` set) a skipped
 * test fails the run, named: CI installs every tool the tests use, so a skip there means a test
 * that proved nothing (see test/helpers/tools.ts for the tools' own failures).
 */
import type { Reporter, TestCase, TestModule } from 'vitest/node';
import { UNDER_CI } from '../helpers/tools.js';

export interface RunCounts {
  readonly passed: number;
  /** Tests that failed, and tests that did not run because their describe failed. */
  readonly failed: number;
  readonly skipped: readonly TestCase[];
  /** Test files that failed outside any test (an import that threw, a failed beforeAll of the file). */
  readonly brokenModules: readonly TestModule[];
}

export function countRun(testModules: readonly TestModule[]): RunCounts {
  let passed = 0;
  let failed = 0;
  const skipped: TestCase[] = [];
  const brokenModules: TestModule[] = [];
  for (const testModule of testModules) {
    if (testModule.errors().length > 0) brokenModules.push(testModule);
    for (const test of testModule.children.allTests()) {
      const { state } = test.result();
      if (state === 'passed') passed++;
      else if (state === 'failed' || (state === 'skipped' && failedAround(test))) failed++;
      else if (state === 'skipped') skipped.push(test);
    }
  }
  return { passed, failed, skipped, brokenModules };
}

/**
 * A test that did not run because its describe failed outside its tests (a beforeAll that threw)
 * failed too. A describe that failed only through one of its tests does not make the tests a
 * `-t` filter left out failures: they are skipped.
 */
function failedAround(test: TestCase): boolean {
  for (let parent = test.parent; parent.type === 'suite'; parent = parent.parent) {
    if (parent.errors().length > 0) return true;
  }
  return false;
}

/** `file > describe > test`, as vitest names a test in its own output. */
function testName(test: TestCase): string {
  return `${test.module.relativeModuleId} > ${test.fullName}`;
}

export default class CountReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const counts = countRun(testModules);
    const lines = [
      `${counts.passed} passed, ${counts.failed} failed, ${counts.skipped.length} skipped`,
    ];
    for (const testModule of counts.brokenModules) {
      lines.push(`test file failed outside its tests: ${testModule.relativeModuleId}`);
    }
    if (UNDER_CI && counts.skipped.length > 0) {
      lines.push(
        `FAIL: ${counts.skipped.length} skipped under CI, where no test may skip (CI installs every tool the tests use; see .ci/run):`,
        ...counts.skipped.map((test) => `  skipped: ${testName(test)}`),
      );
      process.exitCode = 1;
    }
    process.stdout.write(`${lines.join('\n')}\n`);
  }
}
