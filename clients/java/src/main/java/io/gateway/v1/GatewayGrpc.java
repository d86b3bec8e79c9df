package io.gateway.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class GatewayGrpc {

  private GatewayGrpc() {}

  public static final java.lang.String SERVICE_NAME = "gateway.v1.Gateway";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<io.gateway.v1.WriteRequest,
      io.gateway.v1.WriteResult> getWriteMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Write",
      requestType = io.gateway.v1.WriteRequest.class,
      responseType = io.gateway.v1.WriteResult.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.gateway.v1.WriteRequest,
      io.gateway.v1.WriteResult> getWriteMethod() {
    io.grpc.MethodDescriptor<io.gateway.v1.WriteRequest, io.gateway.v1.WriteResult> getWriteMethod;
    if ((getWriteMethod = GatewayGrpc.getWriteMethod) == null) {
      synchronized (GatewayGrpc.class) {
        if ((getWriteMethod = GatewayGrpc.getWriteMethod) == null) {
          GatewayGrpc.getWriteMethod = getWriteMethod =
              io.grpc.MethodDescriptor.<io.gateway.v1.WriteRequest, io.gateway.v1.WriteResult>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Write"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.WriteRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.WriteResult.getDefaultInstance()))
              .setSchemaDescriptor(new GatewayMethodDescriptorSupplier("Write"))
              .build();
        }
      }
    }
    return getWriteMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.gateway.v1.WriteBatchRequest,
      io.gateway.v1.WriteBatchResponse> getWriteBatchMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "WriteBatch",
      requestType = io.gateway.v1.WriteBatchRequest.class,
      responseType = io.gateway.v1.WriteBatchResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.gateway.v1.WriteBatchRequest,
      io.gateway.v1.WriteBatchResponse> getWriteBatchMethod() {
    io.grpc.MethodDescriptor<io.gateway.v1.WriteBatchRequest, io.gateway.v1.WriteBatchResponse> getWriteBatchMethod;
    if ((getWriteBatchMethod = GatewayGrpc.getWriteBatchMethod) == null) {
      synchronized (GatewayGrpc.class) {
        if ((getWriteBatchMethod = GatewayGrpc.getWriteBatchMethod) == null) {
          GatewayGrpc.getWriteBatchMethod = getWriteBatchMethod =
              io.grpc.MethodDescriptor.<io.gateway.v1.WriteBatchRequest, io.gateway.v1.WriteBatchResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "WriteBatch"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.WriteBatchRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.WriteBatchResponse.getDefaultInstance()))
              .setSchemaDescriptor(new GatewayMethodDescriptorSupplier("WriteBatch"))
              .build();
        }
      }
    }
    return getWriteBatchMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.gateway.v1.StreamWriteRequest,
      io.gateway.v1.StreamWriteResponse> getStreamWriteMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "StreamWrite",
      requestType = io.gateway.v1.StreamWriteRequest.class,
      responseType = io.gateway.v1.StreamWriteResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.BIDI_STREAMING)
  public static io.grpc.MethodDescriptor<io.gateway.v1.StreamWriteRequest,
      io.gateway.v1.StreamWriteResponse> getStreamWriteMethod() {
    io.grpc.MethodDescriptor<io.gateway.v1.StreamWriteRequest, io.gateway.v1.StreamWriteResponse> getStreamWriteMethod;
    if ((getStreamWriteMethod = GatewayGrpc.getStreamWriteMethod) == null) {
      synchronized (GatewayGrpc.class) {
        if ((getStreamWriteMethod = GatewayGrpc.getStreamWriteMethod) == null) {
          GatewayGrpc.getStreamWriteMethod = getStreamWriteMethod =
              io.grpc.MethodDescriptor.<io.gateway.v1.StreamWriteRequest, io.gateway.v1.StreamWriteResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.BIDI_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "StreamWrite"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.StreamWriteRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.StreamWriteResponse.getDefaultInstance()))
              .setSchemaDescriptor(new GatewayMethodDescriptorSupplier("StreamWrite"))
              .build();
        }
      }
    }
    return getStreamWriteMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.gateway.v1.ReadRequest,
      io.gateway.v1.ReadResponse> getReadMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Read",
      requestType = io.gateway.v1.ReadRequest.class,
      responseType = io.gateway.v1.ReadResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.gateway.v1.ReadRequest,
      io.gateway.v1.ReadResponse> getReadMethod() {
    io.grpc.MethodDescriptor<io.gateway.v1.ReadRequest, io.gateway.v1.ReadResponse> getReadMethod;
    if ((getReadMethod = GatewayGrpc.getReadMethod) == null) {
      synchronized (GatewayGrpc.class) {
        if ((getReadMethod = GatewayGrpc.getReadMethod) == null) {
          GatewayGrpc.getReadMethod = getReadMethod =
              io.grpc.MethodDescriptor.<io.gateway.v1.ReadRequest, io.gateway.v1.ReadResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Read"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.ReadRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.ReadResponse.getDefaultInstance()))
              .setSchemaDescriptor(new GatewayMethodDescriptorSupplier("Read"))
              .build();
        }
      }
    }
    return getReadMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.gateway.v1.ScanRequest,
      io.gateway.v1.ScanResponse> getScanMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Scan",
      requestType = io.gateway.v1.ScanRequest.class,
      responseType = io.gateway.v1.ScanResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.gateway.v1.ScanRequest,
      io.gateway.v1.ScanResponse> getScanMethod() {
    io.grpc.MethodDescriptor<io.gateway.v1.ScanRequest, io.gateway.v1.ScanResponse> getScanMethod;
    if ((getScanMethod = GatewayGrpc.getScanMethod) == null) {
      synchronized (GatewayGrpc.class) {
        if ((getScanMethod = GatewayGrpc.getScanMethod) == null) {
          GatewayGrpc.getScanMethod = getScanMethod =
              io.grpc.MethodDescriptor.<io.gateway.v1.ScanRequest, io.gateway.v1.ScanResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Scan"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.ScanRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.ScanResponse.getDefaultInstance()))
              .setSchemaDescriptor(new GatewayMethodDescriptorSupplier("Scan"))
              .build();
        }
      }
    }
    return getScanMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.gateway.v1.SubscribeRequest,
      io.gateway.v1.ChangeEvent> getSubscribeMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Subscribe",
      requestType = io.gateway.v1.SubscribeRequest.class,
      responseType = io.gateway.v1.ChangeEvent.class,
      methodType = io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
  public static io.grpc.MethodDescriptor<io.gateway.v1.SubscribeRequest,
      io.gateway.v1.ChangeEvent> getSubscribeMethod() {
    io.grpc.MethodDescriptor<io.gateway.v1.SubscribeRequest, io.gateway.v1.ChangeEvent> getSubscribeMethod;
    if ((getSubscribeMethod = GatewayGrpc.getSubscribeMethod) == null) {
      synchronized (GatewayGrpc.class) {
        if ((getSubscribeMethod = GatewayGrpc.getSubscribeMethod) == null) {
          GatewayGrpc.getSubscribeMethod = getSubscribeMethod =
              io.grpc.MethodDescriptor.<io.gateway.v1.SubscribeRequest, io.gateway.v1.ChangeEvent>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Subscribe"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.SubscribeRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.ChangeEvent.getDefaultInstance()))
              .setSchemaDescriptor(new GatewayMethodDescriptorSupplier("Subscribe"))
              .build();
        }
      }
    }
    return getSubscribeMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.gateway.v1.StatusRequest,
      io.gateway.v1.StatusResponse> getStatusMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Status",
      requestType = io.gateway.v1.StatusRequest.class,
      responseType = io.gateway.v1.StatusResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.gateway.v1.StatusRequest,
      io.gateway.v1.StatusResponse> getStatusMethod() {
    io.grpc.MethodDescriptor<io.gateway.v1.StatusRequest, io.gateway.v1.StatusResponse> getStatusMethod;
    if ((getStatusMethod = GatewayGrpc.getStatusMethod) == null) {
      synchronized (GatewayGrpc.class) {
        if ((getStatusMethod = GatewayGrpc.getStatusMethod) == null) {
          GatewayGrpc.getStatusMethod = getStatusMethod =
              io.grpc.MethodDescriptor.<io.gateway.v1.StatusRequest, io.gateway.v1.StatusResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Status"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.StatusRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.StatusResponse.getDefaultInstance()))
              .setSchemaDescriptor(new GatewayMethodDescriptorSupplier("Status"))
              .build();
        }
      }
    }
    return getStatusMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.gateway.v1.AddNodeRequest,
      io.gateway.v1.AdminResponse> getAddNodeMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "AddNode",
      requestType = io.gateway.v1.AddNodeRequest.class,
      responseType = io.gateway.v1.AdminResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.gateway.v1.AddNodeRequest,
      io.gateway.v1.AdminResponse> getAddNodeMethod() {
    io.grpc.MethodDescriptor<io.gateway.v1.AddNodeRequest, io.gateway.v1.AdminResponse> getAddNodeMethod;
    if ((getAddNodeMethod = GatewayGrpc.getAddNodeMethod) == null) {
      synchronized (GatewayGrpc.class) {
        if ((getAddNodeMethod = GatewayGrpc.getAddNodeMethod) == null) {
          GatewayGrpc.getAddNodeMethod = getAddNodeMethod =
              io.grpc.MethodDescriptor.<io.gateway.v1.AddNodeRequest, io.gateway.v1.AdminResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "AddNode"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.AddNodeRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.AdminResponse.getDefaultInstance()))
              .setSchemaDescriptor(new GatewayMethodDescriptorSupplier("AddNode"))
              .build();
        }
      }
    }
    return getAddNodeMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.gateway.v1.RemoveNodeRequest,
      io.gateway.v1.AdminResponse> getRemoveNodeMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "RemoveNode",
      requestType = io.gateway.v1.RemoveNodeRequest.class,
      responseType = io.gateway.v1.AdminResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.gateway.v1.RemoveNodeRequest,
      io.gateway.v1.AdminResponse> getRemoveNodeMethod() {
    io.grpc.MethodDescriptor<io.gateway.v1.RemoveNodeRequest, io.gateway.v1.AdminResponse> getRemoveNodeMethod;
    if ((getRemoveNodeMethod = GatewayGrpc.getRemoveNodeMethod) == null) {
      synchronized (GatewayGrpc.class) {
        if ((getRemoveNodeMethod = GatewayGrpc.getRemoveNodeMethod) == null) {
          GatewayGrpc.getRemoveNodeMethod = getRemoveNodeMethod =
              io.grpc.MethodDescriptor.<io.gateway.v1.RemoveNodeRequest, io.gateway.v1.AdminResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "RemoveNode"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.RemoveNodeRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.AdminResponse.getDefaultInstance()))
              .setSchemaDescriptor(new GatewayMethodDescriptorSupplier("RemoveNode"))
              .build();
        }
      }
    }
    return getRemoveNodeMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.gateway.v1.TransferLeaderRequest,
      io.gateway.v1.AdminResponse> getTransferLeaderMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "TransferLeader",
      requestType = io.gateway.v1.TransferLeaderRequest.class,
      responseType = io.gateway.v1.AdminResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.gateway.v1.TransferLeaderRequest,
      io.gateway.v1.AdminResponse> getTransferLeaderMethod() {
    io.grpc.MethodDescriptor<io.gateway.v1.TransferLeaderRequest, io.gateway.v1.AdminResponse> getTransferLeaderMethod;
    if ((getTransferLeaderMethod = GatewayGrpc.getTransferLeaderMethod) == null) {
      synchronized (GatewayGrpc.class) {
        if ((getTransferLeaderMethod = GatewayGrpc.getTransferLeaderMethod) == null) {
          GatewayGrpc.getTransferLeaderMethod = getTransferLeaderMethod =
              io.grpc.MethodDescriptor.<io.gateway.v1.TransferLeaderRequest, io.gateway.v1.AdminResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "TransferLeader"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.TransferLeaderRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.AdminResponse.getDefaultInstance()))
              .setSchemaDescriptor(new GatewayMethodDescriptorSupplier("TransferLeader"))
              .build();
        }
      }
    }
    return getTransferLeaderMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.gateway.v1.SnapshotRequest,
      io.gateway.v1.AdminResponse> getSnapshotMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Snapshot",
      requestType = io.gateway.v1.SnapshotRequest.class,
      responseType = io.gateway.v1.AdminResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.gateway.v1.SnapshotRequest,
      io.gateway.v1.AdminResponse> getSnapshotMethod() {
    io.grpc.MethodDescriptor<io.gateway.v1.SnapshotRequest, io.gateway.v1.AdminResponse> getSnapshotMethod;
    if ((getSnapshotMethod = GatewayGrpc.getSnapshotMethod) == null) {
      synchronized (GatewayGrpc.class) {
        if ((getSnapshotMethod = GatewayGrpc.getSnapshotMethod) == null) {
          GatewayGrpc.getSnapshotMethod = getSnapshotMethod =
              io.grpc.MethodDescriptor.<io.gateway.v1.SnapshotRequest, io.gateway.v1.AdminResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Snapshot"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.SnapshotRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.AdminResponse.getDefaultInstance()))
              .setSchemaDescriptor(new GatewayMethodDescriptorSupplier("Snapshot"))
              .build();
        }
      }
    }
    return getSnapshotMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.gateway.v1.AddChannelRequest,
      io.gateway.v1.AdminResponse> getAddChannelMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "AddChannel",
      requestType = io.gateway.v1.AddChannelRequest.class,
      responseType = io.gateway.v1.AdminResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.gateway.v1.AddChannelRequest,
      io.gateway.v1.AdminResponse> getAddChannelMethod() {
    io.grpc.MethodDescriptor<io.gateway.v1.AddChannelRequest, io.gateway.v1.AdminResponse> getAddChannelMethod;
    if ((getAddChannelMethod = GatewayGrpc.getAddChannelMethod) == null) {
      synchronized (GatewayGrpc.class) {
        if ((getAddChannelMethod = GatewayGrpc.getAddChannelMethod) == null) {
          GatewayGrpc.getAddChannelMethod = getAddChannelMethod =
              io.grpc.MethodDescriptor.<io.gateway.v1.AddChannelRequest, io.gateway.v1.AdminResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "AddChannel"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.AddChannelRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.AdminResponse.getDefaultInstance()))
              .setSchemaDescriptor(new GatewayMethodDescriptorSupplier("AddChannel"))
              .build();
        }
      }
    }
    return getAddChannelMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.gateway.v1.ChannelActionRequest,
      io.gateway.v1.AdminResponse> getChannelActionMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ChannelAction",
      requestType = io.gateway.v1.ChannelActionRequest.class,
      responseType = io.gateway.v1.AdminResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.gateway.v1.ChannelActionRequest,
      io.gateway.v1.AdminResponse> getChannelActionMethod() {
    io.grpc.MethodDescriptor<io.gateway.v1.ChannelActionRequest, io.gateway.v1.AdminResponse> getChannelActionMethod;
    if ((getChannelActionMethod = GatewayGrpc.getChannelActionMethod) == null) {
      synchronized (GatewayGrpc.class) {
        if ((getChannelActionMethod = GatewayGrpc.getChannelActionMethod) == null) {
          GatewayGrpc.getChannelActionMethod = getChannelActionMethod =
              io.grpc.MethodDescriptor.<io.gateway.v1.ChannelActionRequest, io.gateway.v1.AdminResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ChannelAction"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.ChannelActionRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.AdminResponse.getDefaultInstance()))
              .setSchemaDescriptor(new GatewayMethodDescriptorSupplier("ChannelAction"))
              .build();
        }
      }
    }
    return getChannelActionMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.gateway.v1.ConflictsRequest,
      io.gateway.v1.AdminResponse> getConflictsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Conflicts",
      requestType = io.gateway.v1.ConflictsRequest.class,
      responseType = io.gateway.v1.AdminResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.gateway.v1.ConflictsRequest,
      io.gateway.v1.AdminResponse> getConflictsMethod() {
    io.grpc.MethodDescriptor<io.gateway.v1.ConflictsRequest, io.gateway.v1.AdminResponse> getConflictsMethod;
    if ((getConflictsMethod = GatewayGrpc.getConflictsMethod) == null) {
      synchronized (GatewayGrpc.class) {
        if ((getConflictsMethod = GatewayGrpc.getConflictsMethod) == null) {
          GatewayGrpc.getConflictsMethod = getConflictsMethod =
              io.grpc.MethodDescriptor.<io.gateway.v1.ConflictsRequest, io.gateway.v1.AdminResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Conflicts"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.ConflictsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.AdminResponse.getDefaultInstance()))
              .setSchemaDescriptor(new GatewayMethodDescriptorSupplier("Conflicts"))
              .build();
        }
      }
    }
    return getConflictsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.gateway.v1.AlarmRequest,
      io.gateway.v1.AdminResponse> getAlarmMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Alarm",
      requestType = io.gateway.v1.AlarmRequest.class,
      responseType = io.gateway.v1.AdminResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.gateway.v1.AlarmRequest,
      io.gateway.v1.AdminResponse> getAlarmMethod() {
    io.grpc.MethodDescriptor<io.gateway.v1.AlarmRequest, io.gateway.v1.AdminResponse> getAlarmMethod;
    if ((getAlarmMethod = GatewayGrpc.getAlarmMethod) == null) {
      synchronized (GatewayGrpc.class) {
        if ((getAlarmMethod = GatewayGrpc.getAlarmMethod) == null) {
          GatewayGrpc.getAlarmMethod = getAlarmMethod =
              io.grpc.MethodDescriptor.<io.gateway.v1.AlarmRequest, io.gateway.v1.AdminResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Alarm"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.AlarmRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.gateway.v1.AdminResponse.getDefaultInstance()))
              .setSchemaDescriptor(new GatewayMethodDescriptorSupplier("Alarm"))
              .build();
        }
      }
    }
    return getAlarmMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static GatewayStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<GatewayStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<GatewayStub>() {
        @java.lang.Override
        public GatewayStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new GatewayStub(channel, callOptions);
        }
      };
    return GatewayStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports all types of calls on the service
   */
  public static GatewayBlockingV2Stub newBlockingV2Stub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<GatewayBlockingV2Stub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<GatewayBlockingV2Stub>() {
        @java.lang.Override
        public GatewayBlockingV2Stub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new GatewayBlockingV2Stub(channel, callOptions);
        }
      };
    return GatewayBlockingV2Stub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static GatewayBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<GatewayBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<GatewayBlockingStub>() {
        @java.lang.Override
        public GatewayBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new GatewayBlockingStub(channel, callOptions);
        }
      };
    return GatewayBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static GatewayFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<GatewayFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<GatewayFutureStub>() {
        @java.lang.Override
        public GatewayFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new GatewayFutureStub(channel, callOptions);
        }
      };
    return GatewayFutureStub.newStub(factory, channel);
  }

  /**
   */
  public interface AsyncService {

    /**
     */
    default void write(io.gateway.v1.WriteRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.WriteResult> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getWriteMethod(), responseObserver);
    }

    /**
     */
    default void writeBatch(io.gateway.v1.WriteBatchRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.WriteBatchResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getWriteBatchMethod(), responseObserver);
    }

    /**
     */
    default io.grpc.stub.StreamObserver<io.gateway.v1.StreamWriteRequest> streamWrite(
        io.grpc.stub.StreamObserver<io.gateway.v1.StreamWriteResponse> responseObserver) {
      return io.grpc.stub.ServerCalls.asyncUnimplementedStreamingCall(getStreamWriteMethod(), responseObserver);
    }

    /**
     */
    default void read(io.gateway.v1.ReadRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.ReadResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getReadMethod(), responseObserver);
    }

    /**
     */
    default void scan(io.gateway.v1.ScanRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.ScanResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getScanMethod(), responseObserver);
    }

    /**
     */
    default void subscribe(io.gateway.v1.SubscribeRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.ChangeEvent> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getSubscribeMethod(), responseObserver);
    }

    /**
     */
    default void status(io.gateway.v1.StatusRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.StatusResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getStatusMethod(), responseObserver);
    }

    /**
     */
    default void addNode(io.gateway.v1.AddNodeRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.AdminResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getAddNodeMethod(), responseObserver);
    }

    /**
     */
    default void removeNode(io.gateway.v1.RemoveNodeRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.AdminResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getRemoveNodeMethod(), responseObserver);
    }

    /**
     */
    default void transferLeader(io.gateway.v1.TransferLeaderRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.AdminResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getTransferLeaderMethod(), responseObserver);
    }

    /**
     */
    default void snapshot(io.gateway.v1.SnapshotRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.AdminResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getSnapshotMethod(), responseObserver);
    }

    /**
     */
    default void addChannel(io.gateway.v1.AddChannelRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.AdminResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getAddChannelMethod(), responseObserver);
    }

    /**
     */
    default void channelAction(io.gateway.v1.ChannelActionRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.AdminResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getChannelActionMethod(), responseObserver);
    }

    /**
     */
    default void conflicts(io.gateway.v1.ConflictsRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.AdminResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getConflictsMethod(), responseObserver);
    }

    /**
     */
    default void alarm(io.gateway.v1.AlarmRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.AdminResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getAlarmMethod(), responseObserver);
    }
  }

  /**
   * Base class for the server implementation of the service Gateway.
   */
  public static abstract class GatewayImplBase
      implements io.grpc.BindableService, AsyncService {

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return GatewayGrpc.bindService(this);
    }
  }

  /**
   * A stub to allow clients to do asynchronous rpc calls to service Gateway.
   */
  public static final class GatewayStub
      extends io.grpc.stub.AbstractAsyncStub<GatewayStub> {
    private GatewayStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected GatewayStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new GatewayStub(channel, callOptions);
    }

    /**
     */
    public void write(io.gateway.v1.WriteRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.WriteResult> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getWriteMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     */
    public void writeBatch(io.gateway.v1.WriteBatchRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.WriteBatchResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getWriteBatchMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     */
    public io.grpc.stub.StreamObserver<io.gateway.v1.StreamWriteRequest> streamWrite(
        io.grpc.stub.StreamObserver<io.gateway.v1.StreamWriteResponse> responseObserver) {
      return io.grpc.stub.ClientCalls.asyncBidiStreamingCall(
          getChannel().newCall(getStreamWriteMethod(), getCallOptions()), responseObserver);
    }

    /**
     */
    public void read(io.gateway.v1.ReadRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.ReadResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getReadMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     */
    public void scan(io.gateway.v1.ScanRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.ScanResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getScanMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     */
    public void subscribe(io.gateway.v1.SubscribeRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.ChangeEvent> responseObserver) {
      io.grpc.stub.ClientCalls.asyncServerStreamingCall(
          getChannel().newCall(getSubscribeMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     */
    public void status(io.gateway.v1.StatusRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.StatusResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getStatusMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     */
    public void addNode(io.gateway.v1.AddNodeRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.AdminResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getAddNodeMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     */
    public void removeNode(io.gateway.v1.RemoveNodeRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.AdminResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getRemoveNodeMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     */
    public void transferLeader(io.gateway.v1.TransferLeaderRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.AdminResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getTransferLeaderMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     */
    public void snapshot(io.gateway.v1.SnapshotRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.AdminResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getSnapshotMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     */
    public void addChannel(io.gateway.v1.AddChannelRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.AdminResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getAddChannelMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     */
    public void channelAction(io.gateway.v1.ChannelActionRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.AdminResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getChannelActionMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     */
    public void conflicts(io.gateway.v1.ConflictsRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.AdminResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getConflictsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     */
    public void alarm(io.gateway.v1.AlarmRequest request,
        io.grpc.stub.StreamObserver<io.gateway.v1.AdminResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getAlarmMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * A stub to allow clients to do synchronous rpc calls to service Gateway.
   */
  public static final class GatewayBlockingV2Stub
      extends io.grpc.stub.AbstractBlockingStub<GatewayBlockingV2Stub> {
    private GatewayBlockingV2Stub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected GatewayBlockingV2Stub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new GatewayBlockingV2Stub(channel, callOptions);
    }

    /**
     */
    public io.gateway.v1.WriteResult write(io.gateway.v1.WriteRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getWriteMethod(), getCallOptions(), request);
    }

    /**
     */
    public io.gateway.v1.WriteBatchResponse writeBatch(io.gateway.v1.WriteBatchRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getWriteBatchMethod(), getCallOptions(), request);
    }

    /**
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<io.gateway.v1.StreamWriteRequest, io.gateway.v1.StreamWriteResponse>
        streamWrite() {
      return io.grpc.stub.ClientCalls.blockingBidiStreamingCall(
          getChannel(), getStreamWriteMethod(), getCallOptions());
    }

    /**
     */
    public io.gateway.v1.ReadResponse read(io.gateway.v1.ReadRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getReadMethod(), getCallOptions(), request);
    }

    /**
     */
    public io.gateway.v1.ScanResponse scan(io.gateway.v1.ScanRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getScanMethod(), getCallOptions(), request);
    }

    /**
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<?, io.gateway.v1.ChangeEvent>
        subscribe(io.gateway.v1.SubscribeRequest request) {
      return io.grpc.stub.ClientCalls.blockingV2ServerStreamingCall(
          getChannel(), getSubscribeMethod(), getCallOptions(), request);
    }

    /**
     */
    public io.gateway.v1.StatusResponse status(io.gateway.v1.StatusRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getStatusMethod(), getCallOptions(), request);
    }

    /**
     */
    public io.gateway.v1.AdminResponse addNode(io.gateway.v1.AddNodeRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getAddNodeMethod(), getCallOptions(), request);
    }

    /**
     */
    public io.gateway.v1.AdminResponse removeNode(io.gateway.v1.RemoveNodeRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getRemoveNodeMethod(), getCallOptions(), request);
    }

    /**
     */
    public io.gateway.v1.AdminResponse transferLeader(io.gateway.v1.TransferLeaderRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getTransferLeaderMethod(), getCallOptions(), request);
    }

    /**
     */
    public io.gateway.v1.AdminResponse snapshot(io.gateway.v1.SnapshotRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getSnapshotMethod(), getCallOptions(), request);
    }

    /**
     */
    public io.gateway.v1.AdminResponse addChannel(io.gateway.v1.AddChannelRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getAddChannelMethod(), getCallOptions(), request);
    }

    /**
     */
    public io.gateway.v1.AdminResponse channelAction(io.gateway.v1.ChannelActionRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getChannelActionMethod(), getCallOptions(), request);
    }

    /**
     */
    public io.gateway.v1.AdminResponse conflicts(io.gateway.v1.ConflictsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getConflictsMethod(), getCallOptions(), request);
    }

    /**
     */
    public io.gateway.v1.AdminResponse alarm(io.gateway.v1.AlarmRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getAlarmMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do limited synchronous rpc calls to service Gateway.
   */
  public static final class GatewayBlockingStub
      extends io.grpc.stub.AbstractBlockingStub<GatewayBlockingStub> {
    private GatewayBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected GatewayBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new GatewayBlockingStub(channel, callOptions);
    }

    /**
     */
    public io.gateway.v1.WriteResult write(io.gateway.v1.WriteRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getWriteMethod(), getCallOptions(), request);
    }

    /**
     */
    public io.gateway.v1.WriteBatchResponse writeBatch(io.gateway.v1.WriteBatchRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getWriteBatchMethod(), getCallOptions(), request);
    }

    /**
     */
    public io.gateway.v1.ReadResponse read(io.gateway.v1.ReadRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getReadMethod(), getCallOptions(), request);
    }

    /**
     */
    public io.gateway.v1.ScanResponse scan(io.gateway.v1.ScanRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getScanMethod(), getCallOptions(), request);
    }

    /**
     */
    public java.util.Iterator<io.gateway.v1.ChangeEvent> subscribe(
        io.gateway.v1.SubscribeRequest request) {
      return io.grpc.stub.ClientCalls.blockingServerStreamingCall(
          getChannel(), getSubscribeMethod(), getCallOptions(), request);
    }

    /**
     */
    public io.gateway.v1.StatusResponse status(io.gateway.v1.StatusRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getStatusMethod(), getCallOptions(), request);
    }

    /**
     */
    public io.gateway.v1.AdminResponse addNode(io.gateway.v1.AddNodeRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getAddNodeMethod(), getCallOptions(), request);
    }

    /**
     */
    public io.gateway.v1.AdminResponse removeNode(io.gateway.v1.RemoveNodeRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getRemoveNodeMethod(), getCallOptions(), request);
    }

    /**
     */
    public io.gateway.v1.AdminResponse transferLeader(io.gateway.v1.TransferLeaderRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getTransferLeaderMethod(), getCallOptions(), request);
    }

    /**
     */
    public io.gateway.v1.AdminResponse snapshot(io.gateway.v1.SnapshotRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getSnapshotMethod(), getCallOptions(), request);
    }

    /**
     */
    public io.gateway.v1.AdminResponse addChannel(io.gateway.v1.AddChannelRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getAddChannelMethod(), getCallOptions(), request);
    }

    /**
     */
    public io.gateway.v1.AdminResponse channelAction(io.gateway.v1.ChannelActionRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getChannelActionMethod(), getCallOptions(), request);
    }

    /**
     */
    public io.gateway.v1.AdminResponse conflicts(io.gateway.v1.ConflictsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getConflictsMethod(), getCallOptions(), request);
    }

    /**
     */
    public io.gateway.v1.AdminResponse alarm(io.gateway.v1.AlarmRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getAlarmMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do ListenableFuture-style rpc calls to service Gateway.
   */
  public static final class GatewayFutureStub
      extends io.grpc.stub.AbstractFutureStub<GatewayFutureStub> {
    private GatewayFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected GatewayFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new GatewayFutureStub(channel, callOptions);
    }

    /**
     */
    public com.google.common.util.concurrent.ListenableFuture<io.gateway.v1.WriteResult> write(
        io.gateway.v1.WriteRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getWriteMethod(), getCallOptions()), request);
    }

    /**
     */
    public com.google.common.util.concurrent.ListenableFuture<io.gateway.v1.WriteBatchResponse> writeBatch(
        io.gateway.v1.WriteBatchRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getWriteBatchMethod(), getCallOptions()), request);
    }

    /**
     */
    public com.google.common.util.concurrent.ListenableFuture<io.gateway.v1.ReadResponse> read(
        io.gateway.v1.ReadRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getReadMethod(), getCallOptions()), request);
    }

    /**
     */
    public com.google.common.util.concurrent.ListenableFuture<io.gateway.v1.ScanResponse> scan(
        io.gateway.v1.ScanRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getScanMethod(), getCallOptions()), request);
    }

    /**
     */
    public com.google.common.util.concurrent.ListenableFuture<io.gateway.v1.StatusResponse> status(
        io.gateway.v1.StatusRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getStatusMethod(), getCallOptions()), request);
    }

    /**
     */
    public com.google.common.util.concurrent.ListenableFuture<io.gateway.v1.AdminResponse> addNode(
        io.gateway.v1.AddNodeRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getAddNodeMethod(), getCallOptions()), request);
    }

    /**
     */
    public com.google.common.util.concurrent.ListenableFuture<io.gateway.v1.AdminResponse> removeNode(
        io.gateway.v1.RemoveNodeRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getRemoveNodeMethod(), getCallOptions()), request);
    }

    /**
     */
    public com.google.common.util.concurrent.ListenableFuture<io.gateway.v1.AdminResponse> transferLeader(
        io.gateway.v1.TransferLeaderRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getTransferLeaderMethod(), getCallOptions()), request);
    }

    /**
     */
    public com.google.common.util.concurrent.ListenableFuture<io.gateway.v1.AdminResponse> snapshot(
        io.gateway.v1.SnapshotRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getSnapshotMethod(), getCallOptions()), request);
    }

    /**
     */
    public com.google.common.util.concurrent.ListenableFuture<io.gateway.v1.AdminResponse> addChannel(
        io.gateway.v1.AddChannelRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getAddChannelMethod(), getCallOptions()), request);
    }

    /**
     */
    public com.google.common.util.concurrent.ListenableFuture<io.gateway.v1.AdminResponse> channelAction(
        io.gateway.v1.ChannelActionRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getChannelActionMethod(), getCallOptions()), request);
    }

    /**
     */
    public com.google.common.util.concurrent.ListenableFuture<io.gateway.v1.AdminResponse> conflicts(
        io.gateway.v1.ConflictsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getConflictsMethod(), getCallOptions()), request);
    }

    /**
     */
    public com.google.common.util.concurrent.ListenableFuture<io.gateway.v1.AdminResponse> alarm(
        io.gateway.v1.AlarmRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getAlarmMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_WRITE = 0;
  private static final int METHODID_WRITE_BATCH = 1;
  private static final int METHODID_READ = 2;
  private static final int METHODID_SCAN = 3;
  private static final int METHODID_SUBSCRIBE = 4;
  private static final int METHODID_STATUS = 5;
  private static final int METHODID_ADD_NODE = 6;
  private static final int METHODID_REMOVE_NODE = 7;
  private static final int METHODID_TRANSFER_LEADER = 8;
  private static final int METHODID_SNAPSHOT = 9;
  private static final int METHODID_ADD_CHANNEL = 10;
  private static final int METHODID_CHANNEL_ACTION = 11;
  private static final int METHODID_CONFLICTS = 12;
  private static final int METHODID_ALARM = 13;
  private static final int METHODID_STREAM_WRITE = 14;

  private static final class MethodHandlers<Req, Resp> implements
      io.grpc.stub.ServerCalls.UnaryMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ServerStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ClientStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.BidiStreamingMethod<Req, Resp> {
    private final AsyncService serviceImpl;
    private final int methodId;

    MethodHandlers(AsyncService serviceImpl, int methodId) {
      this.serviceImpl = serviceImpl;
      this.methodId = methodId;
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public void invoke(Req request, io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        case METHODID_WRITE:
          serviceImpl.write((io.gateway.v1.WriteRequest) request,
              (io.grpc.stub.StreamObserver<io.gateway.v1.WriteResult>) responseObserver);
          break;
        case METHODID_WRITE_BATCH:
          serviceImpl.writeBatch((io.gateway.v1.WriteBatchRequest) request,
              (io.grpc.stub.StreamObserver<io.gateway.v1.WriteBatchResponse>) responseObserver);
          break;
        case METHODID_READ:
          serviceImpl.read((io.gateway.v1.ReadRequest) request,
              (io.grpc.stub.StreamObserver<io.gateway.v1.ReadResponse>) responseObserver);
          break;
        case METHODID_SCAN:
          serviceImpl.scan((io.gateway.v1.ScanRequest) request,
              (io.grpc.stub.StreamObserver<io.gateway.v1.ScanResponse>) responseObserver);
          break;
        case METHODID_SUBSCRIBE:
          serviceImpl.subscribe((io.gateway.v1.SubscribeRequest) request,
              (io.grpc.stub.StreamObserver<io.gateway.v1.ChangeEvent>) responseObserver);
          break;
        case METHODID_STATUS:
          serviceImpl.status((io.gateway.v1.StatusRequest) request,
              (io.grpc.stub.StreamObserver<io.gateway.v1.StatusResponse>) responseObserver);
          break;
        case METHODID_ADD_NODE:
          serviceImpl.addNode((io.gateway.v1.AddNodeRequest) request,
              (io.grpc.stub.StreamObserver<io.gateway.v1.AdminResponse>) responseObserver);
          break;
        case METHODID_REMOVE_NODE:
          serviceImpl.removeNode((io.gateway.v1.RemoveNodeRequest) request,
              (io.grpc.stub.StreamObserver<io.gateway.v1.AdminResponse>) responseObserver);
          break;
        case METHODID_TRANSFER_LEADER:
          serviceImpl.transferLeader((io.gateway.v1.TransferLeaderRequest) request,
              (io.grpc.stub.StreamObserver<io.gateway.v1.AdminResponse>) responseObserver);
          break;
        case METHODID_SNAPSHOT:
          serviceImpl.snapshot((io.gateway.v1.SnapshotRequest) request,
              (io.grpc.stub.StreamObserver<io.gateway.v1.AdminResponse>) responseObserver);
          break;
        case METHODID_ADD_CHANNEL:
          serviceImpl.addChannel((io.gateway.v1.AddChannelRequest) request,
              (io.grpc.stub.StreamObserver<io.gateway.v1.AdminResponse>) responseObserver);
          break;
        case METHODID_CHANNEL_ACTION:
          serviceImpl.channelAction((io.gateway.v1.ChannelActionRequest) request,
              (io.grpc.stub.StreamObserver<io.gateway.v1.AdminResponse>) responseObserver);
          break;
        case METHODID_CONFLICTS:
          serviceImpl.conflicts((io.gateway.v1.ConflictsRequest) request,
              (io.grpc.stub.StreamObserver<io.gateway.v1.AdminResponse>) responseObserver);
          break;
        case METHODID_ALARM:
          serviceImpl.alarm((io.gateway.v1.AlarmRequest) request,
              (io.grpc.stub.StreamObserver<io.gateway.v1.AdminResponse>) responseObserver);
          break;
        default:
          throw new AssertionError();
      }
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public io.grpc.stub.StreamObserver<Req> invoke(
        io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        case METHODID_STREAM_WRITE:
          return (io.grpc.stub.StreamObserver<Req>) serviceImpl.streamWrite(
              (io.grpc.stub.StreamObserver<io.gateway.v1.StreamWriteResponse>) responseObserver);
        default:
          throw new AssertionError();
      }
    }
  }

  public static final io.grpc.ServerServiceDefinition bindService(AsyncService service) {
    return io.grpc.ServerServiceDefinition.builder(getServiceDescriptor())
        .addMethod(
          getWriteMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.gateway.v1.WriteRequest,
              io.gateway.v1.WriteResult>(
                service, METHODID_WRITE)))
        .addMethod(
          getWriteBatchMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.gateway.v1.WriteBatchRequest,
              io.gateway.v1.WriteBatchResponse>(
                service, METHODID_WRITE_BATCH)))
        .addMethod(
          getStreamWriteMethod(),
          io.grpc.stub.ServerCalls.asyncBidiStreamingCall(
            new MethodHandlers<
              io.gateway.v1.StreamWriteRequest,
              io.gateway.v1.StreamWriteResponse>(
                service, METHODID_STREAM_WRITE)))
        .addMethod(
          getReadMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.gateway.v1.ReadRequest,
              io.gateway.v1.ReadResponse>(
                service, METHODID_READ)))
        .addMethod(
          getScanMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.gateway.v1.ScanRequest,
              io.gateway.v1.ScanResponse>(
                service, METHODID_SCAN)))
        .addMethod(
          getSubscribeMethod(),
          io.grpc.stub.ServerCalls.asyncServerStreamingCall(
            new MethodHandlers<
              io.gateway.v1.SubscribeRequest,
              io.gateway.v1.ChangeEvent>(
                service, METHODID_SUBSCRIBE)))
        .addMethod(
          getStatusMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.gateway.v1.StatusRequest,
              io.gateway.v1.StatusResponse>(
                service, METHODID_STATUS)))
        .addMethod(
          getAddNodeMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.gateway.v1.AddNodeRequest,
              io.gateway.v1.AdminResponse>(
                service, METHODID_ADD_NODE)))
        .addMethod(
          getRemoveNodeMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.gateway.v1.RemoveNodeRequest,
              io.gateway.v1.AdminResponse>(
                service, METHODID_REMOVE_NODE)))
        .addMethod(
          getTransferLeaderMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.gateway.v1.TransferLeaderRequest,
              io.gateway.v1.AdminResponse>(
                service, METHODID_TRANSFER_LEADER)))
        .addMethod(
          getSnapshotMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.gateway.v1.SnapshotRequest,
              io.gateway.v1.AdminResponse>(
                service, METHODID_SNAPSHOT)))
        .addMethod(
          getAddChannelMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.gateway.v1.AddChannelRequest,
              io.gateway.v1.AdminResponse>(
                service, METHODID_ADD_CHANNEL)))
        .addMethod(
          getChannelActionMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.gateway.v1.ChannelActionRequest,
              io.gateway.v1.AdminResponse>(
                service, METHODID_CHANNEL_ACTION)))
        .addMethod(
          getConflictsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.gateway.v1.ConflictsRequest,
              io.gateway.v1.AdminResponse>(
                service, METHODID_CONFLICTS)))
        .addMethod(
          getAlarmMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.gateway.v1.AlarmRequest,
              io.gateway.v1.AdminResponse>(
                service, METHODID_ALARM)))
        .build();
  }

  private static abstract class GatewayBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    GatewayBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return io.gateway.v1.GatewayProto.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("Gateway");
    }
  }

  private static final class GatewayFileDescriptorSupplier
      extends GatewayBaseDescriptorSupplier {
    GatewayFileDescriptorSupplier() {}
  }

  private static final class GatewayMethodDescriptorSupplier
      extends GatewayBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final java.lang.String methodName;

    GatewayMethodDescriptorSupplier(java.lang.String methodName) {
      this.methodName = methodName;
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.MethodDescriptor getMethodDescriptor() {
      return getServiceDescriptor().findMethodByName(methodName);
    }
  }

  private static volatile io.grpc.ServiceDescriptor serviceDescriptor;

  public static io.grpc.ServiceDescriptor getServiceDescriptor() {
    io.grpc.ServiceDescriptor result = serviceDescriptor;
    if (result == null) {
      synchronized (GatewayGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new GatewayFileDescriptorSupplier())
              .addMethod(getWriteMethod())
              .addMethod(getWriteBatchMethod())
              .addMethod(getStreamWriteMethod())
              .addMethod(getReadMethod())
              .addMethod(getScanMethod())
              .addMethod(getSubscribeMethod())
              .addMethod(getStatusMethod())
              .addMethod(getAddNodeMethod())
              .addMethod(getRemoveNodeMethod())
              .addMethod(getTransferLeaderMethod())
              .addMethod(getSnapshotMethod())
              .addMethod(getAddChannelMethod())
              .addMethod(getChannelActionMethod())
              .addMethod(getConflictsMethod())
              .addMethod(getAlarmMethod())
              .build();
        }
      }
    }
    return result;
  }
}
