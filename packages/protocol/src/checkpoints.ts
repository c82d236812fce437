import { z } from 'zod';

import { EnvSchema } from './common.js';
import { SecretGrantsSchema } from './egress.js';

export const CheckpointKindSchema = z.enum(['fs', 'full']);
export type CheckpointKind = z.infer<typeof CheckpointKindSchema>;

export const CreateCheckpointRequestSchema = z
  .object({
    /**
     * `fs`: a read-only btrfs snapshot of the session's filesystem, taken after flushing its writes.
     * `full`: the filesystem plus memory and process state (runsc checkpoint); resuming or forking
     * from it continues the processes, servers included (connections with the outside are reset
     * first). Refused (FULL_CHECKPOINT_REFUSED, with an fs checkpoint taken instead) while a stream
     * is attached or a connection with the outside the node did not open is still open.
     */
    kind: CheckpointKindSchema.default('fs'),
  })
  .strict();

/** A volume as a checkpoint recorded it: mounted where, and whether the checkpoint holds a copy of its files (read-write ones do). */
export const CheckpointVolumeSchema = z.object({ name: z.string(), path: z.string(), readOnly: z.boolean(), copied: z.boolean() }).strict();
export type CheckpointVolume = z.infer<typeof CheckpointVolumeSchema>;

export const CheckpointSchema = z
  .object({
    id: z.string(),
    sessionId: z.string(),
    kind: CheckpointKindSchema,
    /**
     * `auto` ones are pruned to the newest few of each kind; `resume`: taken when a resume went back
     * to a full checkpoint, holding the files written after it; `rescue`: the volume a session left
     * on a lost node when it moved on from an older checkpoint, taken when that node came back
     * (what it wrote there after that checkpoint). All but `auto` are kept until deleted.
     */
    trigger: z.enum(['manual', 'auto', 'resume', 'rescue']),
    /** When it was taken: every write acknowledged before this time is in it. */
    createdAt: z.string(),
    /** Bytes of the memory image (full checkpoints); the filesystem part shares blocks and is not counted. */
    sizeBytes: z.number().int().nonnegative().nullable(),
    /** How long the sandbox was paused to take it (full checkpoints). */
    pauseMs: z.number().int().nonnegative().nullable(),
    /** When it was stored in the object store (`SPACE_OBJECT_STORE`), so that any node can restore it; null until then. */
    shippedAt: z.string().nullable(),
    /** The session's volumes when it was taken; a fork gets its own copy of the read-write ones, a restore with `restoreVolumes` puts them back. */
    volumes: z.array(CheckpointVolumeSchema),
  })
  .strict();
export type Checkpoint = z.infer<typeof CheckpointSchema>;

export const CheckpointListSchema = z.object({ checkpoints: z.array(CheckpointSchema) }).strict();

/** A pause: the checkpoint it took (full where the sandbox allowed it, else fs) before stopping the sandbox. */
export const PauseResultSchema = z.object({ checkpoint: CheckpointSchema }).strict();
export type PauseResult = z.infer<typeof PauseResultSchema>;

export const ForkRequestSchema = z
  .object({
    count: z.number().int().min(1).max(16).default(1),
    /**
     * The forks' secrets, instead of their parent's (the default): fewer, or others under the same
     * env var names (`{name, secret}`). A name the parent had keeps its placeholder, so a memory
     * fork's processes, which hold the parent's placeholders, get the fork's grant, never the parent's.
     */
    secrets: SecretGrantsSchema.optional(),
  })
  .strict();
export const RestoreRequestSchema = z
  .object({
    checkpointId: z.string().min(1).max(64),
    /** Also put the session's read-write volumes back to the checkpoint's copies of them (matched by mount path); by default volumes keep their files. */
    restoreVolumes: z.boolean().default(false),
  })
  .strict();

/** Control plane -> node agent. */
export const CheckpointIdSchema = z.string().regex(/^ckp_[a-z0-9]{6,40}$/);
export const NodeCheckpointIdSchema = z.object({ checkpointId: CheckpointIdSchema }).strict();
export const NodeCheckpointRequestSchema = z
  .object({
    checkpointId: CheckpointIdSchema,
    kind: CheckpointKindSchema.default('fs'),
    /** The session's read-write volumes: copied with the checkpoint (in the same pause for a full one). */
    volumes: z
      .array(z.string().regex(/^vol_[a-z0-9]{12}$/))
      .max(16)
      .default([]),
  })
  .strict();
export const NodeCheckpointSchema = z
  .object({
    checkpointId: z.string(),
    kind: CheckpointKindSchema,
    createdAt: z.string(),
    sizeBytes: z.number().int().nonnegative().nullable(),
    pauseMs: z.number().int().nonnegative().nullable(),
  })
  .strict();
export type NodeCheckpoint = z.infer<typeof NodeCheckpointSchema>;

/** Control plane -> node agent: has the session's volume been written since this checkpoint of it? */
export const NodeVolumeChangedQuerySchema = z.object({ since: CheckpointIdSchema }).strict();
export const NodeVolumeChangedSchema = z.object({ changed: z.boolean() }).strict();

/** Node agent -> control plane: the checkpoints on the node, with when each was written. */
export const NodeCheckpointListSchema = z
  .object({ checkpoints: z.array(z.object({ id: z.string().max(64), createdAt: z.string().max(64) }).strict()).max(1_000_000) })
  .strict();
export type NodeCheckpointList = z.infer<typeof NodeCheckpointListSchema>;

/** Node agent -> daemon, before a full checkpoint: the daemon closes its channel and says which pid to wake. */
export const DaemonQuiesceReplySchema = z.object({ daemonPid: z.number().int().positive() }).strict();
/** The daemon's memory guard (POST /relieve-memory, node only): the process it killed, if the sandbox's memory was used up. */
export const DaemonMemoryReliefSchema = z
  .object({
    killed: z
      .object({ pid: z.number().int().positive(), name: z.string().max(64), rssMiB: z.number().int().nonnegative() })
      .strict()
      .nullable(),
    availableMiB: z.number().int(),
    totalMiB: z.number().int().nonnegative(),
  })
  .strict();
export type DaemonMemoryRelief = z.infer<typeof DaemonMemoryReliefSchema>;
/** A sandbox's identity inside: its hostname (`space-` and 8 characters of the session id) and /etc/machine-id. */
export const SandboxIdentitySchema = z
  .object({
    hostname: z.string().regex(/^space-[a-z0-9]{1,32}$/),
    /** Only when the sandbox now serves a session other than the one its memory comes from. */
    machineId: z
      .string()
      .regex(/^[0-9a-f]{32}$/)
      .optional(),
  })
  .strict();
export type SandboxIdentity = z.infer<typeof SandboxIdentitySchema>;

/**
 * Node agent -> a daemon restored from a memory image or taken from the warm pool: its new channel
 * token, the session's environment, and the identity the sandbox takes on (a clone keeps its image's).
 */
export const DaemonRebindRequestSchema = z
  .object({
    token: z.string().regex(/^[0-9a-f]{64}$/),
    env: EnvSchema,
    /** Absent when the sandbox keeps its own (a pooled one). */
    identity: SandboxIdentitySchema.optional(),
    /** The sandbox now serves a session other than the one its memory comes from: finished processes are forgotten. */
    newSession: z.boolean(),
  })
  .strict();
