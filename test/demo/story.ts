// The demo's narration and bookkeeping: numbered steps, plain lines under them, and checks that
// stop the story at the first surprise, naming the step it happened in.

export class StepFailure extends Error {
  constructor(
    readonly step: string,
    message: string,
  ) {
    super(message);
    this.name = "StepFailure";
  }
}

export interface Outcome {
  checks: number;
  /** The step that failed and why; undefined when every step behaved. */
  failed?: { step: string; reason: string };
}

export class Story {
  private current = "start-up";
  private stepNo = 0;
  checks = 0;

  constructor(
    private readonly steps: number,
    readonly say: (line: string) => void,
    /** True once the run is being stopped from outside (Ctrl-C): no further step starts. */
    private readonly stopped: () => boolean = () => false,
  ) {}

  /** Starts the next numbered step. */
  step(title: string): void {
    if (this.stopped()) throw new StepFailure(this.current, "interrupted");
    this.current = title;
    this.say(`\n[${++this.stepNo}/${this.steps}] ${title}`);
  }

  /** One indented line of narration under the current step. */
  line(text: string): void {
    this.say(`    ${text}`);
  }

  /** A check of the current step: counted when it holds, ends the story when it does not. */
  expect(condition: unknown, what: string): asserts condition {
    if (!condition) throw new StepFailure(this.current, what);
    this.checks++;
  }

  /** Runs the whole story; any error (a failed check, a timeout, a crash) is pinned to its step. */
  async run(body: () => Promise<void>): Promise<Outcome> {
    try {
      await body();
      return { checks: this.checks };
    } catch (err) {
      const step = err instanceof StepFailure ? err.step : this.current;
      return { checks: this.checks, failed: { step, reason: err instanceof Error ? err.message : String(err) } };
    }
  }
}
