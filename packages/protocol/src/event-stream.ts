import type { z } from 'zod';

/** A stream of JSON lines answering one request: the shape of its events and which of them matter to the relays between the layers. */
export interface EventStream {
  event: z.ZodTypeAny;
  /** The event that ends the stream: relayed last. */
  isFinal: (event: unknown) => boolean;
  /** Events that pass even once the stream's output bound is spent. */
  alwaysPasses: (event: unknown) => boolean;
  /** What a relay says in the stream itself: a line dropped or output cut (`broken` false), the stream broken off (true). */
  notice: (message: string, broken: boolean) => unknown;
}
