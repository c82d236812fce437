import { warnWhileWaiting } from './still-waiting.js';

/** How often a stop still waiting on one of its steps says so. */
const stillWaitingEveryMs = 10_000;

/**
 * A process's stop, step by step: a step still going after `everyMs` is named in a warning, and
 * again every `everyMs`, so a stop that hangs says on what (a supervisor's SIGKILL leaves no other clue).
 */
export class StopSteps {
  constructor(
    private readonly warn: (message: string) => void,
    private readonly everyMs = stillWaitingEveryMs,
  ) {}

  /** Runs `work`, the step called `name` ("the maintenance pass under way"). */
  step<T>(name: string, work: () => Promise<T> | T): Promise<T> {
    return warnWhileWaiting(work, this.everyMs, (waited) => this.warn(`stopping: still waiting for ${name} after ${waited} s`));
  }
}
