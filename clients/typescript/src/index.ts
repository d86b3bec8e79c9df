// @gateway/client: a TypeScript client for the Gateway gRPC API (see README.md).
export { GatewayClient } from "./client";
export type { ClientOptions, ColumnSpec, ConsistencyName, Position, ReadOptions, ScanOptions, SubscribeOptions, WriteOptions } from "./client";
export { WriteStream } from "./stream";
export type { PendingWrite, StreamOptions, StreamSendOptions } from "./stream";
export { GatewayError, TRAILER_FIELD, TRAILER_LEADER_API, WriteBatchError } from "./errors";
export { condition, decimal, double, fromValue, insert, remove, rowOf, toValue, Typed, typed, unsigned, update } from "./values";
export type { ColumnValue, Columns, KeyInput, Row } from "./values";
export * as pb from "./gen/gateway/v1/gateway";
export { FieldType } from "./gen/gateway/v1/value";
export { SchemaChangeKind } from "./gen/gateway/v1/schema";
