// How much verifying strangers may cost the API server. Every call with a token the sidecar has
// not seen costs a TokenReview (two with @api-server) before anything is known of the caller, so
// unauthenticated load turns into API load as the driver's ServiceAccount. Two bounds:
// - reviews at once: a Limiter of their own (REVIEWS_AT_ONCE in flight, REVIEWS_WAITING queued,
//   RESOURCE_EXHAUSTED past that), so a burst of new tokens cannot open hundreds of requests;
// - tokens found invalid: a bucket of FAILED_BURST refilled at FAILED_PER_SECOND. When it is empty
//   a token never seen valid is refused at once (RESOURCE_EXHAUSTED, retryable) without a review,
//   so garbage at any rate costs at most FAILED_BURST + FAILED_PER_SECOND × seconds reviews.
// A token seen valid within KNOWN_VALID_MS is never held back by the failures of others: the
// healer controller's token, renewed while garbage floods in, is still reviewed and served.
import { resourceExhausted } from "../errors.js";
import { Limiter } from "../relay/limiter.js";

/** Reviews in flight at once: the API server answers each in milliseconds. */
export const REVIEWS_AT_ONCE = 8;
/** Reviews waiting beyond those. */
export const REVIEWS_WAITING = 64;
/** Invalid tokens reviewed in a burst, and per second after it. */
export const FAILED_BURST = 20;
export const FAILED_PER_SECOND = 5;
/** How long a token seen valid skips the failure budget (the TTL of a renewed per-node token is an hour). */
const KNOWN_VALID_MS = 3_600_000;
const MAX_KNOWN = 1024;

export interface ReviewBudgetOptions {
  atOnce?: number;
  waiting?: number;
  failedBurst?: number;
  failedPerSecond?: number;
  now?: () => number;
}

export class ReviewBudget {
  private readonly limiter: Limiter;
  private readonly burst: number;
  private readonly perSecond: number;
  private readonly now: () => number;
  private tokens: number;
  private refilledAt: number;
  /** Hashes of tokens seen valid → when that was (oldest first). */
  private readonly known = new Map<string, number>();

  constructor(o: ReviewBudgetOptions = {}) {
    this.limiter = new Limiter(o.atOnce ?? REVIEWS_AT_ONCE, o.waiting ?? REVIEWS_WAITING, "callers being verified", "a review slot");
    this.burst = o.failedBurst ?? FAILED_BURST;
    this.perSecond = o.failedPerSecond ?? FAILED_PER_SECOND;
    this.now = o.now ?? Date.now;
    this.tokens = this.burst;
    this.refilledAt = this.now();
  }

  /**
   * Runs the review of the token hashed `key`; `valid` tells from its result whether the token was
   * good. Throws RESOURCE_EXHAUSTED without reviewing when the budget says so.
   */
  async review<T>(key: string, signal: AbortSignal, run: () => Promise<T>, valid: (result: T) => boolean): Promise<T> {
    const seen = this.known.get(key);
    const trusted = seen !== undefined && this.now() - seen < KNOWN_VALID_MS;
    // A stranger's review is paid for before it starts (and refunded if the token is good), so
    // reviews running at once cannot spend more than the budget holds.
    if (!trusted) {
      if (this.available() < 1) throw resourceExhausted("too many invalid tokens lately: callers not seen before are not verified for now; retry later");
      this.tokens -= 1;
    }
    let result: T;
    try {
      result = await this.limiter.run(run, signal);
    } catch (err) {
      if (!trusted) this.refund();
      throw err;
    }
    if (valid(result)) {
      if (!trusted) this.refund();
      this.known.delete(key);
      if (this.known.size >= MAX_KNOWN) this.known.delete(this.known.keys().next().value!);
      this.known.set(key, this.now());
    }
    return result;
  }

  private refund(): void {
    this.tokens = Math.min(this.burst, this.available() + 1);
  }

  private available(): number {
    const now = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.refilledAt) / 1000) * this.perSecond);
    this.refilledAt = now;
    return this.tokens;
  }
}
