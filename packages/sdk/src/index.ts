export { Space } from './space.js';
export { Session, SessionHandle, SessionFiles, type StreamOptions } from './session.js';
export { CheckpointFiles } from './checkpoint-files.js';
export { ExecStream } from './exec-stream.js';
export {
  CodeContexts,
  type CodeCellData,
  type CodeContextData,
  type CodeErrorData,
  type CodeEventData,
  type CodeLanguage,
  type CodeResultData,
  type Execution,
  type RunCodeOptions,
} from './code.js';
export {
  SessionDesktop,
  type DesktopApp,
  type DesktopInputData,
  type DesktopStateData,
  type DesktopStreamData,
  type DesktopWindowData,
  type MouseButton,
  type ScreenshotOptions,
} from './desktop.js';
export { FileWatch, type FileChange } from './file-watch.js';
export { SpaceApiError, SpaceClientError, isSpaceApiError } from './errors.js';
export { CALL_TIMEOUT_HEADER } from './transport.js';
export type { SpaceOptions, CallOptions } from './options.js';
export type {
  SessionData,
  SandboxMetricsData,
  ServiceData,
  ListeningPortData,
  PreviewData,
  CreateSessionOptions,
  ExecOptions,
  ExecResult,
  ExecEvent,
  FileEntry,
  PathHistoryData,
  PathRestoreData,
  CheckpointDiffData,
  FileDiffData,
  DiffEntryData,
  PathVersionData,
  CheckpointData,
  ProcessData,
  ProcessListData,
  EgressPolicy,
  SecretData,
  SecretGrant,
  EgressAuditEntry,
  TenantLimitsData,
  UsageFiguresData,
  UsageGroupBy,
  UsageOptions,
  UsageReportData,
  UsageRowData,
  NodeData,
  JoinTokenData,
  DrainResultData,
  TemplateData,
  TemplateConfigData,
  TemplateBuildData,
  TemplateBuildOptions,
  TenantLimitName,
  TenantEventData,
  VolumeData,
  VolumeMountData,
  VolumeSnapshotData,
} from './types.js';
