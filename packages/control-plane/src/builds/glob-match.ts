import { ErrorCode, SpaceError } from '@space/protocol';

/**
 * A bound on the work one tenant's request may make the control plane do on its event loop: each
 * step of a matcher spends one unit, and the request is refused once the budget is spent, so no
 * input, however adversarial, holds the loop for long (20 million steps take ~50 ms here).
 */
export class WorkBudget {
  private left: number;

  constructor(
    steps: number,
    private readonly what: string,
  ) {
    this.left = steps;
  }

  spend(steps: number): void {
    this.left -= steps;
    if (this.left < 0) throw new SpaceError(ErrorCode.VALIDATION_FAILED, `${this.what} need too much work to match; use fewer or simpler patterns`);
  }
}

/**
 * Whether `name` matches `pattern`, where `*` is any run of characters and `?` one character, neither
 * crossing a `/` (so both are compared segment by segment). Greedy with one backtrack point per
 * segment: at most |pattern segment| × |name segment| steps, never exponential.
 */
export function globMatches(pattern: string, name: string, budget: WorkBudget): boolean {
  const patternSegments = pattern.split('/');
  const nameSegments = name.split('/');
  if (patternSegments.length !== nameSegments.length) return false;
  return patternSegments.every((segment, i) => segmentMatches(segment, nameSegments[i]!, budget));
}

function segmentMatches(pattern: string, name: string, budget: WorkBudget): boolean {
  let p = 0;
  let n = 0;
  let star = -1;
  let resumeAt = 0;
  let steps = 0;
  while (n < name.length) {
    steps++;
    if (p < pattern.length && (pattern[p] === '?' || pattern[p] === name[n])) {
      p++;
      n++;
    } else if (p < pattern.length && pattern[p] === '*') {
      star = p++;
      resumeAt = n;
    } else if (star !== -1) {
      // The last star takes one more character; everything after it is matched again.
      p = star + 1;
      n = ++resumeAt;
    } else {
      budget.spend(steps);
      return false;
    }
  }
  budget.spend(steps);
  while (pattern[p] === '*') p++;
  return p === pattern.length;
}
