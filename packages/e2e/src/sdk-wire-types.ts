/**
 * The SDK's types are the wire's: each pair below must be assignable both ways, so `npm run build`
 * (and with it `./space test`) fails as soon as an SDK type and the protocol's zod schema drift
 * apart. The SDK keeps its own declarations so that it depends on nothing of the server's.
 */
import type {
  Checkpoint,
  EgressAuditEntry as WireAuditEntry,
  EgressPolicy as WirePolicy,
  ExecResult as WireExecResult,
  FileStat,
  ProcessInfo,
  Secret,
  Session,
  SessionStatus,
  TenantLimitsView,
  Template,
  NodeView,
  DrainResult,
  SandboxMetrics,
  ListeningPort,
  PreviewToken,
  Service,
  Volume,
  VolumeSnapshot,
  TemplateBuild,
  TenantEvent,
} from '@space/protocol';
import type {
  CheckpointData,
  EgressAuditEntry,
  EgressPolicy,
  ExecResult,
  FileEntry,
  ProcessData,
  SecretData,
  SessionData,
  TemplateData,
  TenantLimitsData,
  NodeData,
  DrainResultData,
  SandboxMetricsData,
  ListeningPortData,
  PreviewData,
  ServiceData,
  VolumeData,
  VolumeSnapshotData,
  TemplateBuildData,
  TenantEventData,
} from '@space/sdk';

/** `true` only when A and B are assignable to each other. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

export const sdkMatchesWire: Record<string, true> = {
  session: true satisfies Same<SessionData, Session>,
  sessionStatus: true satisfies Same<SessionData['status'], SessionStatus>,
  checkpoint: true satisfies Same<CheckpointData, Checkpoint>,
  egressPolicy: true satisfies Same<EgressPolicy, WirePolicy>,
  secret: true satisfies Same<SecretData, Secret>,
  egressAuditEntry: true satisfies Same<EgressAuditEntry, WireAuditEntry>,
  execResult: true satisfies Same<ExecResult, WireExecResult>,
  fileEntry: true satisfies Same<FileEntry, FileStat>,
  process: true satisfies Same<ProcessData, ProcessInfo>,
  limits: true satisfies Same<TenantLimitsData, TenantLimitsView>,
  node: true satisfies Same<NodeData, NodeView>,
  drain: true satisfies Same<DrainResultData, DrainResult>,
  template: true satisfies Same<TemplateData, Template>,
  metrics: true satisfies Same<SandboxMetricsData, SandboxMetrics>,
  port: true satisfies Same<ListeningPortData, ListeningPort>,
  preview: true satisfies Same<PreviewData, PreviewToken>,
  service: true satisfies Same<ServiceData, Service>,
  volume: true satisfies Same<VolumeData, Volume>,
  volumeSnapshot: true satisfies Same<VolumeSnapshotData, VolumeSnapshot>,
  templateBuild: true satisfies Same<TemplateBuildData, TemplateBuild>,
  tenantEvent: true satisfies Same<TenantEventData, TenantEvent>,
};
